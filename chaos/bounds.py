"""An experiment's stated bounds, checked against the recovery summary.

Bounds are the experiment author's; each is checked for every fault of its run. A figure
that was never reached (no recovery within the run) violates a ``max_time_*`` bound.

Recovery bounds (``RECOVERY_BOUNDS``) do not apply to a fault whose analysis window a later
fault of the same run cut (``window_cut_by``): by definition it cannot recover inside its
window, so the bound would fail by construction, not because of the system. Those results
say ``met: null`` with the reason; the incident's recovery is checked on the last fault,
whose window runs to the end of the run through every heal. Failed-request bounds apply to
every fault.
"""

from __future__ import annotations

from typing import Any

from chaos.errors import UsageError

# name -> (what it reads from a fault summary, comparison)
BOUNDS = {
    "max_failed_requests": (lambda f: f["failed"]["total"], "<="),
    "max_failed_mid_stream": (lambda f: f["failed"]["mid_stream"], "<="),
    "max_failed_unaffected_zones": (lambda f: f["failed"]["unaffected_zones"], "<="),
    "max_failed_ratio": (lambda f: f["failed_ratio"] or 0.0, "<="),
    "max_time_to_first_success_s": (lambda f: f["time_to_first_success_s"] if f["disrupted"] else 0.0, "<="),
    "max_time_to_steady_state_s": (lambda f: f["time_to_steady_state_s"], "<="),
    "must_recover": (lambda f: f["recovered"], "=="),
}
RECOVERY_BOUNDS = frozenset({"max_time_to_first_success_s", "max_time_to_steady_state_s", "must_recover"})


def validate(bounds: Any, source: str = "bounds") -> dict[str, Any]:
    if not isinstance(bounds, dict) or not bounds:
        raise UsageError(f"{source}: must be a non-empty mapping of bound names to limits")
    for name, limit in bounds.items():
        if name not in BOUNDS:
            raise UsageError(f"{source}.{name}: unknown bound (known: {', '.join(BOUNDS)})")
        if name == "must_recover":
            if not isinstance(limit, bool):
                raise UsageError(f"{source}.{name}: must be true or false")
        elif isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
            raise UsageError(f"{source}.{name}: must be a number >= 0, got {limit!r}")
    return bounds


def check(summary: dict[str, Any], bounds: dict[str, Any]) -> list[dict[str, Any]]:
    """One result per (fault, bound): value, limit, met (true, false, or null: not applicable)."""
    out = []
    if not summary.get("faults"):
        return [{"fault_id": None, "scope": None, "bound": "fault_injected", "value": 0, "limit": ">= 1",
                 "met": False}]
    for f in summary["faults"]:
        cut_by = f.get("window_cut_by")
        for name, limit in bounds.items():
            read, op = BOUNDS[name]
            value = read(f)
            if name in RECOVERY_BOUNDS and cut_by:
                out.append({"fault_id": f["fault_id"], "scope": f["scope"], "bound": name, "value": value,
                            "limit": limit, "met": None,
                            "reason": f"window cut by fault {cut_by}; recovery is checked on the last fault"})
                continue
            if op == "==":
                met = value == limit
            else:
                met = value is not None and value <= limit
            out.append({"fault_id": f["fault_id"], "scope": f["scope"], "bound": name, "value": value,
                        "limit": limit, "met": met})
    return out


def fault_met(results: list[dict[str, Any]] | None, fault_id: str) -> str | None:
    """One fault's line in a table: "yes", "no", "yes, recovery n/a (window cut)"; None without results."""
    mine = [r for r in results or [] if r["fault_id"] == fault_id]
    if not mine:
        return None
    if violated(mine):
        return "no"
    return "yes, recovery n/a (window cut)" if any(r["met"] is None for r in mine) else "yes"


def violated(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["met"] is False]


def all_met(results: list[dict[str, Any]]) -> bool:
    return not violated(results)
