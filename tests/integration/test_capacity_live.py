"""The capacity sweep (chaos.load.capacity) with the real load harness against a loopback server that saturates
at a known rate: the sustained rate it finds is within one step of the knee. No Ray."""

import json
import subprocess
import time

from jsonschema import Draft202012Validator

from chaos.load import capacity, utilization
from chaos.recording import records as rec
from chaos import schemas
from chaos.analysis import SLO
from chaos.backends.local import ports
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target

from . import sse_server

SERVICE_S = 0.08  # one request at a time: the knee is 1 / 0.08 = 12.5 req/s


def start_server(port: int) -> subprocess.Popen:
    return sse_server.start(port, str(SERVICE_S))


def test_the_sweep_finds_the_knee_of_a_server_that_serves_one_request_at_a_time(tmp_path):
    port = ports.free_port()
    server = start_server(port)
    events = rec.Events()
    writer = rec.RecordWriter(tmp_path / "records.ndjson").attach(events)
    targets = [Target("local", f"http://127.0.0.1:{port}", zone="z1")]

    def run_step(shape, index):
        got = []
        events.request_done.append(got.append)
        try:
            step = {"capacity_step": {"index": index, "rate_rps": shape.rate}}
            LoadRun(targets, shape, events, header_extra=step).run()
        finally:
            events.request_done.remove(got.append)
        return got

    # constant arrivals: below the knee no request waits for another; above it the queue grows each second
    shape = LoadShape(arrival="constant", timeout_s=3, connect_timeout_s=1, max_tokens=(3, 3), seed=5)
    slo = SLO(ttft_s=0.5, itl_s=None)
    plan = capacity.SweepPlan(start_rps=2, factor=2, max_rps=20, step_s=3, warmup_s=1)
    t0 = time.monotonic()
    try:
        steps, decision = capacity.sweep(shape, slo, plan, run_step)
    finally:
        server.kill()
        server.wait()
        writer.close()
    wall = time.monotonic() - t0
    print(capacity.table(steps, decision), f"\n{wall:.1f} s")

    knee = 1 / SERVICE_S
    assert decision.stop == capacity.SLO_BROKE, decision.reason
    assert knee / plan.factor <= decision.sustained_rps <= knee  # within one step of the knee, below it
    assert decision.sustained_rps == 8 and [s.rate_offered for s in steps] == [2, 4, 8, 16]
    assert all(j.sustained for j in decision.judged[:-1]) and not decision.judged[-1].within_slo
    for s in steps[:-1]:  # below the knee: every request on time, the rate achieved the rate offered
        assert s.attainment == 1.0 and s.failed == 0 and abs(s.rate_achieved - s.rate_offered) <= 0.5
    assert steps[-1].p95_ttft_s > slo.ttft_s
    assert wall < 30, wall

    # capacity.json as `availproof capacity` writes it, valid against its schema, and a run's rate from it
    doc = capacity.document(steps, decision, plan, slo, shape,
                            {"app": "stream", "front": "direct", "topology": "loopback-server"})
    Draft202012Validator(schemas.schema(schemas.CAPACITY)).validate(doc)
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(doc))
    run_shape = LoadShape(utilization=0.5, capacity="capacity.json")
    rate_from = utilization.derive(run_shape, "stream", experiment_file=tmp_path / "exp.json")
    assert rate_from["rate_rps"] == 4.0 and rate_from["sustained_rps"] == 8

    # the records: one header per step, every request of every step
    headers = [o for _, o in rec.iter_lines(tmp_path / "records.ndjson") if o and o.get("kind") == "run"]
    assert [h["capacity_step"]["rate_rps"] for h in headers] == [2, 4, 8, 16]
    back = rec.read(tmp_path / "records.ndjson")
    assert sum(r.phase == rec.MEASURE for r in back.requests) == sum(s.sent for s in steps)
