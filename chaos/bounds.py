"""An experiment's stated bounds, checked against the recovery summary.

Bounds are the experiment author's; each is checked for every fault of its run. A figure
that was never reached (no recovery within the run) violates a ``max_time_*`` bound.
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
    """One result per (fault, bound): value, limit, met."""
    out = []
    if not summary.get("faults"):
        return [{"fault_id": None, "scope": None, "bound": "fault_injected", "value": 0, "limit": ">= 1",
                 "met": False}]
    for f in summary["faults"]:
        for name, limit in bounds.items():
            read, op = BOUNDS[name]
            value = read(f)
            if op == "==":
                met = value == limit
            else:
                met = value is not None and value <= limit
            out.append({"fault_id": f["fault_id"], "scope": f["scope"], "bound": name, "value": value,
                        "limit": limit, "met": met})
    return out


def all_met(results: list[dict[str, Any]]) -> bool:
    return all(r["met"] for r in results)
