"""The harness against a real local HTTP server that the test kills and restarts."""

import subprocess
import sys
import time
from pathlib import Path

import httpx

from chaos import analysis, records as rec
from chaos.backends.local import ports
from chaos.faults import Marker
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target

SERVER = Path(__file__).with_name("sse_server.py")


def start_server(port: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(SERVER), "127.0.0.1", str(port)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}, timeout=1)
            return p
        except httpx.HTTPError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("test server did not start")


def test_kill_and_restart_target_failed_count_matches_records(tmp_path):
    port = ports.free_port()
    server = start_server(port)
    events = rec.Events()
    writer = rec.RecordWriter(tmp_path / "records.ndjson").attach(events)
    marker = Marker(events)
    shape = LoadShape(rate=40, duration_s=16, warmup_s=1, timeout_s=3, connect_timeout_s=1, seed=3)
    run = LoadRun([Target("local", f"http://127.0.0.1:{port}", zone="z1")], shape, events).start()
    try:
        time.sleep(3)
        with marker.inject("node", "local", ["z1"]) as fault:
            server.kill()
            server.wait()
        time.sleep(2)
        with marker.heal(fault):
            server = start_server(port)
        run.join(timeout=30)
    finally:
        run.stop()
        server.kill()
        server.wait()
        writer.close()
    back = rec.read(tmp_path / "records.ndjson")
    assert not back.partial and back.torn_lines == 0
    assert len(back.requests) == back.footer["sent"] == run.counts["sent"]
    s = analysis.analyse(back, analysis.SteadyState(window_s=1.0, min_success_ratio=0.9))
    f = s["faults"][0]
    inject = f["inject_ns"]
    in_window = [r for r in back.requests if r.phase == "measure" and not r.ok
                 and (r.sent_ns >= inject or r.sent_ns + int(r.e2e_s * 1e9) >= inject)]
    assert f["failed"]["total"] == len(in_window) > 0
    assert f["failed"]["by_class"].get(rec.CONNECT_REFUSED, 0) > 0
    # nothing can succeed while the server is dead; once it is back, requests succeed again
    a = f["affected"]
    assert a["basis"] == "fault_domain" and a["failed_total"] == f["failed"]["total"]
    assert a["time_to_first_success_s"] >= f["heal_start_s"] - 0.1
    assert a["recovered"] and a["time_to_steady_state_s"] >= a["time_to_impact_s"]
    assert 0 <= a["time_to_impact_s"] <= a["time_to_detect_s"] < 1.0
    # requests sent on schedule whether or not earlier ones finished: rate x duration
    assert abs(len(back.requests) - 40 * 16) < 40 * 16 * 0.2
