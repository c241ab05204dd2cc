"""The predictive distribution of a period's lost service-seconds: seeded simulation, plain numpy.

Every simulated period draws, per scope, what is not known as well as what is random:
- the **rate**: a point figure as stated; an observed history's from its Gamma posterior
  (shape ``count + 0.5``, rate ``exposure_days``: Jeffreys), scaled to the period;
- the **event count**: Poisson(rate), or a fixed count (the soak's own injected events);
- the **cost distribution**: a Bayesian bootstrap over the scope's recovered runs (Dirichlet(1, ..., 1)
  weights on their costs, drawn once per period, each event's cost drawn with those weights);
- the **unrecovered** share: ``q`` from Beta(``u + 0.5``, ``n - u + 0.5``) (``n`` counted runs, ``u`` of them
  lower bounds: not recovered in their window), an event being unrecovered (or unlike any tested: the
  bootstrap cannot draw a cost it has not seen) with probability ``q`` and then costing
  ``unrecovered_cost_s`` (the claim sets it to at least the error budget and the largest lower bound
  measured: :mod:`chaos.claim.scope_entry`);
- when a stated outage length is covered by a fit (:mod:`chaos.claim.coverage`), the slope ``b`` from
  its Student-t interval, floored at 0 (a longer outage never costs less), each cost moved to the stated
  length (never below 0).
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

CHUNK = 10_000  # periods drawn at a time (memory: periods x distinct costs)
COUPLED = 4096  # recovered runs whose share of q is drawn one exponential each (common random numbers)


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


def _groups(m: ScopeModel) -> tuple[list[int], np.ndarray, np.ndarray | None]:
    """Each value's group (equal value and outage: the copies :meth:`ScopeModel.with_more_trials` adds), the
    groups' values and outages."""
    keys: dict[tuple[float, float | None], int] = {}
    group = []
    for i, v in enumerate(m.values):
        key = (v, None if m.outages is None else m.outages[i])
        group.append(keys.setdefault(key, len(keys)))
    vals = np.array([k[0] for k in keys], dtype=float)
    outs = None if m.outages is None else np.array([k[1] for k in keys], dtype=float)
    return group, vals, outs


