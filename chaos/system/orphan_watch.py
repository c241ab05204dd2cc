"""The orphan check: after a fault that kills or replaces a replica, its engine processes must be gone (and their
memory freed) within a bound (``max_orphan_s``, :data:`DEFAULT_BOUND_S`). Orphaned engines that hold device memory
are a known cause of replacements that never fit (vllm-project/vllm #55510, #34643; ray-project/ray #59265); on CPU
RAM such a run passes unless something looks.

At injection, each fault of a scope with ``orphan_check`` (:class:`chaos.scopes.Scope`) records its victim
(:func:`record_victim`): the replica's node and process, and its engine processes (the engine scopes' ``pids``; a
replica kill's found before the kill, :func:`engines_before_kill`, through ``backend.engine_children``).

:class:`OrphanWatch`, a thread of the run's (started with the load), follows each such fault from then on: every
``poll_s`` one look per fault (``backend.processes_left``: /proc on the local backend, one exec per pod on KubeRay,
a pod gone counting as gone) at the replica's process and the engines not yet seen gone, each instant taken when
the look ended, in seconds since the fault's injection. **The clock starts** at the first look that found the
replica's own process gone (killed, or replaced by Serve: its actor's worker exits; its pod gone): that is
``replica_gone_s``; ``seconds_until_freed`` is the last engine's first look found gone minus it, 0 when every engine
was gone before its replica (an engine crash, an engine error). The figures are as fine as the looks
(``resolution_s``). At the run's end (:meth:`OrphanWatch.conclude`, before the records close) it looks once more and,
while an engine of a replica gone less than the bound ago lives, keeps looking until it is gone or the bound has
passed, then puts each fault's ``orphans`` on its timeline (a ``looked_after`` mark: :func:`outcome`). It never
outlives the run: a daemon thread, stopped there (or when the run closes), and after ``max_s`` by itself.

A pid is taken to name the same process for the whole run (a reused one within it would read alive: unlikely in
the kernel's pid space within minutes, and said here).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from chaos.analysis import figures
from chaos.base import scope_registry

DEFAULT_BOUND_S = 30.0
POLL_S = 1.0
MAX_S = 6 * 3600.0  # the watch stops by itself after this long, whatever happens
CLOCK = "from the first look that found the replica's process gone (killed, or replaced)"
# the statuses whose bound does not apply (nothing replaced, nothing to leave), and the one it cannot be judged on
NOT_REPLACED, NO_ENGINES = figures.ORPHANS_NOT_APPLICABLE
UNMEASURED, FREED, LEFT = "unmeasurable", "freed", "left"


def engines_before_kill(backend, r) -> tuple[list[int] | None, str | None]:
    """The replica's engine processes, found before a fault kills it (``backend.engine_children``); (None, why)
    when they could not be looked for (the kill goes on: the orphan check is then unmeasurable)."""
    try:
        return [int(p) for p in backend.engine_children(r)], None
    except Exception as e:  # noqa: BLE001 - the look costs the fault nothing; its figure says why
        return None, f"the replica's engine processes could not be found before the kill ({type(e).__name__}: {e})"[:240]


def group_before_fault(backend, r) -> tuple[list[int] | None, str | None]:
    """The replica's engine processes and their ranks (``backend.rank_children``: a rank group's rank processes,
    children of its engine, serve_apps/stream_ranks.py), found before a rank fault: the whole group must go with the
    replica; (None, why) when they could not be looked for."""
    engines, why = engines_before_kill(backend, r)
    if engines is None:
        return None, why
    try:
        ranks = [pid_of(p) for p in backend.rank_children(r)]
        return engines + [p for p in ranks if p not in {pid_of(e) for e in engines}], None  # none counted twice
    except Exception as e:  # noqa: BLE001 - the look costs the fault nothing; its figure says why
        return None, f"the engine's rank processes could not be found before the fault ({type(e).__name__}: {e})"[:240]


def pid_of(item: Any) -> int:
    """A pid from what a backend's engine methods return (the local backend's pid, KubeRay's ``pod/pid``)."""
    return int(str(item).rsplit("/", 1)[-1])


