"""Traffic like production (issue 25): gamma arrivals, stages, lengths, trace replay, dealing to workers, the merge."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.core import experiment
from chaos.recording import records as rec
from chaos.base.errors import UsageError
from chaos.load import arrivals, lengths, trace
from chaos.load.workers import clock_offset, deal
from chaos.load.workload import LoadShape, Router, Target, plan
from chaos.schemas import __file__ as schemas_init

REPO = Path(__file__).resolve().parents[2]
TARGETS = [Target("a", "http://127.0.0.1:1", "zone-a"), Target("b", "http://127.0.0.1:2", "zone-b")]


def _plan(**kw):
    kw.setdefault("warmup_s", 0)
    return list(plan(LoadShape(**kw), Router(list(TARGETS))))


def _gaps(xs):
    return [b - a for a, b in zip(xs, xs[1:])]


# ---------------------------------------------------------------- arrivals
def test_gamma_burstiness_half_has_cv_sqrt2_and_the_stated_rate():
    reqs = _plan(arrival="gamma", burstiness=0.5, rate=100, duration_s=60, seed=11, max_requests=100_000)
    offs = [r.offset_s for r in reqs]
    assert arrivals.coefficient_of_variation(offs) == pytest.approx(math.sqrt(1 / 0.5), abs=0.15)
    assert len(offs) == pytest.approx(100 * 60, rel=0.1)  # the mean gap is 1 / rate
    assert offs == sorted(offs) and offs[0] == 0.0 and offs[-1] < 60


@pytest.mark.parametrize("k, cv", [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0)])
def test_gamma_cv_is_one_over_sqrt_k(k, cv):
    offs = list(arrivals.offsets("gamma", 50, 200, seed=3, burstiness=k))
    assert arrivals.coefficient_of_variation(offs) == pytest.approx(cv, rel=0.12)


def test_gamma_gap_is_vllm_bench_serves_draw():
    # vllm/benchmarks/serve.py: theta = 1 / (rate * burstiness); np.random.gamma(shape=burstiness, scale=theta)
    rng, ref = random.Random(5), random.Random(5)
    for _ in range(50):
        assert arrivals.gap(rng, "gamma", 40, 0.5) == ref.gammavariate(0.5, 1.0 / (40 * 0.5))


def test_schedules_are_seeded_and_reproducible():
    a = _plan(arrival="gamma", burstiness=0.5, rate=80, duration_s=10, seed=4)
    b = _plan(arrival="gamma", burstiness=0.5, rate=80, duration_s=10, seed=4)
    c = _plan(arrival="gamma", burstiness=0.5, rate=80, duration_s=10, seed=5)
    key = [(r.offset_s, r.target.name, r.prompt, r.max_tokens) for r in a]
    assert key == [(r.offset_s, r.target.name, r.prompt, r.max_tokens) for r in b]
    assert key != [(r.offset_s, r.target.name, r.prompt, r.max_tokens) for r in c]


def test_poisson_and_constant_schedules_are_unchanged():
    # what the harness drew before gamma and stages existed: the experiments' schedules stay the same
    rng = random.Random(7)
    t, want = 0.0, []
    while t < 20:
        want.append(t)
        t += rng.expovariate(8)
    assert [r.offset_s for r in _plan(rate=8, duration_s=20)] == want
    assert [r.offset_s for r in _plan(arrival="constant", rate=4, duration_s=2)] == [i / 4 for i in range(8)]


def test_stages_ramp_rates_and_end_with_the_last_stage():
    stages = [{"rate": 20, "duration_s": 10}, {"rate": 0, "duration_s": 5}, {"rate": 100, "duration_s": 10}]
    offs = [r.offset_s for r in _plan(arrival="poisson", stages=stages, duration_s=100, seed=2, max_requests=100_000)]
    first = [t for t in offs if t < 10]
    pause = [t for t in offs if 10 <= t < 15]
    last = [t for t in offs if 15 <= t]
    assert len(first) == pytest.approx(200, rel=0.2) and pause == [] and len(last) == pytest.approx(1000, rel=0.1)
    assert offs[-1] < 25


def test_stages_keep_the_burstiness_inside_a_stage_and_stop_at_duration():
    stages = [{"rate": 50, "duration_s": 40}, {"rate": 150, "duration_s": 40}]
    offs = [r.offset_s for r in _plan(arrival="gamma", burstiness=0.5, stages=stages, duration_s=60, seed=9,
                                      max_requests=100_000)]
    assert offs[-1] < 60
    for lo, hi in ((0, 40), (40, 60)):
        assert arrivals.coefficient_of_variation([t for t in offs if lo <= t < hi]) == pytest.approx(1.41, abs=0.15)
    constant = [r.offset_s for r in _plan(arrival="constant", stages=[{"rate": 10, "duration_s": 1},
                                                                         {"rate": 20, "duration_s": 1}])]
    assert constant[:9] == pytest.approx([0.1 * i for i in range(1, 10)])  # one gap after 0, then 1 / rate
    assert _gaps([t for t in constant if t > 1.01]) == pytest.approx([0.05] * len(_gaps([t for t in constant
                                                                                        if t > 1.01])))
    assert 28 <= len(constant) <= 30


@pytest.mark.parametrize("load, needle", [
    ({"arrival": "gamma", "burstiness": 0}, "burstiness"),
    ({"stages": [{"rate": 0, "duration_s": 5}]}, "at least one stage"),
    ({"stages": [{"rate": 5}]}, "stages[0]"),
    ({"workers": 0}, "workers"),
    ({"mode": "closed", "concurrency": 2, "workers": 3}, "concurrency"),
])
def test_bad_arrivals_and_workers_are_refused_in_one_line(load, needle):
    with pytest.raises(UsageError) as e:
        LoadShape.from_dict(load)
    assert needle in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------- lengths
def test_length_distributions_draw_what_they_say(tmp_path):
    rng = random.Random(1)
    assert {lengths.sampler({"dist": "fixed", "value": 7}, rng)() for _ in range(20)} == {7}
    u = [lengths.sampler({"dist": "uniform", "min": 3, "max": 5}, rng)() for _ in range(300)]
    assert set(u) == {3, 4, 5}
    n = [lengths.sampler({"dist": "normal", "mean": 100, "std": 40, "min": 50, "max": 120}, rng)() for _ in range(2000)]
    assert min(n) == 50 and max(n) == 120 and 90 < sum(n) / len(n) < 100  # clipped at both ends
    (tmp_path / "l.txt").write_text("10\n20\n\n30\n")
    f = [lengths.sampler({"dist": "file", "path": str(tmp_path / "l.txt")}, rng)() for _ in range(200)]
    assert set(f) == {10, 20, 30}
    (tmp_path / "t.jsonl").write_text('{"input_length": 4, "output_length": 9}\n')
    assert lengths.sampler({"dist": "file", "path": str(tmp_path / "t.jsonl"), "field": "output_length"}, rng)() == 9


@pytest.mark.parametrize("spec, needle", [
    ({"dist": "fixed"}, "needs value"),
    ({"dist": "uniform", "min": 9, "max": 3}, "min must be <= max"),
    ({"dist": "normal", "mean": 5, "std": 1, "value": 3}, "value is not a field"),
    ({"dist": "file", "path": "/nonexistent/lengths.txt"}, "cannot be read"),
    ({"dist": "poisson"}, "dist must be one of"),
])
def test_bad_lengths_are_refused_naming_the_field(spec, needle):
    problems = lengths.check(spec, "prompt_len")
    assert problems and needle in problems[0] and problems[0].startswith("prompt_len")


def test_planned_lengths_are_tokens_of_the_tiny_model_and_recorded():
    reqs = _plan(prompt_len={"dist": "uniform", "min": 20, "max": 40}, output_len={"dist": "fixed", "value": 30},
                 rate=50, duration_s=2)
    for r in reqs:
        assert 20 <= r.prompt_len <= 40 and len(r.prompt.split()) == r.prompt_len and r.max_tokens == 30
        assert set(r.prompt.split()) <= set(lengths.TOKEN_WORDS) and r.clipped is None
    assert all(r.prompt_len is None and r.clipped is None for r in _plan(rate=50, duration_s=2))  # prompt_words


def test_clipping_to_the_models_context_is_stated_and_counted():
    assert lengths.clip(8000, 300, 504, "prompt") == (204, 300, "prompt")
    assert lengths.clip(8000, 600, 504, "prompt") == (1, 503, "prompt+output")
    assert lengths.clip(100, 600, 504, "output") == (100, 404, "output")
    assert lengths.clip(8000, 300, 504, "output") == (503, 1, "prompt+output")
    assert lengths.clip(None, 600, 504, "prompt") == (None, 504, "output")
    assert lengths.clip(200, 300, 504, "prompt") == (200, 300, None)
    reqs = _plan(route="chat", prompt_len={"dist": "fixed", "value": 500}, output_len={"dist": "fixed", "value": 100},
                 rate=10, duration_s=1)
    assert {(r.prompt_len, r.max_tokens, r.clipped) for r in reqs} == {(404, 100, "prompt")}  # 512 - 8 of template
    comp = _plan(route="completions", prompt_len={"dist": "fixed", "value": 500},
                 output_len={"dist": "fixed", "value": 100}, rate=10, duration_s=1)
    assert {r.prompt_len for r in comp} == {412}


def test_the_model_limit_is_the_tiny_models():
    from serve_apps.config import LLMOptions

    assert LoadShape().max_model_len == LLMOptions().max_model_len == 512


# ---------------------------------------------------------------- traces
TRACE = "\n".join(json.dumps(r) for r in [
    {"timestamp": 1000, "input_length": 30, "output_length": 10, "hash_ids": [0]},
    {"timestamp": 1500, "input_length": 900, "output_length": 40, "hash_ids": [0, 1]},
    {"timestamp": 1250, "input_length": 12, "output_length": 700},
    {"timestamp": 2000, "input_length": 20, "output_length": 5, "hash_ids": [2]},
]) + "\n"


@pytest.fixture
def trace_file(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(TRACE)
    return str(p)


def test_trace_parsing_sorts_by_time_and_reads_hash_ids(trace_file):
    t = trace.load(trace_file)
    assert [r.timestamp_ms for r in t.rows] == [1000, 1250, 1500, 2000]
    assert t.rows[2].hash_ids == (0, 1) and t.rows[1].hash_ids == ()
    assert t.describe()["requests"] == 4 and t.span_s == 1.0 and len(t.sha256) == 64


@pytest.mark.parametrize("line, needle", [
    ('{"timestamp": 0, "input_length": 3}', "needs output_length"),
    ('{"timestamp": -1, "input_length": 3, "output_length": 1}', "timestamp"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 1}', "input_length"),
    ('{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": ["x"]}', "hash_ids"),
    ('[1, 2]', "not a JSON object"),
    ('{"timestamp": 0,', "not JSON"),
])
def test_bad_trace_lines_name_the_line(line, needle):
    with pytest.raises(ValueError) as e:
        trace.parse('{"timestamp": 0, "input_length": 1, "output_length": 1}\n' + line, "x.jsonl")
    assert "x.jsonl line 2" in str(e.value) and needle in str(e.value)


def test_trace_replay_scales_clips_and_stops(trace_file):
    reqs = _plan(trace=trace_file, trace_speed=2.0, route="completions", duration_s=100)
    assert [r.offset_s for r in reqs] == [0.0, 0.125, 0.25, 0.5]  # (ts - ts0) / 1000 / speed
    assert [(r.prompt_len, r.max_tokens, r.clipped) for r in reqs] == [
        (30, 10, None), (1, 511, "prompt+output"), (472, 40, "prompt"), (20, 5, None)]  # the prompt cut first
    assert [len(r.prompt.split()) for r in reqs] == [30, 1, 472, 20]
    out_first = _plan(trace=trace_file, route="completions", clip="output")
    assert [(r.prompt_len, r.max_tokens, r.clipped) for r in out_first][1:3] == [(12, 500, "output"),
                                                                                 (511, 1, "prompt+output")]


def test_trace_replay_loops_one_period_later_within_the_bounds(trace_file):
    reqs = _plan(trace=trace_file, trace_end="loop", duration_s=3.0)
    # period = span * n / (n - 1) = 1 s * 4 / 3
    assert [r.offset_s for r in reqs] == pytest.approx(
        [k * 4 / 3 + d for k in range(3) for d in (0, 0.25, 0.5, 1.0) if k * 4 / 3 + d < 3.0])
    assert [r.id for r in reqs] == list(range(len(reqs)))
    assert len(_plan(trace=trace_file, trace_end="loop", duration_s=1000, max_requests=10)) == 10


def test_shared_hash_ids_are_shared_prefixes(trace_file):
    reqs = _plan(trace=trace_file, route="completions", trace_block_tokens=16)
    a, b = reqs[0].prompt.split(), reqs[2].prompt.split()  # hash_ids [0] and [0, 1]
    assert a[:16] == b[:16] and a[16:] != b[16:32]
    other = _plan(trace=trace_file, route="completions", trace_block_tokens=16, seed=8)
    assert other[0].prompt != reqs[0].prompt  # the text is seeded


@pytest.mark.parametrize("load, needle", [
    ({"trace": "/nonexistent.jsonl"}, "cannot be read"),
    ({"trace": "T", "stages": [{"rate": 1, "duration_s": 1}]}, "remove stages"),
    ({"trace": "T", "mode": "closed"}, "mode closed"),
    ({"trace": "T", "trace_end": "again"}, "trace_end"),
])
def test_bad_trace_settings_are_refused(trace_file, load, needle):
    load = {k: (trace_file if v == "T" else v) for k, v in load.items()}
    with pytest.raises(UsageError) as e:
        LoadShape.from_dict(load)
    assert needle in str(e.value)


def test_the_shipped_example_trace_replays_and_the_generator_makes_it(tmp_path):
    shipped = REPO / "experiments" / "traces" / "example.jsonl"
    t = trace.load(str(shipped))
    assert 100 <= len(t.rows) <= 2000 and any(r.hash_ids for r in t.rows)
    reqs = _plan(trace="experiments/traces/example.jsonl", duration_s=10_000, max_requests=100_000)
    assert len(reqs) == len(t.rows) and any(r.clipped for r in reqs)
    out = tmp_path / "again.jsonl"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_trace.py"), "--out", str(out), *EXAMPLE_ARGS],
                   check=True, capture_output=True, timeout=60)
    assert out.read_bytes() == shipped.read_bytes()  # the example is what the generator makes


EXAMPLE_ARGS = ["--requests", "600", "--rate", "10", "--burstiness", "0.5", "--seed", "25"]
# README's worked example: a production-shaped trace (a log of 3 s granularity, every prompt opening with one
# shared block, prompts of 400-120,000 tokens, outputs up to 900)
PRODUCTION_ARGS = ["--requests", "450", "--rate", "3", "--granularity-ms", "3000", "--prefixes", "1",
                   "--prefix-share", "1", "--input-median", "8000", "--input-sigma", "1.0", "--input-max", "120000",
                   "--output-median", "150", "--output-sigma", "1.0", "--output-max", "900", "--seed", "7"]


def test_the_shipped_production_shaped_trace_is_what_the_readme_says_and_makes(tmp_path):
    shipped = REPO / "experiments" / "traces" / "production-like.jsonl"
    rows = trace.load(str(shipped)).rows
    stamps = [r.timestamp_ms for r in rows]
    assert len(rows) == 450 and all(t % 3000 == 0 for t in stamps) and stamps[-1] == 141_000
    assert max(stamps.count(t) for t in set(stamps)) == 21  # the largest burst: 21 requests at one instant
    assert {r.hash_ids[0] for r in rows} == {0} and max(r.output_length for r in rows) == 900
    reqs = _plan(trace="experiments/traces/production-like.jsonl", duration_s=10_000, max_requests=100_000)
    assert all(r.clipped for r in reqs) and max(r.max_tokens for r in reqs) == 503  # the tiny model's 512
    out = tmp_path / "again.jsonl"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_trace.py"), "--out", str(out), *PRODUCTION_ARGS],
                   check=True, capture_output=True, timeout=60)
    assert out.read_bytes() == shipped.read_bytes()


def test_generated_traces_have_the_stated_burstiness_and_prefixes():
    rows = trace.generate(3000, rate=20, seed=3, burstiness=0.5)
    ts = [r["timestamp"] / 1000 for r in rows]
    assert arrivals.coefficient_of_variation(ts) == pytest.approx(1.41, abs=0.15)
    firsts = [r["hash_ids"][0] for r in rows]
    assert sum(1 for h in firsts if h < 8) == pytest.approx(0.6 * 3000, rel=0.1)  # the shared prefixes
    assert all(len(r["hash_ids"]) == math.ceil(r["input_length"] / 512) for r in rows)


def test_a_coarse_granularity_makes_bursts_of_the_same_requests():
    exact = trace.generate(400, rate=4, seed=5)
    coarse = trace.generate(400, rate=4, seed=5, granularity_ms=3000)
    assert [r["timestamp"] - r["timestamp"] % 3000 for r in exact] == [r["timestamp"] for r in coarse]
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in exact] == \
        [{k: v for k, v in r.items() if k != "timestamp"} for r in coarse]  # the same requests, in bursts
    sizes = [sum(1 for r in coarse if r["timestamp"] == t) for t in {r["timestamp"] for r in coarse}]
    assert max(sizes) >= 12 and all(r["timestamp"] % 3000 == 0 for r in coarse)  # ~12 a step at 4 req/s
    with pytest.raises(ValueError):
        trace.generate(10, rate=1, granularity_ms=-1)


# ---------------------------------------------------------------- workers: dealing, merging, clocks
def test_dealing_round_robin_keeps_the_merged_schedule():
    reqs = _plan(arrival="gamma", burstiness=0.5, rate=200, duration_s=30, seed=1, max_requests=100_000)
    shares = deal(reqs, 3)
    assert [len(s) for s in shares] == [len(reqs[w::3]) for w in range(3)]
    merged = sorted((r for s in shares for r in s), key=lambda r: (r.offset_s, r.id))
    assert [r.id for r in merged] == [r.id for r in reqs]  # the union is the plan, in its order
    assert arrivals.coefficient_of_variation([r.offset_s for r in merged]) == pytest.approx(1.41, abs=0.15)
    for s in shares:  # each share is itself a thinned schedule: regular-ish, its own mean gap n times the plan's
        assert [r.offset_s for r in s] == sorted(r.offset_s for r in s)


def _line(i, sent_ns, worker):
    return {"kind": "request", "id": i, "target": "a", "url": "http://127.0.0.1:1", "zone": None,
            "route": "/v1/chat/completions", "phase": "measure", "planned_ns": sent_ns, "sent_ns": sent_ns,
            "sent_offset_s": 0.0, "ok": True, "failure": None, "e2e_s": 0.1, "worker": worker}


def test_merge_orders_request_lines_by_send_time_in_their_places(tmp_path):
    p = tmp_path / "records.ndjson"
    lines = [{"kind": "run", "run_id": "r", "started_ns": 0, "load": {}, "targets": []},
             _line(3, 30, 1), _line(0, 10, 0),
             {"kind": "mark", "event": "inject_start", "fault_id": "f", "scope": "replica", "target": "x",
              "t_ns": 15, "zones": []},
             _line(2, 20, 0), _line(1, 10, 1),
             {"kind": "end", "stopped_ns": 40}]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"kind": "requ')
    assert rec.order_by_send_time(p) == 4
    out = p.read_text().splitlines()
    kinds = [json.loads(x)["kind"] if x.endswith("}") else "torn" for x in out]
    assert kinds == ["run", "request", "request", "mark", "request", "request", "end", "torn"]
    assert [(json.loads(x)["sent_ns"], json.loads(x)["id"]) for x in out if '"request"' in x and x.endswith("}")] == \
        [(10, 0), (10, 1), (20, 2), (30, 3)]
    back = rec.read(p)
    assert [r.worker for r in back.requests] == [0, 1, 0, 1] and back.torn_lines == 1


def test_records_lines_with_workers_lengths_and_clocks_are_schema_valid():
    import jsonschema

    v = jsonschema.Draft202012Validator(json.loads((Path(schemas_init).parent / "records-line.schema.json").read_text()))
    clock = {"worker": 0, "wall_offset_ns": 1500, "mono_offset_ns": -20, "uncertainty_ns": 21000, "rtt_ns": 42000,
             "samples": 9}
    r = rec.RequestRecord(id=1, target="a", url="http://127.0.0.1:1", zone=None, route="/v1/completions",
                          phase="measure", planned_ns=1, sent_ns=2, sent_offset_s=0.1, ok=True, e2e_s=0.2, worker=1,
                          prompt_len=404, clipped="prompt")
    v.validate(json.loads(json.dumps(vars(r))))
    v.validate({"kind": "run", "run_id": "r", "started_ns": 1, "load": LoadShape().to_dict(), "targets": [],
                "workers": {"n": 2, "dealing": "round_robin", "planned": 10, "clock_start": [clock, clock]},
                "trace": {"path": "t.jsonl", "sha256": "0" * 64, "requests": 3, "span_s": 1.0}})
    v.validate({"kind": "end", "stopped_ns": 5, "sent": 4, "clipped": 1, "workers": [
        {"worker": 0, "pid": 7, "sent": 2, "ok": 2, "failed": 0, "clipped": 1, "rate": 9.9, "cpu_s": 0.1,
         "clock_start": clock, "clock_end": None}]})
    with pytest.raises(Exception):
        v.validate({**json.loads(json.dumps(vars(r))), "clipped": "everything"})


def test_clock_offset_takes_the_shortest_round_trip():
    class Conn:
        def __init__(self):
            self.k = None

        def send(self, msg):
            self.k = msg[1]

        def poll(self, timeout):
            return True

        def recv(self):
            import time

            return ("pong", self.k, time.time_ns() + 5_000_000, time.monotonic_ns())

    c = clock_offset(Conn(), samples=5)
    assert abs(c["wall_offset_ns"] - 5_000_000) <= c["uncertainty_ns"] + 1000
    assert abs(c["mono_offset_ns"]) <= c["uncertainty_ns"] + 1000 and c["samples"] == 5


# ---------------------------------------------------------------- the experiment's load
def _exp(load):
    return {"title": "t", "method": [{"type": "action", "name": "x", "provider": {"type": "python", "module": "m",
                                                                                  "func": "f"}}],
            "extensions": [{"name": "availproof", "scope": "replica", "bounds": {"must_recover": True}, "load": load}]}


def test_an_experiment_with_gamma_half_and_two_workers_validates(trace_file):
    s = experiment.settings(_exp({"arrival": "gamma", "burstiness": 0.5, "workers": 2, "rate": 20}))
    assert (s.load.arrival, s.load.burstiness, s.load.workers) == ("gamma", 0.5, 2)
    assert experiment.problems(_exp({"trace": trace_file, "trace_speed": 4, "trace_end": "loop"})) == []
    bad = experiment.problems(_exp({"arrival": "gamma", "burstiness": -1}))
    assert bad and "load.burstiness" in bad[0]
    bad = experiment.problems(_exp({"prompt_len": {"dist": "uniform", "min": 1}}))
    assert bad and "prompt_len: uniform needs max" in bad[0]


def test_workers_beyond_one_run_on_kuberay_too():
    """Processes of the rig (outside the cluster, so outside every fault), or with kubernetes.load.in_cluster
    pods of a Job (tests/unit/test_kuberay_load_job.py)."""
    from chaos.core import provision

    import dataclasses

    s = dataclasses.replace(experiment.settings(_exp({"workers": 2})), front="direct")  # Settings are frozen
    provision.check_capabilities("kuberay", s)


def run_local_pool(tmp_path, shape: LoadShape):
    """``shape`` sent by a local WorkerPool (its worker processes) to a loopback server; records in
    ``tmp_path/records.ndjson``. Returns (the pool, its footer)."""
    import asyncio
    import threading

    from chaos.load.workers import WorkerPool
    from tests.unit.test_transport import Server

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(Server().start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    events = rec.Events()
    writer = rec.RecordWriter(tmp_path / "records.ndjson").attach(events)
    pool = WorkerPool([Target("t", f"http://127.0.0.1:{server.port}")], shape, events, records_dir=tmp_path)
    try:
        return pool, pool.run()
    finally:
        writer.close()
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)


def test_two_local_workers_send_their_shares_and_their_records_merge(tmp_path):
    """The local pool end to end (its processes against a loopback server): the plan dealt, the records
    published with their worker, the clocks read over the sockets at the start and the end."""
    shape = LoadShape(mode="open", arrival="constant", rate=40, duration_s=1.0, warmup_s=0, timeout_s=5,
                      route="completions", model="m", max_tokens=(2, 2), prompt_words=(2, 2), workers=2, seed=3)
    _, footer = run_local_pool(tmp_path, shape)
    back = rec.read(tmp_path / "records.ndjson")
    assert back.header["workers"]["where"] == "processes of the rig" and len(back.header["workers"]["pids"]) == 2
    assert sorted(r.id for r in back.requests) == list(range(back.header["workers"]["planned"])) and footer["sent"] == 40
    assert all(r.worker == r.id % 2 and r.ok for r in back.requests)
    for w in footer["workers"]:
        for c in (w["clock_start"], w["clock_end"]):
            assert c["via"] == "socket" and abs(c["wall_offset_ns"]) <= c["uncertainty_ns"] + 1_000_000


def test_trace_rows_sent_from_two_workers_keep_their_shared_prefix_group(tmp_path):
    """A trace replayed by two worker processes: every request line says its row's shared first block
    (``prefix_group``) as one harness's would, so the warm-up counts the trace's prefix sharing whatever
    the number of workers (2026-12-05: with workers 2 every line said none, and the warm-up read "no
    prefix-sharing request was sent")."""
    rows = [{"timestamp": 100 * (i // 4), "input_length": 8, "output_length": 2, "hash_ids": [i % 3, 100 + i]}
            for i in range(24)]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shape = LoadShape(mode="open", duration_s=5.0, warmup_s=0, timeout_s=5, route="completions", model="m",
                      trace=str(path), workers=2, seed=3)
    pool, _ = run_local_pool(tmp_path, shape)
    planned = {r.id: r.prefix_group for r in plan(LoadShape(**{**shape.__dict__, "workers": 1}), pool.router)}
    back = rec.read(tmp_path / "records.ndjson").requests
    assert len(back) == 24 and {r.worker for r in back} == {0, 1}
    assert {r.id: r.prefix_group for r in back} == planned and set(planned.values()) == {0, 1, 2}


def test_the_summary_says_the_arrivals_as_sent():
    from chaos import analysis

    offs = list(arrivals.offsets("gamma", 50, 100, seed=2, burstiness=0.5))
    reqs = [rec.RequestRecord(id=i, target="a", url="http://127.0.0.1:1", zone=None, route="/v1/completions",
                              phase="measure", planned_ns=0, sent_ns=int(1e18 + t * 1e9), sent_offset_s=t, ok=True,
                              worker=i % 2, clipped="prompt" if i == 3 else None) for i, t in enumerate(offs)]
    a = analysis.arrivals(reqs)
    assert a["interarrival_cv"] == pytest.approx(arrivals.coefficient_of_variation(offs), abs=1e-3)
    assert a["interarrival_cv"] == pytest.approx(1.41, abs=0.15) and a["rate_rps"] == pytest.approx(50, rel=0.1)
    assert a["per_worker"] == {"0": (len(offs) + 1) // 2, "1": len(offs) // 2} and a["clipped"] == 1
    assert analysis.arrivals([])["interarrival_cv"] is None


@pytest.mark.parametrize("load, needle", [
    ({"mode": "closed", "stages": [{"rate": 1, "duration_s": 5}]}, "mode closed: stages"),
    ({"mode": "closed", "arrival": "gamma", "burstiness": 0.5}, "mode closed: arrival, burstiness"),
    ({"arrival": "constant", "burstiness": 0.5}, "burstiness shapes gamma arrivals only"),
])
def test_an_arrival_field_the_load_would_ignore_is_refused_in_one_line(load, needle):
    """A closed loop has no schedule to shape, and burstiness shapes gamma only: refused, not ignored."""
    with pytest.raises(UsageError, match=needle):
        LoadShape.from_dict(load)


def test_trace_rows_that_begin_with_a_shared_block_carry_its_prefix_group(tmp_path):
    """Rows whose first hash_id another row begins with are prefix-sharing (prefix_group = that id); a row
    whose first block no other row has, or with no hash_ids, is not."""
    import json as _json

    from chaos.load import workload as wl

    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": 0, "input_length": 100, "output_length": 8, "hash_ids": [7, 8]},
            {"timestamp": 0, "input_length": 120, "output_length": 8, "hash_ids": [7, 9]},
            {"timestamp": 1000, "input_length": 90, "output_length": 8, "hash_ids": [11]},
            {"timestamp": 2000, "input_length": 90, "output_length": 8}]
    path.write_text("\n".join(_json.dumps(r) for r in rows) + "\n")
    shape = wl.LoadShape(trace=str(path), duration_s=10)
    plan = list(wl.plan(shape, wl.Router([wl.Target("t", "http://127.0.0.1:9")])))
    assert [p.prefix_group for p in plan] == [7, 7, None, None]
    assert plan[0].prompt[:40] == plan[1].prompt[:40]  # the shared block is shared text
