"""An experiment's stated bounds, checked against the recovery summary.

Which figure a bound reads, and how it compares, is the figure catalogue's (:mod:`chaos.analysis.figures`: a
figure's ``bound`` and ``comparison``). Bounds are the experiment author's; each is checked for every
fault of its run, on one population of the fault (:mod:`chaos.analysis`): ``affected`` by default (the
users of the lost domain), or ``service`` when the experiment says ``"population": "service"``.

Every result has ``met``: ``true``, ``false``, or ``null`` with a ``status`` and a ``reason``:

- ``not_applicable``: the bound does not apply to this fault, and does not count against the
  run: a recovery or capacity bound of a fault whose analysis window a later fault cut (``window_cut_by``:
  it cannot recover inside its window by construction; the incident's recovery is checked on
  the last fault); a time to first success when nothing failed (a slow-only disruption, or
  none: nothing to recover from); failures in unaffected zones of a fault that has no zone, or
  of a run whose client sends through one front door for every zone (``front: lb``: its
  requests belong to no zone, so no unaffected zone's users exist to bound).
- ``unmeasurable``: the figure could not be measured (the fault's ``unmeasurable`` map says
  why: too short a window, targets without zones). The claim is then not supported, so the
  run does not pass: :func:`all_met` is false, and the verdict names the bound.

A figure never reached (no first success, no steady state within the run) violates its
``max_time_*`` bound.

``max_amplification`` (a client that retries, ``load.retry``) reads the population's
``retries.peak_amplification`` (:mod:`chaos.analysis.retries`): the most attempts sent per logical request
asked for, in a bin from the injection to recovery. It is ``not_applicable`` in a run without a retry
policy (nothing was retried: nothing to bound), and :func:`with_defaults` states it at
:data:`DEFAULT_MAX_AMPLIFICATION` for an experiment with a policy whose bounds do not name it.

``max_orphan_s`` reads the fault's ``orphans`` (:mod:`chaos.system.orphan_watch`): not applicable where the fault
killed or replaced no replica, or its replica had no engine; unmeasurable where the engines could not be
looked at; violated when an engine was left at the bound (never freed) or went later than it.

``max_device_crashloop_s`` reads the fault's ``device`` (:mod:`chaos.analysis.device`): how long replacements kept
failing on a node whose device stays bad; not applicable to a fault that leaves none; applied by default (120 s) to the
scopes that do.

``max_cross_region_share`` (for users pinned to a region) reads the fault's ``locality``: the larger
of the shares of requests served outside the client's region during the fault and after it.
"""

from __future__ import annotations

from typing import Any

from chaos.analysis import figures
from chaos import scopes
from chaos.base.errors import UsageError

MET, VIOLATED, NOT_APPLICABLE, UNMEASURABLE = "met", "violated", "not_applicable", "unmeasurable"


# name -> the figure it bounds, with its comparison (chaos.analysis.figures: the catalogue is the one table);
# check() reads the catalogue itself, so a figure registered later is checked as well
BOUNDS: dict[str, figures.Figure] = figures.bounded()
RECOVERY_BOUNDS = frozenset(name for name, fig in BOUNDS.items() if fig.bound_recovery)
POPULATIONS = figures.POPULATIONS
# the bounds read from a population: none of them can be judged on a population with no request
POPULATION_BOUNDS = frozenset(name for name, fig in BOUNDS.items()
                              if fig.plane in (figures.POPULATION, figures.RETRIES))
# a client's retries: at the fault's peak, at most half as many attempts again as users asked for
DEFAULT_MAX_AMPLIFICATION = 1.5


def with_defaults(spec: dict[str, Any], retrying: bool) -> tuple[dict[str, Any], str | None]:
    """The bounds as stated, with the defaults of what the experiment does (a retry policy: ``max_amplification``
    at :data:`DEFAULT_MAX_AMPLIFICATION` when not named), and a sentence saying what was added (None: nothing)."""
    if not retrying or "max_amplification" in spec:
        return spec, None
    return ({**spec, "max_amplification": DEFAULT_MAX_AMPLIFICATION},
            f"max_amplification {DEFAULT_MAX_AMPLIFICATION} by default: the experiment's client retries (load.retry).")


def _population(f: dict, population: str) -> dict:
    """The fault's population figures (a summary of format 1 has none: re-derive it)."""
    if population in f:
        return f[population]
    raise UsageError(f"summary of fault {f.get('fault_id')} has no {population!r} population: "
                     f"re-derive it with `availproof analyse RUN_DIR`")


