"""Control plane and capacity per fault (chaos/analysis/planes.py) at their edges, on synthetic samples."""

import pytest

from chaos import analysis
from chaos.core import bounds
from chaos.analysis import planes
from chaos.recording import records as rec

from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.test_analysis import NS, T0, every, mark, run

FULL = {"StreamTarget": {"zone-a": 1, "zone-b": 1, "zone-c": 1}}


def sample(t, up=True, replicas=FULL, nodes=None, controller=None):
    return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.01, gcs_ok=up, gcs_latency_s=0.002 if up else None,
                      controller_ok=up if controller is None else controller, app_status="RUNNING" if up else None,
                      replicas=replicas if (up if controller is None else controller) else None,
                      nodes_alive=nodes if nodes is not None else ({"zone-a": 1, "zone-b": 1, "zone-c": 1} if up else None))


def samples(start, end, period=0.5, **kw):
    out, t = [], start
    while t < end - 1e-9:
        out.append(sample(round(t, 4), **kw))
        t += period
    return out


def fault_of(smp, inject_t=10, end_t=40):
    r = run(every(0, end_t), [mark(rec.INJECT_START, inject_t, scope="head", zones=())], end_t)
    r.samples = sorted(smp, key=lambda s: s.t_ns)
    return analysis.analyse(r, analysis.SteadyState(window_s=2.0, min_success_ratio=1.0))["faults"][0]


def test_never_lost_is_a_zero_outage_and_full_capacity():
    f = fault_of(samples(0, 40))
    cp, cap = f["control_plane"], f["capacity"]
    assert cp["time_to_loss_s"] is None and cp["outage_s"] == 0.0 and cp["time_to_restored_s"] == 0.0
    assert cp["resolution_s"] == pytest.approx(0.5)
    assert cap["target_replicas"] == 3 and cap["min_replicas"] == 3 and cap["min_ratio"] == 1.0
    assert cap["time_to_lost_s"] is None and cap["time_to_restored_s"] == 0.0
    assert cap["nodes_min_alive"] == 3
    assert not [k for k in f["unmeasurable"] if k.startswith(("control_plane", "capacity"))]


def test_head_outage_loss_and_restore_follow_the_samples():
    # down from 10.2 s (the first sample after the kill at 10.0 s... the kill is at 10, the sample at 10.0 is up)
    smp = samples(0, 10.5) + samples(10.5, 31, up=False) + samples(31, 40)
    f = fault_of(smp)
    cp = f["control_plane"]
    assert cp["time_to_loss_s"] == pytest.approx(0.5)
    assert cp["time_to_restored_s"] == pytest.approx(21.0)
    assert cp["outage_s"] == pytest.approx(20.5)
    cap = f["capacity"]  # the controller answered nothing while down: those samples say nothing
    assert cap["time_to_lost_s"] is None and cap["time_to_restored_s"] == 0.0
    r = {x["bound"]: x for x in bounds.check({"faults": [f]}, {"max_control_plane_outage_s": 10})}
    assert r["max_control_plane_outage_s"]["met"] is False and r["max_control_plane_outage_s"]["value"] == 20.5


def test_lost_and_never_restored_in_the_window():
    f = fault_of(samples(0, 10.5) + samples(10.5, 40, up=False))
    cp = f["control_plane"]
    assert cp["time_to_loss_s"] == pytest.approx(0.5)
    assert cp["time_to_restored_s"] is None and cp["outage_s"] is None
    assert "control_plane.outage_s" not in f["unmeasurable"]  # never restored: not unmeasurable
    assert "capacity.time_to_restored_s" in f["unmeasurable"]  # the controller never answered
    r = bounds.check({"faults": [f]}, {"max_control_plane_outage_s": 100, "max_time_to_capacity_restored_s": 100})
    assert [x["status"] for x in r] == [bounds.VIOLATED, bounds.UNMEASURABLE]


def test_flapping_control_plane_restores_after_the_last_loss():
    smp = samples(0, 12) + samples(12, 14, up=False) + samples(14, 20) + samples(20, 22, up=False) + samples(22, 40)
    cp = fault_of(smp)["control_plane"]
    assert cp["time_to_loss_s"] == pytest.approx(2.0)
    assert cp["time_to_restored_s"] == pytest.approx(12.0)
    assert cp["outage_s"] == pytest.approx(10.0)  # the span of the incident, relapse included
    assert cp["losses"] == 2 and cp["blips"] == 0


