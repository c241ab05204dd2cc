"""The background: requests that fail with no fault at all, charged to the period as a term of their own.

Each run's cost is net of its baseline (the failed share before its injection, subtracted and clipped at 0:
:mod:`chaos.claim.cost`), so a service that always loses a little would otherwise never be charged for it. The
claim pools every run's baseline (the measured requests sent and ended before its first injection, each run
once; every measured request of a fault-free run: a long quiet run is how to narrow it) into one estimate of the
background's failed share, ``beta`` ~ Beta(``failed + 0.5``, ``requests - failed + 0.5``) (Jeffreys), and
charges ``beta x period`` lost service-seconds to every period (for an open loop the failed share integrated over
time; within a period its randomness is negligible beside what is unknown of ``beta``,
so it is drawn once per outer draw: :class:`chaos.claim.credible.Background`). Reported as its own row with its
share of the error budget; the SLO's figure uses the requests that missed the SLO before the injection."""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.claim.credible import Background


def pooled(runs: list[dict[str, Any]], key: str = "failed") -> tuple[Background | None, int]:
    """Every run's baseline pooled (each run once: its first fault's; a fault-free run's every measured request),
    and how many runs gave one."""
    req = bad = k = 0
    for r in runs:
        base = r.get("quiet") or next((f.get("baseline") for f in r.get("faults") or [] if f.get("baseline")), None)
        if not base or not base.get("requests"):
            continue
        req += int(base["requests"])
        bad += int(base.get(key) or 0)
        k += 1
    return (Background(bad, req, k) if req else None), k


def row(bg: Background | None, runs: int, period_s: float, budget_s: float, seed: int = 0) -> dict[str, Any]:
    """The background's row of the claim: its share, the seconds it costs a period and its share of the budget."""
    if bg is None:
        return {"requests": 0, "failed": 0, "runs": 0, "share": None, "lost_s": None, "budget_share": None,
                "unmeasurable": {"share": "no run has a baseline (no measured request ended before an injection)"}}
    d = bg.draw(200_000, seed)
    lo, hi = (float(x) for x in np.quantile(d, (0.05, 0.95)))
    mean = float(d.mean())
    return {"requests": bg.requests, "failed": bg.failed, "runs": runs,
            "share": {"mean": round(mean, 9), "interval90": [round(lo, 9), round(hi, 9)],
                      "prior": "Beta(failed + 0.5, requests - failed + 0.5)"},
            "lost_s": {"mean": round(mean * period_s, 6), "interval90": [round(lo * period_s, 6),
                                                                          round(hi * period_s, 6)]},
            "budget_share": round(mean * period_s / budget_s, 6), "unmeasurable": {}}
