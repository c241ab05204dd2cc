"""Is a stated outage length covered by what was tested? And the cost of that length.

A scope's ``duration_s`` (RATES) is **covered** when the cost of that length was measured:
- ``runs``: at least :data:`MIN_AT_LENGTH` counted runs imposed an outage at least that long. The claim's
  events then cost what *those* runs cost (four 2 s outages do not say what a 30 s one costs);
- ``fit``: runs at two or more outage lengths, at least :data:`MIN_AT_LENGTH` runs at each (lengths within
  10 % of each other are one length), whose least-squares line ``cost(d) = a + b x d`` is read at the stated
  length when it lies within the lengths tested (at most the longest: interpolation only). The claim's events then cost each run's cost moved along the line
  to the stated length, ``c_i + b x (d - d_i)``, with ``b`` drawn from its Student-t interval in every
  simulated period. ``b`` is the share of the population's service each second of outage costs: near 0,
  failover works whatever the length; near the lost domain's share, its users wait the outage out.
Otherwise ``not_covered``: the claim never extrapolates. With no ``duration_s`` stated, every counted run's
cost is an event's cost."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_AT_LENGTH = 2
SAME_LENGTH = 0.10  # lengths within 10 % of a group's shortest are one length
REACH = 1.0  # a fit is read up to the longest length tested, never beyond (interpolation only)
TOLERANCE = 0.01  # a run's outage within 1 % below the stated length is at it (a heal measured at 29.998 s of 30)
# Student's t, 95th percentile (a two-sided 90 % interval), by degrees of freedom
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
        12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697, 60: 1.671}


def t95(df: int) -> float:
    """Student's t 95th percentile for ``df`` degrees of freedom, from the table's row at or below it
    (fewer degrees, a larger quantile: never narrower than the truth)."""
    rows = [k for k in sorted(_T95) if k <= max(1, df)]
    if df >= 120:
        return 1.658
    return _T95[rows[-1]]


@dataclass(frozen=True)
class Fit:
    a: float
    b: float
    b_se: float
    df: int
    n: int
    lengths: tuple[float, ...]

    def b_ci90(self) -> list[float]:
        h = t95(self.df) * self.b_se
        return [self.b - h, self.b + h]

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.b_ci90()
        return {"a": round(self.a, 6), "b": round(self.b, 6), "b_se": round(self.b_se, 6),
                "b_ci90": [round(lo, 6), round(hi, 6)], "df": self.df, "runs": self.n,
                "lengths_s": [round(x, 3) for x in self.lengths]}


def group_lengths(outages: list[float]) -> list[list[float]]:
    groups: list[list[float]] = []
    for d in sorted(outages):
        if groups and d <= groups[-1][0] * (1 + SAME_LENGTH):
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups


def fit(points: list[tuple[float, float]]) -> Fit | None:
    """Least squares of cost on outage length; None unless two lengths have MIN_AT_LENGTH runs each."""
    groups = [g for g in group_lengths([d for d, _ in points]) if len(g) >= MIN_AT_LENGTH]
    if len(groups) < 2:
        return None
    n = len(points)
    mx = sum(d for d, _ in points) / n
    my = sum(c for _, c in points) / n
    sxx = sum((d - mx) ** 2 for d, _ in points)
    if sxx <= 0:
        return None
    b = sum((d - mx) * (c - my) for d, c in points) / sxx
    a = my - b * mx
    df = n - 2
    rss = sum((c - a - b * d) ** 2 for d, c in points)
    se = math.sqrt(rss / df / sxx) if df > 0 else float("nan")
    return Fit(a, b, se, df, n, tuple(g[0] for g in groups))


def coverage(duration_s: float | None, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether ``duration_s`` is covered by ``runs`` (the scope's counted runs: ``outage_tested_s`` and
    ``lost_service_s``), how, and which runs' costs an event costs. ``use``: the indices of the runs whose
    costs count; ``fit``: the line when the costs are moved along it."""
    tested = [r["outage_tested_s"] for r in runs if r.get("outage_tested_s") is not None]
    out: dict[str, Any] = {"duration_s": duration_s, "covered": None, "by": None, "why": None,
                           "longest_tested_s": max(tested) if tested else None,
                           "runs_at_or_beyond": None, "fit": None, "use": list(range(len(runs)))}
    points = [(r["outage_tested_s"], r["lost_service_s"]) for r in runs
              if r.get("outage_tested_s") is not None and r.get("lost_service_s") is not None]
    f = fit(points)
    if f is not None:
        out["fit"] = f.to_dict()
    if duration_s is None:
        return out
    if not tested:
        out.update(covered=False, why=f"a duration of {duration_s:g} s is stated, but no run of it imposed an outage "
                                      "length to compare it with")
        return out
    beyond = [i for i, r in enumerate(runs) if r.get("outage_tested_s") is not None
              and r["outage_tested_s"] >= duration_s * (1 - TOLERANCE)]
    out["runs_at_or_beyond"] = len(beyond)
    if len(beyond) >= MIN_AT_LENGTH:
        out.update(covered=True, by="runs", use=beyond)
        return out
    longest = max(tested)
    if f is not None and duration_s <= REACH * longest:
        out.update(covered=True, by="fit",
                   use=[i for i, r in enumerate(runs) if r.get("outage_tested_s") is not None])
        return out
    why = (f"the stated duration {duration_s:g} s: {len(beyond)} run(s) at or beyond it (need {MIN_AT_LENGTH})")
    if f is None:
        why += (f", and no fit (it needs {MIN_AT_LENGTH} runs at each of two outage lengths; tested: "
                + ", ".join(f"{len(g)} at {g[0]:g} s" for g in group_lengths(tested)) + ")")
    else:
        why += (f", and the fit is read within the lengths tested only (the longest, {longest:g} s): the claim never "
                "extrapolates")
    out.update(covered=False, why=why)
    return out
