"""The claim's verdict, the trials that would change it, and the plan.

The verdict, the first that holds (every reason is listed, not only the first word's):
1. ``not_covered``: a rated scope has no single-fault run with a measured cost, or its stated outage length
   is not covered (:mod:`chaos.claim.coverage`). The claim never extrapolates. What the covered scopes
   alone say (2-4) is listed after it.
2. ``supported``: the credible probability that a period's miss chance is within the risk reaches the stated
   credibility ``c`` (:mod:`chaos.claim.credible`), resolved beyond its Monte Carlo error; with ``--slo-target``
   the same holds for ``slo_attainment``.
3. ``not_supported``: not even the optimistic end of what more trials could show reaches ``c``: every scope's
   unrecovered share at its posterior's 5 % quantile, its costs those seen (the empirical distribution), the
   rates' own uncertainty kept (more trials do not narrow it).
4. ``insufficient_evidence``: more trials could support it; ``trials_needed`` says how many more of which scope
   would, if they recover, each costs the scope's typical (median) recovered cost and brings a baseline like the
   runs' so far (the background's evidence grows with them). Found by simulation at fixed draws,
   :data:`SEARCH_OUTER` x :data:`SEARCH_INNER`, common random numbers: the scopes that press hardest on the miss
   chance doubled together, judged once a step; then cut back by a common factor, and one by one when few, to
   the fewest that still reach ``c`` plus three of the search's outer standard errors (so that the count found
   supports the claim when judged again with more draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from chaos.claim import credible, predict, unrecovered
from chaos.claim.model import ScopeModel

NOT_COVERED, NOT_SUPPORTED, INSUFFICIENT, SUPPORTED = (
    "not_covered", "not_supported", "insufficient_evidence", "supported")
VERDICTS = (NOT_COVERED, NOT_SUPPORTED, INSUFFICIENT, SUPPORTED)
MAX_EXTRA = 1024  # more trials of one scope than this are not searched
SEARCH_PERIODS = 20_000  # periods of the plan's expected-loss bound
SEARCH_OUTER, SEARCH_INNER = 1000, 500
ONE_BY_ONE = 3  # scopes cut back one by one after the common factor, when at most this many grew
OPTIMISTIC_Q = 0.05  # the unrecovered share's posterior quantile at the optimistic end


@dataclass(frozen=True)
class Goal:
    period_days: float
    target: float
    risk: float
    slo_target: float | None = None
    credibility: float = credible.DEFAULT_CREDIBILITY
    pool: bool = False

    @property
    def period_s(self) -> float:
        return self.period_days * 86_400

    def budget_s(self, target: float) -> float:
        return (1 - target) * self.period_s


def judge(models: list[ScopeModel], slo_models: list[ScopeModel] | None, goal: Goal, seed: int,
          background: credible.Background | None = None, slo_background: credible.Background | None = None,
          limit: bool = False, pool: bool | None = None, **sizes) -> dict[str, Any]:
    """The credibility of the availability (and, with an SLO target, of the attainment) against the risk, and
    whether both reach the goal's credibility. ``limit``: the optimistic end (see the module docstring)."""
    pool = goal.pool if pool is None else pool
    q_at = OPTIMISTIC_Q if limit else None
    out = {"availability": credible.credibility(models, goal.period_days, goal.budget_s(goal.target), goal.risk,
                                                seed, goal.credibility, background, limit, q_at, pool, **sizes),
           "slo_attainment": None}
    if goal.slo_target is not None and slo_models is not None:
        out["slo_attainment"] = credible.credibility(slo_models, goal.period_days, goal.budget_s(goal.slo_target),
                                                     goal.risk, seed, goal.credibility, slo_background, limit,
                                                     q_at, pool, **sizes)
    parts = [v for v in out.values() if v is not None]
    out["met"] = all(v["met"] for v in parts)
    out["resolved"] = all(v["resolved"] for v in parts)
    out["value"] = min(v["value"] for v in parts)
    return out


def _more(models: list[ScopeModel], extra: dict[str, int]) -> list[ScopeModel]:
    return [m.with_more_trials(extra.get(m.name, 0)) for m in models]


def _pressure(m: ScopeModel, goal: Goal, target: float) -> float:
    """How much a scope presses on the miss chance, without simulation (to pick which scopes to grow): its
    events times its unrecovered share's quantile at the credibility, plus its events times its typical cost over
    the budget."""
    ev = m.events if m.events is not None else (m.count + 0.5) / m.exposure_days * goal.period_days
    q = unrecovered.quantile(m.prior, m.n + m.extra, m.u, goal.credibility)
    return ev * q + ev * m.typical_cost() / goal.budget_s(target)


