"""An experiment's stated bounds, checked against the recovery summary.

Bounds are the experiment author's; each is checked for every fault of its run, on one
population of the fault (:mod:`chaos.analysis`): ``affected`` by default (the users of the
lost domain), or ``service`` when the experiment says ``"population": "service"``.

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

``max_cross_region_share`` (for users pinned to a region) reads the fault's ``locality``: the larger
of the shares of requests served outside the client's region during the fault and after it.
"""

from __future__ import annotations

from typing import Any, Callable

from chaos import scopes
from chaos.errors import UsageError

MET, VIOLATED, NOT_APPLICABLE, UNMEASURABLE = "met", "violated", "not_applicable", "unmeasurable"


def _pop(key: str) -> Callable[[dict, dict], Any]:
    return lambda f, p: p[key]


def _first_success(f: dict, p: dict) -> Any:
    return p["time_to_first_success_s"]


def _cross_region_share(f: dict, p: dict) -> Any:
    """The larger share of requests served outside the client's region, during the fault and after
    it (``locality``, chaos.analysis); None when neither phase could tell."""
    phases = [(f.get("locality") or {}).get(k) or {} for k in ("during", "after")]
    shares = [ph.get("cross_region_share") for ph in phases if ph.get("cross_region_share") is not None]
    return max(shares) if shares else None


# name -> (what it reads from (fault, population), comparison, the unmeasurable key or None)
BOUNDS: dict[str, tuple[Callable[[dict, dict], Any], str, str | None]] = {
    "max_failed_requests": (_pop("failed_total"), "<=", None),
    "max_failed_mid_stream": (_pop("failed_mid_stream"), "<=", None),
    "max_failed_unaffected_zones": (lambda f, p: f["failed"]["unaffected_zones"], "<=", "failed.unaffected_zones"),
    "max_failed_ratio": (_pop("failed_ratio"), "<=", "{pop}.failed_ratio"),
    "max_time_to_first_success_s": (_first_success, "<=", None),
    "max_time_to_steady_state_s": (_pop("time_to_steady_state_s"), "<=", "{pop}.time_to_steady_state_s"),
    "max_relapses": (_pop("relapses"), "<=", "{pop}.relapses"),
    "must_recover": (_pop("recovered"), "==", "{pop}.recovered"),
    # the other two planes (chaos.planes): population-independent
    "max_control_plane_outage_s": (lambda f, p: f["control_plane"]["outage_s"], "<=", "control_plane.outage_s"),
    "max_time_to_capacity_restored_s": (lambda f, p: f["capacity"]["time_to_restored_s"], "<=",
                                        "capacity.time_to_restored_s"),
    "min_capacity_ratio": (lambda f, p: f["capacity"]["min_ratio"], ">=", "capacity.min_ratio"),
    # who served (chaos.analysis.locality): a data-location policy, for users pinned to a region
    "max_cross_region_share": (_cross_region_share, "<=", "locality.cross_region_share"),
}
RECOVERY_BOUNDS = frozenset({"max_time_to_first_success_s", "max_time_to_steady_state_s", "must_recover",
                             "max_relapses", "max_control_plane_outage_s", "max_time_to_capacity_restored_s",
                             "min_capacity_ratio"})
POPULATIONS = ("affected", "service")
# the bounds read from a population: none of them can be judged on a population with no request
POPULATION_BOUNDS = frozenset({"max_failed_requests", "max_failed_mid_stream", "max_failed_ratio",
                               "max_time_to_first_success_s", "max_time_to_steady_state_s", "max_relapses",
                               "must_recover"})


def _population(f: dict, population: str) -> dict:
    """The fault's population figures (a summary of format 1 has none: re-derive it)."""
    if population in f:
        return f[population]
    raise UsageError(f"summary of fault {f.get('fault_id')} has no {population!r} population: "
                     f"re-derive it with `availproof analyse RUN_DIR`")


def _not_applicable(name: str, f: dict, p: dict) -> str | None:
    if name in RECOVERY_BOUNDS and f.get("window_cut_by"):
        return f"window cut by fault {f['window_cut_by']}; recovery and capacity are checked on the last fault"
    if name == "max_time_to_first_success_s" and not p["failed_total"]:
        return "no request failed: there was nothing to recover from"
    if name == "max_failed_unaffected_zones" and (not f.get("zones") or scopes.get(f["scope"]).every_target_affected):
        return (f.get("unmeasurable") or {}).get("failed.unaffected_zones") or \
            f"the {f['scope']} fault has no zone: no zone is unaffected by it"
    if name == "max_failed_unaffected_zones" and (f.get("affected") or {}).get("basis") == "service":
        # one front door for every zone (lb): the client's requests have no zone, so no population
        # of an unaffected zone exists to bound; zonal-lb and direct clients keep their zones
        return ("the client sends through one front door for every zone: its requests belong to no zone, "
                "so there are no unaffected zones' users to bound (zonal-lb or direct keep the zones)")
    return None


def check(summary: dict[str, Any], bounds: dict[str, Any], population: str = "affected") -> list[dict[str, Any]]:
    """One result per (fault, bound): value, limit, met (true, false, or null with status and reason)."""
    if population not in POPULATIONS:
        raise UsageError(f"population: must be one of {', '.join(POPULATIONS)}, got {population!r}")
    out = []
    if not summary.get("faults"):
        return [{"fault_id": None, "scope": None, "bound": "fault_injected", "value": 0, "limit": ">= 1",
                 "met": False, "status": VIOLATED, "population": population}]
    for f in summary["faults"]:
        p = _population(f, population)
        for name, limit in bounds.items():
            read, op, unmeasurable_key = BOUNDS[name]
            value = read(f, p)
            row = {"fault_id": f["fault_id"], "scope": f["scope"], "bound": name, "population": population,
                   "value": value, "limit": limit}
            unmeasurable = f.get("unmeasurable") or {}
            no_requests = unmeasurable.get(f"{population}.requests") if name in POPULATION_BOUNDS else None
            why_na = _not_applicable(name, f, p)
            why_unmeasurable = unmeasurable.get((unmeasurable_key or "").format(pop=population))
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
