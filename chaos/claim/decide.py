"""The claim's verdict from the predictive distribution, the trials that would change it, and the plan.

The verdict, the first that holds (every reason is listed, not only the first word's):
1. ``not_covered``: a rated scope has no single-fault run with a measured cost, or its stated outage length
   is not covered (:mod:`chaos.claim.coverage`). The claim never extrapolates. What the covered scopes
   alone say (2-4) is listed after it.
2. ``supported``: P(a period's availability >= target) >= 1 - risk under the predictive distribution
   (:mod:`chaos.claim.predict`), read as the simulated miss share's one-sided 95 % upper bound being at most
   the risk; with ``--slo-target`` the same holds for ``slo_attainment``.
3. ``not_supported``: not even with endless trials costing what these cost (the ``limit`` draws): the costs,
   or the rates' own uncertainty, keep the miss share above the risk (its one-sided 95 % lower bound is).
4. ``insufficient_evidence``: more trials could support it; ``trials_needed`` says how many more of which
   scope would, if they recover and cost what the recovered runs so far cost (found by simulation: greedy
   doubling, the scope that lowers the miss share most per trial first, then each scope's count cut back to
   the fewest that still support it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from chaos.claim import predict

NOT_COVERED, NOT_SUPPORTED, INSUFFICIENT, SUPPORTED = (
    "not_covered", "not_supported", "insufficient_evidence", "supported")
VERDICTS = (NOT_COVERED, NOT_SUPPORTED, INSUFFICIENT, SUPPORTED)
MAX_EXTRA = 1024  # more trials of one scope than this are not searched
SEARCH_PERIODS = 20_000


@dataclass(frozen=True)
class Goal:
    period_days: float
    target: float
    risk: float
    slo_target: float | None = None

    @property
    def period_s(self) -> float:
        return self.period_days * 86_400


def miss_upper(models: list[predict.ScopeModel], slo_models: list[predict.ScopeModel] | None, goal: Goal,
               periods: int, seed: int, limit: bool = False, bound: str = "upper95") -> float:
    """The larger of the availability's and (with an SLO target) the attainment's miss-share bounds
    (``bound``: ``upper95`` or ``lower95``), each taken against the risk."""
    def one(ms: list[predict.ScopeModel], target: float) -> float:
        draws = predict.simulate(ms, goal.period_days, periods, seed, limit)
        return predict.p_miss(draws.loss, (1 - target) * goal.period_s)[bound]

    up = one(models, goal.target)
    if goal.slo_target is not None and slo_models is not None:
        up = max(up, one(slo_models, goal.slo_target))
    return up


def _more(models: list[predict.ScopeModel], extra: dict[str, int]) -> list[predict.ScopeModel]:
    return [m.with_more_trials(extra.get(m.name, 0)) for m in models]


def trials_needed(models: list[predict.ScopeModel], slo_models: list[predict.ScopeModel] | None, goal: Goal,
                  seed: int, periods: int = SEARCH_PERIODS) -> dict[str, Any]:
    """How many more trials of which scope would support the claim (see the module docstring)."""
    def upper(extra: dict[str, int]) -> float:
        return miss_upper(_more(models, extra), None if slo_models is None else _more(slo_models, extra), goal,
                          periods, seed)

    names = [m.name for m in models if m.values]
    extra = {n: 0 for n in names}
    now = upper(extra)
    ok = now <= goal.risk
    for _ in range(64):
        if ok:
            break
        grow = [n for n in names if extra[n] + max(1, extra[n]) <= MAX_EXTRA]
        if not grow:
            break
        best, best_score, best_up = None, 0.0, now
        for n in grow:
            step = max(1, extra[n])
            up = upper({**extra, n: extra[n] + step})
            score = (now - up) / step
            if best is None or score > best_score:
                best, best_score, best_up = n, score, up
        if best_score > 0:
            extra[best] += max(1, extra[best])
            now = best_up
        else:  # no one scope helps (the simulation's noise, or all must grow together): double them all
            for n in grow:
                extra[n] += max(1, extra[n])
            now = upper(extra)
        ok = now <= goal.risk
    if not ok:
        return {"found": False, "extra": {n: k for n, k in extra.items() if k},
                "why": (f"up to {MAX_EXTRA} more trials of each scope ({', '.join(names) or 'none with a cost'}), "
                        f"doubled in turn, did not support it (miss share's upper bound {now:.4g})")}
    for n in names:  # cut each back to the fewest that still support it
        lo, hi = 0, extra[n]
        while lo < hi:
            mid = (lo + hi) // 2
            if upper({**extra, n: mid}) <= goal.risk:
                hi = mid
            else:
                lo = mid + 1
        extra[n] = hi
    return {"found": True, "extra": {n: k for n, k in extra.items() if k}, "p_miss_upper95": round(upper(extra), 6),
            "periods": periods}


def expected_upper(models: list[predict.ScopeModel], period_days: float, periods: int, seed: int) -> float:
    """The 95th percentile of the period's *expected* lost seconds (parameter uncertainty alone)."""
    d = predict.simulate(models, period_days, periods, seed)
    total = sum(d.expected.values()) if d.expected else np.zeros(periods)
    return float(np.quantile(total, 0.95))


