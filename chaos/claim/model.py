"""One scope's event model: what the claim knows of it (the tested costs, its trials and how many did not
recover, its rate, the prior on its unrecovered share, a coverage fit) and nothing drawn yet
(:mod:`chaos.claim.theta` draws from it)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from chaos.claim.unrecovered import Prior


@dataclass(frozen=True)
class ScopeModel:
    name: str
    values: tuple[float, ...]  # the recovered runs' costs, seconds
    n: int  # counted runs (trials)
    u: int  # of them not recovered (lower bounds, or never came back)
    unrecovered_cost_s: float
    events: float | None = None  # a point rate per period ...
    count: int | None = None  # ... or an observed history
    exposure_days: float | None = None
    outages: tuple[float, ...] | None = None  # each value's outage length, when moved along a fit
    fit: tuple[float, float, int] | None = None  # (b, b_se, df)
    duration_s: float | None = None  # the stated length the costs are moved to
    prior: Prior = field(default_factory=Prior)  # on the unrecovered share
    prior_events: tuple[int, int] = (0, 0)  # the fleet history behind a prior (unrecovered, events), for pooling
    extra: int = 0  # more recovered trials assumed by the trials search, each costing typical_cost()

    def with_more_trials(self, k: int) -> "ScopeModel":
        """``k`` more trials that recover, each costing the scope's typical (median) recovered cost."""
        if k <= 0 or not self.values:
            return self
        return replace(self, extra=self.extra + k)

    def typical_cost(self) -> float:
        """The median recovered cost (moved to the stated length at the fit's estimate, its slope floored at 0)."""
        if not self.values:
            return 0.0
        if self.fit is not None and self.duration_s is not None and self.outages is not None:
            b = max(0.0, self.fit[0])
            return float(statistics.median(max(0.0, v + b * max(0.0, self.duration_s - d))
                                           for v, d in zip(self.values, self.outages)))
        return float(statistics.median(self.values))

    @property
    def trials(self) -> int:
        return self.n + self.extra
