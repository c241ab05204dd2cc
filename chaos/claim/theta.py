"""What is unknown, drawn: ``theta``, per scope its rate, its unrecovered share and its cost distribution.

The claim keeps two levels apart (:mod:`chaos.claim.credible`): what is **unknown** (``theta``: drawn here, once
per outer draw) and what is **random** given it (how many events a period has, which cost each one has: drawn
per period by :func:`recovered_sums`). Per scope:
- the **rate** ``lam`` per period: a point figure as stated; an observed history's from its Gamma posterior (shape
  ``count + 0.5``, rate ``exposure_days``: Jeffreys), scaled to the period;
- the **unrecovered share** ``q``: :mod:`chaos.claim.unrecovered` (its prior said there);
- the **cost distribution** ``F`` of a recovered event: :mod:`chaos.claim.cost_model`; when a stated outage length
  is covered by a fit (:mod:`chaos.claim.coverage`) the slope ``b`` from its Student-t interval, floored at 0, each
  tested cost moved to the stated length (never below 0).
``limit=True`` is the optimistic end of what more trials could show (:mod:`chaos.claim.decide`): ``q`` at the
given quantile of its posterior (``q_at``), ``F`` the empirical distribution of the costs seen, ``b`` at its
estimate; the rate's uncertainty stays (more trials do not narrow it).
Every kind of draw has a stream of its own per scope (common random numbers across models that differ only in
their extra trials)."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from chaos.claim import cost_model, unrecovered
from chaos.claim.model import ScopeModel

EVENTS_PER_CHUNK = 2_000_000  # events held at once while summing costs


@dataclass
class ScopeTheta:
    name: str
    lam: np.ndarray  # (outer,) expected events per period
    q: np.ndarray  # (outer,) unrecovered share
    atoms: np.ndarray  # (outer, J) recovered costs
    weights: np.ndarray  # (outer, J) their probabilities
    unrecovered_cost_s: float

    def mean_cost(self) -> np.ndarray:
        return (self.atoms * self.weights).sum(axis=1)


def rng(seed: int, name: str, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, zlib.crc32(name.encode())])


def _groups(m: ScopeModel) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The distinct (value, outage) pairs of the tested costs, their sizes and outages."""
    keys: dict[tuple[float, float | None], int] = {}
    for i, v in enumerate(m.values):
        key = (v, None if m.outages is None else m.outages[i])
        keys[key] = keys.get(key, 0) + 1
    vals = np.array([k[0] for k in keys], dtype=float)
    sizes = np.array(list(keys.values()), dtype=np.int64)
    outs = None if m.outages is None else np.array([k[1] for k in keys], dtype=float)
    return vals, sizes, outs


def _moved(m: ScopeModel, vals: np.ndarray, outs: np.ndarray | None, b: np.ndarray | float) -> np.ndarray:
    if m.fit is None or m.duration_s is None or outs is None:
        return np.broadcast_to(vals, (np.size(b), len(vals))) if np.ndim(b) else vals
    shift = np.maximum(0.0, m.duration_s - outs)
    return np.maximum(0.0, vals[None, :] + np.asarray(b, dtype=float).reshape(-1, 1) * shift[None, :])


def draw_scope(m: ScopeModel, outer: int, period_days: float, seed: int, s0: float, limit: bool = False,
               q_at: float | None = None, q: np.ndarray | None = None) -> ScopeTheta:
    """``outer`` draws of one scope's ``theta`` (see the module docstring); ``q`` given: the pooled draws."""
    r_rate, r_q, r_w, r_new, r_b, r_xq, r_xw = (rng(seed, m.name, k) for k in (3, 4, 5, 8, 7, 9, 10))
    if m.events is not None:
        lam = np.full(outer, float(m.events))
    else:
        lam = r_rate.gamma(m.count + 0.5, period_days / m.exposure_days, outer)
    n, u = m.n + m.extra, m.u
    vals, sizes, outs = _groups(m)
    if q is None:
        if limit:
            q = np.full(outer, unrecovered.quantile(m.prior, n, u, q_at if q_at is not None else 0.05, seed))
        else:
            q = unrecovered.draw(m.prior, m.n, u, outer, r_q, m.extra, r_xq)
    if len(vals) == 0 and not m.extra:  # every run a lower bound: every event unrecovered
        return ScopeTheta(m.name, lam, np.ones(outer), np.zeros((outer, 1)), np.ones((outer, 1)),
                          m.unrecovered_cost_s)
    if m.fit is not None and m.duration_s is not None and outs is not None:
        b_hat, se, df = m.fit
        b = (np.full(outer, b_hat) if limit or not math.isfinite(se)
             else b_hat + se * r_b.standard_t(max(df, 1), outer))
        b = np.maximum(b, 0.0)  # a longer outage never costs less
        b_center = max(b_hat, 0.0)
    else:
        b, b_center = np.zeros(outer), 0.0
    centre = np.repeat(_moved(m, vals, outs, np.array([b_center]))[0], sizes) if len(vals) else np.array([])
    base = cost_model.Base.of(list(centre), s0)
    atoms, w = cost_model.draw(vals, sizes, base, outer, r_w, r_new, m.extra, m.typical_cost(), r_xw, limit)
    if m.fit is not None and m.duration_s is not None and outs is not None and len(vals):
        atoms = atoms.copy()
        atoms[:, :len(vals)] = _moved(m, vals, outs, b)
    return ScopeTheta(m.name, lam, q, np.ascontiguousarray(atoms), w, m.unrecovered_cost_s)


