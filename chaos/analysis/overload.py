"""A load step above capacity (issue 48): goodput, refusals against timeouts and TTFT per phase, and the time to
goodput recovered after the step, from the request records alone (the summary's ``overload``).

It applies to a run whose load steps (``load.stages``, the records header's ``load``): the **step** is the
contiguous stages at the highest rate, when that rate is above the first stage's; **before** is what the schedule
sent before it, **after** what it sent after it. A phase holds the attempts *sent* in it (each attempt by its
planned instant; warm-up attempts left out), so every figure of a phase is a function of the seeded schedule's
instants and what became of them:

- ``goodput_rps``: successful attempts sent in the phase per second of it (a logical request succeeds at most
  once: with retries on, a retry is counted in the phase it was sent in);
- ``offered_rps``: first attempts (logical requests) sent per second: what the users asked for;
- ``refused``: attempts refused at once because the service was full (the failure class ``refused``: a 429, or a
  503 with ``Retry-After`` or Serve's backpressure message); ``timed_out``: attempts that waited out a timeout
  (``read_timeout``, ``deadline``, ``connect_timeout``); ``failed``: every failed attempt;
- ``ttft_p99_s``: the p99 TTFT of its successful streams (nearest rank; null with its reason when none);
- ``time_to_goodput_recovered_s``: from the step's end, the start of the first bin (``bin_s``, the steady-state
  window) of the after phase from which every bin's successful share of the attempts sent in it is at least the
  steady state's ``min_success_ratio``; 0 when the after phase starts recovered; null with its reason
  (``recovered_reason``) when no bin of it holds to the end (never recovered) or nothing was sent after the step.

``offered_above_capacity``: the step's offered rate above the capacity the stages were a share of
(``rate_from.sustained_rps`` in the header), null with its reason when the run names no capacity: the step's proof.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.base.stats import percentile

TIMEOUT_CLASSES = ("read_timeout", "deadline", "connect_timeout")
REFUSED = "refused"
PHASES = ("before", "during", "after")


def step_of(load: dict[str, Any] | None) -> tuple[float, float, float] | None:
    """The step's ``(start_s, end_s, schedule_end_s)`` from the load's start, or None when the load does not step up."""
    stages = (load or {}).get("stages") or []
    if len(stages) < 2 or any("rate" not in st for st in stages):
        return None
    rates = [float(st["rate"]) for st in stages]
    top = max(rates)
    if top <= rates[0]:
        return None
    first = rates.index(top)
    last = first
    while last + 1 < len(rates) and rates[last + 1] == top:
        last += 1
    edges = np.cumsum([0.0] + [float(st["duration_s"]) for st in stages])
    return float(edges[first]), float(edges[last + 1]), float(edges[-1])


def failure_names(cols) -> np.ndarray:
    """Each row's failure class as a string array ('' for none)."""
    column = cols.failure
    values = np.array([("" if v is None else str(v)) for v in column.values] + [""], dtype=object)
    return values[column.codes]  # a code of -1 (None) reads the last entry, ''


def overload(header: dict[str, Any], cols, min_success_ratio: float, bin_s: float,
             stopped_ns: int | None = None) -> dict[str, Any] | None:
    """The run's ``overload`` (None when its load does not step up); ``cols``: every request's columns;
    ``stopped_ns``: when the load stopped (the records' footer), if before the schedule's end."""
    load = header.get("load") or {}
    step = step_of(load)
    if step is None:
        return None
    start_s, end_s, schedule_end_s = step
    t0 = header.get("started_ns")
    if t0 is None:
        return {"step": {"start_s": start_s, "end_s": end_s}, "reason": "the records' header has no started_ns"}
    at = (cols.planned_ns.astype(np.float64) - t0) / 1e9 if len(cols) else np.zeros(0)
    measured = np.asarray(cols.measure, dtype=bool) if len(cols) else np.zeros(0, dtype=bool)
    warmup_s = float(load.get("warmup_s") or 0.0)
    first_measured = max(warmup_s, float(at[measured].min())) if measured.any() else warmup_s
    # the after phase ends with the schedule, or with the load's last send when the run stopped it sooner (its
    # recovery window over): a rate over seconds nothing was sent in would dilute its goodput
    after_end = min(schedule_end_s, float(load.get("duration_s") or schedule_end_s))
    during_end = end_s
    if stopped_ns is not None:  # the load stopped sooner: the step too ends there
        during_end = max(start_s, min(end_s, (stopped_ns - t0) / 1e9))
        after_end = max(end_s, min(after_end, (stopped_ns - t0) / 1e9))
    bounds = {"before": (min(first_measured, start_s), start_s), "during": (start_s, during_end),
              "after": (end_s, after_end)}
    failures = failure_names(cols) if len(cols) else np.zeros(0, dtype=object)
    phases = {name: phase_figures(cols, at, measured, failures, *bounds[name]) for name in PHASES}
    rate_from = header.get("rate_from") or {}
    capacity = rate_from.get("sustained_rps")
    offered = phases["during"]["offered_rps"]
    above, above_reason = (None, "no capacity named: the stages stated rates, not shares of `availproof capacity`'s")
    if capacity and offered is not None:
        above, above_reason = bool(offered > capacity), None
    recovered, reason = time_to_recovered(cols, at, measured, *bounds["after"], min_success_ratio, bin_s)
    return {"step": {"start_s": start_s, "end_s": end_s, "schedule_end_s": schedule_end_s},
            "capacity_rps": capacity, "offered_above_capacity": above, "offered_above_capacity_reason": above_reason,
            "phases": phases,
            "refused": sum(p["refused"] for p in phases.values()),
            "timed_out": sum(p["timed_out"] for p in phases.values()),
            "time_to_goodput_recovered_s": recovered, "recovered_reason": reason, "bin_s": bin_s,
            "min_success_ratio": min_success_ratio}


