"""The harness against a real local HTTP server that the test kills and restarts."""

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from chaos import analysis
from chaos.recording import records as rec
from chaos.backends.local import ports
from chaos.scopes.faults import Marker
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target

from . import sse_server



def start_server(port: int) -> subprocess.Popen:
    return sse_server.start(port)


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


# ---------------------------------------------------------------- traffic like production (issue 25)
def _p99_ms(xs_ns):
    from chaos.base.stats import percentile

    return percentile([abs(x) / 1e6 for x in xs_ns], 0.99)


def _median_ms(xs_ns):
    from chaos.base.stats import percentile

    return percentile([abs(x) / 1e6 for x in xs_ns], 0.5)


# What these tests assert of the send instants is the open loop: each request leaves at its own planned instant,
# whatever the others are doing, so the median lag stays within a few milliseconds (a loop that waited on answers,
# or a schedule that drifted, would be hundreds of milliseconds to seconds late). The harness's precision (1 ms
# p99) is a speed figure: a benchmark measures it, `python bench/harness.py` (--bursts for a trace), and every run
# says its own in `arrivals.send_lag_ms`; a timed assertion on a shared 2-core machine failed the project's CI
# (2026-12-06: p99 3.0, 37.8 and 2.0 ms in three attempts, load 1.4-3, without the real-time class), so the p99
# is printed here, not asserted.
OPEN_LOOP_MEDIAN_MS = 5.0


@pytest.mark.timing
def test_two_workers_gamma_half_merge_from_both_with_the_burstiness_and_analyse_again(tmp_path):
    import json
    import shutil

    import jsonschema

    from chaos.core import summary as summary_mod
    from chaos.load import arrivals
    from chaos.load.workers import WorkerPool
    from chaos.schemas import __file__ as schemas_init

    port = ports.free_port()
    server = start_server(port)
    events = rec.Events()
    path = tmp_path / "records.ndjson"
    writer = rec.RecordWriter(path).attach(events)
    marker = Marker(events)
    defs = analysis.Definitions(analysis.SteadyState(window_s=1.0, min_success_ratio=0.9), analysis.SLO(), "affected")
    bounds = {"max_failed_requests": 1000}
    shape = LoadShape(arrival="gamma", burstiness=0.5, rate=60, duration_s=15, warmup_s=1, timeout_s=3,
                      connect_timeout_s=1, seed=2, workers=2)
    pool = WorkerPool([Target("local", f"http://127.0.0.1:{port}", zone="z1")], shape, events,
                      header_extra=summary_mod.header_block("live", "node", defs, bounds, "test", "stream"),
                      records_dir=tmp_path)
    try:
        pool.start()
        time.sleep(6)
        assert pool.running and "w0" in pool.progress_line() and "w1" in pool.progress_line()
        with marker.inject("node", "local", ["z1"]) as fault:
            server.kill()
            server.wait()
        time.sleep(1)
        with marker.heal(fault):
            server = start_server(port)
        pool.join(timeout=60)
    finally:
        pool.stop()
        server.kill()
        server.wait()
        writer.close()
    shutil.copy(path, tmp_path / "as-written.ndjson")
    assert rec.order_by_send_time(path) == pool.footer["sent"]
    back = rec.read(path)
    assert not back.partial and back.torn_lines == 0
    # lines from both workers, every planned request sent once, the merge in send order
    assert {r.worker for r in back.requests} == {0, 1}
    assert sorted(r.id for r in back.requests) == list(range(back.header["workers"]["planned"]))
    written = [json.loads(x) for x in path.read_text().splitlines()]
    sent = [x["sent_ns"] for x in written if x["kind"] == "request"]
    assert sent == sorted(sent)
    for w in (0, 1):
        own = [r for _, r in rec.iter_lines(tmp_path / "workers" / f"worker-{w}.ndjson") if r["kind"] == "request"]
        assert sorted(r["id"] for r in own) == sorted(r.id for r in back.requests if r.worker == w)
        assert all(r["id"] % 2 == w for r in own)  # dealt round-robin
    # the merged arrivals keep the burstiness: CV of the actual send instants
    cv = arrivals.coefficient_of_variation([r.sent_ns / 1e9 for r in back.requests])
    assert abs(cv - 2 ** 0.5) <= 0.15, cv
    lags = [r.sent_ns - r.planned_ns for r in back.requests]
    print(f"two workers, gamma 0.5: send lag p50 {_median_ms(lags):.3f} ms, p99 {_p99_ms(lags):.3f} ms, "
          f"load average {os.getloadavg()[0]:.2f}")
    assert _median_ms(lags) < OPEN_LOOP_MEDIAN_MS
    # the clocks, at the start and at the end, with their uncertainty
    for c in back.header["workers"]["clock_start"] + [w["clock_end"] for w in back.footer["workers"]]:
        assert 0 < c["uncertainty_ns"] < 50_000_000 and abs(c["wall_offset_ns"]) <= c["uncertainty_ns"] + 1_000_000
    assert [w["sent"] for w in back.footer["workers"]] == [sum(1 for r in back.requests if r.worker == w)
                                                           for w in (0, 1)]
    v = jsonschema.Draft202012Validator(json.loads((Path(schemas_init).parent / "records-line.schema.json").read_text()))
    for obj in written:
        v.validate(obj)
    # availproof analyse re-derives the same figures from the merged file
    f = summary_mod.derive(rec.read(tmp_path / "as-written.ndjson"), defs, bounds, "test")
    again, _ = summary_mod.reanalyse(tmp_path)
    assert again["faults"] == f["faults"] and again["bounds"] == f["bounds"]
    assert again["faults"][0]["affected"]["failed_total"] > 0
    assert again["arrivals"] == f["arrivals"] and set(again["arrivals"]["per_worker"]) == {"0", "1"}
    assert abs(again["arrivals"]["interarrival_cv"] - 2 ** 0.5) <= 0.15


