"""The load as it was sent: how many, the rate achieved, how bursty, per load worker, and the client's send lag."""

from __future__ import annotations

from typing import Any

from chaos import records as rec
from chaos.analysis.windows import NS
from chaos.stats import percentile  # the rig's one convention: nearest rank


def arrivals(reqs: list[rec.RequestRecord]) -> dict[str, Any]:
    """The load as it was sent (every request, warm-up included): how many, the rate achieved over
    the sending span, the coefficient of variation of the inter-arrival times of the send instants
    (1 for Poisson, 1 / sqrt(k) for gamma arrivals of burstiness k, 0 for constant), requests per
    load worker, and how many ``max_model_len`` clipped. ``reqs`` sorted by send."""
    sent = [r.sent_ns for r in reqs]
    gaps = [(b - a) / NS for a, b in zip(sent, sent[1:])]
    cv = None
    if len(gaps) >= 2 and sum(gaps) > 0:
        m = sum(gaps) / len(gaps)
        cv = round((sum((g - m) ** 2 for g in gaps) / (len(gaps) - 1)) ** 0.5 / m, 4)
    per_worker: dict[str, int] = {}
    for r in reqs:
        if r.worker is not None:
            per_worker[str(r.worker)] = per_worker.get(str(r.worker), 0) + 1
    span = (sent[-1] - sent[0]) / NS if len(sent) > 1 else 0.0
    return {"sent": len(reqs), "rate_rps": round((len(sent) - 1) / span, 3) if span > 0 else None,
            "interarrival_cv": cv, "per_worker": dict(sorted(per_worker.items(), key=lambda kv: int(kv[0]))),
            "clipped": sum(1 for r in reqs if r.clipped), "send_lag_ms": send_lag_ms(reqs)}


def send_lag_ms(reqs: list[rec.RequestRecord]) -> dict[str, Any] | None:
    """How late the client sent against its schedule (sent minus planned, ms): p50, p99, max, over the
    open loop's requests; null for a closed loop (no schedule: every request is sent when a user is free).
    A p99 of many ms means the client, not the system, set the timing (a burst sent one after another)."""
    lags = [(r.sent_ns - r.planned_ns) / 1e6 for r in reqs if r.planned_ns != r.sent_ns]
    if not lags:
        return None
    lags.sort()
    return {"p50": round(percentile(lags, 0.5), 3), "p99": round(percentile(lags, 0.99), 3),
            "max": round(lags[-1], 3), "requests": len(lags)}
