"""What every fault function shares, written once against :class:`chaos.backends.base.Backend`: the
:class:`Marker` that puts its marks on the run's timeline, its proof (:func:`prove`), its outage
(:func:`outage`), and the rollback (:func:`heal`). The fault functions themselves are their scopes': one
module of :mod:`chaos.scopes` each (``chaos.scopes.<scope>``, :attr:`chaos.scopes.Scope.fault`).

A fault's inject marks are written only when the backend call returned (a backend that fails to inject
raises, and the run records no injection). No fault without proof: before its inject end mark, each fault
looks at the system until it sees itself in effect (:func:`prove`, the fault's ``effect``); one not seen in
effect within its bound makes the run's verdict ERROR. Each fault marks the run's timeline through a
:class:`Marker` (inject and heal, start and end) and heals itself after ``outage_s``, or :func:`heal`
(every experiment's rollback) heals what the run injected.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from chaos.recording import records as rec
from chaos.base import scope_registry


_BASE_KEYS = ("fault_id", "scope", "target", "zones")  # a fault dict with more: its backend call returned


def detail_of(fault: dict[str, Any]) -> dict[str, Any]:
    """What a fault dict says beyond its identity: the detail its marks carry."""
    return {k: v for k, v in fault.items() if k not in _BASE_KEYS}


def effect(verified: bool, t: float, bound_s: float | None, checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"verified": verified, "time_to_effect_s": t if verified else None, "bound_s": bound_s, "checks": checks}


class Marker:
    """Puts fault marks on the run's timeline (and anywhere else subscribed to the events)."""

    def __init__(self, events: rec.Events | None = None, log: Callable[[str], None] = lambda m: None):
        self.events = events
        self.log = log
        self.marks: list[rec.FaultMark] = []
        # every fault whose injection was attempted, in order: the run heals exactly these (chaos.core.run.heal_injected),
        # a call that raised half-way too (it may have acted on part of its target)
        self.attempted: dict[str, dict[str, Any]] = {}
        self.healed: set[str] = set()
        self.started: dict[str, float] = {}  # fault id -> monotonic instant of its injection
        # the load's start on the monotonic clock (chaos.core.run.start_load), the instant its schedule counts
        # from: a fault that is a step of the load itself marks its instants from it (chaos.scopes.overload)
        self.load_started_mono: float | None = None

    def since_inject(self, fault: dict) -> float:  # seconds since the fault's injection instant
        return time.monotonic() - self.started[fault["fault_id"]]

    def unhealed(self) -> list[dict[str, Any]]:
        """The faults attempted and not yet healed, in the order they were injected."""
        return [f for fid, f in self.attempted.items() if fid not in self.healed]

    def mark(self, event: str, fault_id: str, scope: str, target: str, zones: list[str],
             detail: dict | None = None, t_ns: int | None = None) -> rec.FaultMark:
        m = rec.FaultMark(event=event, fault_id=fault_id, scope=scope, target=target,
                          t_ns=rec.now_ns() if t_ns is None else t_ns, zones=list(zones), detail=detail or {})
        self.marks.append(m)
        if self.events is not None:
            self.events.emit(self.events.fault_marked, m)
        self.log(f"{event} {scope} {target}")
        return m

    @contextmanager
    def inject(self, scope: str, target: str, zones: list[str], detail: dict | None = None) -> Iterator[dict]:
        """Around the call that injects: its instant is taken before the call, but the inject marks
        are written only once the call returned, so a failed injection records nothing."""
        fault_id = f"{scope}-{uuid.uuid4().hex[:8]}"
        out: dict[str, Any] = {"fault_id": fault_id, "scope": scope, "target": target, "zones": zones}
        self.attempted[fault_id] = out
        t_start = rec.now_ns()
        self.started[fault_id] = time.monotonic()

        def marks() -> None:
            self.mark(rec.INJECT_START, fault_id, scope, target, zones, detail, t_ns=t_start)
            self.mark(rec.INJECT_END, fault_id, scope, target, zones, detail_of(out))
        try:
            yield out
        except BaseException:
            # interrupted after the backend acted (a stop condition during the proof or a drain's
            # deadline; Ctrl-C): the fault happened, so it is in the records with what is known of it
            if set(out) - set(_BASE_KEYS):
                marks()
            raise
        marks()

    @contextmanager
    def heal(self, fault: dict) -> Iterator[None]:
        self.heal_started(fault)
        yield
        self.heal_ended(fault)

    def heal_started(self, fault: dict) -> None:
        self.mark(rec.HEAL_START, fault["fault_id"], fault["scope"], fault["target"], fault["zones"])

    def heal_ended(self, fault: dict) -> None:
        """The fault healed; the whole detail again: what was learnt after the inject marks (a drain's
        kill at its deadline, a replacement's figures, its proof) is in the summary's detail too."""
        self.healed.add(fault["fault_id"])
        self.mark(rec.HEAL_END, fault["fault_id"], fault["scope"], fault["target"], fault["zones"], detail_of(fault))

    def looked_after(self, fault: dict, detail: dict) -> rec.FaultMark:
        """What a look after the fault learnt (:mod:`chaos.system.orphan_watch`), on the timeline: merged into the
        fault's detail when the records are read back (and into the fault dict here)."""
        fault.update(detail)
        return self.mark(rec.LOOKED_AFTER, fault["fault_id"], fault["scope"], fault["target"], fault["zones"], detail)


