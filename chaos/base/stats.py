"""Statistics over trials: bootstrap confidence intervals and Wilson intervals. Plain Python.

- **percentiles** (every median, p95, p99 of the rig: per request, per run, over trials, in the
  bench) are :func:`percentile`'s, nearest rank: always one of the values seen, never a value
  between two of them that nobody observed.
- **bootstrap CI** of a statistic (median, p95) of per-trial values: the percentile bootstrap,
  ``resamples`` draws with replacement from a seeded generator, the interval between the
  ``(1-c)/2`` and ``(1+c)/2`` percentiles of the resampled statistic. With few trials it is
  optimistic (it cannot be wider than the spread of the values seen), so :func:`trials`
  flags small samples instead of pretending.
- **Wilson score interval** of a proportion (failed requests out of requests): well behaved at
  0 and near 1, unlike the normal approximation.
- A trial that never recovered has no recovery time: it is counted apart (``not_recovered``)
  and makes every recovery claim about that figure unsupported, never silently dropped.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

Z95 = 1.959963984540054

# below these counts a claim about the statistic is not supported by the trials
MIN_TRIALS_MEDIAN = 5  # the median's bootstrap interval needs a handful of distinct values
MIN_TRIALS_P95 = 20  # a p95 from fewer than 20 trials is just the maximum


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in [0, 1]): the smallest value with at least ``q`` of the
    values at or below it, i.e. the ``ceil(q * n)``-th smallest (the first for q = 0); None for no
    values. The rig's one convention: the median of an even count is the lower middle value, a
    p95 of 20 values the 19th (numpy's default would interpolate 19.05)."""
    if not values:
        return None
    s = sorted(values)
    return s[rank(len(s), q) - 1]


def rank(n: int, q: float) -> int:
    """The nearest rank of the ``q`` percentile among ``n`` values (1 to n): :func:`percentile`'s."""
    return max(1, min(n, math.ceil(q * n - 1e-9)))  # 1e-9: 0.07 * 100 is 7.000000000000001


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 0.5)


def p95(values: Sequence[float]) -> float | None:
    return percentile(values, 0.95)


def bootstrap_ci(values: Sequence[float], stat: Callable[[Sequence[float]], float | None],
                 confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of ``stat`` over ``values``; None for no values."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    alpha = (1 - confidence) / 2
    return percentile(draws, alpha), percentile(draws, 1 - alpha)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion ``successes / n``; None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


RECOVERY_FIGURES = ("time_to_impact_s", "time_to_detect_s", "time_to_first_success_s", "time_to_steady_state_s")


def describe(values: list[float], missing: int, seed: int = 0, unmeasurable: int = 0) -> dict[str, Any]:
    """Median and p95 with bootstrap intervals, and what the sample supports.

    An interval is only given where the sample can support it: none on the median below
    ``MIN_TRIALS_MEDIAN`` values, none on the p95 below ``MIN_TRIALS_P95`` (it would be the
    maximum's spread, not a p95's)."""
    n = len(values)
    out: dict[str, Any] = {
        "n": n, "missing": missing, "unmeasurable": unmeasurable, "values": values,
        "median": median(values),
        "median_ci95": bootstrap_ci(values, median, seed=seed) if n >= MIN_TRIALS_MEDIAN else None,
        "p95": p95(values),
        "p95_ci95": bootstrap_ci(values, p95, seed=seed) if n >= MIN_TRIALS_P95 else None,
    }
    flags = []
    if missing:
        flags.append(f"{missing} trial(s) never reached this point: no bound on it holds for every trial")
    if unmeasurable:
        flags.append(f"{unmeasurable} trial(s) could not measure it (insufficient evidence): not counted as values")
    if n < MIN_TRIALS_MEDIAN:
        flags.append(f"only {n} value(s): too few for an interval on the median (need {MIN_TRIALS_MEDIAN})")
    if n < MIN_TRIALS_P95:
        flags.append(f"only {n} value(s): a p95 needs at least {MIN_TRIALS_P95} trials; here it is about the maximum")
    out["flags"] = flags
    return out


def aggregate(faults: list[dict[str, Any]], population: str = "affected", seed: int = 0) -> dict[str, Any]:
    """The recovery figures of one fault position over trials, on one population.

    A figure a trial never reached counts as ``missing`` (an undisturbed trial has no impact,
    detection or first success, and that is not missing); one it could not measure counts
    as ``unmeasurable``; a steady state a later fault cut off is neither (``window_cut``). The failed fraction is failed / requests of the population summed
    over trials: the same numerator and denominator as each run's ``failed_ratio``."""
    pops = [(f, f[population]) for f in faults]
    out: dict[str, Any] = {"population": population, "n": len(faults),
                           "scope": faults[0]["scope"] if faults else None, "figures": {}}
    cut = sum(1 for f, _ in pops if f.get("window_cut_by"))
    out["window_cut"] = cut  # a later fault ended the window: recovery is not judged on this position
    for name in RECOVERY_FIGURES:
        vals = [p[name] for _, p in pops if p.get(name) is not None]
        unmeasurable = sum(1 for f, p in pops if p.get(name) is None
                           and f"{population}.{name}" in (f.get("unmeasurable") or {}))
        if name == "time_to_steady_state_s":
            missing = sum(1 for f, p in pops if p.get("recovered") is False and not f.get("window_cut_by"))
        elif name == "time_to_first_success_s":
            missing = sum(1 for _, p in pops if p.get(name) is None and p.get("failed_total"))
        else:
            missing = 0
        out["figures"][name] = describe(vals, missing, seed=seed, unmeasurable=unmeasurable)
    failed = sum(p["failed_total"] for _, p in pops)
    requests = sum(p["requests"] for _, p in pops)
    out["failed"] = {"failed": failed, "requests": requests,
                     "fraction": round(failed / requests, 6) if requests else None,
                     "wilson95": wilson(failed, requests)}
    return out


def trials(summaries: list[dict[str, Any]], population: str = "affected", seed: int = 0) -> dict[str, Any]:
    """Statistics over trials: per fault position (1st, 2nd... fault of each run), and for the
    incident (the last fault of each run, whose window runs to the end through every heal).
    ``figures`` and ``failed`` at the top are the incident's."""
    with_faults = [s["faults"] for s in summaries if s.get("faults")]
    positions = []
    for i in range(max((len(fs) for fs in with_faults), default=0)):
        positions.append({"position": i + 1, **aggregate([fs[i] for fs in with_faults if len(fs) > i],
                                                          population, seed)})
    incident = aggregate([fs[-1] for fs in with_faults], population, seed)
    verdicts = [s.get("bounds", {}).get("all_met") for s in summaries]
    return {"trials": len(summaries), "with_fault": len(with_faults), "population": population,
            "figures": incident["figures"], "failed": incident["failed"], "incident": incident,
            "positions": positions,
            "bounds_met": {"trials": sum(1 for v in verdicts if v), "of": len(verdicts),
                           "wilson95": wilson(sum(1 for v in verdicts if v), len(verdicts))}}
