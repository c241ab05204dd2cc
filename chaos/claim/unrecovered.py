"""The unrecovered share ``q`` of a scope's events: its prior, its posterior, and pooling across scopes.

An event is *unrecovered* when the system did not come back by itself in the run's window (the run's cost is a
lower bound), or the run never came back at all (ERROR after the injection, stopped before recovery). After
``n`` trials of which ``u`` did not recover, ``q`` has the posterior Beta(``a + u``, ``b + n - u``), where the
prior Beta(``a``, ``b``) is:
- by default Jeffreys' Beta(0.5, 0.5) (:data:`JEFFREYS`), each scope on its own;
- with ``prior_unrecovered: {events: K, trials: N}`` in RATES (fleet history: incidents that needed a human, K,
  over events seen, N), Jeffreys' updated by that history: Beta(0.5 + K, 0.5 + N - K);
- with ``--pool-scopes``, a hierarchical Beta (BDA3 ch. 5): every scope's ``q_s`` ~ Beta(``mu kappa``,
  ``(1 - mu) kappa``), with ``p(mu, kappa)`` proportional to ``kappa^-3/2`` (the rat-tumour prior ``(a + b)^-5/2``
  in these coordinates) on a grid (:data:`MU_GRID` x :data:`KAPPA_GRID`), so that ten clean scopes inform each
  other; a scope's fleet history then counts as its data.
Draws are made as ``Ga / (Ga + Gb)`` from gamma variates of streams of their own, the extra recovered trials of
the trials search adding a gamma of their own to ``Gb`` (common random numbers: more trials like these never draw a
larger ``q``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

JEFFREYS = (0.5, 0.5)
MU_GRID = np.exp(np.linspace(math.log(1e-5), math.log(0.5), 60))
KAPPA_GRID = np.exp(np.linspace(math.log(0.5), math.log(5000.0), 50))
QUANTILE_DRAWS = 200_000


@dataclass(frozen=True)
class Prior:
    a: float = JEFFREYS[0]
    b: float = JEFFREYS[1]
    source: str = "Jeffreys Beta(0.5, 0.5)"

    @staticmethod
    def fleet(events: int, trials: int) -> "Prior":
        return Prior(0.5 + events, 0.5 + trials - events,
                     f"Jeffreys updated by fleet history: {events} unrecovered of {trials} events, "
                     f"Beta({0.5 + events:g}, {0.5 + trials - events:g})")

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "source": self.source}


def draw(prior: Prior, n: int, u: int, outer: int, rng: np.random.Generator, extra: int = 0,
         r_extra: np.random.Generator | None = None) -> np.ndarray:
    """``outer`` draws of ``q`` from Beta(a + u, b + n - u + extra)."""
    ga = rng.gamma(prior.a + u, 1.0, outer)
    gb = rng.gamma(prior.b + n - u, 1.0, outer)
    if extra:
        gb = gb + r_extra.gamma(float(extra), 1.0, outer)
    return ga / (ga + gb)


def quantile(prior: Prior, n: int, u: int, p: float, seed: int = 0) -> float:
    """The posterior's ``p`` quantile (by seeded sampling: no closed form in numpy)."""
    rng = np.random.default_rng([seed, 29])
    return float(np.quantile(draw(prior, n, u, QUANTILE_DRAWS, rng), p))


def _log_beta(a, b):
    from math import lgamma

    return np.vectorize(lambda x, y: lgamma(x) + lgamma(y) - lgamma(x + y))(a, b)


def pooled_draws(data: list[tuple[int, int]], outer: int, rng: np.random.Generator) -> np.ndarray:
    """``(outer, scopes)`` draws of every scope's ``q`` under the hierarchical Beta; ``data``: per scope (``n``,
    ``u``), fleet history and the trials search's extra trials included."""
    mu, kappa = np.meshgrid(MU_GRID, KAPPA_GRID, indexing="ij")
    a, b = mu * kappa, (1 - mu) * kappa
    logp = -1.5 * np.log(kappa) + np.log(mu) + np.log(kappa)  # p(mu, kappa) on log-spaced grids (Jacobians)
    for n, u in data:
        logp = logp + _log_beta(a + u, b + n - u) - _log_beta(a, b)
    p = np.exp(logp - logp.max()).ravel()
    p /= p.sum()
    pick = rng.choice(p.size, size=outer, p=p)
    am, bm = a.ravel()[pick], b.ravel()[pick]
    out = np.empty((outer, len(data)))
    for j, (n, u) in enumerate(data):
        ga = rng.gamma(am + u)
        gb = rng.gamma(bm + n - u)
        out[:, j] = ga / (ga + gb)
    return out
