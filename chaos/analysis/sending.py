"""The load as it was sent: how many, the rate achieved, how bursty, per load worker, and the client's send lag."""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.recording import records as rec, request_columns as rc
from chaos.analysis.windows import NS


def _sum(values: np.ndarray) -> float:
    """Python's ``sum`` of floats, left to right (a running sum; numpy's ``sum`` pairs them: other last bits)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0


def arrivals(reqs: list[rec.RequestRecord] | rc.RequestColumns) -> dict[str, Any]:
    """The load as it was sent (every request, warm-up included): how many, the rate achieved over
    the sending span, the coefficient of variation of the inter-arrival times of the send instants
    (1 for Poisson, 1 / sqrt(k) for gamma arrivals of burstiness k, 0 for constant), requests per
    load worker, and how many ``max_model_len`` clipped. ``reqs`` sorted by send."""
    cols = reqs if isinstance(reqs, rc.RequestColumns) else rc.from_records(reqs)
    sent = cols.sent_ns
    gaps = np.diff(sent) / NS
    cv = None
    if len(gaps) >= 2 and _sum(gaps) > 0:
        m = _sum(gaps) / len(gaps)
        cv = round((_sum((gaps - m) ** 2) / (len(gaps) - 1)) ** 0.5 / m, 4)
    per_worker: dict[str, int] = {}
    codes, counts = np.unique(cols.worker.codes[cols.worker.known()], return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        key = str(cols.worker.values[code])
        per_worker[key] = per_worker.get(key, 0) + count
    clipped = np.array([bool(v) for v in cols.clipped.values] + [False], dtype=bool)[cols.clipped.codes]
    span = int(sent[-1] - sent[0]) / NS if len(sent) > 1 else 0.0
    return {"sent": len(sent), "rate_rps": round((len(sent) - 1) / span, 3) if span > 0 else None,
            "interarrival_cv": cv, "per_worker": dict(sorted(per_worker.items(), key=lambda kv: int(kv[0]))),
            "clipped": int(np.count_nonzero(clipped)), "send_lag_ms": send_lag_ms(cols)}


def send_lag_ms(reqs: list[rec.RequestRecord] | rc.RequestColumns) -> dict[str, Any] | None:
    """How late the client sent against its schedule (sent minus planned, ms): p50, p99, max, over the
    open loop's requests; null for a closed loop (no schedule: every request is sent when a user is free).
    A p99 of many ms means the client, not the system, set the timing (a burst sent one after another)."""
    cols = reqs if isinstance(reqs, rc.RequestColumns) else rc.from_records(reqs)
    late = cols.sent_ns - cols.planned_ns
    lags = late[late != 0] / 1e6
    if not len(lags):
        return None
    return {"p50": round(rc.percentile(lags, 0.5), 3), "p99": round(rc.percentile(lags, 0.99), 3),
            "max": round(float(lags.max()), 3), "requests": len(lags)}
