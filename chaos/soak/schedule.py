"""The soak's fault schedule: seeded Poisson instants per scope, and what one cluster cannot run at once.

**What an experiment injects** (:func:`fault_from_experiment`) is a :class:`SoakFault`: its scope, and
``heal_s``, how long from its injection to its heal. Read from the experiment file:
- ``extensions[availproof]``: ``scope``; ``recovery_window_s`` and ``recovery_settle_s`` (with ``--app llm``
  its ``llm`` block's, merged as :func:`chaos.core.experiment.settings` merges them); ``load`` (every
  :class:`~chaos.load.workload.LoadShape` field but ``duration_s`` and ``max_requests``, which the soak sets);
  the topology block ``topology``, ``gcs_fault_tolerance``, ``network``, ``app``, ``targets``, ``routing``,
  ``front``, ``front_door``;
- ``method``: its one fault action (``provider.func``: a registered scope's action, :func:`heal_args`) and that
  action's ``arguments``: the time to its heal is the largest of the arguments its scope names
  (:attr:`chaos.scopes.Scope.heal_args`: ``outage_s``, ``duration_s``; a drain's ``outage_s`` and ``deadline_s``:
  the node goes at its deadline and comes back ``outage_s`` after the notice, not before it went), each with
  its fault function's default when not given; ``zone`` (the zones it names; none named: it may hit any zone).
  A fault with no heal of its own (its scope names no heal argument: the system replaces what it hit, or it
  completes) or whose duration is null (healed in the rollback) is held for an *occupancy* bound instead: its
  ``recovery_window_s`` (``healed_by``: ``occupancy``).

**The draw** (:func:`draw`): per rated scope, a Poisson process of rate ``mean_events / period_s x K`` over
``[0, duration_s)``: a Poisson count, then that many uniform instants, from ``numpy.random.default_rng([seed,
crc32(scope)])`` (adding a scope does not move another's instants), merged in time order. A fault *holds*
from its instant to ``until_s = heal_at_s + settle_s`` (its ``recovery_settle_s``).

**The rules**, applied in time order; a fault that breaks one is skipped and recorded with why:
- a fault of a scope whose previous injected fault still holds (not healed plus settled);
- a fault that conflicts with one of another scope still holding: :func:`conflicts` (whatever the zones) or
  :func:`same_zone` (when the zones they name meet; none named meets every zone).
The conflict table is over the scopes' conflict classes (:attr:`chaos.scopes.Scope.conflict_class`,
:data:`CLASSES`; a scope of none conflicts only with itself):
- always: control-plane x control-plane; control-plane x replica-level, node-drain, every-replica (they pick,
  drain or upgrade through the control plane) and x ray-nodes (their heals restart Ray nodes, which register
  with the GCS); every-replica x replica-level and node-drain (it replaces every replica and waits for them);
- in the same zone: any two of replica-level, node-drain, ray-nodes, network.
Any other two faults may hold at once (as in production, a second arrives while the first heals): each such
overlap is recorded (``faults``, ``scopes``, ``from_s`` to ``to_s``).

**Input checks** (:func:`check`), before anything is drawn, each a one-line UsageError: a speed-up or duration
not above 0; two experiments of one scope; experiments whose ``load`` or topology block differ (the field
named); a rated scope (a rate above 0) no listed experiment injects; a speed-up that brings a scope's faults
closer on average than one holds (``heal_s + settle_s``); a soak expecting fewer than 1 fault in all, or
shorter than a fault's ``heal_s`` plus its ``recovery_window_s``. The load runs on to ``end_s``: the soak's
duration, or the last injected fault's heal plus its recovery window when that is later."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from chaos import scopes
from chaos.claim.rates import Rates
from chaos.base.errors import UsageError

SETUP_FIELDS = ("topology", "gcs_fault_tolerance", "network", "app", "targets", "routing", "front", "front_door")
LOAD_SET_BY_SOAK = ("duration_s", "max_requests")

# the conflict classes a scope may be of (Scope.conflict_class), each what its faults do to the cluster
CLASSES = {
    "replica-level": "acts on one replica (or its engine, or its node's accelerator), picked through the control plane",
    "node-drain": "drains a node through the control plane, then takes it down",
    "ray-nodes": "takes Ray nodes down; its heal restarts them, and they register with the GCS",
    "network": "cuts a zone off the network",
    "control-plane": "takes the control plane (the GCS, its Redis) down",
    "every-replica": "replaces every replica and waits for them",
}
# class pair -> why two faults of them never hold at once; the first rule naming a pair gives its reason
ALWAYS = (
    (("control-plane",), ("control-plane",), "the head's restart reads the GCS state back from Redis"),
    (("control-plane",), ("replica-level", "node-drain", "every-replica"),
     "it picks its replica, drains or upgrades through the control plane, which the other holds down"),
    (("control-plane",), ("ray-nodes",),
     "its heal restarts Ray nodes, which register with the GCS the other holds down"),
    (("every-replica",), ("replica-level", "node-drain"),
     "the upgrade replaces every replica and waits for them; the other kills, stops or moves one"),
)
ZONAL = ("replica-level", "node-drain", "ray-nodes", "network")  # never two of them at once in the same zone
SAME_ZONE_WHY = "both act on the same zone: the same node or replica, or a replica the domain fault has taken down"


def _table(pairs: Iterable[tuple[Iterable[str], Iterable[str], str]]) -> dict[frozenset, str]:
    """Scope pair -> why, for every two registered scopes (of different names) whose classes a rule names."""
    into: dict[frozenset, str] = {}
    for left, right, why in pairs:
        for a in scopes.all_scopes():
            for b in scopes.all_scopes():
                if a.name != b.name and a.conflict_class in left and b.conflict_class in right:
                    into.setdefault(frozenset((a.name, b.name)), why)
    return into


def conflicts() -> dict[frozenset, str]:
    """Scope pair -> why they never hold at once (the registered scopes, by their classes)."""
    return _table(ALWAYS)


def same_zone() -> dict[frozenset, str]:
    """Scope pair -> why they do not hold at once in the same zone."""
    return _table([(ZONAL, ZONAL, SAME_ZONE_WHY)])


def heal_args() -> dict[str, dict[str, Any]]:
    """Every registered action -> the arguments its time to heal is read from, each with its fault function's
    default (:attr:`chaos.scopes.Scope.heal_args`; the max over them is the time to heal)."""
    out = {}
    for name, (scope, fault) in scopes.actions().items():
        params = inspect.signature(fault).parameters
        out[name] = {a: params[a].default for a in scope.heal_args if a in params}
    return out


@dataclass(frozen=True)
class SoakFault:
    scope: str
    experiment: str
    heal_s: float  # injection to heal; with no heal of its own, the occupancy bound
    healed_by: str = "heal"  # heal | occupancy
    recovery_window_s: float = 40.0
    settle_s: float = 10.0
    zones: tuple[str, ...] = ()  # the zones its action names (none: any zone)
    load: dict | None = field(default=None, compare=False)
    setup: dict | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("load", "setup")}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SoakFault":
        return cls(**{**d, "zones": tuple(d.get("zones") or ())})


@dataclass
class Planned:
    index: int  # its place in the drawn schedule
    instant_s: float
    scope: str
    experiment: str
    heal_at_s: float
    until_s: float  # heal_at_s + settle_s: it holds its scope (and what it touches) until then
    why: str | None = None  # skipped: why

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return d if self.why is not None else {k: v for k, v in d.items() if k != "why"}


@dataclass
class Schedule:
    seed: int
    speedup: float
    duration_s: float
    period_days: float
    rates_per_s: dict[str, float]  # per scope, mean_events / period_s x speedup
    faults: dict[str, SoakFault]
    injected: list[Planned]
    skipped: list[Planned]
    overlaps: list[dict[str, Any]]
    end_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "speedup": self.speedup, "duration_s": self.duration_s, "end_s": self.end_s,
                "period_days": self.period_days, "rates_per_s": dict(self.rates_per_s),
                "faults": {s: f.to_dict() for s, f in self.faults.items()},
                "injected": [p.to_dict() for p in self.injected], "skipped": [p.to_dict() for p in self.skipped],
                "overlaps": [dict(o) for o in self.overlaps]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Schedule":
        return cls(d["seed"], d["speedup"], d["duration_s"], d["period_days"], dict(d["rates_per_s"]),
                   {s: SoakFault.from_dict(f) for s, f in d["faults"].items()},
                   [Planned(**p) for p in d["injected"]], [Planned(**p) for p in d["skipped"]],
                   [dict(o) for o in d["overlaps"]], d["end_s"])


def _duration(func: str, args: dict[str, Any]) -> float | None:
    vals = [args.get(k, default) for k, default in heal_args()[func].items()]
    return None if not vals or any(v is None for v in vals) else float(max(vals))


def fault_from_experiment(path: str | Path, app: str = "stream") -> SoakFault:
    """What the experiment at ``path`` injects (the fields read: the module docstring)."""
    from chaos.core import experiment

    path = Path(path)
    exp = experiment.load(path)
    s = experiment.settings(exp, path.name, app)
    known = heal_args()
    acts = [a for a in exp["method"] if isinstance(a, dict) and (a.get("provider") or {}).get("func") in known]
    if len(acts) != 1:
        raise UsageError(f"{path}: method: a soak injects one fault per experiment, found {len(acts)} fault actions "
                         f"(known: {', '.join(known)})")
    func, args = acts[0]["provider"]["func"], acts[0]["provider"].get("arguments") or {}
    heal = _duration(func, args)
    zone = args.get("zone")
    load = {k: v for k, v in dataclasses.asdict(s.load).items() if k not in LOAD_SET_BY_SOAK}
    return SoakFault(s.scope, path.stem, s.recovery_window_s if heal is None else heal,
                     "occupancy" if heal is None else "heal", s.recovery_window_s, s.recovery_settle_s,
                     (zone,) if isinstance(zone, str) else (), json.loads(json.dumps(load, default=str)),
                     {k: getattr(s, k) for k in SETUP_FIELDS})


def faults_from_experiments(paths: Iterable[str | Path], app: str = "stream") -> list[SoakFault]:
    faults = [fault_from_experiment(p, app) for p in paths]
    check_same_setup(faults)
    return faults


def _differs(a: Any, b: Any, prefix: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            d = _differs(a.get(k), b.get(k), f"{prefix}.{k}")
            if d:
                return d
        return None
    return None if a == b else f"{prefix} differs ({a!r} vs {b!r})"


def check_same_setup(faults: list[SoakFault]) -> None:
    """One load on one cluster: the experiments' ``load`` and topology blocks must agree field by field."""
    known = [f for f in faults if f.load is not None and f.setup is not None]
    for f in known[1:]:
        d = _differs(known[0].load, f.load, "load") or _differs(known[0].setup, f.setup, "")
        if d:
            raise UsageError(f"{known[0].experiment} and {f.experiment}: {d.lstrip('.')}: a soak runs one load on "
                             "one cluster; list experiments that agree")


