"""The predictive distribution of a period's lost service-seconds: seeded simulation, plain numpy.

Every simulated period draws its own ``theta`` (what is unknown: the rates, the unrecovered shares, the cost
distributions: :mod:`chaos.claim.theta`), then what is random given it: per scope, the unrecovered events
(Poisson(``lam q``), or Binomial(``k``, ``q``) of a fixed count ``k``: the soak's own injected events), each costing
the scope's ``unrecovered_cost_s`` (the claim floors it strictly above the error budget:
:mod:`chaos.claim.scope_entry`), and the recovered ones (Poisson(``lam (1 - q)``), or the rest of the fixed
count), each costing a draw of the period's ``F``. Averaged over ``theta`` this is the *predictive* distribution:
its figures (mean, intervals, the share of periods that miss) mix what is unknown with what is random. The
verdict keeps them apart (:mod:`chaos.claim.credible`).
``limit=True`` draws as if the scope had endless trials costing what these cost (:mod:`chaos.claim.theta`).
Returned: each period's lost seconds, and each scope's *expected* lost seconds given the period's ``theta``
(``lam x ((1 - q) x mean of F + q x unrecovered_cost_s)``: parameter uncertainty alone)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chaos.claim import theta as th
from chaos.claim.model import ScopeModel  # noqa: F401  (the model's home; imported from here too)


@dataclass
class Draws:
    loss: np.ndarray  # lost seconds per period
    expected: dict[str, np.ndarray] = field(default_factory=dict)  # per scope, expected lost s given the draws
    counts: dict[str, np.ndarray] = field(default_factory=dict)


def simulate(models: list[ScopeModel], period_days: float, periods: int, seed: int, limit: bool = False,
             fixed_counts: dict[str, int] | None = None, background_s: np.ndarray | None = None,
             pool: bool = False, chunk: int = 10_000) -> Draws:
    """``periods`` simulated periods of ``period_days``, each drawing its own ``theta`` (the predictive
    distribution: see the module docstring), in chunks of ``chunk`` periods; ``background_s``: the background's
    lost seconds of each period (:mod:`chaos.claim.background`), added."""
    out = Draws(np.zeros(periods))
    parts: list[tuple[np.ndarray, dict, dict]] = []
    for s in range(0, periods, chunk):
        n = min(chunk, periods - s)
        cseed = seed + 1_000_003 * (s // chunk)
        thetas = th.draw(models, n, period_days, cseed, limit, pool=pool)
        r = np.random.default_rng([cseed, 6])
        loss, exp, cnt = np.zeros(n), {}, {}
        for t, m in zip(thetas, models):
            if fixed_counts is not None:
                k = np.full(n, fixed_counts.get(m.name, 0), dtype=np.int64)
                unrec = r.binomial(k, t.q)
            else:
                unrec = r.poisson(t.lam * t.q)
                k = None
            rec_counts = (k - unrec) if k is not None else r.poisson(t.lam * (1 - t.q))
            loss += unrec * t.unrecovered_cost_s + th.recovered_sums([t], 1, r, {m.name: rec_counts[:, None]})[:, 0]
            exp[m.name] = t.lam * ((1 - t.q) * t.mean_cost() + t.q * t.unrecovered_cost_s)
            cnt[m.name] = unrec + rec_counts
        parts.append((loss, exp, cnt))
    out.loss = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    for m in models:
        out.expected[m.name] = np.concatenate([p[1][m.name] for p in parts])
        out.counts[m.name] = np.concatenate([p[2][m.name] for p in parts])
    if background_s is not None:
        out.loss = out.loss + background_s[:periods]
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
