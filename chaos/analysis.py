"""Recovery per fault mark, from the request records alone. Plain Python: no Ray, no Kubernetes.

Definitions (all instants are request *send* times, ``time.time_ns()``, relative to the
fault's ``inject_start`` mark; warm-up requests are left out everywhere):

- **analysis window** of a fault: from its injection to the next fault's injection, or to
  the end of the run. A second fault before recovery therefore ends the first window, and
  the first fault is reported as not recovered; ``window_cut_by`` names the fault that cut
  it (``null`` for the last fault). The recovery of the whole incident is the last fault's:
  its window runs to the end of the run, through the heal of every earlier fault.
- **time to detect**: the first failed request sent at or after the injection; a request
  that was already in flight at the injection and failed counts at the instant its failure
  was seen (send + end-to-end time).
- **time to first success**: the first successful request sent after that first failure
  (and not before the injection).
  No failure at all: both are ``null`` and ``disrupted`` is false.
- **time to steady state**: the start of the first window of ``W`` seconds (default 5)
  starting at or after the disruption onset, lying wholly inside the analysis window and
  holding at least ``min_requests`` requests, in which the success ratio is at least
  ``min_success_ratio`` and the p95 TTFT at most ``max_p95_ttft_s``. Windows start at the
  send time of each request. The onset is the first failure; with no failure, the first
  window out of bound (slow, not failing); with neither, steady state is 0 (undisturbed).
  ``null`` when no such window exists: not recovered within the run.
- **failed requests**: every failed request sent in the analysis window or in flight at the
  injection (``in_flight_at_injection`` counts the latter apart), by failure class,
  with those that failed after their first token (mid-stream) counted apart, and those sent
  to targets outside the fault's zones counted apart (``unaffected_zones``).
- **goodput**: requests per second that succeeded and met the SLO (TTFT, per-request p95
  inter-token latency, end-to-end), before the injection, during (injection to steady
  state) and after (steady state to the end of the analysis window).
- **resolution**: the median gap between consecutive planned sends in the window (the
  inter-arrival time). No figure above can be finer than that; it is reported beside them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos import records as rec

NS = 1_000_000_000


@dataclass
class SteadyState:
    window_s: float = 5.0
    min_success_ratio: float = 0.99
    max_p95_ttft_s: float | None = None
    min_requests: int = 3

    @classmethod
    def from_dict(cls, d: dict | None) -> "SteadyState":
        return cls(**{k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__})


@dataclass
class SLO:
    ttft_s: float | None = 2.0
    itl_s: float | None = 0.5
    e2e_s: float | None = None

    @classmethod
    def from_dict(cls, d: dict | None) -> "SLO":
        return cls(**{k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__})

    def met(self, r: rec.RequestRecord) -> bool:
        if not r.ok:
            return False
        if self.ttft_s is not None and r.ttft_s is not None and r.ttft_s > self.ttft_s:
            return False
        if self.itl_s is not None and r.itl_p95_s is not None and r.itl_p95_s > self.itl_s:
            return False
        if self.e2e_s is not None and r.e2e_s is not None and r.e2e_s > self.e2e_s:
            return False
        return True


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 1]); None for no values."""
    if not values:
        return None
    s = sorted(values)
    rank = max(1, min(len(s), math.ceil(q * len(s) - 1e-9)))
    return s[rank - 1]


@dataclass
class Fault:
    """The four marks of one fault, folded."""

    fault_id: str
    scope: str
    target: str
    zones: list[str]
    inject_ns: int
    inject_end_ns: int | None = None
    heal_start_ns: int | None = None
    heal_end_ns: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def faults_from_marks(marks: list[rec.FaultMark]) -> list[Fault]:
    out: dict[str, Fault] = {}
    for m in sorted(marks, key=lambda m: m.t_ns):
        f = out.get(m.fault_id)
        if m.event == rec.INJECT_START:
            if f is None:
                out[m.fault_id] = Fault(m.fault_id, m.scope, m.target, list(m.zones), m.t_ns, detail=dict(m.detail))
        elif f is not None:
            if m.event == rec.INJECT_END:
                f.inject_end_ns = m.t_ns
            elif m.event == rec.HEAL_START:
                f.heal_start_ns = m.t_ns
            elif m.event == rec.HEAL_END:
                f.heal_end_ns = m.t_ns
            f.detail.update(m.detail)
    return sorted(out.values(), key=lambda f: f.inject_ns)