def conflict(a: SoakFault, b: SoakFault) -> str | None:
    """Why faults ``a`` and ``b`` (of different scopes) cannot hold at once, or None."""
    pair = frozenset((a.scope, b.scope))
    always, zonal = conflicts(), same_zone()
    if pair in always:
        return always[pair]
    if pair in zonal:
        meet = sorted(set(a.zones) & set(b.zones)) if a.zones and b.zones else None
        if meet is None or meet:
            where = ", ".join(meet) if meet else "any zone (one of them names none)"
            return f"{zonal[pair]} ({where})"
    return None


def check(rates: Rates, faults: list[SoakFault], speedup: float, duration_s: float) -> dict[str, float]:
    """Every input check, each a one-line UsageError; returns each rated scope's rate per second."""
    if not isinstance(speedup, (int, float)) or not math.isfinite(speedup) or speedup <= 0:
        raise UsageError(f"--speedup: a number above 0 (e.g. 720: a month in an hour), got {speedup!r}")
    if not isinstance(duration_s, (int, float)) or not math.isfinite(duration_s) or duration_s <= 0:
        raise UsageError(f"--duration: seconds above 0, got {duration_s!r}")
    by: dict[str, SoakFault] = {}
    for f in faults:
        cls = scopes.get(f.scope).conflict_class
        if cls is not None and cls not in CLASSES:
            raise UsageError(f"scope {f.scope}: conflict class {cls!r} is none of the soak's ({', '.join(CLASSES)})")
        if f.scope in by:
            raise UsageError(f"{by[f.scope].experiment} and {f.experiment} both inject scope {f.scope}: list one "
                             "experiment per scope")
        by[f.scope] = f
    check_same_setup(faults)
    listed = ", ".join(f"{f.scope} ({f.experiment})" for f in faults) or "none"
    per_s = {}
    for name, rate in rates.rated().items():
        if name not in by:
            raise UsageError(f"{rates.path}: scopes.{name}: no listed experiment injects this scope (listed: "
                             f"{listed}); list one of its experiments or drop its rate")
        per_s[name] = rate.mean_events(rates.period_days) / rates.period_s * speedup
    for name, lam in per_s.items():
        f = by[name]
        hold = f.heal_s + f.settle_s
        if 1 / lam < hold:
            most = speedup * (1 / lam) / hold
            raise UsageError(f"--speedup {speedup:g}: {name} faults would arrive every {1 / lam:.1f} s on average, "
                             f"sooner than one holds ({f.heal_s:g} s to its heal + {f.settle_s:g} s settle, "
                             f"{f.experiment}); at most --speedup {math.floor(most * 1000) / 1000:g}")
    expected = sum(per_s.values()) * duration_s
    if expected < 1:
        raise UsageError(f"--duration {duration_s:g}: {expected:.3f} faults expected in all over the soak (rates x "
                         f"--speedup {speedup:g}); at least 1 is needed: a longer soak or a higher speed-up")
    for name in per_s:
        f = by[name]
        if duration_s < f.heal_s + f.recovery_window_s:
            raise UsageError(f"--duration {duration_s:g}: shorter than one {name} fault and its recovery window "
                             f"({f.heal_s:g} + {f.recovery_window_s:g} s, {f.experiment})")
    return per_s


