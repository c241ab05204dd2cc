"""The predictive distribution of a period's lost service-seconds: seeded simulation, plain numpy.

Every simulated period draws, per scope, what is not known as well as what is random:
- the **rate**: a point figure as stated; an observed history's from its Gamma posterior
  (shape ``count + 0.5``, rate ``exposure_days``: Jeffreys), scaled to the period;
- the **event count**: Poisson(rate), or a fixed count (the soak's own injected events);
- the **cost distribution**: a Bayesian bootstrap over the scope's recovered runs (Dirichlet(1, ..., 1)
  weights on their costs, drawn once per period, each event's cost drawn with those weights);
- the **unrecovered** share: ``q`` from Beta(``u + 0.5``, ``n - u + 0.5``) (``n`` counted runs, ``u`` of them
  lower bounds: not recovered in their window), an event being unrecovered with probability ``q`` and then
  costing ``unrecovered_cost_s`` (on-call detection plus repair);
- when a stated outage length is covered by a fit (:mod:`chaos.claim.coverage`), the slope ``b`` from
  its Student-t interval, each cost moved to the stated length (never below 0).
``limit=True`` draws as if the scope had endless trials costing what these cost: the empirical costs with
equal weights, ``q`` = ``u / n``, ``b`` at its estimate (the rate's uncertainty stays: more trials do not narrow it).
Returned: each period's lost seconds, and each scope's *expected* lost seconds given the period's draws
(``rate x ((1 - q) x weighted mean cost + q x unrecovered_cost_s)``: parameter uncertainty alone)."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

CHUNK = 10_000  # periods drawn at a time (memory: events x runs booleans)


@dataclass(frozen=True)
class ScopeModel:
    name: str
    values: tuple[float, ...]  # the recovered runs' costs, seconds
    n: int  # counted runs
    u: int  # of them not recovered (lower bounds)
    unrecovered_cost_s: float
    events: float | None = None  # a point rate per period ...
    count: int | None = None  # ... or an observed history
    exposure_days: float | None = None
    outages: tuple[float, ...] | None = None  # each value's outage length, when moved along a fit
    fit: tuple[float, float, int] | None = None  # (b, b_se, df)
    duration_s: float | None = None  # the stated length the costs are moved to

    def with_more_trials(self, k: int) -> "ScopeModel":
        """``k`` more recovered trials costing what the recovered runs so far cost (in turn)."""
        if k <= 0 or not self.values:
            return self
        m = len(self.values)
        extra = tuple(self.values[i % m] for i in range(k))
        outages = None if self.outages is None else self.outages + tuple(self.outages[i % m] for i in range(k))
        return replace(self, values=self.values + extra, n=self.n + k, outages=outages)


@dataclass
class Draws:
    loss: np.ndarray  # lost seconds per period
    expected: dict[str, np.ndarray] = field(default_factory=dict)  # per scope, expected lost s given the draws
    counts: dict[str, np.ndarray] = field(default_factory=dict)


def _rng(seed: int, name: str, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, zlib.crc32(name.encode())])


def _scope(m: ScopeModel, periods: int, period_days: float, rng: np.random.Generator, limit: bool,
           fixed: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if m.events is not None:
        lam = np.full(periods, float(m.events))
    else:
        lam = rng.gamma(m.count + 0.5, period_days / m.exposure_days, periods)
    counts = np.full(periods, fixed, dtype=np.int64) if fixed is not None else rng.poisson(lam)
    q = np.full(periods, m.u / m.n if m.n else 0.0) if limit else rng.beta(m.u + 0.5, m.n - m.u + 0.5, periods)
    vals = np.asarray(m.values, dtype=float)
    k = len(vals)
    if k == 0:  # every run a lower bound: every event unrecovered
        q = np.ones(periods)
        vals, k = np.zeros(1), 1
    w = np.full((periods, k), 1.0 / k) if limit else rng.dirichlet(np.ones(k), periods)
    if m.fit is not None and m.duration_s is not None and m.outages is not None:
        b_hat, se, df = m.fit
        b = np.full(periods, b_hat) if limit or not math.isfinite(se) else b_hat + se * rng.standard_t(max(df, 1), periods)
        shift = np.maximum(0.0, m.duration_s - np.asarray(m.outages, dtype=float))
        cost = np.maximum(0.0, vals[None, :] + b[:, None] * shift[None, :])  # periods x k
    else:
        cost = np.broadcast_to(vals, (periods, k))
    expected = lam * ((1 - q) * (w * cost).sum(axis=1) + q * m.unrecovered_cost_s)
    loss = np.zeros(periods)
    total = int(counts.sum())
    if total:
        rows = np.repeat(np.arange(periods), counts)
        unrec = rng.random(total) < q[rows]
        cum = np.cumsum(w, axis=1)
        u = rng.random(total)
        idx = np.minimum((cum[rows] < u[:, None]).sum(axis=1), k - 1)
        each = np.where(unrec, m.unrecovered_cost_s, cost[rows, idx])
        loss = np.bincount(rows, weights=each, minlength=periods)
    return loss, expected, counts


def simulate(models: list[ScopeModel], period_days: float, periods: int, seed: int, limit: bool = False,
             fixed_counts: dict[str, int] | None = None) -> Draws:
    """``periods`` simulated periods of ``period_days`` (see the module docstring); seeded per scope, so a
    scope's draws do not change when another scope is added."""
    out = Draws(np.zeros(periods))
    for m in models:
        rng = _rng(seed, m.name, 3)
        parts = [_scope(m, min(CHUNK, periods - s), period_days, rng, limit,
                        None if fixed_counts is None else fixed_counts.get(m.name, 0))
                 for s in range(0, periods, CHUNK)]
        out.loss += np.concatenate([p[0] for p in parts])
        out.expected[m.name] = np.concatenate([p[1] for p in parts])
        out.counts[m.name] = np.concatenate([p[2] for p in parts])
    return out


def p_miss(loss: np.ndarray, budget_s: float) -> dict[str, Any]:
    """The share of periods whose loss passes the budget, its standard error and a one-sided 95 % upper
    bound (3 / periods when no period missed: the rule of three)."""
    n = len(loss)
    k = int((loss > budget_s).sum())
    p = k / n
    se = math.sqrt(p * (1 - p) / n)
    upper = 3 / n if k == 0 else min(1.0, p + 1.645 * se + 1 / n)
    return {"value": round(p, 6), "stderr": round(se, 6), "upper95": round(upper, 6), "periods": n, "missed": k}


def quantiles(x: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    return [float(v) for v in np.quantile(x, qs)]


def figure(loss: np.ndarray, period_s: float, target: float) -> dict[str, Any]:
    """A predictive availability (or SLO attainment) figure from the periods' lost seconds."""
    a = 1 - loss / period_s
    lo90, hi90, lo95, hi95 = quantiles(a, (0.05, 0.95, 0.025, 0.975))
    pm = p_miss(loss, (1 - target) * period_s)
    return {"mean": round(float(a.mean()), 9), "interval90": [round(lo90, 9), round(hi90, 9)],
            "interval95": [round(lo95, 9), round(hi95, 9)],
            "p_at_least_target": round(1 - pm["value"], 6), "p_miss": pm,
            "lost_s": {"mean": round(float(loss.mean()), 6),
                       "interval90": [round(v, 6) for v in quantiles(loss, (0.05, 0.95))]}}


def percentile_of(value: float, loss: np.ndarray) -> float:
    """Where ``value`` falls in the predictive distribution (mid-rank: ties count half), in [0, 100]."""
    below = float((loss < value).mean())
    equal = float((loss == value).mean())
    return round(100 * (below + equal / 2), 3)