def _not_applicable(fig: figures.Figure, f: dict, p: dict) -> str | None:
    if fig.plane == figures.RETRIES and p.get(figures.RETRIES) is None:
        return "the run had no retry policy (load.retry): nothing was retried"
    if fig.bound_recovery and f.get("window_cut_by"):
        return f"window cut by fault {f['window_cut_by']}; recovery and capacity are checked on the last fault"
    if fig.failure and not p["failed_total"]:  # a figure that exists only because something failed
        return "no request failed: there was nothing to recover from"
    if fig is figures.UNAFFECTED_ZONES and (not f.get("zones") or scopes.get(f["scope"]).every_target_affected):
        return (f.get("unmeasurable") or {}).get("failed.unaffected_zones") or \
            f"the {f['scope']} fault has no zone: no zone is unaffected by it"
    if fig is figures.UNAFFECTED_ZONES and (f.get("affected") or {}).get("basis") == "service":
        # one front door for every zone (lb): the client's requests have no zone, so no population
        # of an unaffected zone exists to bound; zonal-lb and direct clients keep their zones
        return ("the client sends through one front door for every zone: its requests belong to no zone, "
                "so there are no unaffected zones' users to bound (zonal-lb or direct keep the zones)")
    if fig is figures.DV_CRASHLOOP and not isinstance(f.get("device"), dict):
        return "the fault leaves no node whose device stays bad: no crash loop to bound"
    if fig is figures.ORPHANS_FREED and (f.get("orphans") or {}).get("status") in (None, *figures.ORPHANS_NOT_APPLICABLE):
        return (f.get("unmeasurable") or {}).get(fig.key()) or "no orphan check for this fault"
    return None


def check(summary: dict[str, Any], bounds: dict[str, Any], population: str = "affected") -> list[dict[str, Any]]:
    """One result per (fault, bound): value, limit, met (true, false, or null with status and reason)."""
    if population not in POPULATIONS:
        raise UsageError(f"population: must be one of {', '.join(POPULATIONS)}, got {population!r}")
    out = []
    if not summary.get("faults"):
        return [{"fault_id": None, "scope": None, "bound": "fault_injected", "value": 0, "limit": ">= 1",
                 "met": False, "status": VIOLATED, "population": population}]
    table = figures.bounded()
    for f in summary["faults"]:
        p = _population(f, population)
        for name, limit in bounds.items():
            fig = table[name]
            op, value = fig.comparison, fig.bound_value(f, p)
            row = {"fault_id": f["fault_id"], "scope": f["scope"], "bound": name, "population": population,
                   "value": value, "limit": limit}
            unmeasurable = f.get("unmeasurable") or {}
            no_requests = unmeasurable.get(f"{population}.requests") if fig.plane in (figures.POPULATION, figures.RETRIES) \
                else None
            why_na = _not_applicable(fig, f, p)
            why_unmeasurable = unmeasurable.get(fig.key(population))
            if no_requests:  # nothing of this population to judge: not even "0 failed"
                row.update(met=None, status=UNMEASURABLE, reason=no_requests)
            elif why_na:
                row.update(met=None, status=NOT_APPLICABLE, reason=why_na)
            elif value is None and why_unmeasurable:
                row.update(met=None, status=UNMEASURABLE, reason=why_unmeasurable)
            else:
                if op == "==":
                    met = value == limit
                elif op == ">=":
                    met = value is not None and value >= limit
                else:
                    met = value is not None and value <= limit
                row.update(met=met, status=MET if met else VIOLATED)
            out.append(row)
    return out


def fault_met(results: list[dict[str, Any]] | None, fault_id: str) -> str | None:
    """One fault's line in a table: "yes", "no", "unmeasured", "yes, recovery n/a (window cut)"."""
    mine = [r for r in results or [] if r["fault_id"] == fault_id]
    if not mine:
        return None
    if violated(mine):
        return "no"
    if unmeasured(mine):
        return "unmeasured"
    if any(r.get("status") == NOT_APPLICABLE and "window cut" in r.get("reason", "") for r in mine):
        return "yes, recovery n/a (window cut)"
    return "yes"


def violated(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["met"] is False]


def unmeasured(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r.get("status") == UNMEASURABLE]


def all_met(results: list[dict[str, Any]]) -> bool:
    """Every bound met or not applicable; a violated or unmeasurable one fails the run."""
    return not violated(results) and not unmeasured(results)


def describe_failures(results: list[dict[str, Any]]) -> list[str]:
    """One short phrase per bound that keeps the run from passing."""
    out = [f"{r['bound']}={r['value']} (limit {r['limit']}, {r['population']})" for r in violated(results)]
    out += [f"{r['bound']} unmeasurable: {r['reason']}" for r in unmeasured(results)]
    return out