def phase_figures(cols, at: np.ndarray, measured: np.ndarray, failures: np.ndarray, a: float, b: float) -> dict:
    """One phase's figures (the module's docstring): the attempts sent in ``[a, b)`` s after the load's start."""
    length = b - a
    rows = np.flatnonzero(measured & (at >= a) & (at < b)) if len(at) else np.zeros(0, dtype=np.int64)
    ok = np.asarray(cols.ok, dtype=bool)[rows] if len(rows) else np.zeros(0, dtype=bool)
    attempt = np.asarray(cols.attempt)[rows] if len(rows) else np.zeros(0)
    first = ~(attempt > 1)  # no policy: every attempt a first one
    fails = failures[rows] if len(rows) else np.zeros(0, dtype=object)
    ttfts = np.asarray(cols.ttft, dtype=np.float64)[rows][ok] if len(rows) else np.zeros(0)
    ttfts = ttfts[~np.isnan(ttfts)]
    p99 = percentile(sorted(ttfts.tolist()), 0.99) if len(ttfts) else None
    rate = (lambda n: round(n / length, 4)) if length > 0 else (lambda n: None)
    return {"from_s": round(a, 3), "to_s": round(b, 3), "attempts": int(len(rows)),
            "logical_requests": int(np.count_nonzero(first)), "ok": int(np.count_nonzero(ok)),
            "goodput_rps": rate(int(np.count_nonzero(ok))), "offered_rps": rate(int(np.count_nonzero(first))),
            "failed": int(np.count_nonzero(~ok)), "refused": int(np.count_nonzero(fails == REFUSED)),
            "timed_out": int(np.count_nonzero(np.isin(fails, TIMEOUT_CLASSES))),
            "ttft_p99_s": None if p99 is None else round(float(p99), 4),
            "ttft_reason": None if p99 is not None else "no successful stream with a first token sent in this phase"}


def time_to_recovered(cols, at: np.ndarray, measured: np.ndarray, a: float, b: float, min_ratio: float,
                      bin_s: float) -> tuple[float | None, str | None]:
    """From ``a`` (the step's end), the start of the first bin from which every bin's success share holds (the
    module's docstring), with the reason when there is none."""
    if b - a <= 0:
        return None, "the schedule ends with the step: nothing was sent after it"
    ok = np.asarray(cols.ok, dtype=bool) if len(cols) else np.zeros(0, dtype=bool)
    edges = np.arange(a, b, bin_s)
    shares: list[float | None] = []
    for lo in edges:
        rows = measured & (at >= lo) & (at < min(lo + bin_s, b))
        n = int(np.count_nonzero(rows))
        shares.append(None if n == 0 else np.count_nonzero(ok & rows) / n)
    if all(s is None for s in shares):
        return None, "no request was sent after the step"
    recovered_from = None
    for i in range(len(shares) - 1, -1, -1):  # the earliest bin from which every bin with sends holds
        if shares[i] is None:
            continue
        if shares[i] < min_ratio:
            break
        recovered_from = i
    if recovered_from is None:
        return None, (f"never: the last bin with requests sent after the step ({bin_s:g} s) succeeded "
                      f"below {min_ratio:g} of them")
    return round(float(edges[recovered_from] - a), 3), None