def record_victim(fault: dict, r, engines: list | None, why: str | None = None) -> None:
    """At injection: the replica whose engine processes the watch follows (its node, its process, its engines)."""
    fault["victim"] = {"node": r.node, "pid": r.pid,
                       "engines": None if engines is None else [pid_of(p) for p in engines],
                       **({"why": why} if why else {})}


@dataclass
class Followed:
    """One fault followed: its victim, and what the looks saw (seconds since its injection)."""

    fault: dict
    t0: float  # monotonic instant of the injection
    node: str | None
    replica: int | None
    engines: list[int]
    replica_gone_s: float | None = None
    gone_s: dict[int, float] = field(default_factory=dict)
    rss_mb: dict[int, float | None] = field(default_factory=dict)
    looks: int = 0
    last_look_s: float | None = None
    error: str | None = None  # the last look that failed, and why

    def waiting(self, now_s: float, bound_s: float) -> bool:
        """Whether to look on at the run's end: an engine lives, its replica gone less than ``bound_s`` ago."""
        return (self.replica_gone_s is not None and now_s < self.replica_gone_s + bound_s
                and any(p not in self.gone_s for p in self.engines))


class OrphanWatch(threading.Thread):
    """Follows the engines of every fault whose scope has ``orphan_check`` (:mod:`chaos.system.orphan_watch`)."""

    def __init__(self, backend, marker, poll_s: float = POLL_S, max_s: float = MAX_S,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(name="availproof-orphan-watch", daemon=True)
        self.backend, self.marker, self.poll_s, self.max_s, self.clock = backend, marker, poll_s, max_s, clock
        self.followed: dict[str, Followed] = {}
        self.skipped: dict[str, str] = {}  # fault id -> why it is not followed (no engines known)
        self._stop_evt = threading.Event()
        self._lock = threading.Lock()  # one look at a time: the thread's ticks and the run end's own looks
        self.concluded = False

    def run(self) -> None:
        start = self.clock()
        while not self._stop_evt.is_set() and self.clock() - start < self.max_s:
            self.tick()
            self._stop_evt.wait(self.poll_s)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_evt.set()
        if self.is_alive():
            self.join(timeout)

    def adopt(self) -> None:
        """Follow each fault injected since the last tick that recorded its victim (:func:`record_victim`)."""
        for fault in list(self.marker.attempted.values()):
            fid = fault.get("fault_id")
            victim = fault.get("victim")
            if fid in self.followed or fid in self.skipped or not isinstance(victim, dict):
                continue
            if not scope_registry.get(fault.get("scope")).orphan_check:
                continue
            if victim.get("engines") is None:
                self.skipped[fid] = victim.get("why") or "the replica's engine processes are not known"
                continue
            self.followed[fid] = Followed(fault, self.marker.started.get(fid, self.clock()), victim.get("node"),
                                          victim.get("pid"), list(victim["engines"]))

    def look(self, f: Followed) -> None:
        """One look at what of the fault's replica and engines is not yet seen gone."""
        pids = [p for p in f.engines if p not in f.gone_s]
        if f.replica is not None and f.replica_gone_s is None:
            pids.append(int(f.replica))
        if not pids:
            return
        try:
            alive = self.backend.processes_left(f.node, pids)
        except Exception as e:  # noqa: BLE001 - a look that fails sees nothing; looked at again
            f.error = f"{type(e).__name__}: {e}"[:200]
            return
        t = round(self.clock() - f.t0, 3)  # when the look ended: what it saw gone was gone by then
        f.looks, f.last_look_s = f.looks + 1, t
        for p in pids:
            if p in alive:
                if p in f.engines:
                    f.rss_mb[p] = alive[p]
            elif p in f.engines:
                f.gone_s.setdefault(p, t)
                f.rss_mb.pop(p, None)
            else:  # the replica's own process
                f.replica_gone_s = t

    def tick(self) -> None:
        with self._lock:
            try:
                self.adopt()
            except Exception:  # noqa: BLE001 - the fault dicts change under it: taken again at the next tick
                return
            for f in list(self.followed.values()):
                if f.replica_gone_s is None or any(p not in f.gone_s for p in f.engines):
                    self.look(f)

    def conclude(self, bound_s: float = DEFAULT_BOUND_S, sleep: Callable[[float], None] = time.sleep) -> list[dict]:
        """At the run's end: the watch stopped, one more look, then looks on while an engine of a replica gone less
        than ``bound_s`` ago lives (at most ``bound_s``); each fault's ``orphans`` put on its timeline
        (``marker.looked_after``). What was put, in order."""
        if self.concluded:
            return []
        self.stop()
        self.concluded = True
        self.tick()
        deadline = self.clock() + bound_s
        while self.clock() < deadline:
            waiting = [f for f in list(self.followed.values()) if f.waiting(self.clock() - f.t0, bound_s)]
            if not waiting:
                break
            sleep(min(self.poll_s, max(0.0, deadline - self.clock())))
            with self._lock:
                for f in waiting:
                    self.look(f)
        with self._lock:
            for f in list(self.followed.values()):  # the look that says "left": taken once the bound has passed
                if f.replica_gone_s is not None and any(p not in f.gone_s for p in f.engines):
                    self.look(f)
        out = []
        for f in list(self.followed.values()):
            out.append(self._put(f.fault, outcome(f, bound_s, self.poll_s)))
        for fid, why in self.skipped.items():
            fault = self.marker.attempted[fid]
            out.append(self._put(fault, unmeasured(why, bound_s, fault["victim"].get("engines"))))
        return out

    def _put(self, fault: dict, orphans: dict) -> dict:
        self.marker.looked_after(fault, {"orphans": orphans})
        return orphans


def unmeasured(why: str, bound_s: float, engines: list | None = None) -> dict:
    return {"status": UNMEASURED, "why": why, "engines": engines, "left": None, "seconds_until_freed": None,
            "rss_mb_left": None, "replica_gone_s": None, "engines_gone_s": None, "bound_s": bound_s,
            "resolution_s": None, "clock": CLOCK}


def outcome(f: Followed, bound_s: float, poll_s: float) -> dict:
    """A followed fault's ``orphans``: its engines, those left alive at the bound, the seconds from its replica's
    end to its last engine's (null with ``why``: not replaced, no engine, not looked at; left: never freed), the
    resident memory still held by those left (MB), the instants seen."""
    base = {"engines": list(f.engines), "replica_gone_s": f.replica_gone_s,
            "engines_gone_s": {str(p): s for p, s in sorted(f.gone_s.items())}, "bound_s": bound_s,
            "resolution_s": poll_s, "clock": CLOCK}
    left = [p for p in f.engines if p not in f.gone_s]
    rss = [f.rss_mb.get(p) for p in left]
    held = round(sum(x for x in rss if x is not None), 1) if any(x is not None for x in rss) else None
    common = {**base, "left": left, "rss_mb_left": 0.0 if not left else held}
    if not f.engines:
        return {**common, "status": NO_ENGINES, "seconds_until_freed": None,
                "why": "the replica had no engine process: none could be left behind"}
    if not f.looks:
        return {**unmeasured(f"no look at the replica's processes succeeded ({f.error or 'none was taken'})",
                             bound_s, list(f.engines)), **{"resolution_s": poll_s}}
    if f.replica_gone_s is None:
        state = "every engine gone" if not left else f"engine(s) {left} alive"
        return {**common, "status": NOT_REPLACED, "seconds_until_freed": None,
                "why": f"the replica's process ({f.replica}) was alive at the last look ({f.last_look_s} s after the "
                       f"injection; {state}): not killed or replaced in the run, so nothing was orphaned"}
    if left:
        seen = round((f.last_look_s or 0.0) - f.replica_gone_s, 3)
        if seen < bound_s:
            return {**common, **unmeasured(f"engine(s) {left} alive at the last look, {seen} s after the replica was "
                                           f"gone: not looked at up to the bound ({bound_s} s; {f.error or 'no error'})",
                                           bound_s, list(f.engines)), "left": left, "rss_mb_left": held,
                    "replica_gone_s": f.replica_gone_s, "resolution_s": poll_s}
        return {**common, "status": LEFT, "seconds_until_freed": None,
                "why": f"engine(s) {left} still alive {seen} s after the replica was gone (bound {bound_s} s)"}
    freed = max(0.0, max(f.gone_s[p] for p in f.engines) - f.replica_gone_s)
    return {**common, "status": FREED, "seconds_until_freed": round(freed, 3), "why": None}
