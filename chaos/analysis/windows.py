"""What a summary is computed with, the faults, and the windows judged: the ground the figures stand on.

- :class:`SteadyState` and :class:`SLO` (an experiment's ``steady_state`` and ``slo``), and
  :class:`Definitions`, both written into the run header so that ``availproof analyse`` derives the
  same figures from the records alone;
- :class:`Fault`: the four marks of one fault, folded (:func:`faults_from_marks`);
- a request's latency (:func:`latency`) and the instant its outcome was seen (``request_end_ns``);
- the analysis window and the steady-state windows judged in it (:func:`judge_windows`).

A population's requests in a fault's **analysis window** are those sent from the injection
to the window's end (the next fault's injection, or the end of the run), plus those sent
before the injection and still in flight at it (``in_flight_at_injection``: they ended after
it). A request belongs to one fault only: one still in flight at the next fault's injection is
that fault's, not this one's.

Steady-state windows: see :mod:`chaos.analysis.populations` (figures of one population).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from chaos.recording import records as rec, request_columns as rc
from chaos.base.stats import percentile  # the rig's one convention: nearest rank

NS = 1_000_000_000
FORMAT_VERSION = 2  # of summary.json; 1 was the single-population summary before 2026-12
POPULATIONS = ("affected", "service")
INSUFFICIENT = "insufficient evidence"


@dataclass
class SteadyState:
    window_s: float = 5.0
    min_success_ratio: float = 0.99
    max_p95_ttft_s: float | None = None
    min_requests: int = 3
    warm_factor: float = 1.2  # the warm-up figure: a replacement is warm within this factor of warm replicas

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


@dataclass
class Definitions:
    """What a summary is computed with: written into the run header, so that
    ``availproof analyse`` can derive the same figures from the records alone."""

    steady_state: SteadyState = field(default_factory=SteadyState)
    slo: SLO = field(default_factory=SLO)
    population: str = "affected"  # which population the bounds are checked on

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "steady_state": asdict(self.steady_state),
                "slo": asdict(self.slo), "population": self.population}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Definitions":
        d = d or {}
        return cls(SteadyState.from_dict(d.get("steady_state")), SLO.from_dict(d.get("slo")),
                   d.get("population", "affected"))


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


def request_end_ns(r: rec.RequestRecord) -> int:
    """The instant the client saw the request end (its outcome observed)."""
    return r.sent_ns + int((r.e2e_s or 0) * NS)


def latency(r: rec.RequestRecord) -> float | None:
    """TTFT for a streamed request; end-to-end for one that was not streamed."""
    return r.ttft_s if r.stream else r.e2e_s


def window_state(ws: list[rec.RequestRecord], steady: SteadyState) -> bool | None:
    """True in bound, False out of bound, None too thin to judge."""
    if len(ws) < max(1, steady.min_requests):
        return None
    ok = [r for r in ws if r.ok]
    if len(ok) / len(ws) < steady.min_success_ratio:
        return False
    if steady.max_p95_ttft_s is not None:
        p95 = percentile([x for x in map(latency, ok) if x is not None], 0.95)
        if p95 is None or p95 > steady.max_p95_ttft_s:
            return False
    return True


def judge_windows(rs: list[rec.RequestRecord], t0: int, end_ns: int, steady: SteadyState,
                  judge: Callable[[list[rec.RequestRecord]], bool | None] | None = None) -> list[tuple[int, bool]]:
    """(start, in bound) of every judged window; ``rs`` sorted by send, all sent in [t0, end). A window
    is judged by ``judge`` (True in bound, False out, None too thin), by default the steady state's."""
    w = int(steady.window_s * NS)
    out: list[tuple[int, bool]] = []
    j = k = 0
    for s in [t0] + [r.sent_ns for r in rs]:
        if s + w > end_ns:
            break
        while j < len(rs) and rs[j].sent_ns < s:
            j += 1
        k = max(k, j)
        while k < len(rs) and rs[k].sent_ns < s + w:
            k += 1
        state = window_state(rs[j:k], steady) if judge is None else judge(rs[j:k])
        if state is not None and (not out or out[-1][0] != s):
            out.append((s, state))
    return out


def window_states(sent: np.ndarray, ok: np.ndarray, lat: np.ndarray, t0: int, end_ns: int,
                  steady: SteadyState) -> tuple[np.ndarray, np.ndarray]:
    """:func:`judge_windows` with the steady state's own judge (:func:`window_state`), on columns: the
    requests' send instants (sorted, all in [t0, end)), success and latency (NaN: none). Returns the judged
    windows' starts and whether each is in bound. A window's counts are differences of running sums, and its
    p95 is over the bound exactly when fewer than the p95's rank of its latencies are at or under the bound:
    no window is rescanned."""
    w = int(steady.window_s * NS)
    starts = np.unique(np.concatenate((np.array([t0], dtype=np.int64), sent)))
    starts = starts[starts + w <= end_ns]
    j = np.searchsorted(sent, starts, "left")
    k = np.searchsorted(sent, starts + w, "left")
    n = k - j

    def in_window(mask: np.ndarray) -> np.ndarray:
        running = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
        return running[k] - running[j]

    judged = n >= max(1, steady.min_requests)
    good = in_window(ok)[judged] / n[judged] >= steady.min_success_ratio
    if steady.max_p95_ttft_s is not None:
        known = ok & ~np.isnan(lat)
        m = in_window(known)[judged]
        under = in_window(known & (lat <= steady.max_p95_ttft_s))[judged]
        rank = np.clip(np.ceil(0.95 * m - 1e-9), 1, np.maximum(m, 1))  # chaos.base.stats.rank, vectorised
        good &= (m > 0) & (under >= rank)
    return starts[judged], good


def run_end_ns(run: rec.RunRecords, columns: rc.RequestColumns | None = None) -> int:
    """The end of the run: the footer's stop instant, else the last request's end (a partial run)."""
    if run.footer and run.footer.get("stopped_ns"):
        return run.footer["stopped_ns"]
    ends = (columns if columns is not None else rc.of(run)).end_ns
    return int(ends.max()) + 1 if len(ends) else 0


def window_mask(cols: rc.RequestColumns, fault: dict[str, Any], window_end_ns: int) -> np.ndarray:
    """Which requests of ``cols`` were sent in the fault's analysis window (:func:`window_requests` on columns)."""
    sent = cols.sent_ns
    mask = (sent >= fault["inject_ns"]) & (sent < window_end_ns)
    if fault.get("window_cut_by"):
        mask &= cols.end_ns <= window_end_ns
    return mask


def window_requests(fault: dict[str, Any], measured: list[rec.RequestRecord],
                    window_end_ns: int) -> list[rec.RequestRecord]:
    """The requests sent in the fault's analysis window, as :func:`chaos.analysis.populations.analyse_fault` counts them."""
    t0, cut = fault["inject_ns"], fault.get("window_cut_by")
    return [r for r in measured
            if t0 <= r.sent_ns < window_end_ns and not (cut and request_end_ns(r) > window_end_ns)]
