"""engine-stutter on the local backend: the duty cycle of SIGSTOP and SIGCONT, a thread of the rig's
(:class:`DutyCycle`), and the look at it (:func:`sample`).

The thread stops its engine processes for the stopped part of each cycle and continues them for the
running part (:class:`chaos.backends.engine_faults.Throttle`), until it is stopped (the heal:
:meth:`DutyCycle.stop`) or its own bound passes (the duration and a margin), and always leaves them
continued. It signals only the processes it was given, while each is the process it was given (its start
time unchanged: a PID freed by an engine that exited may name another process later); none left, it ends.
A rig that dies takes the thread with it; what it may leave stopped, `availproof recover` continues
(every stopped process of the cluster's sessions), and the next run refuses to start before that.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Callable

from chaos.backends import engine_faults
from chaos.backends.engine_faults import Throttle
from chaos.backends.local import procs


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22); None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rfind(")") + 2:].split()[19])


class DutyCycle(threading.Thread):
    """SIGSTOP and SIGCONT of ``pids`` by ``throttle``'s cycle, from now until :meth:`stop` or its bound."""

    def __init__(self, pids: list[int], throttle: Throttle,
                 signal_pids: Callable[[list[int], int], list[int]] = procs.signal_pids):
        super().__init__(name=f"engine-stutter-{'-'.join(map(str, pids))}", daemon=True)
        self.pids, self.throttle, self._signal = list(pids), throttle, signal_pids
        self.started_at = {p: start_time(p) for p in self.pids}
        self.deadline = time.monotonic() + throttle.bound_s
        self.cycles = 0  # cycles completed
        self.ended: str | None = None  # why the thread ended: stopped, bound, gone
        self._halt = threading.Event()

    def _same(self) -> list[int]:
        """The processes still the ones given (alive, the same start time)."""
        return [p for p in self.pids if procs.alive(p) and start_time(p) == self.started_at[p]]

    def covers(self, pids) -> bool:
        return bool(set(self.pids) & set(pids))

    def run(self) -> None:
        t = self.throttle
        try:
            while not self._halt.is_set():
                if time.monotonic() >= self.deadline:
                    self.ended = "bound"
                    return
                live = self._same()
                if not live:
                    self.ended = "gone"
                    return
                self._signal(live, signal.SIGSTOP)
                self._halt.wait(t.stop_s)
                self._signal(live, signal.SIGCONT)
                if self._halt.wait(t.run_s):
                    break
                self.cycles += 1
            self.ended = "stopped"
        finally:
            self._signal(self._same(), signal.SIGCONT)

    def stop(self, timeout: float = 5.0) -> list[int]:
        """End the cycle and leave the processes continued (also when the thread had ended); returns those
        continued."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout)
        return self._signal(self._same(), signal.SIGCONT)


def sample(pids: list[int], replica_pid: int | None, throttle: Throttle,
           sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """One look at a duty cycle: the engine processes' states sampled over two cycles
    (:func:`chaos.backends.engine_faults.sampling`); seen stopped in one sample and running in another, and the
    replica's process alive and not stopped (its state at the last sample)."""
    n, interval = engine_faults.sampling(throttle)
    samples = []
    for i in range(n):
        samples.append({p: procs.state(p) for p in pids})
        if i < n - 1:
            sleep(interval)
    return engine_faults.duty_cycle_checks(pids, samples) + [
        engine_faults.replica_runs(replica_pid, procs.state(replica_pid) if replica_pid else None)]
