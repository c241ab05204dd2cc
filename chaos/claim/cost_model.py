"""What one recovered event of a scope costs: a Dirichlet-process posterior over the scope's cost distribution,
so that the claim can draw a cost it has not seen.

**The model.** A recovered event's cost (lost service-seconds) is drawn from an unknown distribution ``F``. The
prior on ``F`` is a Dirichlet process DP(``ALPHA``, ``G0``) (Ferguson 1973); after ``n`` recovered trials costing
``x_1 .. x_n`` its posterior is DP(``ALPHA + n``, (``ALPHA G0 + sum delta_x_i``) / (``ALPHA + n``)). One draw of
``F`` is then, exactly, ``V G + (1 - V) sum w_i delta_x_i`` with (``V``, ``w_1 .. w_n``) ~ Dirichlet(``ALPHA``, 1,
.., 1) and ``G`` ~ DP(``ALPHA``, ``G0``), here truncated at :data:`ATOMS` stick-breaking atoms (the last takes the
rest of the stick). With one trial ``V`` is uniform: half of the cost's mass, on average, lies where nothing was
seen; as ``n`` grows ``V`` ~ ``ALPHA / n`` and ``F`` becomes the Bayesian bootstrap (Rubin 1981), which is the limit
``ALPHA -> 0``.

**The base measure** ``G0`` is smooth: a log-normal whose log-location is the mean of the scope's log costs and
whose log-scale is ``s0 sqrt(1 + 1 / n)`` (the location's own uncertainty added). ``s0`` is pooled across the
claim's scopes (:func:`pooled_log_sd`): the within-scope spread of log costs of every scope with two costs or more,
with a prior of :data:`PRIOR_LOG_SD` worth :data:`PRIOR_WEIGHT` degrees of freedom (one scope's two trials do not
make ``s0`` small). Costs below :data:`FLOOR_S` count as that floor in the logs (a clipped cost is 0). ``G0``'s
location is read from the data (empirical Bayes): said in the claim's assumptions.

**Extra trials** (the trials search: :meth:`chaos.claim.model.ScopeModel.with_more_trials`) are one atom of
their own at the scope's typical cost, weighted ``Gamma(extra)``, drawn from a stream of their own: a model with
more trials draws the same ``V``-free weights for the first ones (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 1.0  # the DP's concentration: the prior is worth one trial
ATOMS = 8  # stick-breaking atoms of G (the new mass); the last takes what is left of the stick
PRIOR_LOG_SD = 1.0  # the prior spread of log costs: a factor e per standard deviation
PRIOR_WEIGHT = 2.0  # worth two degrees of freedom
FLOOR_S = 1e-3  # costs below it count as it in the logs


def _logs(values) -> np.ndarray:
    return np.log(np.maximum(np.asarray(values, dtype=float), FLOOR_S))


def pooled_log_sd(value_lists: list[list[float]]) -> float:
    """``s0``: the within-scope spread of log costs pooled across scopes, shrunk to :data:`PRIOR_LOG_SD`."""
    ss, df = PRIOR_WEIGHT * PRIOR_LOG_SD ** 2, PRIOR_WEIGHT
    for values in value_lists:
        if len(values) >= 2:
            lv = _logs(values)
            ss += float(((lv - lv.mean()) ** 2).sum())
            df += len(values) - 1
    return math.sqrt(ss / df)


@dataclass(frozen=True)
class Base:
    """``G0``: log-normal(``mu``, ``sd``)."""
    mu: float
    sd: float

    @staticmethod
    def of(values: list[float], s0: float) -> "Base":
        if not values:
            return Base(math.log(FLOOR_S), s0)
        return Base(float(_logs(values).mean()), s0 * math.sqrt(1 + 1 / len(values)))


def draw(group_values: np.ndarray, group_sizes: np.ndarray, base: Base, outer: int, r_w: np.random.Generator,
         r_new: np.random.Generator, extra: int = 0, extra_value: float = 0.0, r_extra: np.random.Generator | None = None,
         limit: bool = False, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """``outer`` draws of ``F``: atoms and weights, each ``(outer, J)``; ``J`` = the groups of equal costs (sizes
    ``group_sizes``), then the extra trials' atom when ``extra``, then :data:`ATOMS` atoms of ``G0`` (their weight
    0 with ``limit``: endless trials costing what these cost, the empirical distribution)."""
    k = len(group_values)
    cols = [np.broadcast_to(group_values, (outer, k))]
    if limit:
        sizes = np.concatenate([group_sizes.astype(float), [float(extra)] if extra else []])
        w = np.broadcast_to(sizes / sizes.sum(), (outer, len(sizes)))
        atoms = np.concatenate(cols + ([np.full((outer, 1), extra_value)] if extra else []), axis=1)
        return atoms, np.ascontiguousarray(w)
    g = np.stack([r_w.gamma(float(m), 1.0, outer) for m in group_sizes], axis=1) if k else np.zeros((outer, 0))
    parts = [g]
    if extra:
        parts.append(r_extra.gamma(float(extra), 1.0, outer)[:, None])
        cols.append(np.full((outer, 1), extra_value))
    new_mass = r_new.gamma(alpha, 1.0, outer)
    beta = r_new.beta(1.0, alpha, (outer, ATOMS))
    beta[:, -1] = 1.0
    left = np.cumprod(np.concatenate([np.ones((outer, 1)), 1 - beta[:, :-1]], axis=1), axis=1)
    sticks = beta * left
    parts.append(new_mass[:, None] * sticks)
    cols.append(np.exp(base.mu + base.sd * r_new.standard_normal((outer, ATOMS))))
    w = np.concatenate(parts, axis=1)
    w /= w.sum(axis=1, keepdims=True)
    return np.concatenate(cols, axis=1), w


def mean_interval(values: list[float], s0: float | None = None, draws: int = 4000, seed: int = 0,
                  q: tuple[float, float] = (0.025, 0.975)) -> list[float]:
    """The posterior interval of the mean cost (95 % by default), for the coverage check of
    :mod:`chaos.claim.calibrate`; ``s0`` pooled from ``values`` alone when not given."""
    s0 = pooled_log_sd([values]) if s0 is None else s0
    gv, sizes = np.unique(np.asarray(values, dtype=float), return_counts=True)
    rng = np.random.default_rng([seed, 11])
    atoms, w = draw(gv, sizes, Base.of(values, s0), draws, rng, np.random.default_rng([seed, 12]))
    means = (atoms * w).sum(axis=1)
    return [float(v) for v in np.quantile(means, q)]