def draw(models: list[ScopeModel], outer: int, period_days: float, seed: int, limit: bool = False,
         q_at: float | None = None, pool: bool = False) -> list[ScopeTheta]:
    """Every scope's ``theta``, ``outer`` draws; ``pool``: the unrecovered shares from the hierarchical Beta."""
    s0 = cost_model.pooled_log_sd([list(m.values) for m in models])
    qs = None
    if pool and not limit and models:
        data = [(m.n + m.extra + m.prior_events[1], m.u + m.prior_events[0]) for m in models]
        qs = unrecovered.pooled_draws(data, outer, np.random.default_rng([seed, 41]))
    return [draw_scope(m, outer, period_days, seed, s0, limit, q_at, None if qs is None else qs[:, j])
            for j, m in enumerate(models)]


def recovered_sums(thetas: list[ScopeTheta], inner: int, r: np.random.Generator,
                   fixed_counts: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """``(outer, inner)``: each period's summed cost of its recovered events over every scope. Counts are
    Poisson(``lam (1 - q)``) (thinning: the unrecovered events are Poisson(``lam q``), independent of them), or the
    ``fixed_counts`` given per scope as ``(outer, inner)`` arrays."""
    if not thetas:
        return np.zeros((0, inner))
    outer = len(thetas[0].lam)
    total = np.zeros((outer, inner))
    for th in thetas:
        if fixed_counts is not None:
            counts = fixed_counts[th.name]
        else:
            counts = r.poisson((th.lam * (1 - th.q))[:, None], (outer, inner))
        total += _sum_costs(th, counts, r)
    return total


def _sum_costs(th: ScopeTheta, counts: np.ndarray, r: np.random.Generator) -> np.ndarray:
    """Each period's summed cost of ``counts`` events drawn from its outer draw's ``F``: event by event (a
    global search of the weights' cumulative sums) when events are few, else a multinomial split over the atoms;
    in chunks of outer draws so that at most :data:`EVENTS_PER_CHUNK` events or cells are held."""
    outer, inner = counts.shape
    j = th.weights.shape[1]
    out = np.zeros((outer, inner))
    many = counts.mean() > j if counts.size else False
    per_row = counts.sum(axis=1) if not many else np.full(outer, inner * j)
    cum = np.cumsum(th.weights, axis=1)
    cum[:, -1] = 1.0 + 1e-9
    start = 0
    while start < outer:
        stop, held = start, 0
        while stop < outer and (held == 0 or held + per_row[stop] <= EVENTS_PER_CHUNK):
            held += int(per_row[stop])
            stop += 1
        c = counts[start:stop]
        if many:
            w = th.weights[start:stop] / th.weights[start:stop].sum(axis=1, keepdims=True)
            split = r.multinomial(c, w[:, None, :])
            out[start:stop] = (split * th.atoms[start:stop, None, :]).sum(axis=2)
        elif held:
            period = np.repeat(np.arange(c.size), c.ravel())
            row = period // inner
            flat = (cum[start:stop] + 2.0 * np.arange(stop - start)[:, None]).ravel()
            idx = np.searchsorted(flat, r.random(len(period)) + 2.0 * row) - row * j
            cost = th.atoms[start:stop][row, np.minimum(idx, j - 1)]
            out[start:stop] = np.bincount(period, weights=cost, minlength=c.size).reshape(c.shape)
        start = stop
    return out