def trials_needed(models: list[ScopeModel], slo_models: list[ScopeModel] | None, goal: Goal, seed: int,
                  background: credible.Background | None = None,
                  slo_background: credible.Background | None = None) -> dict[str, Any]:
    """How many more trials of which scope would support the claim (see the module docstring): the scopes that
    press hardest (within half of the hardest, :func:`_pressure`) doubled together, judged once a step; then the
    counts cut back by a common factor, and each scope's alone when there are at most :data:`ONE_BY_ONE`."""
    fixed = {"outer": SEARCH_OUTER, "inner": SEARCH_INNER, "max_outer": SEARCH_OUTER, "max_inner": SEARCH_INNER}

    def value(extra: dict[str, int]) -> float:
        k = sum(extra.values())  # each more trial brings a baseline like the runs' so far
        return judge(_more(models, extra), None if slo_models is None else _more(slo_models, extra), goal, seed,
                     None if background is None else background.with_more_runs(k),
                     None if slo_background is None else slo_background.with_more_runs(k), **fixed)["value"]

    names = [m.name for m in models if m.values]
    by = {m.name: m for m in models}
    extra = {n: 0 for n in names}
    aim = min(0.999, goal.credibility + 3 * (goal.credibility * (1 - goal.credibility) / SEARCH_OUTER) ** 0.5)
    now = value(extra)
    ok = now >= aim
    for _ in range(64):
        if ok:
            break
        press = {n: _pressure(by[n].with_more_trials(extra[n]), goal, goal.target) for n in names}
        grow = [n for n in names if extra[n] + max(1, extra[n]) <= MAX_EXTRA]
        if not grow:
            break
        top = max(press[n] for n in grow)
        for n in grow:
            if press[n] >= top / 2:
                extra[n] += max(1, extra[n])
        now = value(extra)
        ok = now >= aim
    if not ok:
        return {"found": False, "extra": {n: k for n, k in extra.items() if k},
                "why": (f"up to {MAX_EXTRA} more trials of each scope ({', '.join(names) or 'none with a cost'}), "
                        f"doubled in turn, did not support it (credibility {now:.3g} < {aim:.3g})")}
    lo, hi = 0.0, 1.0  # a common factor first: the fewest trials in these proportions
    for _ in range(7):
        mid = (lo + hi) / 2
        if value({n: math.ceil(k * mid) for n, k in extra.items()}) >= aim:
            hi = mid
        else:
            lo = mid
    extra = {n: math.ceil(k * hi) for n, k in extra.items()}
    for n in names if len([k for k in extra.values() if k]) <= ONE_BY_ONE else ():
        lo_k, hi_k = 0, extra[n]
        while lo_k < hi_k:
            mid_k = (lo_k + hi_k) // 2
            if value({**extra, n: mid_k}) >= aim:
                hi_k = mid_k
            else:
                lo_k = mid_k + 1
        extra[n] = hi_k
    typical = {m.name: round(m.typical_cost(), 6) for m in models if extra.get(m.name)}
    return {"found": True, "extra": {n: k for n, k in extra.items() if k}, "credibility": round(value(extra), 6),
            "aimed_at": round(aim, 6), "each_costing_s": typical, "draws": [SEARCH_OUTER, SEARCH_INNER]}


def expected_upper(models: list[ScopeModel], period_days: float, periods: int, seed: int) -> float:
    """The 95th percentile of the period's *expected* lost seconds (parameter uncertainty alone)."""
    d = predict.simulate(models, period_days, periods, seed)
    total = sum(d.expected.values()) if d.expected else np.zeros(periods)
    return float(np.quantile(total, 0.95))


def plan(models: list[ScopeModel], period_days: float, seed: int, command: Callable[[str, int], str],
         needed: dict[str, int] | None = None, periods: int = SEARCH_PERIODS,
         uncovered: list[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The next trials: first each rated scope the claim does not cover (``uncovered``: scope, why), then the
    one that lowers the upper bound of the expected loss the most: per scope, that bound now and with one
    more trial costing the scope's typical cost (a rise, which only the simulation's noise can give, reads 0),
    the trials suggested (``needed``, else 1) and the command."""
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


def _said(name: str, fig: dict[str, Any], goal: Goal, tgt: float) -> str:
    return (f"P(miss of {name} >= {tgt * 100:g} %) <= {goal.risk:g} with credibility {fig['value']:.3g} "
            f"(required {goal.credibility:g}; Monte Carlo interval {fig['interval'][0]:.3g} .. "
            f"{fig['interval'][1]:.3g}, {fig['outer']} x {fig['inner']} draws"
            + ("" if fig["resolved"] else "; the Monte Carlo error straddles the required credibility even at the "
               "most draws: not supported at this precision") + ")")


def verdict(not_covered: list[str], judged: dict[str, Any] | None, goal: Goal,
            optimistic: dict[str, Any] | None, needed: dict[str, Any] | None) -> dict[str, Any]:
    """The word and every reason, from the figures already computed (see the module docstring)."""
    found: dict[str, list[str]] = {w: [] for w in VERDICTS}
    found[NOT_COVERED] += not_covered
    if judged is None and not not_covered:
        found[NOT_COVERED].append("no rated scope: nothing to claim (every scope's rate is 0, or none is given)")
    short = []
    for name, tgt in (("availability", goal.target), ("slo_attainment", goal.slo_target)):
        fig = None if judged is None else judged.get(name)
        if fig is None or tgt is None or fig["met"]:
            continue
        short.append(_said(name, fig, goal, tgt))
    if short:  # listed under not_covered too: what the covered scopes alone say
        if optimistic is not None and optimistic["resolved"] and not optimistic["met"]:
            found[NOT_SUPPORTED] += short + [
                f"even at the optimistic end (every unrecovered share at its posterior's {OPTIMISTIC_Q:g} quantile, "
                f"costs as seen, endless trials) the credibility is {optimistic['value']:.3g} < {goal.credibility:g}"]
        else:
            extra = (needed or {}).get("extra") or {}
            more = ", ".join(f"{k} more of {n}" for n, k in sorted(extra.items())) or "more trials"
            tail = (f"{more} would support it, if they recover and each costs the scope's typical recovered cost"
                    if (needed or {}).get("found") else (needed or {}).get("why", "more trials may support it"))
            found[INSUFFICIENT] += short + [tail]
    word = next((w for w in VERDICTS[:-1] if found[w]), SUPPORTED)
    return {"word": word, "reasons": [f"{w}: {r}" for w in VERDICTS[:-1] for r in found[w]]}
