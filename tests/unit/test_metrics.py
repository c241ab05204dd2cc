"""The Prometheus exporter of the live run, scraped as text: the sampler's planes as gauges.

An unknown figure (its source did not answer) must be NaN, never 0; a deployment or zone that
disappears from a sample that answered must go to 0, not keep its last value.
"""

import math

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from chaos.system import metrics
from chaos.recording import records as rec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def _scrape(exporter) -> dict[tuple[str, tuple], float]:
    """The registry's text exposition as {(sample name, sorted labels): value}."""
    text = generate_latest(exporter.registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _sample(t, gcs=True, controller=True, replicas=None, nodes=None, latency=0.004):
    return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.012, gcs_ok=gcs, gcs_latency_s=latency if gcs else None,
                      controller_ok=controller, app_status="RUNNING" if controller else None,
                      replicas=replicas if controller else None, nodes_alive=nodes)


FULL = {"StreamTarget": {"zone-a": 1, "zone-b": 1, "zone-c": 1}, "OpenAiIngress": {"zone-a": 1}}
NODES = {"zone-a": 1, "zone-b": 1, "zone-c": 1}


def _up(m, component):
    return m[("availproof_control_plane_up", (("component", component),))]


def _replicas(m, dep, zone):
    return m[("availproof_serve_replicas_running", (("deployment", dep), ("zone", zone)))]


def _nodes(m, zone):
    return m[("availproof_nodes_alive", (("zone", zone),))]


def test_before_any_sample_the_control_plane_is_unknown_not_down():
    m = _scrape(metrics.Exporter())
    assert math.isnan(_up(m, "gcs")) and math.isnan(_up(m, "controller"))
    assert math.isnan(m[("availproof_gcs_health_latency_seconds", ())])
    assert m[("availproof_samples_total", ())] == 0
    assert not any(name == "availproof_serve_replicas_running" for name, _ in m)


def test_gauges_follow_the_samples_through_a_head_outage_and_a_zone_loss():
    events = rec.Events()
    exporter = metrics.Exporter().attach(events)
    emit = lambda s: events.emit(events.sample_taken, s)  # noqa: E731

    emit(_sample(0.0, replicas=FULL, nodes=NODES))
    m = _scrape(exporter)
    assert _up(m, "gcs") == 1 and _up(m, "controller") == 1
    assert m[("availproof_gcs_health_latency_seconds", ())] == 0.004
    assert m[("availproof_sample_duration_seconds", ())] == 0.012
    assert {z: _replicas(m, "StreamTarget", z) for z in NODES} == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    assert _replicas(m, "OpenAiIngress", "zone-a") == 1
    assert {z: _nodes(m, z) for z in NODES} == NODES

    # the head is down: GCS and controller do not answer; replicas and nodes unknown (NaN), never 0
    emit(_sample(0.5, gcs=False, controller=False, nodes=None))
    m = _scrape(exporter)
    assert _up(m, "gcs") == 0 and _up(m, "controller") == 0
    assert math.isnan(m[("availproof_gcs_health_latency_seconds", ())])
    assert all(math.isnan(_replicas(m, "StreamTarget", z)) for z in NODES)
    assert math.isnan(_replicas(m, "OpenAiIngress", "zone-a"))
    assert all(math.isnan(_nodes(m, z)) for z in NODES)

    # the GCS is back, the controller not yet: nodes known again, replicas still unknown
    emit(_sample(1.0, gcs=True, controller=False, nodes={"zone-a": 1, "zone-b": 0, "zone-c": 1}))
    m = _scrape(exporter)
    assert _up(m, "gcs") == 1 and _up(m, "controller") == 0
    assert _nodes(m, "zone-b") == 0 and _nodes(m, "zone-a") == 1
    assert math.isnan(_replicas(m, "StreamTarget", "zone-b"))

    # the controller answers; zone-b's replica is gone from the answer: 0, not its last value
    emit(_sample(1.5, replicas={"StreamTarget": {"zone-a": 1, "zone-c": 1}, "OpenAiIngress": {"zone-a": 1}},
                 nodes={"zone-a": 1, "zone-c": 1}))
    m = _scrape(exporter)
    assert _up(m, "controller") == 1
    assert _replicas(m, "StreamTarget", "zone-b") == 0 and _replicas(m, "StreamTarget", "zone-a") == 1
    assert _nodes(m, "zone-b") == 0  # a zone absent from an answer that came is 0

    # restored, with a replica in a zone never seen before
    emit(_sample(2.0, replicas={**FULL, "StreamTarget": {**FULL["StreamTarget"], "zone-d": 2}}, nodes=NODES))
    m = _scrape(exporter)
    assert _replicas(m, "StreamTarget", "zone-b") == 1 and _replicas(m, "StreamTarget", "zone-d") == 2
    assert m[("availproof_samples_total", ())] == 5


def test_a_gcs_answer_that_is_not_healthy_has_no_latency():
    exporter = metrics.Exporter()
    exporter.on_sample(rec.Sample(t_ns=T0, took_s=0.1, gcs_ok=False, gcs_latency_s=0.2, controller_ok=True,
                                  app_status="RUNNING", replicas={}, nodes_alive={}))
    m = _scrape(exporter)
    assert _up(m, "gcs") == 0 and math.isnan(m[("availproof_gcs_health_latency_seconds", ())])


def test_requests_and_marks_still_exported_beside_the_samples():
    events = rec.Events()
    exporter = metrics.Exporter().attach(events)
    events.emit(events.request_done, rec.RequestRecord(
        id=1, target="worker-a", url="u", zone="zone-a", route="/v1/completions", phase=rec.MEASURE,
        planned_ns=T0, sent_ns=T0, sent_offset_s=0.0, ok=False, failure=rec.CONNECT_REFUSED))
    events.emit(events.fault_marked, rec.FaultMark(event=rec.INJECT_START, fault_id="f", scope="zone",
                                                   target="zone-a", t_ns=T0, zones=["zone-a"]))
    events.emit(events.sample_taken, _sample(0.0, replicas=FULL, nodes=NODES))
    m = _scrape(exporter)
    assert m[("availproof_requests_total", (("failure_class", rec.CONNECT_REFUSED), ("outcome", "failed"),
                                            ("target", "worker-a"), ("zone", "zone-a")))] == 1
    assert m[("availproof_fault_active", (("scope", "zone"), ("target", "zone-a")))] == 1
    assert _up(m, "gcs") == 1


def test_the_dashboard_has_a_panel_for_each_sampled_plane():
    import json

    from chaos.system import prometheus

    dash = json.loads(prometheus.DASHBOARD.read_text())
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    for name in ("availproof_control_plane_up", "availproof_gcs_health_latency_seconds",
                 "availproof_serve_replicas_running", "availproof_nodes_alive"):
        assert name in exprs, name
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    cells = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dash["panels"]}
    assert len(cells) == len(dash["panels"])  # no two panels on one spot
