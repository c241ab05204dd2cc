"""The verdict's number: the credible probability that a period's miss chance is within the risk.

Two levels, said apart. What is **random** given the world (how many events a period has, which cost each one
has) makes a period miss its budget with some probability ``P(miss | theta)``; what is **unknown** about the world
(``theta``: the rates, the unrecovered shares, the cost distributions, the background: :mod:`chaos.claim.theta`)
makes that probability itself uncertain. The claim is ``supported`` only when

    credibility = P( P(miss | theta) <= risk )  >=  c        (c = 0.9 by default: ``--credibility``)

**Nested simulation.** ``outer`` draws of ``theta``; for each, ``P(miss | theta)`` from ``inner`` periods with
common random numbers. An unrecovered event costs strictly more than the budget (:mod:`chaos.claim.scope_entry`),
so a period with one misses, and the unrecovered events of all scopes are Poisson(``sum lam q``) independent of the
recovered ones (thinning): ``P(miss | theta) = 1 - exp(-sum lam q) x P(recovered costs + background <= budget |
theta)``, the first factor exact, the second simulated (and exact, 1, for a draw whose largest cost times a
count it reaches with chance below 1e-12 stays within the budget). Memory is bounded (outer draws in chunks,
events in chunks: :func:`chaos.claim.theta.recovered_sums`).

**Monte Carlo error, stated.** Each outer draw's estimate has a binomial standard error over its inner periods
(``(k + 0.5) / (inner + 1)`` for its share, so a draw with no missed period is not certain); a draw whose estimate
lies within two such errors of the risk is *ambiguous*. The credibility's interval runs from the share of draws
clearly within the risk, less three outer standard errors, to that share plus the ambiguous ones, plus three outer
standard errors (a one-sided 0.13 % chance each way that the outer draws alone mislead it). When ``c`` lies inside it the verdict cannot be told at this precision: the outer and inner
draws are doubled (up to :data:`MAX_OUTER` x :data:`MAX_INNER`); still inside at the cap, the verdict takes the
side of caution (not supported) and says so (``resolved: false``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from chaos.claim import theta as th
from chaos.claim.model import ScopeModel

DEFAULT_CREDIBILITY = 0.9
OUTER, INNER = 2000, 1000
MAX_OUTER, MAX_INNER = 8000, 8000
CHUNK_CELLS = 1_000_000  # outer x inner periods simulated at once


@dataclass(frozen=True)
class Background:
    """The background's failed share of the service per outer draw: Beta(``failed + 0.5``, ``requests - failed +
    0.5``) over every baseline pooled (:mod:`chaos.claim.background`)."""
    failed: int
    requests: int
    runs: int = 1

    def with_more_runs(self, k: int) -> "Background":
        """``k`` more runs whose baselines are like these (as many requests, failing as often)."""
        if k <= 0:
            return self
        f = (self.runs + k) / self.runs
        return Background(int(round(self.failed * f)), int(round(self.requests * f)), self.runs + k)

    def draw(self, outer: int, seed: int, at: float | None = None) -> np.ndarray:
        """``outer`` draws of the share; ``at``: its posterior's quantile instead, every draw."""
        r = np.random.default_rng([seed, 51])
        if at is not None:
            return np.full(outer, float(np.quantile(self.draw(200_000, seed), at)))
        ga = r.gamma(self.failed + 0.5, 1.0, outer)
        gb = r.gamma(self.requests - self.failed + 0.5, 1.0, outer)
        return ga / (ga + gb)


def p_miss_given_theta(models: list[ScopeModel], period_days: float, budget_s: float, outer: int, inner: int,
                       seed: int, background: Background | None = None, limit: bool = False,
                       q_at: float | None = None, pool: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per outer draw, ``P(miss | theta)`` and its Monte Carlo standard error (see the module docstring)."""
    for m in models:
        if m.unrecovered_cost_s <= budget_s:
            raise ValueError(f"{m.name}: an unrecovered event must cost more than the budget "
                             f"({m.unrecovered_cost_s} <= {budget_s})")
    thetas = th.draw(models, outer, period_days, seed, limit, q_at, pool)
    lam_q = sum((t.lam * t.q for t in thetas), np.zeros(outer))
    bg = (np.zeros(outer) if background is None
          else background.draw(outer, seed, q_at if limit else None) * period_days * 86_400)
    ok = np.full(outer, float(inner))
    # a draw whose largest cost times a count it cannot reach (tail < 1e-12) stays within the budget needs no
    # inner periods: every period of it is within (only the others are simulated)
    lam_rec = sum((t.lam * (1 - t.q) for t in thetas), np.zeros(outer))
    top = np.max([t.atoms.max(axis=1) for t in thetas], axis=0) if thetas else np.zeros(outer)
    reach = np.ceil(lam_rec + 8 * np.sqrt(lam_rec) + 25) * top
    todo = np.flatnonzero(reach + bg > budget_s)
    step = max(1, CHUNK_CELLS // inner)
    for s in range(0, len(todo), step):
        rows = todo[s:s + step]
        part = [th.ScopeTheta(t.name, t.lam[rows], t.q[rows], t.atoms[rows], t.weights[rows], t.unrecovered_cost_s)
                for t in thetas]
        r = np.random.default_rng([seed, 61, s])
        sums = th.recovered_sums(part, inner, r)
        ok[rows] = ((sums + bg[rows, None]) <= budget_s).sum(axis=1)
    clean = np.exp(-lam_q)
    share = (ok + 0.5) / (inner + 1)
    p = 1 - clean * ok / inner
    se = clean * np.sqrt(share * (1 - share) / inner)
    se[np.setdiff1d(np.arange(outer), todo)] = 0.0  # exact: every period of these draws is within the budget
    return p, se


def credibility(models: list[ScopeModel], period_days: float, budget_s: float, risk: float, seed: int,
                c: float = DEFAULT_CREDIBILITY, background: Background | None = None, limit: bool = False,
                q_at: float | None = None, pool: bool = False, outer: int = OUTER, inner: int = INNER,
                max_outer: int = MAX_OUTER, max_inner: int = MAX_INNER) -> dict[str, Any]:
    """The credibility that ``P(miss | theta) <= risk``, its Monte Carlo interval and whether it tells ``c``
    apart (see the module docstring), with the quantiles of ``P(miss | theta)``."""
    while True:
        p, se = p_miss_given_theta(models, period_days, budget_s, outer, inner, seed, background, limit, q_at, pool)
        value = float((p <= risk).mean())
        clear = float((p + 2 * se <= risk).mean())
        ambiguous = float((np.abs(p - risk) < 2 * se).mean())
        outer_se = math.sqrt(max(value * (1 - value), 1 / outer) / outer)
        low = max(0.0, min(value, clear) - 3 * outer_se)
        high = min(1.0, max(value, clear + ambiguous) + 3 * outer_se)
        resolved = not (low < c <= high)
        if resolved or (outer >= max_outer and inner >= max_inner):
            break
        outer, inner = min(max_outer, outer * 2), min(max_inner, inner * 2)
    qs = np.quantile(p, (0.5, c, 0.95))
    return {"value": round(value, 6), "interval": [round(low, 6), round(high, 6)], "required": c,
            "met": bool(resolved and value >= c), "resolved": bool(resolved),
            "p_miss_median": round(float(qs[0]), 6), "p_miss_at_credibility": round(float(qs[1]), 6),
            "p_miss_upper95": round(float(qs[2]), 6), "outer": outer, "inner": inner,
            "ambiguous_share": round(ambiguous, 6)}
