"""A Prometheus exporter for the live run, fed from the same record events as the NDJSON file.

Series (prefix ``availproof_``): ``requests_total{outcome,failure_class,target,zone}``,
``ttft_seconds`` and ``e2e_seconds`` histograms by target, ``fault_active{scope,target}``
(1 between inject and heal), ``fault_marks_total{event,scope}``. Served on loopback by
default; the port is configurable (``AVAILPROOF_METRICS_PORT``, 0 to disable).
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from chaos import records as rec

DEFAULT_PORT = 9477
BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32)


class Exporter:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter("availproof_requests_total", "Finished requests by outcome and failure class",
                                ["outcome", "failure_class", "target", "zone"], registry=r)
        self.ttft = Histogram("availproof_ttft_seconds", "Time to first token", ["target"], buckets=BUCKETS,
                              registry=r)
        self.e2e = Histogram("availproof_e2e_seconds", "End-to-end request time", ["target"], buckets=BUCKETS,
                             registry=r)
        self.fault = Gauge("availproof_fault_active", "1 while a fault is injected and not healed",
                           ["scope", "target"], registry=r)
        self.marks = Counter("availproof_fault_marks_total", "Fault marks", ["event", "scope"], registry=r)
        self.server = None

    def attach(self, events: rec.Events) -> "Exporter":
        events.request_done.append(self.on_request)
        events.fault_marked.append(self.on_mark)
        return self

    def on_request(self, r: rec.RequestRecord) -> None:
        if r.phase == rec.WARMUP:
            return
        self.requests.labels("ok" if r.ok else "failed", r.failure or "", r.target, r.zone or "").inc()
        if r.ttft_s is not None:
            self.ttft.labels(r.target).observe(r.ttft_s)
        if r.e2e_s is not None:
            self.e2e.labels(r.target).observe(r.e2e_s)

    def on_mark(self, m: rec.FaultMark) -> None:
        self.marks.labels(m.event, m.scope).inc()
        if m.event == rec.INJECT_START:
            self.fault.labels(m.scope, m.target).set(1)
        elif m.event == rec.HEAL_END:
            self.fault.labels(m.scope, m.target).set(0)

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Start the HTTP endpoint; returns the bound port."""
        self.server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return self.server.server_address[1]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def port_from_env() -> int:
    try:
        return int(os.environ.get("AVAILPROOF_METRICS_PORT", DEFAULT_PORT))
    except ValueError:
        return DEFAULT_PORT