def test_lone_failed_samples_are_blips_not_an_outage():
    """The dashboard's GCS check allows the GCS 0.1 s: one failed sample on a busy machine is a blip.
    Measured during a rolling upgrade (2026-12-03): lone 503s at 3.7 s and 18.4 s read as a 15.3 s outage
    under the old definition."""
    smp = samples(0, 13.5) + samples(13.5, 14, up=False) + samples(14, 28.5) + samples(28.5, 29, up=False) \
        + samples(29, 40)
    cp = fault_of(smp)["control_plane"]
    assert cp["time_to_loss_s"] is None and cp["outage_s"] == 0.0 and cp["time_to_restored_s"] == 0.0
    assert cp["blips"] == 2 and cp["losses"] == 0
    # two failed samples in a row are a loss (1 s at 0.5 s): the edge
    smp = samples(0, 13.5) + samples(13.5, 14.5, up=False) + samples(14.5, 40)
    cp = fault_of(smp)["control_plane"]
    assert cp["time_to_loss_s"] == pytest.approx(3.5) and cp["outage_s"] == pytest.approx(1.0)
    assert cp["losses"] == 1 and cp["blips"] == 0
    # a lone failed sample that ends the window is not known to be over: it counts
    cp = fault_of(samples(0, 39.5) + samples(39.5, 40, up=False))["control_plane"]
    assert cp["time_to_loss_s"] == pytest.approx(29.5) and cp["time_to_restored_s"] is None


def test_capacity_lost_in_a_zone_and_restored_when_its_replica_runs_again():
    short = {"StreamTarget": {"zone-a": 1, "zone-c": 1}}
    smp = (samples(0, 10.5) + samples(10.5, 35, replicas=short, nodes={"zone-a": 1, "zone-b": 0, "zone-c": 1})
           + samples(35, 40))
    cap = fault_of(smp)["capacity"]
    assert cap["time_to_lost_s"] == pytest.approx(0.5)
    assert cap["time_to_restored_s"] == pytest.approx(25.0)
    assert cap["min_replicas"] == 2 and cap["min_ratio"] == pytest.approx(0.6667, abs=1e-4)
    assert cap["nodes_min_alive"] == 2 and cap["nodes_min_alive_per_zone"]["zone-b"] == 0
    r = bounds.check({"faults": [{**fault_of(smp)}]}, {"min_capacity_ratio": 0.9, "max_time_to_capacity_restored_s": 30})
    assert [x["met"] for x in r] == [False, True]


def test_a_replica_moved_to_another_zone_is_not_capacity_restored():
    moved = {"StreamTarget": {"zone-a": 2, "zone-c": 1}}  # three replicas, but none in zone-b
    cap = fault_of(samples(0, 10.5) + samples(10.5, 40, replicas=moved))["capacity"]
    assert cap["min_replicas"] == 3 and cap["time_to_lost_s"] == pytest.approx(0.5)
    assert cap["time_to_restored_s"] is None


def test_missing_samples_make_both_planes_unmeasurable_not_zero():
    f = fault_of([])
    assert f["control_plane"]["outage_s"] is None and f["capacity"]["min_replicas"] is None
    assert "not sampled" in f["unmeasurable"]["control_plane.outage_s"]
    assert "not sampled" in f["unmeasurable"]["capacity.time_to_restored_s"]
    r = bounds.check({"faults": [f]}, {"max_control_plane_outage_s": 1, "min_capacity_ratio": 0.5})
    assert [x["status"] for x in r] == [bounds.UNMEASURABLE, bounds.UNMEASURABLE]
    # samples only after the injection: no baseline, no target
    f = fault_of(samples(10.5, 40))
    assert "no baseline" in f["unmeasurable"]["capacity.min_ratio"]
    assert f["control_plane"]["outage_s"] == 0.0


def test_samples_round_trip_through_the_records_file(tmp_path):
    ev = rec.Events()
    w = rec.RecordWriter(tmp_path / "r.ndjson").attach(ev)
    smp = samples(0, 2) + [sample(2, up=False)]
    for s in smp:
        ev.emit(ev.sample_taken, s)
    w.close()
    back = rec.read(tmp_path / "r.ndjson")
    assert back.samples == smp and back.torn_lines == 0