def _rate(rs: list[rec.RequestRecord], slo: SLO, start_ns: int, end_ns: int) -> float | None:
    if end_ns <= start_ns:
        return None
    good = sum(1 for r in rs if start_ns <= r.sent_ns < end_ns and slo.met(r))
    return round(good / ((end_ns - start_ns) / NS), 4)


def _window_ok(ws: list[rec.RequestRecord], steady: SteadyState) -> bool:
    if len(ws) < steady.min_requests:
        return False
    ok = sum(1 for r in ws if r.ok)
    if ok / len(ws) < steady.min_success_ratio:
        return False
    if steady.max_p95_ttft_s is not None:
        p95 = percentile([r.ttft_s for r in ws if r.ttft_s is not None], 0.95)
        if p95 is None or p95 > steady.max_p95_ttft_s:
            return False
    return True


def _first_ok_window(rs: list[rec.RequestRecord], starts: list[int], end_ns: int, steady: SteadyState,
                     want_ok: bool) -> int | None:
    """First start whose [start, start+W) window lies before end_ns and is (not) within bound."""
    w = int(steady.window_s * NS)
    j = 0
    for s in starts:
        if s + w > end_ns:
            return None
        while j < len(rs) and rs[j].sent_ns < s:
            j += 1
        k = j
        while k < len(rs) and rs[k].sent_ns < s + w:
            k += 1
        if _window_ok(rs[j:k], steady) == want_ok:
            return s
    return None


def analyse_fault(fault: Fault, measured: list[rec.RequestRecord], window_end_ns: int, measure_start_ns: int,
                  steady: SteadyState, slo: SLO, cut_by: str | None = None) -> dict[str, Any]:
    t0 = fault.inject_ns
    rs = [r for r in measured if t0 <= r.sent_ns < window_end_ns]
    in_flight = [r for r in measured if r.sent_ns < t0 <= r.sent_ns + int((r.e2e_s or 0) * NS)]
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    failed_in_flight = [r for r in in_flight if not r.ok]
    failed = failed_in_flight + [r for r in rs if not r.ok]
    seen = [r.sent_ns + int((r.e2e_s or 0) * NS) for r in failed_in_flight] + [r.sent_ns for r in rs if not r.ok]
    first_fail = min(seen) if seen else None
    first_success = None
    if first_fail is not None:
        first_success = next((r.sent_ns for r in rs if r.ok and r.sent_ns > first_fail), None)

    # disruption onset: the first failure, else the first window out of bound
    onset = first_fail
    if onset is None:
        onset = _first_ok_window(rs, [t0] + [r.sent_ns for r in rs], window_end_ns, steady, want_ok=False)
    if onset is None:
        steady_at, disrupted = t0, False
    else:
        disrupted = True
        steady_at = _first_ok_window(rs, [r.sent_ns for r in rs if r.sent_ns >= onset], window_end_ns, steady,
                                     want_ok=True)

    by_class: dict[str, int] = {}
    for r in failed:
        by_class[r.failure or rec.OTHER] = by_class.get(r.failure or rec.OTHER, 0) + 1
    mid_stream = sum(1 for r in failed if r.got_first_token)
    zones = set(fault.zones)
    unaffected = sum(1 for r in failed if zones and r.zone is not None and r.zone not in zones)
    planned = sorted(r.planned_ns for r in rs)  # the schedule's resolution, not the (bunched) sends
    gaps = [b - a for a, b in zip(planned, planned[1:])]
    before = [r for r in measured if measure_start_ns <= r.sent_ns < t0]
    recovered_at = steady_at if steady_at is not None else window_end_ns
    after_p95 = percentile([r.ttft_s for r in rs if recovered_at <= r.sent_ns and r.ttft_s is not None], 0.95)
    return {
        "fault_id": fault.fault_id,
        "scope": fault.scope,
        "target": fault.target,
        "zones": fault.zones,
        "inject_ns": t0,
        "inject_end_s": sec(fault.inject_end_ns),
        "heal_start_s": sec(fault.heal_start_ns),
        "heal_end_s": sec(fault.heal_end_ns),
        "window_s": round((window_end_ns - t0) / NS, 4),
        "window_cut_by": cut_by,
        "requests_in_window": len(rs),
        "disrupted": disrupted,
        "recovered": steady_at is not None,
        "time_to_detect_s": sec(first_fail),
        "time_to_first_success_s": sec(first_success),
        "time_to_steady_state_s": sec(steady_at),
        "time_to_last_failure_s": sec(max(seen)) if seen else None,
        "failed": {
            "total": len(failed),
            "in_flight_at_injection": len(failed_in_flight),
            "by_class": dict(sorted(by_class.items())),
            "before_first_token": len(failed) - mid_stream,
            "mid_stream": mid_stream,
            "unaffected_zones": unaffected,
            "by_zone": _count_by(failed, "zone"),
        },
        "failed_ratio": round(len(failed) / (len(rs) + len(in_flight)), 6) if rs or in_flight else None,
        "goodput_rps": {
            "before": _rate(before, slo, measure_start_ns, t0),
            "during": _rate(rs, slo, t0, recovered_at) if disrupted else None,
            "after": _rate(rs, slo, recovered_at, window_end_ns) if steady_at is not None else None,
        },
        "p95_ttft_s": {
            "before": percentile([r.ttft_s for r in before if r.ttft_s is not None], 0.95),
            "after": after_p95,
        },
        "resolution_s": round(percentile(gaps, 0.5) / NS, 4) if gaps else None,
        "detail": fault.detail,
    }


