"""Seeded synthetic worlds whose truth is known, for the claim rule's operating characteristic
(:mod:`chaos.claim.calibrate`).

One *world* is one scope (``replica``) with a point rate ``lam`` events per period (30 days, target 0.999: a
budget of 2592 s) whose true chance that a period misses is ``m x risk``. ``n`` trials are drawn from it (each
unrecovered with the world's share ``q``, else a cost drawn from its cost distribution) and the claim's own rule
(:func:`chaos.claim.decide.judge`, Jeffreys' prior, no background) says whether it is supported. Two families:

- ``cost_driven``: every event recovers (``q = 0``); a recovered event costs log-normal(``log median``, 1.0),
  the median such that a period's compound-Poisson sum of costs exceeds the budget with probability ``m x risk``.
  With common random numbers (one big seeded simulation of the period sums at median 1 s) the median that
  solves that equation is exactly the budget over the sums' ``1 - m x risk`` quantile (the root a bisection on
  the same simulation would converge to); unattainable when ``m x risk >= 1 - exp(-lam)`` (a period with no
  event never misses).
- ``rare_unrecovered``: recovered costs log-normal(median 1 s, 0.5), negligible against the budget; ``q`` such
  that ``1 - exp(-lam q) = m x risk``; unattainable when that needs ``q > 1``.

Also the cost model's coverage: log-normal worlds, the share whose 95 % interval of the mean
(:func:`chaos.claim.cost_model.mean_interval`, and for comparison the plain Bayesian bootstrap's) contains the
true mean ``exp(mu + sigma^2 / 2)``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from chaos.claim import cost_model, decide
from chaos.claim.model import ScopeModel

FAMILIES = ("cost_driven", "rare_unrecovered")
PERIOD_DAYS, TARGET = 30.0, 0.999
COST_SIGMA = 1.0  # cost_driven: the log-normal's sigma
RARE_MEDIAN_S, RARE_SIGMA = 1.0, 0.5  # rare_unrecovered: the recovered costs
TRUTH_PERIODS = 400_000  # periods of the big seeded simulation that solves (and checks) a world
# the claim's nested simulation, small for speed (the claim itself: chaos.claim.credible.OUTER x INNER, 2000 x 1000,
# doubling to MAX_OUTER x MAX_INNER, 8000 x 8000)
SIZES = {"outer": 400, "inner": 400, "max_outer": 1600, "max_inner": 1600}
MAX_N = 100  # the trials of a world are the first n of one sequence of this many (common random numbers in n)
COVERAGE_MU = math.log(30.0)  # the coverage worlds' log-location (30 s): far above the cost model's floor
COVERAGE_DRAWS = 4000


def goal(risk: float, credibility: float) -> decide.Goal:
    return decide.Goal(PERIOD_DAYS, TARGET, risk, credibility=credibility)


def budget_s() -> float:
    return (1 - TARGET) * PERIOD_DAYS * 86_400


def _period_sums(lam: float, sigma: float, periods: int, seed: int, median: float = 1.0) -> np.ndarray:
    """Each of ``periods`` periods' summed cost of Poisson(``lam``) events costing log-normal(log median, sigma)."""
    r = np.random.default_rng([seed, 71])
    counts = r.poisson(lam, periods)
    costs = median * np.exp(sigma * r.standard_normal(int(counts.sum())))
    return np.bincount(np.repeat(np.arange(periods), counts), weights=costs, minlength=periods)


@functools.lru_cache(maxsize=None)
def cost_median(lam: float, p: float, seed: int = 0) -> float | None:
    """``cost_driven``: the median cost at which a period misses with probability ``p`` (None: unattainable)."""
    if p >= 1 - math.exp(-lam):
        return None
    sums = _period_sums(lam, COST_SIGMA, TRUTH_PERIODS, seed)
    return float(budget_s() / np.quantile(sums, 1 - p))


def world_params(family: str, lam: float, m: float, risk: float) -> dict[str, Any]:
    """The world's truth: ``q``, the costs' median and sigma; ``null`` with the reason when unattainable."""
    p = m * risk
    if family == "cost_driven":
        med = cost_median(lam, p)
        if med is None:
            return {"null": f"P(miss) = {p:g} is out of reach at {lam:g} events a period: even if every event "
                            f"missed, P(miss) = 1 - exp(-lam) = {1 - math.exp(-lam):.3g}"}
        return {"null": None, "q": 0.0, "median": med, "sigma": COST_SIGMA}
    if p >= 1:
        return {"null": f"P(miss) = {p:g} is not a probability"}
    q = -math.log(1 - p) / lam
    if q > 1:
        return {"null": f"P(miss) = {p:g} needs an unrecovered share {q:.3g} > 1 at {lam:g} events a period"}
    return {"null": None, "q": q, "median": RARE_MEDIAN_S, "sigma": RARE_SIGMA}


