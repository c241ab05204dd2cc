"""A run's stop conditions (as AWS FIS has them): :class:`StopConditions` decides from what was seen
whether to stop (the failure ratio of ``stop_when``: ``max_failed_ratio`` for ``for_s`` seconds, and the
wall clock, ``max_wall_s``); :class:`Guard`, a thread, watches them and calls :meth:`chaos.core.run_state.Run.stop`.
The reason goes in the summary (the run is then judged violated) and the driver's ``on_stop`` interrupts
the method; a stop the driver did not take is raised as :class:`chaos.core.run_state.Stopped` by the
lifecycle's next wait (:func:`chaos.core.run.wait`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

from chaos.core import experiment as exp_mod
from chaos.recording import records as rec
from chaos.core.run_state import Run, log


class StopConditions:
    """Whether to stop, from what was seen: the failed fraction of the measured requests of the
    last ``for_s`` seconds above ``max_failed_ratio`` (at least 5 of them) for ``for_s`` seconds
    on end, or ``max_wall_s`` past ``started``. Times are the caller's clock (seconds)."""

    MIN_REQUESTS = 5

    def __init__(self, max_failed_ratio: float | None, for_s: float, max_wall_s: float, started: float):
        self.max_failed_ratio, self.for_s, self.max_wall_s, self.started = max_failed_ratio, for_s, max_wall_s, started
        self._seen: deque[tuple[float, bool]] = deque()
        self._lock = threading.Lock()
        self._above_since: float | None = None

    @classmethod
    def of(cls, settings: exp_mod.Settings, started: float) -> StopConditions:
        return cls(settings.stop_when.get("max_failed_ratio"), float(settings.stop_when.get("for_s", 10.0)),
                   settings.max_wall_s, started)

    def seen(self, t: float, ok: bool) -> None:
        """A measured request ended at ``t`` (called from the harness' thread)."""
        with self._lock:
            self._seen.append((t, ok))

    def check(self, now: float) -> str | None:
        """The reason to stop now, or None."""
        if now - self.started > self.max_wall_s:
            return f"wall-clock limit of {self.max_wall_s:.0f} s exceeded"
        ratio = self.max_failed_ratio
        if ratio is None:
            return None
        with self._lock:
            while self._seen and now - self._seen[0][0] > self.for_s:
                self._seen.popleft()
            n, failed = len(self._seen), sum(1 for _, ok in self._seen if not ok)
        if n >= self.MIN_REQUESTS:
            fraction = failed / n
            if fraction > ratio:
                if self._above_since is None:
                    self._above_since = now
                if now - self._above_since >= self.for_s:
                    return f"failure ratio {fraction:.2f} above {ratio} for {self.for_s:.0f} s"
            else:
                self._above_since = None
        return None


class Guard(threading.Thread):
    """The stop conditions' watch: every ``poll_s`` until the run stops or finishes,
    :meth:`StopConditions.check`; when it says stop, :meth:`Run.stop` (which interrupts the
    method through the driver). It watches whether or not the load still runs: a harness that
    ended early (or died) must not take the wall-clock limit with it."""

    def __init__(self, run: Run, poll_s: float = 0.5, clock: Callable[[], float] = time.monotonic):
        super().__init__(name="availproof-guard", daemon=True)
        self.run_, self.poll_s, self.clock = run, poll_s, clock
        self.conditions = StopConditions.of(run.settings, run.started_mono)
        run.events.subscribe(run.events.request_done, self._seen)

    def _seen(self, r: rec.RequestRecord) -> None:
        if r.phase == rec.MEASURE:
            self.conditions.seen(self.clock(), r.ok)

    def done(self) -> bool:
        """Nothing left to watch: the run stopped, or it is finishing."""
        run = self.run_
        return run.stop_reason is not None or run.finishing

    def poll(self) -> bool:
        """One check of the stop conditions (the thread's step); True when nothing is left to watch."""
        if self.done():
            return True
        reason = self.conditions.check(self.clock())
        if reason is not None:
            self.run_.stop(reason)
            return True
        return False

    def run(self) -> None:
        while not self.done():
            time.sleep(self.poll_s)
            try:
                if self.poll():
                    return
            except Exception as e:  # noqa: BLE001 - a watch that dies silently is no stop condition
                log(f"stop conditions: check failed ({type(e).__name__}: {e}); still watching")
