"""Load from several processes (``load.workers`` N > 1): one schedule, dealt to N harness processes.

- The plan (arrival instants, targets, prompts, lengths) is drawn **once**, here in the rig's
  process, from the seed (:func:`chaos.load.workload.plan`), and dealt round-robin: worker ``w``
  gets requests ``w, w + N, w + 2N, ...``. The union of the shares is the plan, so the merged
  arrivals keep the stated burstiness (dealing a gamma schedule is not N gamma schedules).
- Each worker is a process of its own (``python -m chaos.load.worker``, :mod:`chaos.load.worker`)
  with its own event loop, its share, and its own records file (``workers/worker-W.ndjson`` beside
  the run's records). All start at one instant, ``t0``, given on the monotonic clock the processes
  of one machine share; each worker's wall-clock (and monotonic) offset against the rig is measured
  at the start and at the end, with its uncertainty (half the best round trip of 9 pings over the
  socket), and recorded in the run's header and footer.
- This process tails the workers' files: every finished request is published on the run's
  :class:`~chaos.recording.records.Events` (the run's records file, the exporter, the stop conditions) as it
  arrives, with its ``worker``; once the run ends the records file is put in send order
  (:func:`chaos.recording.records.order_by_send_time`, called by whoever owns the writer).

What every pool shares (the plan dealt, the lines published, the surface of
:class:`~chaos.load.harness.LoadRun`: ``start``, ``stop``, ``join``, ``running``, ``counts``,
``elapsed_s``, ``progress_line``) is :class:`chaos.load.pool.LoadPool`; on KubeRay the workers can
run as pods of a Job instead (:mod:`chaos.backends.kuberay.kube.load_pool`). Every wait is bounded; a
worker that outlives the run's bound is killed by its PID (and only it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection, wait as mp_wait
from pathlib import Path
from typing import Any

from chaos.recording import records as rec
from chaos.system import secret_env
from chaos.load.clock import best_offset
from chaos.load.pool import LineBuffer, LoadPool, deal  # noqa: F401 - deal: the dealing, imported from here too
from chaos.load.workload import LoadShape, Target

READY_TIMEOUT_S = 60.0
PING_SAMPLES = 9
START_LEAD_S = 0.3  # t0 this far after the last worker is ready: every worker is waiting for it


def clock_offset(conn: Connection, samples: int = PING_SAMPLES, timeout_s: float = 5.0) -> dict[str, Any]:
    """A worker's clocks minus ours, from the ping with the shortest round trip: the worker's reading
    against the midpoint of ours; the uncertainty is half that round trip (NTP's bound)."""

    def ask(k: int) -> tuple[int, int]:
        conn.send(("ping", k))
        if not conn.poll(timeout_s):
            raise TimeoutError("a load worker did not answer its clock ping")
        msg = conn.recv()
        if msg[0] != "pong" or msg[1] != k:
            raise RuntimeError(f"a load worker answered {msg[0]!r} to a clock ping")
        return msg[2], msg[3]

    return best_offset(ask, samples, via="socket")


class WorkerPool(LoadPool):
    """N load workers, processes of the rig, driven as one load run (see the module's docstring)."""

    where = "processes of the rig"

    def __init__(self, targets: list[Target], shape: LoadShape, events: rec.Events, routing: str = "round_robin",
                 allow_hosts: tuple[str, ...] = (), run_id: str | None = None,
                 header_extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                 ca_file: str | None = None, records_dir: str | Path | None = None):
        super().__init__(targets, shape, events, routing=routing, allow_hosts=allow_hosts, run_id=run_id,
                         header_extra=header_extra, headers=headers, ca_file=ca_file)
        base = Path(records_dir) if records_dir else Path(tempfile.mkdtemp(prefix="availproof-workers-"))
        self.records_dir = base / "workers"
        self.paths = [self.records_dir / f"worker-{w}.ndjson" for w in range(self.n)]
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Connection] = []
        self._send_lock = threading.Lock()
        self._tails: list[Any] = [None] * self.n
        self._lines = [LineBuffer() for _ in range(self.n)]

    def _header_workers(self) -> dict[str, Any]:
        return {"pids": [p.pid for p in self.procs], "records": [str(p) for p in self.paths]}

    # ---------------------------------------------------------------- internals
    def _start(self) -> None:
        shares = self.shares()
        self.records_dir.mkdir(parents=True, exist_ok=True)
        env = secret_env.child_env()
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for w in range(self.n):
            ours, theirs = socket.socketpair()
            try:
                proc = subprocess.Popen([sys.executable, "-m", "chaos.load.worker", str(theirs.fileno())],
                                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, env=env, start_new_session=True)
            finally:
                theirs.close()
            self.procs.append(proc)
            self.conns.append(Connection(ours.detach()))
            self.paths[w].unlink(missing_ok=True)
            self.conns[w].send(self.spec(w, shares[w], records=str(self.paths[w])))
        del shares
        deadline = time.monotonic() + READY_TIMEOUT_S
        for w, conn in enumerate(self.conns):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"load worker {w} not ready within {READY_TIMEOUT_S:.0f} s")
            msg = conn.recv()
            if msg[0] != "ready":
                raise RuntimeError(f"load worker {w} answered {msg[0]!r} instead of ready")
        self.clock_start = [{"worker": w, **clock_offset(c)} for w, c in enumerate(self.conns)]
        self.clock_end = [None] * self.n
        for w, path in enumerate(self.paths):
            self._tails[w] = open(path, "rb")
        self.t0 = time.monotonic() + START_LEAD_S
        self.started_ns = time.time_ns() + int(START_LEAD_S * 1e9)
        self._send_all(("go", self.t0, self.started_ns))
        self.events.emit(self.events.run_started, self.header())

    def _signal_stop(self) -> None:
        self._send_all(("stop",))

    def _send_all(self, msg) -> None:
        with self._send_lock:
            for w, conn in enumerate(self.conns):
                if self._done[w] is None and not conn.closed:
                    try:
                        conn.send(msg)
                    except (OSError, ValueError):
                        pass

    def _tail(self) -> None:
        """Publish the request lines the workers wrote since the last look."""
        for w, f in enumerate(self._tails):
            if f is None:
                continue
            for line in self._lines[w].feed(f.read()):
                self.publish(w, line)

    def _supervise(self) -> None:
        s = self.shape
        drain = s.drain_bound_s()
        deadline = self.t0 + s.duration_s + drain + 60.0  # every worker ends by itself well before
        problems = []
        while any(d is None for d in self._done) and time.monotonic() < deadline:
            live = [c for w, c in enumerate(self.conns) if self._done[w] is None]
            for conn in mp_wait(live, timeout=0.1):
                w = self.conns.index(conn)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    code = self.procs[w].wait(timeout=10)
                    self._done[w] = ({}, self._wcounts[w], None, f"exited with code {code} before it was done")
                    problems.append(f"load worker {w} exited with code {code} before it was done")
                    continue
                if msg[0] == "counts":
                    self._wcounts[w] = msg[1]
                elif msg[0] == "done":
                    _, footer, counts, cpu, err = msg
                    self._wcounts[w] = counts
                    self._done[w] = (footer, counts, cpu, err)
                    if err:
                        problems.append(f"load worker {w}: {err}")
            self._tail()
        late = [w for w, d in enumerate(self._done) if d is None]
        for w in late:
            problems.append(f"load worker {w} still running past the run's bound: killed")
            self._kill(w)
            self._done[w] = ({}, self._wcounts[w], None, "killed past the run's bound")
        self._tail()
        for w, conn in enumerate(self.conns):
            if w not in late and not problems_for(w, self._done):
                try:
                    self.clock_end[w] = {"worker": w, **clock_offset(conn)}
                except (TimeoutError, RuntimeError, OSError, EOFError):
                    self.clock_end[w] = None
            try:
                conn.send(("exit",))
            except (OSError, ValueError):
                pass
        for w, p in enumerate(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._kill(w)
        for f in self._tails:
            if f is not None:
                f.close()
        for c in self.conns:
            c.close()
        self.end([self.per_worker(w, pid=self.procs[w].pid) for w in range(self.n)], problems)

    def _kill(self, w: int) -> None:
        p = self.procs[w]
        if p.poll() is None:
            p.kill()  # by its PID: the process this pool started
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _abort(self) -> None:
        for w in range(len(self.procs)):
            self._kill(w)


def problems_for(w: int, done: list) -> bool:
    """Whether worker ``w`` ended without its done message (no clock to read at the end)."""
    d = done[w]
    return d is None or d[2] is None
