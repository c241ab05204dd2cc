"""overload: more load than the service can take, for a while (issue 48). Nothing on the cluster is touched: the
"fault" is the load's own step above the measured capacity (``load.stages`` stating utilizations,
:mod:`chaos.load.utilization`; the ``overload`` experiment steps from 0.5x to 2x ``availproof capacity``'s
sustained rate and back), deterministic from the load's seed. What it measures is whether the service refuses
what it cannot take at once (``app.admission``, :mod:`serve_apps.admission`: a 503 with ``Retry-After``) or lets
every request wait out its timeout, and how long goodput takes to come back after the step
(:mod:`chaos.analysis.overload`, the summary's ``overload``).

:func:`step_load` marks the step on the run's timeline: its inject marks at the instant the schedule steps up
(``at_s`` after the load's start, the instant every load loop shares: ``Marker.load_started_mono``), its heal
marks ``step_s`` later, when it steps down. A rig whose method came later than ``at_s`` marks at once and says how
late (``late_s``). Its proof is the load itself: the requests the clients sent in the step's first seconds (every
request sent is recorded when it ends, ``Events.request_done``), as a rate, at least ``min_ratio`` times the rate
sent in as long a window before the step; the analysis then compares the rate offered during the whole step with
the measured capacity (``overload.offered_above_capacity``).
"""

from __future__ import annotations

import threading
import time

from chaos.scopes import faults
from chaos.base.scope_registry import Scope

PROOF_WINDOW_S = 5.0  # the step's first seconds, and as long before it, whose sends are counted


class SendCounter:
    """Counts the requests sent (their planned instant, else their send instant) in two windows of the monotonic
    clock, from the records of requests as they end (``request_done``)."""

    def __init__(self, before: tuple[float, float], during: tuple[float, float]):
        self.windows = {"before": before, "during": during}
        self.counts = {"before": 0, "during": 0}
        self._lock = threading.Lock()
        self._mono_minus_wall = time.monotonic() - time.time_ns() / 1e9

    def __call__(self, record) -> None:
        if getattr(record, "attempt", None) not in (None, 1):  # a retry is no new offer
            return
        ns = getattr(record, "planned_ns", None) or getattr(record, "sent_ns", None)
        if ns is None:
            return
        t = ns / 1e9 + self._mono_minus_wall
        with self._lock:
            for name, (a, b) in self.windows.items():
                if a <= t < b:
                    self.counts[name] += 1


def step_load(backend, marker: faults.Marker, at_s: float = 0.0, step_s: float = 30.0, min_ratio: float = 2.0,
              proof_wait_s: float = 30.0) -> dict:
    """Mark the load's step above capacity: injected ``at_s`` after the load's start (at once when that is past),
    healed ``step_s`` later. The proof: the rate sent in the step's first :data:`PROOF_WINDOW_S` at least
    ``min_ratio`` (capped at 1.5 for the check, Poisson draws vary) times the rate sent as long before it, counted
    from the requests ended within ``proof_wait_s`` after that window (a request that waits ends at its timeout)."""
    origin = getattr(marker, "load_started_mono", None)
    now = time.monotonic()
    start = now if origin is None else max(now, origin + at_s)
    late_s = None if origin is None else round(max(0.0, now - (origin + at_s)), 3)
    window = min(PROOF_WINDOW_S, step_s)
    sched = start if origin is None else origin + at_s  # the schedule's step: a late method counts around it too
    counter = SendCounter((sched - window, sched), (sched, sched + window))
    events = getattr(marker, "events", None)
    if events is not None:
        events.subscribe(events.request_done, counter)
    faults.sleep(max(0.0, start - time.monotonic()))
    try:
        with marker.inject(SCOPE.name, "load", [], {"at_s": at_s, "step_s": step_s, "late_s": late_s,
                                                    "min_ratio": min_ratio}) as f:
            f["late_s"] = late_s
            # the proof's wait ends with the step at the latest: the step-down is marked step_s after the step
            faults.sleep(max(0.0, min(sched + window + proof_wait_s, sched + step_s) - time.monotonic()))
            f["effect"] = _proof(counter, window, min_ratio, marker.since_inject(f), window + proof_wait_s)
    finally:
        if events is not None:
            events.unsubscribe(events.request_done, counter)
    faults.sleep(max(0.0, sched + step_s - time.monotonic()))
    with marker.heal(f):
        f["stepped_down_s"] = round(marker.since_inject(f), 3)
    return f


def _proof(counter: SendCounter, window: float, min_ratio: float, t: float, bound_s: float) -> dict:
    before, during = counter.counts["before"] / window, counter.counts["during"] / window
    need = min(min_ratio, 1.5)
    ok = during > 0 and during >= need * before
    seen = (f"{during:.3g} req/s sent in the step's first {window:g} s, {before:.3g} req/s in as long before"
            + ("" if during > 0 else ": no request sent in the step seen (records not in this process?)"))
    return faults.effect(ok, round(t, 3), bound_s, [{
        "check": f"the load stepped up: the rate sent at least {need:g} x the rate before", "ok": ok, "t_s": round(t, 3),
        "seen": seen, "before_rps": round(before, 3), "during_rps": round(during, 3)}])


SCOPE = Scope(
    "overload", "load above capacity", fault=step_load,
    action_omits=("proof_wait_s",),
    every_target_affected=True,  # every zone's users meet the full queues: Serve routes from any proxy to any replica
    effect_bound_s=60.0,  # the window's sends seen once they ended: a request that waits ends at its timeout
    touches_nothing=True,  # the load steps up; no Kubernetes call beyond the reads every run makes
    heal_args=("step_s",), conflict_class=None,
)