class _EffectBounds(Mapping[str, float]):
    """Each registered scope's bound on its effect's proof (:attr:`chaos.scopes.Scope.effect_bound_s`,
    said in the scope's module), read from the registry at each use."""

    def __getitem__(self, scope: str) -> float:
        if not scope_registry.known(scope):
            raise KeyError(scope)
        return scope_registry.get(scope).effect_bound_s

    def __iter__(self) -> Iterator[str]:
        return iter(scope_registry.names())

    def __len__(self) -> int:
        return len(scope_registry.names())


# How long after its injection each scope's effect must be seen on the system (s), per scope: its module
# says it (a SIGKILL's process is gone at once; the GCS marks a lost node DEAD within its health checks).
# Tests replace this mapping to look once.
EFFECT_BOUND_S: Mapping[str, float] = _EffectBounds()


def prove(backend, marker: Marker, fault: dict, bound_s: float | None = None, poll_s: float = 0.25) -> dict:
    """No fault without proof: look at the system (``backend.effect_checks``) until every check says
    the fault is in effect, or ``bound_s`` (default :data:`EFFECT_BOUND_S`) has passed since the
    injection. The evidence is the fault's ``effect``: ``{"verified", "time_to_effect_s", "bound_s",
    "checks": [{"check", "ok", "seen", "t_s"}]}`` (``t_s``: when that check was first seen ok, else
    of its last look). A fault not seen in effect is not an error here: it is recorded, and the
    run's verdict is ERROR ("fault not in effect", :mod:`chaos.core.verdict`)."""
    bound = EFFECT_BOUND_S.get(fault["scope"], 30.0) if bound_s is None else bound_s
    first_ok: dict[str, float] = {}
    while True:
        try:
            checks = backend.effect_checks(fault)
        except Exception as e:  # noqa: BLE001 - a look that fails proves nothing; looked at again
            checks = [{"check": "the effect checks", "ok": False, "seen": f"{type(e).__name__}: {e}"[:200]}]
        t = round(marker.since_inject(fault), 3)  # when the look ended: what it saw was true by then
        for c in checks:
            if c["ok"]:
                first_ok.setdefault(c["check"], t)
            c["t_s"] = first_ok.get(c["check"], t)
        verified = bool(checks) and all(c["ok"] for c in checks)
        if verified or marker.since_inject(fault) >= bound:
            break
        time.sleep(poll_s)
    fault["effect"] = effect(verified, t, bound, checks)
    marker.log(f"effect of {fault['scope']} {fault['target']}: " + (f"in effect after {t:.2f} s" if verified else
               "NOT IN EFFECT: " + "; ".join(f"{c['check']}: {c['seen']}" for c in checks if not c["ok"])))
    return fault["effect"]


def sleep(seconds: float | None) -> None:
    """Wait ``seconds`` (None or 0: not at all): a fault's outage, a delay between two faults."""
    if seconds:
        time.sleep(seconds)


def outage(backend, marker: Marker, fault: dict, outage_s: float | None, restore: Callable[[], None]) -> None:
    """Restore ``outage_s`` after the injection instant (its proof's time included), else leave it to the rollback."""
    if outage_s is None:
        return
    sleep(max(0.0, outage_s - marker.since_inject(fault)))
    with marker.heal(fault):
        restore()


def heal(backend, marker: Marker, timeout: float = 240.0) -> dict:
    """Every experiment's rollback: heal what the faults this run injected broke, and nothing else,
    through the backend (:meth:`Backend.heal`, last fault first, idempotent): the faults not healed
    yet, and the consequences of those that healed themselves (a head restarted without GCS fault
    tolerance leaves its workers unknown to the new GCS); then wait for health. Heal marks are
    written for the faults not healed yet. Nothing injected: the cluster is not touched."""
    if not marker.attempted:
        return {"healed": [], "note": "nothing was injected: nothing to heal"}
    pending = list(reversed(marker.unhealed()))
    for f in pending:
        marker.heal_started(f)
    done = backend.heal(list(reversed(marker.attempted.values())), timeout=timeout)
    for f in pending:
        marker.heal_ended(f)
    done["healed"] = [f["fault_id"] for f in pending]
    return done