def test_sampler_thread_records_every_tick_even_when_the_observation_fails():
    import time

    from chaos.system.sampler import Sampler

    ev, seen = rec.Events(), []
    ev.sample_taken.append(seen.append)
    calls = {"n": 0}

    def observe(timeout):
        calls["n"] += 1
        if calls["n"] % 2:
            raise TimeoutError("dashboard did not answer")
        return sample(0)

    s = Sampler(observe, ev, period_s=0.02, max_samples=10)
    s.start()
    deadline = time.monotonic() + 5
    while s.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert len(seen) == 10
    failed = [x for x in seen if not x.control_up]
    assert len(failed) == 5 and all("TimeoutError" in x.errors["sampler"] for x in failed)


def test_resolution_is_the_median_gap():
    assert planes.resolution(samples(0, 5, period=0.25)) == pytest.approx(0.25)
    assert planes.resolution([]) is None


def test_observe_dashboard_over_http_reads_each_probe_and_says_why_one_did_not_answer():
    """Against a loopback HTTP server standing in for the dashboard: the GCS answers 503 (down),
    the Serve API answers, the node table times out."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from chaos.system import sampler

    details = {"applications": {"llm": {"status": "DEPLOYING", "deployments": {
        "StreamTarget": {"replicas": [{"state": "RUNNING", "node_ip": "127.0.0.3"},
                                      {"state": "RUNNING", "node_ip": "127.0.0.4"},
                                      {"state": "STOPPING", "node_ip": "127.0.0.5"}]}}}}}
    stop = threading.Event()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path == "/api/gcs_healthz":
                self.send_response(503)
                self.end_headers()
            elif self.path == "/api/serve/applications/":
                body = json.dumps(details).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                stop.wait(3)  # the node table hangs past the probe's timeout

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        zone_of_ip = {"127.0.0.3": "zone-a", "127.0.0.4": "zone-b", "127.0.0.5": "zone-c"}
        smp = sampler.observe_dashboard(f"http://127.0.0.1:{srv.server_address[1]}", zone_of_ip, "llm", timeout=0.5)
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()
    assert smp.gcs_ok is False and "503" in smp.errors["gcs"]
    assert smp.controller_ok is True and smp.app_status == "DEPLOYING"
    assert smp.replicas == {"StreamTarget": {"zone-a": 1, "zone-b": 1}}
    assert smp.nodes_alive is None and "nodes" in smp.errors
    assert smp.control_up is False and smp.took_s < 2.0


def test_replicas_recovering_after_a_controller_restart_are_unknown_not_lost(monkeypatch):
    """Seen after a Redis loss restarted the head: the controller answers with the app DEPLOYING and
    its live replicas RECOVERING for ~1.6 s. Capacity is unknown then, not 0."""
    from chaos.system import sampler

    rows = [{"state": "RECOVERING", "node_ip": "127.0.0.3"}, {"state": "RUNNING", "node_ip": "127.0.0.4"}]
    details = {"applications": {"llm": {"status": "DEPLOYING", "deployments": {
        "StreamTarget": {"replicas": rows}}}}}
    fake_dashboard(monkeypatch, serve=details)
    ok, status, replicas, why = sampler.serve_state("http://d", 1.0, {"127.0.0.3": "zone-a", "127.0.0.4": "zone-b"},
                                                    "llm")
    assert ok and status == "DEPLOYING" and replicas is None and "RECOVERING" in why
    unknown = [sample(t, replicas=None, controller=True) for t in (20.0, 20.5, 21.0)]
    smp = samples(0, 20) + unknown + samples(21.5, 40)
    cap = fault_of(smp)["capacity"]
    assert cap["min_replicas"] == 3 and cap["time_to_lost_s"] is None and cap["time_to_restored_s"] == 0.0
    # the same samples read as zero replicas would have been a loss: the test is not vacuous
    zero = [sample(t, replicas={"StreamTarget": {}}) for t in (20.0, 20.5, 21.0)]
    cap = fault_of(samples(0, 20) + zero + samples(21.5, 40))["capacity"]
    assert cap["min_replicas"] == 0 and cap["time_to_lost_s"] == pytest.approx(10.0)


def test_an_app_listed_without_deployments_is_being_built_unknown_not_zero(monkeypatch):
    """An upgrade's new code version: for ~3-4 s the controller lists the app (DEPLOYING) with no
    deployment while the old replicas serve (measured on Ray 2.60): capacity unknown, not 0; an app
    that is not listed at all (deleted) has none."""
    from chaos.system import sampler

    ids: dict = {}
    dashboard = fake_dashboard(monkeypatch, serve={"applications": {"llm": {"status": "DEPLOYING", "deployments": {}}}})
    ok, status, replicas, why = sampler.serve_state("http://d", 1.0, {}, "llm", ids)
    assert ok and status == "DEPLOYING" and replicas is None and "lists no deployment" in why and ids == {}
    dashboard.serve = {"applications": {}}
    assert sampler.serve_state("http://d", 1.0, {}, "llm") == (True, None, {}, None)
    rows = [{"state": "RUNNING", "node_ip": "127.0.0.3", "replica_id": "r1"},
            {"state": "STOPPING", "node_ip": "127.0.0.4", "replica_id": "r0"}]
    dashboard.serve = {"applications": {"llm": {"status": "DEPLOYING", "deployments": {
        "StreamTarget": {"replicas": rows}}}}}
    ids = {}
    ok, status, replicas, why = sampler.serve_state("http://d", 1.0, {"127.0.0.3": "zone-a"}, "llm", ids)
    assert replicas == {"StreamTarget": {"zone-a": 1}} and ids == {"StreamTarget": ["r1"]} and why is None


def test_a_later_fault_is_measured_against_the_placement_before_the_first():
    """zone-b's replica lost at the first fault (10 s) and never back; a second fault at 20 s must not
    take the degraded placement as its target."""
    short = {"StreamTarget": {"zone-a": 1, "zone-c": 1}}
    r = run(every(0, 40), [mark(rec.INJECT_START, 10, "f1"), mark(rec.INJECT_START, 20, "f2", scope="node",
                                                                       zones=("a",))], 40)
    r.samples = samples(0, 10.5) + samples(10.5, 40, replicas=short)
    f1, f2 = analysis.analyse(r, analysis.SteadyState(window_s=2.0, min_success_ratio=1.0))["faults"]
    assert f2["capacity"]["target_replicas"] == 3
    assert f2["capacity"]["time_to_restored_s"] is None and f2["capacity"]["min_ratio"] == pytest.approx(0.6667, abs=1e-4)


def test_a_sampling_gap_makes_both_planes_unmeasurable_not_never_down():
    f = fault_of(samples(0, 10.5))  # the sampler stopped 0.5 s after the injection
    assert f["control_plane"]["outage_s"] is None and "not observed" in f["unmeasurable"]["control_plane.outage_s"]
    assert f["capacity"]["time_to_restored_s"] is None and "not observed" in f["unmeasurable"]["capacity.time_to_restored_s"]
    f = fault_of(samples(0, 15) + samples(25, 40))  # 10 s without a sample in the middle
    assert "for 10.5 s from 4.5 s" in f["unmeasurable"]["control_plane.outage_s"]  # last sample at 14.5 s
    r = bounds.check({"faults": [f]}, {"max_control_plane_outage_s": 100})
    assert r[0]["status"] == bounds.UNMEASURABLE


def test_starting_replicas_count_once_allocated_on_a_node(monkeypatch):
    """Serve says STARTING both while a replica waits for a node (no node, no pid: e.g. its zone is
    down) and while its constructor runs on one (a vLLM engine starting): only the second is a start."""
    from chaos.system import sampler

    rows = [{"state": "RUNNING", "node_ip": "127.0.0.3", "replica_id": "r1", "node_id": "n1", "pid": 7},
            {"state": "STARTING", "replica_id": "waiting", "node_id": None, "pid": None},
            {"state": "STARTING", "node_ip": "127.0.0.4", "replica_id": "engine", "node_id": "n2", "pid": 9}]
    details = {"applications": {"llm": {"status": "RUNNING", "deployments": {
        "LLMServer": {"replicas": rows}}}}}
    fake_dashboard(monkeypatch, serve=details)
    ids, starting = {}, {}
    ok, _, replicas, _ = sampler.serve_state("http://d", 1.0, {"127.0.0.3": "zone-a"}, "llm", ids, starting)
    assert ok and ids == {"LLMServer": ["r1"]} and starting == {"LLMServer": ["engine"]}
