"""Open-loop arrival schedules: constant, Poisson and gamma inter-arrivals, at one rate or in stages.

Gamma arrivals are those of ``vllm bench serve --burstiness``: each inter-arrival time is drawn
from a gamma distribution with shape ``k = burstiness`` and scale ``theta = 1 / (rate * k)``
(vLLM's ``benchmarks/serve.py``, ``get_request``), so the mean stays ``1 / rate`` and the
coefficient of variation is ``1 / sqrt(k)``: 1 is Poisson, smaller is burstier (0.5: CV 1.41),
larger is more regular. Unlike vLLM, the schedule is not rescaled to end at ``n / rate`` (its
sum is left as drawn), and the first request goes at offset 0.

Stages (``load.stages``: ``[{"rate": r, "duration_s": d}, ...]``, a ramp) play one after the
other, each at its own rate; the schedule ends with the last stage. Across stages the draws are
made in *operational time* (the expected number of arrivals so far, the integral of the rate): a
gap of mean 1 is drawn there and mapped back through the piecewise-constant rate, which keeps
the stated burstiness inside every stage and lets a gap run across a boundary (a stage of rate
0 is a pause). With stages the first request comes one gap after 0, as a renewal process. A stage may state its
``utilization`` (a share of the measured capacity) instead of its rate: a load step (:mod:`chaos.load.utilization`
resolves it to a rate before anything is drawn).

Everything is drawn from one ``random.Random(seed)``: the same seed gives the same schedule.
"""

from __future__ import annotations

import math
import random
from typing import Iterator, Sequence

ARRIVALS = ("poisson", "constant", "gamma")
MAX_STAGE_UTILIZATION = 10.0  # a stage's share of the measured capacity at most (a load step: 2 is twice it)


def _unit_gap(rng: random.Random, arrival: str, burstiness: float) -> float:
    """One inter-arrival time in operational time (mean 1)."""
    if arrival == "constant":
        return 1.0
    if arrival == "poisson":
        return rng.expovariate(1.0)
    return rng.gammavariate(burstiness, 1.0 / burstiness)


def gap(rng: random.Random, arrival: str, rate: float, burstiness: float = 1.0) -> float:
    """One inter-arrival time at ``rate`` (seconds): vLLM's ``gamma(shape=k, scale=1/(rate*k))``
    for gamma; Poisson and constant draw exactly as the harness always did."""
    if arrival == "constant":
        return 1.0 / rate
    if arrival == "poisson":
        return rng.expovariate(rate)
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


def offsets(arrival: str, rate: float, duration_s: float, seed: int, burstiness: float = 1.0,
            stages: Sequence[dict] | None = None) -> Iterator[float]:
    """Planned send offsets in seconds from the run's start, increasing, every one < ``duration_s``
    (and, with stages, before the last stage ends). Unbounded in count: the caller takes what it needs."""
    rng = random.Random(seed)
    if not stages:
        t = 0.0
        while t < duration_s:
            yield t
            t += gap(rng, arrival, rate, burstiness)
        return
    bounds = []  # (start, end, rate) of each stage
    start = 0.0
    for st in stages:
        bounds.append((start, start + float(st["duration_s"]), float(st["rate"])))
        start += float(st["duration_s"])
    end_all = min(start, duration_s)
    t, i = 0.0, 0
    while True:
        u = _unit_gap(rng, arrival, burstiness)
        while True:  # spend u operational units, stage by stage
            s_start, s_end, r = bounds[i]
            room = (s_end - t) * r  # operational units left in this stage
            if r > 0 and u < room:
                t += u / r
                break
            u -= room
            t = s_end
            i += 1
            if i == len(bounds):
                return
        if t >= end_all:
            return
        yield t


def coefficient_of_variation(xs: Sequence[float]) -> float:
    """Sample standard deviation over mean of the gaps between consecutive values of ``xs`` (sorted)."""
    s = sorted(xs)
    gaps = [b - a for a, b in zip(s, s[1:])]
    if len(gaps) < 2:
        raise ValueError("need at least three instants")
    m = sum(gaps) / len(gaps)
    var = sum((g - m) ** 2 for g in gaps) / (len(gaps) - 1)
    return math.sqrt(var) / m


def check(arrival: str, burstiness: float, stages: Sequence | None) -> list[str]:
    """The arrival fields' problems (what the schema cannot say), one line each."""
    out = []
    if arrival not in ARRIVALS:
        out.append(f"arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if not (isinstance(burstiness, (int, float)) and 0 < burstiness <= 1000):
        out.append(f"burstiness must be in (0, 1000], got {burstiness!r}")
    for i, st in enumerate(stages or ()):
        if not isinstance(st, dict) or set(st) not in ({"rate", "duration_s"}, {"utilization", "duration_s"}):
            out.append(f"stages[{i}] must be {{rate, duration_s}} or {{utilization, duration_s}}, got {st!r}")
            continue
        r, d = st.get("rate"), st["duration_s"]
        u = st.get("utilization")
        if "utilization" in st and not (isinstance(u, (int, float)) and not isinstance(u, bool)
                                        and 0 <= u <= MAX_STAGE_UTILIZATION):
            out.append(f"stages[{i}].utilization must be in [0, {MAX_STAGE_UTILIZATION:g}] (a share of the measured "
                       f"capacity), got {u!r}")
        if "rate" in st and not (isinstance(r, (int, float)) and 0 <= r <= 5000):
            out.append(f"stages[{i}].rate must be in [0, 5000] req/s, got {r!r}")
        if not (isinstance(d, (int, float)) and 0 < d <= 86400):
            out.append(f"stages[{i}].duration_s must be in (0, 86400], got {d!r}")
    if stages and not out and not any((st.get("rate") or st.get("utilization") or 0) > 0 for st in stages):
        out.append("stages: at least one stage needs a rate above 0")
    return out