def plan(models: list[predict.ScopeModel], period_days: float, seed: int, command: Callable[[str, int], str],
         needed: dict[str, int] | None = None, periods: int = SEARCH_PERIODS,
         uncovered: list[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The next trials: first each rated scope the claim does not cover (``uncovered``: scope, why), then the
    one that lowers the upper bound of the expected loss the most: per scope, that bound now and with one
    more trial costing what its recovered runs cost (a rise, which only the simulation's noise can give,
    reads 0), the trials suggested (``needed``, else 1) and the command."""
    rows = [{"scope": name, "trials": 0, "expected_lost_upper95_s": None, "after_one_more_s": None,
             "lowers_by_s": None, "suggested_trials": 2, "command": command(name, 2), "why": why}
            for name, why in uncovered]
    if not models:
        return rows
    now = expected_upper(models, period_days, periods, seed)
    covered = []
    for m in models:
        if not m.values:
            continue
        after = expected_upper(_more(models, {m.name: 1}), period_days, periods, seed)
        k = (needed or {}).get(m.name) or 1
        covered.append({"scope": m.name, "trials": m.n, "expected_lost_upper95_s": round(now, 6),
                        "after_one_more_s": round(after, 6), "lowers_by_s": round(max(0.0, now - after), 6),
                        "suggested_trials": k, "command": command(m.name, k), "why": None})
    covered.sort(key=lambda r: -r["lowers_by_s"])
    return rows + covered


def verdict(not_covered: list[str], avail: dict[str, Any] | None, slo: dict[str, Any] | None, goal: Goal,
            limit_lower: float | None, needed: dict[str, Any] | None) -> dict[str, Any]:
    """The word and every reason, from the figures already computed (see the module docstring)."""
    found: dict[str, list[str]] = {w: [] for w in VERDICTS}
    found[NOT_COVERED] += not_covered
    if avail is None and not not_covered:
        found[NOT_COVERED].append("no rated scope: nothing to claim (every scope's rate is 0, or none is given)")
    short = []
    for name, fig, tgt in (("availability", avail, goal.target), ("slo_attainment", slo, goal.slo_target)):
        if fig is None or tgt is None:
            continue
        pm = fig["p_miss"]
        if pm["upper95"] > goal.risk:
            short.append(f"P({name} >= {tgt * 100:g} %) = {1 - pm['value']:.4f} (miss share {pm['value']:.4g}, upper "
                         f"bound {pm['upper95']:.4g} > risk {goal.risk:g}; {pm['periods']} simulated periods)")
    if short:  # listed under not_covered too: what the covered scopes alone say
        if limit_lower is not None and limit_lower > goal.risk:
            found[NOT_SUPPORTED] += short + [
                f"even with endless trials costing what these cost, the miss share is at least {limit_lower:.4g} "
                "(its one-sided 95 % lower bound)"]
        else:
            extra = (needed or {}).get("extra") or {}
            more = ", ".join(f"{k} more of {n}" for n, k in sorted(extra.items())) or "more trials"
            tail = (f"{more} would support it, if they recover and cost what the recovered runs so far cost"
                    if (needed or {}).get("found") else (needed or {}).get("why", "more trials may support it"))
            found[INSUFFICIENT] += short + [tail]
    word = next((w for w in VERDICTS[:-1] if found[w]), SUPPORTED)
    return {"word": word, "reasons": [f"{w}: {r}" for w in VERDICTS[:-1] for r in found[w]]}