def true_p_miss(family: str, lam: float, m: float, risk: float, seed: int, periods: int = TRUTH_PERIODS) -> float:
    """A world's P(miss), simulated afresh (periods, events, unrecovered ones, costs) with its own seed."""
    w = world_params(family, lam, m, risk)
    r = np.random.default_rng([seed, 73])
    counts = r.poisson(lam, periods)
    total = int(counts.sum())
    period = np.repeat(np.arange(periods), counts)
    unrec = r.random(total) < w["q"]
    costs = np.where(unrec, np.inf, w["median"] * np.exp(w["sigma"] * r.standard_normal(total)))
    sums = np.bincount(period, weights=np.where(unrec, 0.0, costs), minlength=periods)
    bad = np.bincount(period, weights=unrec.astype(float), minlength=periods) > 0
    return float(((sums > budget_s()) | bad).mean())


def world_seed(seed: int, family: str, lam: float, m: float, world: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, FAMILIES.index(family), int(round(lam * 100)), int(round(m * 100)), world])


def world_model(family: str, lam: float, n: int, m: float, risk: float, seed: int,
                world: int) -> tuple[ScopeModel, int]:
    """World ``world`` of a cell: the model the claim builds from its ``n`` trials, and the seed of its judgement.
    The trials are the first ``n`` of the world's sequence of :data:`MAX_N` (the same world across ``n``)."""
    w = world_params(family, lam, m, risk)
    r = np.random.default_rng(world_seed(seed, family, lam, m, world))
    unrec = r.random(MAX_N)[:n] < w["q"]
    costs = w["median"] * np.exp(w["sigma"] * r.standard_normal(MAX_N))[:n]
    judge_seed = int(r.integers(2 ** 31))
    values = tuple(float(c) for c, x in zip(costs, unrec) if not x)
    model = ScopeModel(name="replica", values=values, n=n, u=int(unrec.sum()),
                       unrecovered_cost_s=budget_s() + 1.0, events=lam)
    return model, judge_seed


def judge_world(family: str, lam: float, n: int, m: float, risk: float, credibility: float, seed: int,
                world: int) -> tuple[bool, bool]:
    """(supported, resolved) by the claim's rule; unresolved at the cap counts as not supported, as in the rule."""
    model, judge_seed = world_model(family, lam, n, m, risk, seed, world)
    j = decide.judge([model], None, goal(risk, credibility), judge_seed, **SIZES)
    return bool(j["met"]), bool(j["resolved"])


# ---- the cost model's coverage -----------------------------------------------------------------------------------

def bootstrap_interval(values: list[float], seed: int, draws: int = COVERAGE_DRAWS,
                       q: tuple[float, float] = (0.025, 0.975)) -> list[float]:
    """The plain Bayesian bootstrap's interval of the mean: Dirichlet(1, .., 1) weights over the values."""
    x = np.asarray(values, dtype=float)
    w = np.random.default_rng([seed, 13]).dirichlet(np.ones(len(x)), draws)
    return [float(v) for v in np.quantile(w @ x, q)]


def coverage_cell(sigma: float, n: int, worlds: int, seed: int) -> dict[str, Any]:
    """The share of log-normal(:data:`COVERAGE_MU`, ``sigma``) worlds of ``n`` costs whose 95 % interval of the
    mean contains the true mean: the cost model's and the Bayesian bootstrap's, on the same worlds."""
    truth = math.exp(COVERAGE_MU + sigma ** 2 / 2)
    dp = bb = 0
    for i in range(worlds):
        ss = np.random.SeedSequence([seed, 97, int(round(sigma * 100)), n, i])
        r = np.random.default_rng(ss)
        values = [float(v) for v in np.exp(COVERAGE_MU + sigma * r.standard_normal(n))]
        s = int(r.integers(2 ** 31))
        lo, hi = cost_model.mean_interval(values, draws=COVERAGE_DRAWS, seed=s)
        dp += lo <= truth <= hi
        lo, hi = bootstrap_interval(values, s)
        bb += lo <= truth <= hi
    return {"sigma": sigma, "n": n, "worlds": worlds, "cost_model": round(dp / worlds, 6),
            "bootstrap": round(bb / worlds, 6)}
