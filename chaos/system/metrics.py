"""A Prometheus exporter for the live run, fed from the same record events as the NDJSON file.

Series (prefix ``availproof_``): ``requests_total{outcome,failure_class,target,zone}``,
``ttft_seconds`` and ``e2e_seconds`` histograms by target, ``fault_active{scope,target}``
(1 between inject and heal), ``fault_marks_total{event,scope}``.

From the control-plane and capacity sampler (:mod:`chaos.system.sampler`, ``events.sample_taken``), the
last sample's view: ``control_plane_up{component}`` (``gcs``: the GCS answered its health
check; ``controller``: the Serve controller answered; 1 or 0), ``gcs_health_latency_seconds``,
``serve_replicas_running{deployment,zone}`` (RUNNING replicas), ``nodes_alive{zone}`` (worker
nodes ALIVE), ``samples_total`` and ``sample_duration_seconds``. A figure the sample does not
know (its source did not answer) is NaN, never 0: a gap in a graph, not a drop; a deployment or
zone seen before and absent from a sample that answered is 0.

Served on loopback by default; the port is configurable (``AVAILPROOF_METRICS_PORT``, 0 to disable).
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from chaos.recording import records as rec

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
        self.control_up = Gauge("availproof_control_plane_up",
                                "1 when the component answered the last sample (gcs: the GCS health check; "
                                "controller: the Serve controller)", ["component"], registry=r)
        self.gcs_latency = Gauge("availproof_gcs_health_latency_seconds",
                                 "Latency of the GCS health check in the last sample (NaN: no answer)", registry=r)
        self.replicas = Gauge("availproof_serve_replicas_running",
                              "RUNNING Serve replicas per deployment and zone in the last sample (NaN: the "
                              "controller did not answer)", ["deployment", "zone"], registry=r)
        self.nodes = Gauge("availproof_nodes_alive", "Worker nodes ALIVE per zone in the last sample (NaN: unknown)",
                           ["zone"], registry=r)
        self.samples = Counter("availproof_samples_total", "Control-plane and capacity samples taken", registry=r)
        self.sample_took = Gauge("availproof_sample_duration_seconds", "How long taking the last sample took",
                                 registry=r)
        for component in ("gcs", "controller"):  # unknown until the first sample: NaN, not 0 (down)
            self.control_up.labels(component).set(float("nan"))
        self.gcs_latency.set(float("nan"))
        self.sample_took.set(float("nan"))
        self._replica_keys: set[tuple[str, str]] = set()
        self._node_zones: set[str] = set()
        self.server = None

    def attach(self, events: rec.Events) -> "Exporter":
        events.subscribe(events.request_done, self.on_request)
        events.subscribe(events.fault_marked, self.on_mark)
        events.subscribe(events.sample_taken, self.on_sample)
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

    def on_sample(self, s: rec.Sample) -> None:
        nan = float("nan")
        self.samples.inc()
        self.sample_took.set(s.took_s)
        self.control_up.labels("gcs").set(1 if s.gcs_ok else 0)
        self.control_up.labels("controller").set(1 if s.controller_ok else 0)
        self.gcs_latency.set(s.gcs_latency_s if s.gcs_ok and s.gcs_latency_s is not None else nan)
        if s.controller_ok and s.replicas is not None:
            now = {(dep, zone): n for dep, zones in s.replicas.items() for zone, n in zones.items()}
            for key in self._replica_keys - now.keys():
                self.replicas.labels(*key).set(0)
            for key, n in now.items():
                self.replicas.labels(*key).set(n)
            self._replica_keys |= now.keys()
        else:
            for key in self._replica_keys:
                self.replicas.labels(*key).set(nan)
        if s.nodes_alive is not None:
            for zone in self._node_zones - s.nodes_alive.keys():
                self.nodes.labels(zone).set(0)
            for zone, n in s.nodes_alive.items():
                self.nodes.labels(zone).set(n)
            self._node_zones |= s.nodes_alive.keys()
        else:
            for zone in self._node_zones:
                self.nodes.labels(zone).set(nan)

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