def _scope(m: ScopeModel, periods: int, period_days: float, seed: int, limit: bool,
           fixed: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One scope's lost seconds, expected lost seconds and event counts for ``periods`` periods.

    Common random numbers: each kind of draw has a stream of its own (rate and count; the unrecovered share;
    the bootstrap weights, one exponential per trial in the trials' order; the events' split), so a model
    with more trials (:meth:`ScopeModel.with_more_trials`) draws the same rate, count and uniforms, and its
    first trials the same weights: the comparisons of :mod:`chaos.claim.decide` are not drowned in noise.
    Memory and time grow with periods x distinct costs, not with the events (a Binomial and a Multinomial
    split each period's events)."""
    r_rate, r_q, r_w, r_ev, r_b = (_rng(seed, m.name, k) for k in (3, 4, 5, 6, 7))
    if m.events is not None:
        lam = np.full(periods, float(m.events))
    else:
        lam = r_rate.gamma(m.count + 0.5, period_days / m.exposure_days, periods)
    counts = np.full(periods, fixed, dtype=np.int64) if fixed is not None else r_rate.poisson(lam)
    group, vals, outs = _groups(m)
    k = len(vals)
    recovered = m.n - m.u
    if k == 0:  # every run a lower bound: every event unrecovered
        q = np.ones(periods)
        vals, k, group = np.zeros(1), 1, []
    elif limit:
        q = np.full(periods, m.u / m.n if m.n else 0.0)
    else:  # Beta(u + 0.5, n - u + 0.5) as Gamma(u + 0.5) / (that + Gamma(0.5) + one exponential per recovered run)
        ga = r_q.gamma(m.u + 0.5, 1.0, periods)
        gb = r_q.gamma(0.5, 1.0, periods)
        for _ in range(min(recovered, COUPLED)):
            gb += r_q.standard_exponential(periods)
        if recovered > COUPLED:  # beyond it, one gamma draw (no trials search goes that far)
            gb += r_q.gamma(recovered - COUPLED, 1.0, periods)
        q = ga / (ga + gb)
    if limit or not group:
        w = np.bincount(group, minlength=k).astype(float)[None, :] if group else np.ones((1, k))
        w = np.broadcast_to(w / w.sum(), (periods, k))
    else:  # Dirichlet(1, ..., 1) over the runs, summed within each group of equal costs
        w = np.zeros((periods, k))
        for g in group:
            w[:, g] += r_w.standard_exponential(periods)
        w /= w.sum(axis=1, keepdims=True)
    if m.fit is not None and m.duration_s is not None and outs is not None:
        b_hat, se, df = m.fit
        b = (np.full(periods, b_hat) if limit or not math.isfinite(se)
             else b_hat + se * r_b.standard_t(max(df, 1), periods))
        b = np.maximum(b, 0.0)  # a longer outage never costs less: the slope is floored at 0
        cost = np.maximum(0.0, vals[None, :] + b[:, None] * np.maximum(0.0, m.duration_s - outs)[None, :])
    else:
        cost = np.broadcast_to(vals, (periods, k))
    expected = lam * ((1 - q) * (w * cost).sum(axis=1) + q * m.unrecovered_cost_s)
    unrec = r_ev.binomial(counts, q)
    split = r_ev.multinomial(counts - unrec, w)
    loss = unrec * m.unrecovered_cost_s + (split * cost).sum(axis=1)
    return loss, expected, counts


def simulate(models: list[ScopeModel], period_days: float, periods: int, seed: int, limit: bool = False,
             fixed_counts: dict[str, int] | None = None) -> Draws:
    """``periods`` simulated periods of ``period_days`` (see the module docstring); seeded per scope, so a
    scope's draws do not change when another scope is added."""
    out = Draws(np.zeros(periods))
    for m in models:
        parts = [_scope(m, min(CHUNK, periods - s), period_days, seed + 1_000_003 * (s // CHUNK), limit,
                        None if fixed_counts is None else fixed_counts.get(m.name, 0))
                 for s in range(0, periods, CHUNK)]
        out.loss += np.concatenate([p[0] for p in parts])
        out.expected[m.name] = np.concatenate([p[1] for p in parts])
        out.counts[m.name] = np.concatenate([p[2] for p in parts])
    return out


def _chi2(nu: float, z: float) -> float:
    """The chi-square quantile of ``nu`` degrees of freedom at the normal quantile ``z`` (Wilson-Hilferty)."""
    return nu * max(0.0, 1 - 2 / (9 * nu) + z * math.sqrt(2 / (9 * nu))) ** 3


def _poisson_cdf(k: int, lam: float) -> float:
    term = total = math.exp(-lam)
    for i in range(1, k + 1):
        term *= lam / i
        total += term
    return total


def upper95(k: int, n: int) -> float:
    """A one-sided 95 % upper bound of a share seen ``k`` times in ``n``: the exact Poisson bound (the mean
    whose chance of ``k`` or fewer is 0.05, by bisection; above the exact binomial, Clopper-Pearson, bound)
    over ``n``; the rule of three, -ln 0.05 / n, for none; Wilson-Hilferty's chi-square beyond 500."""
    if k == 0:
        return min(1.0, -math.log(0.05) / n)
    if k > 500:
        return min(1.0, 1.002 * _chi2(2 * k + 2, 1.6448536) / (2 * n))
    lo, hi = float(k), k + 10.0 * math.sqrt(k) + 10
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _poisson_cdf(k, mid) > 0.05 else (lo, mid)
    return min(1.0, hi / n)


def lower95(k: int, n: int) -> float:
    """A one-sided 95 % lower bound of the same share: the Poisson bound chi2(0.05, 2k) / 2n (0 for none)."""
    if k == 0:
        return 0.0
    return min(k / n, _chi2(2 * k, -1.6448536) / (2 * n))


def p_miss(loss: np.ndarray, budget_s: float) -> dict[str, Any]:
    """The share of periods whose loss passes the budget, its standard error and its one-sided 95 % bounds
    (:func:`upper95`: 3 / periods when no period missed; :func:`lower95`)."""
    n = len(loss)
    k = int((loss > budget_s).sum())
    p = k / n
    se = math.sqrt(p * (1 - p) / n)
    return {"value": round(p, 6), "stderr": round(se, 6), "upper95": round(upper95(k, n), 6),
            "lower95": round(lower95(k, n), 6), "periods": n, "missed": k}


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