@contextlib.contextmanager
def _realtime(priority: int = 10):
    """This thread (and the threads and the server process it starts) in the round-robin real-time class at
    ``priority`` when it may (root with CAP_SYS_NICE), restored after; elsewhere unchanged: the figures printed are
    then the harness's own (on a 2-core machine that other work held at load 4-8 the kernel woke the replay up to
    1.3-3 ms late at p99 at normal priority; nice -10 did not help, SCHED_RR did, 2026-12-06)."""
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(priority))
    except PermissionError:
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, before[0], before[1])


def _replay(tmp_path, rows, attempt):
    from chaos.load import trace

    trace.write(rows, tmp_path / "t.jsonl")
    port = ports.free_port()
    server = start_server(port)
    events = rec.Events()
    path = tmp_path / f"records-{attempt}.ndjson"
    writer = rec.RecordWriter(path).attach(events)
    shape = LoadShape(trace=str(tmp_path / "t.jsonl"), trace_speed=2.0, duration_s=60, warmup_s=0, timeout_s=5,
                      connect_timeout_s=1, route="completions")
    try:
        LoadRun([Target("local", f"http://127.0.0.1:{port}")], shape, events).run()
    finally:
        server.kill()
        server.wait()
        writer.close()
    return rec.read(path)


@pytest.mark.timing
def test_a_trace_replays_open_loop_at_the_traces_instants(tmp_path):
    from chaos.load import trace

    rows = trace.generate(300, rate=30, seed=4, burstiness=1.0, input_median=60, input_max=400, output_median=8,
                          output_max=20)
    want_ns = [round(row["timestamp"] / 2.0 * 1e6) for row in rows]  # ms, replayed twice as fast
    with _realtime():
        back = _replay(tmp_path, rows, 0)
    assert back.footer["reason"] == "duration" and len(back.requests) == 300 and all(r.ok for r in back.requests)
    t0 = back.header["started_ns"]
    by_id = sorted(back.requests, key=lambda r: r.id)
    assert [r.planned_ns - t0 for r in by_id] == pytest.approx(want_ns, abs=1000)  # the trace's instants, planned
    lags = [r.sent_ns - (t0 + w) for r, w in zip(by_id, want_ns)]
    print(f"trace replay: send lag p50 {_median_ms(lags):.3f} ms, p99 {_p99_ms(lags):.3f} ms, load average "
          f"{os.getloadavg()[0]:.2f}, scheduling class {os.sched_getscheduler(0)}")
    # sent at them: the first half and the last half alike (a lag that grew would be a loop falling behind)
    assert _median_ms(lags[:150]) < OPEN_LOOP_MEDIAN_MS and _median_ms(lags[150:]) < OPEN_LOOP_MEDIAN_MS, lags
    assert [(r.prompt_len, r.max_tokens) for r in by_id] == [(row["input_length"], row["output_length"])
                                                             for row in rows]  # none beyond 512 here
    assert back.header["trace"]["requests"] == 300 and back.header["trace"]["speed"] == 2.0