def _count_by(rs: list[rec.RequestRecord], attr: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rs:
        key = str(getattr(r, attr))
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def analyse(run: rec.RunRecords, steady: SteadyState | None = None, slo: SLO | None = None) -> dict[str, Any]:
    """The summary of one run: totals, then one entry per fault, grouped by scope."""
    steady = steady or SteadyState()
    slo = slo or SLO()
    reqs = sorted(run.requests, key=lambda r: r.sent_ns)
    measured = [r for r in reqs if r.phase == rec.MEASURE]
    faults = faults_from_marks(run.marks)
    if run.footer and run.footer.get("stopped_ns"):
        end_ns = run.footer["stopped_ns"]
    elif reqs:
        end_ns = max(r.sent_ns + int((r.e2e_s or 0) * NS) for r in reqs) + 1
    else:
        end_ns = 0
    measure_start = measured[0].sent_ns if measured else end_ns
    results = []
    for i, f in enumerate(faults):
        nxt = faults[i + 1] if i + 1 < len(faults) else None
        window_end = nxt.inject_ns if nxt else end_ns
        results.append(analyse_fault(f, measured, window_end, measure_start, steady, slo,
                                     cut_by=nxt.fault_id if nxt else None))
    by_scope: dict[str, list[dict]] = {}
    for r in results:
        by_scope.setdefault(r["scope"], []).append(r)
    baseline_end = faults[0].inject_ns if faults else end_ns
    baseline = [r for r in measured if r.sent_ns < baseline_end]
    return {
        "run_id": run.header.get("run_id"),
        "partial": run.partial,
        "torn_lines": run.torn_lines,
        "definitions": {"steady_state": asdict(steady), "slo": asdict(slo)},
        "requests": {
            "total": len(reqs),
            "warmup": len(reqs) - len(measured),
            "measured": len(measured),
            "ok": sum(1 for r in measured if r.ok),
            "failed": sum(1 for r in measured if not r.ok),
            "failed_before_first_fault": sum(1 for r in baseline if not r.ok),
        },
        "faults": results,
        "by_scope": by_scope,
    }


def worst(values: list[Any], none_is_worst: bool = True) -> Any:
    """The worst (largest) figure across faults; None (never reached) counts as worst."""
    if any(v is None for v in values) and none_is_worst:
        return None
    present = [v for v in values if v is not None]
    return max(present) if present else None