def instants(scope: str, per_s: float, duration_s: float, seed: int) -> list[float]:
    """A Poisson process of ``per_s`` over ``[0, duration_s)``, seeded by ``seed`` and the scope's name."""
    rng = np.random.default_rng([seed, zlib.crc32(scope.encode())])
    n = int(rng.poisson(per_s * duration_s))
    return sorted(float(x) for x in rng.uniform(0.0, duration_s, n))


def draw(rates: Rates, faults: list[SoakFault], speedup: float, duration_s: float, seed: int) -> Schedule:
    """The soak's schedule (see the module docstring): inputs checked first, then drawn, then the rules."""
    per_s = check(rates, faults, speedup, duration_s)
    by = {f.scope: f for f in faults}
    drawn = sorted((t, name) for name, lam in per_s.items() for t in instants(name, lam, duration_s, seed))
    injected, skipped, overlaps = apply_rules(drawn, by)
    end = max([duration_s] + [p.heal_at_s + by[p.scope].recovery_window_s for p in injected])
    return Schedule(seed, float(speedup), float(duration_s), rates.period_days, per_s, by, injected, skipped,
                    overlaps, round(end, 6))


def apply_rules(drawn: list[tuple[float, str]], by: dict[str, SoakFault]
                ) -> tuple[list[Planned], list[Planned], list[dict[str, Any]]]:
    """The rules (the module docstring) over ``(instant_s, scope)`` in time order: injected, skipped, overlaps."""
    injected: list[Planned] = []
    skipped: list[Planned] = []
    overlaps: list[dict[str, Any]] = []
    for i, (t, name) in enumerate(drawn):
        f = by[name]
        p = Planned(i, round(t, 6), name, f.experiment, round(t + f.heal_s, 6), round(t + f.heal_s + f.settle_s, 6))
        holding = [q for q in injected if q.until_s > p.instant_s]
        for q in holding:
            if q.scope == name:
                p.why = (f"{name} fault #{q.index} (at {q.instant_s:.1f} s) holds its scope until {q.until_s:.1f} s "
                         f"(healed at {q.heal_at_s:.1f} s + {f.settle_s:g} s settle)")
                break
            why = conflict(by[q.scope], f)
            if why:
                p.why = f"conflicts with {q.scope} fault #{q.index} holding until {q.until_s:.1f} s: {why}"
                break
        if p.why:
            skipped.append(p)
            continue
        for q in holding:
            overlaps.append({"faults": [q.index, p.index], "scopes": [q.scope, name],
                             "experiments": [q.experiment, f.experiment],
                             "from_s": p.instant_s, "to_s": min(q.until_s, p.until_s)})
        injected.append(p)
    return injected, skipped, overlaps
