"""KV pressure on vLLM (issue 48): ``app.kv_cache: {blocks: N}`` to the engine's arguments (exact; the config as it was
when unset; refused with the stream target), the engines' preemption counters sampled from the nodes' metrics
endpoints, and the fault's ``kv_pressure`` figures from synthetic samples (a counter that starts again after a
replica's replacement: the sum of each series' increases; null with its reason without a read)."""

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from chaos.analysis import figures, kv_pressure
from chaos.base.errors import UsageError
from chaos.core import experiment
from chaos.recording import records as rec, request_columns as rc
from chaos.system import engine_metrics
from serve_apps import checkpoint, config as serve_config, kv_cache

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = json.loads((ROOT / "experiments" / "replica-kill-kv-pressure.json").read_text())
NS = 1_000_000_000


def llm_config(blocks=None):
    spec = serve_config.AppSpec(app="llm", llm=serve_config.LLMOptions(model_path="/m"), kv_cache_blocks=blocks)
    return serve_config.serve_config(spec)["applications"][0]["args"]["llm_configs"][0]


# ---------------------------------------------------------------- the option -> the engine's arguments
def test_the_option_maps_to_exactly_these_engine_arguments():
    off, on = llm_config(), llm_config(9)
    assert on["engine_kwargs"] == {**off["engine_kwargs"], "num_gpu_blocks_override": 9, "block_size": 128,
                                   "disable_log_stats": False}
    assert on["log_engine_metrics"] is True
    assert {k: v for k, v in on.items() if k not in ("engine_kwargs", "log_engine_metrics")} == \
        {k: v for k, v in off.items() if k not in ("engine_kwargs", "log_engine_metrics")}


def test_unset_the_config_is_what_it_was():
    off = llm_config()
    assert off["engine_kwargs"] == {"dtype": "float32", "max_model_len": 512, "enforce_eager": True,
                                    "kv_cache_memory_bytes": 64 * 1024 * 1024, "max_num_seqs": 16,
                                    "disable_log_stats": True, "enable_prefix_caching": True,
                                    "enable_prompt_tokens_details": True}
    assert off["log_engine_metrics"] is False
    assert json.dumps(serve_config.serve_config(serve_config.AppSpec(app="llm", llm=serve_config.LLMOptions(
        model_path="/m")))) == json.dumps(serve_config.serve_config(serve_config.AppSpec(
            app="llm", llm=serve_config.LLMOptions(model_path="/m"), kv_cache_blocks=None)))


def test_the_stream_target_is_refused_in_one_line():
    with pytest.raises(ValueError, match="the stream target has no KV cache") as e:
        serve_config.serve_config(serve_config.AppSpec(app="stream", kv_cache_blocks=9))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("blocks", [4, 0, "9", True, 9.0])
def test_too_few_or_not_an_integer_is_refused(blocks):
    with pytest.raises(ValueError, match="kv_cache blocks must be an integer >= 5"):
        llm_config(blocks)


def test_blocks_and_fit_on_the_tiny_checkpoint():
    defaults = {k: p.default for k, p in inspect.signature(checkpoint.build).parameters.items()}
    head_dim = defaults["hidden"] // defaults["heads"]
    assert kv_cache.bytes_per_block(defaults["layers"], defaults["kv_heads"], head_dim, 4) == 128 * 1024
    assert kv_cache.min_blocks(512) == 5
    assert kv_cache.blocks_per_request(488) == 4 and kv_cache.blocks_per_request(128) == 1
    assert kv_cache.fit(9, 488) == 2 and kv_cache.fit(5, 512) == 1 and kv_cache.fit(9, 384) == 2


# ---------------------------------------------------------------- the experiment
def test_the_shipped_experiment_runs_with_the_vllm_app_only():
    s = experiment.settings(SHIPPED, "replica-kill-kv-pressure.json", app="llm")
    assert s.app == {"kv_cache": {"blocks": 9}}
    assert s.load.mode == "closed" and s.load.max_tokens == (400, 448)
    fit = kv_cache.fit(9, 16 * 2 + 8 + s.load.max_tokens[1])
    assert s.load.concurrency / 3 > fit  # more per replica than the cache holds at full length: preemption
    with pytest.raises(UsageError, match="app.kv_cache: the stream target has no KV cache") as e:
        experiment.settings(SHIPPED, "replica-kill-kv-pressure.json", app="stream")
    assert "\n" not in str(e.value)


def test_the_schema_refuses_too_few_blocks():
    doc = json.loads(json.dumps(SHIPPED))
    next(e for e in doc["extensions"] if e["name"] == "availproof")["app"]["kv_cache"]["blocks"] = 4
    assert any("kv_cache" in p for p in experiment.problems(doc, "x.json"))


# ---------------------------------------------------------------- the counters read from the nodes
TEXT = """# HELP ray_vllm_num_preemptions_total Cumulative number of preemption from the engine.
# TYPE ray_vllm_num_preemptions_total counter
ray_vllm_num_preemptions_total{Component="core_worker",ReplicaId="r1",engine="0",model_name="availproof-tiny"} 7.0
ray_vllm_num_preemptions_created{ReplicaId="r1"} 1.7e9
vllm:num_preemptions_total{engine="0",model_name="m"} 2
ray_vllm_num_requests_running{ReplicaId="r1"} 3.0
"""


def test_the_preemption_series_are_parsed_by_replica_and_engine():
    assert engine_metrics.parse_preemptions(TEXT, "w1") == {"w1/r1/0": 7.0, "w1/?/0": 2.0}


class Sample:
    def __init__(self):
        self.errors, self.engine = {}, None


def test_the_counters_are_read_every_period_and_say_why_not():
    now = [0.0]
    reads = []

    def get(url, timeout):
        reads.append(url)
        if "bad" in url:
            raise OSError("refused")
        return TEXT

    counters = engine_metrics.EngineCounters(lambda t: Sample(), lambda: [("w1", "ok:1"), ("w2", "bad:2")],
                                             period_s=5.0, clock=lambda: now[0], get=get)
    first = counters(2.0)
    assert first.engine == {"preemptions": {"w1/r1/0": 7.0, "w1/?/0": 2.0}} and "w2: OSError" in first.errors["engine"]
    now[0] = 1.0
    assert counters(2.0).engine is None and len(reads) == 2  # not due yet: the sample as the backend took it
    now[0] = 5.0
    assert counters(2.0).engine is not None and len(reads) == 4
    remote = engine_metrics.EngineCounters(lambda t: Sample(), lambda: None)(2.0)
    assert remote.engine == {"preemptions": None} and remote.errors["engine"] == engine_metrics.NOT_LOCAL


def test_the_observer_is_the_backend_s_own_unless_the_vllm_app_runs_a_small_cache():
    class Backend:
        def observe(self, timeout):
            return Sample()

    b = Backend()
    assert engine_metrics.observer(b, "llm", {}) == b.observe
    assert engine_metrics.observer(b, "stream", {"kv_cache": {"blocks": 9}}) == b.observe
    assert isinstance(engine_metrics.observer(b, "llm", {"kv_cache": {"blocks": 9}}), engine_metrics.EngineCounters)


# ---------------------------------------------------------------- the figures from the samples
def sample(t_s, preemptions, errors=None):
    return rec.Sample(t_ns=int(t_s * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.01, controller_ok=True,
                      app_status="RUNNING", replicas={}, nodes_alive={}, errors=errors or {},
                      engine=None if preemptions is False else {"preemptions": preemptions})


def test_preemptions_are_the_sum_of_each_series_increases_across_a_replacement():
    samples = [
        sample(0, {"a/r1/0": 0, "b/r2/0": 0, "c/r3/0": 0}),
        sample(5, {"a/r1/0": 4, "b/r2/0": 3, "c/r3/0": 5}),        # before the kill at 10 s: 12
        sample(12, {"a/r1/0": 6, "b/r2/0": 4}),                    # r3 killed: gone from the endpoint (+3)
        sample(14, False),                                          # a sample that did not read: skipped
        sample(17, {"a/r1/0": 9, "b/r2/0": 4, "c/r4/0": 2}),        # the replacement's series, from 0 (+5)
        sample(22, {"a/r1/0": 1, "b/r2/0": 6, "c/r4/0": 5}),        # r1's counter started again: +1, +2, +3
        sample(27, None, {"engine": "3 of 3 metrics endpoints did not answer"}),
    ]
    assert kv_pressure.preemptions(samples, 0, 10 * NS) == (12, None)
    assert kv_pressure.preemptions(samples, 10 * NS, 30 * NS) == (3 + 5 + 6, None)


def test_a_node_that_did_not_answer_once_is_not_counted_again():
    samples = [sample(0, {"a/r1/0": 5, "b/r2/0": 5}), sample(5, {"a/r1/0": 6}), sample(10, {"a/r1/0": 6, "b/r2/0": 7})]
    assert kv_pressure.preemptions(samples, 1, 20 * NS) == (1 + 2, None)


def test_null_with_its_reason_without_a_read():
    assert kv_pressure.preemptions([sample(0, False)], 0, NS) == (None, kv_pressure.NO_READ)
    down = [sample(0, {"a/r1/0": 1}), sample(5, None, {"engine": engine_metrics.NOT_LOCAL})]
    count, why = kv_pressure.preemptions(down, 4 * NS, 10 * NS)
    assert count is None and engine_metrics.NOT_LOCAL in why
    count, why = kv_pressure.preemptions(down, 20 * NS, 30 * NS)
    assert count is None and why == "no sample in the window read the engines' preemption counters"


def request(i, sent_s, ok=True, ttft=0.5, itl=0.1):
    return rec.RequestRecord(id=i, target="w", url="u", zone="zone-a", route="/v1/chat/completions", phase="measure",
                             planned_ns=int(sent_s * NS), sent_ns=int(sent_s * NS), sent_offset_s=sent_s, ok=ok,
                             failure=None if ok else rec.STREAM_BROKEN, ttft_s=ttft, e2e_s=20.0, itl_mean_s=itl)


def test_the_fault_s_entry_from_records_alone():
    cols = rc.from_records([request(i, i, ttft=0.1 * (i + 1), itl=0.01 * (i + 1)) for i in range(10)]
                           + [request(10, 11, ok=False, ttft=None, itl=None)])
    samples = [sample(0, {"a/r1/0": 0}), sample(4, {"a/r1/0": 2}), sample(12, {"a/r1/0": 9})]
    rows = np.arange(5, 11)
    why = {}
    kv = kv_pressure.kv_pressure(5 * NS, cols, rows, samples, 0, 20 * NS, why)
    assert (kv["preemptions"], kv["preemptions_before"], kv["requests"], kv["failed"]) == (7, 2, 6, 1)
    assert (kv["ttft_p50_s"], kv["ttft_p99_s"], kv["itl_p50_s"], kv["itl_p99_s"]) == (0.8, 1.0, 0.08, 0.1)
    assert kv["before"]["requests"] == 5 and kv["before"]["ttft_p99_s"] == 0.5 and why == {}
    for fig in figures.of("kv_pressure"):  # every figure of the catalogue's plane is in the entry
        assert fig.name in kv
    empty = kv_pressure.kv_pressure(5 * NS, cols, np.arange(0), [sample(0, False)], 0, 20 * NS, why)
    assert empty["ttft_p50_s"] is None and why["kv_pressure.ttft_p50_s"] == "no request got a first token"
    assert empty["preemptions"] is None and why["kv_pressure.preemptions"] == kv_pressure.NO_READ


def test_samples_with_engine_counters_read_back():
    line = json.dumps(vars(sample(1, {"a/r1/0": 3.0})))
    lines = rec.LineReader()
    lines.add(json.loads(line))
    assert lines.samples[0].engine == {"preemptions": {"a/r1/0": 3.0}} and lines.torn == 0


def test_the_nodes_are_read_at_once_not_one_after_another():
    """Read in turn, three slow endpoints held a sample three timeouts long and the sampler fell more than 5 s behind
    (2026-12-06): read at once, the sample waits for the slowest alone."""
    import threading
    import time as _time
    from chaos.system import engine_metrics as em
    barrier = threading.Barrier(3, timeout=2.0)  # passes only when the three reads are in flight together

    def get(url, timeout):
        barrier.wait()
        _time.sleep(0.05)
        return 'vllm:num_preemptions_total{engine="0",model_name="m"} 2\n'

    values, why = em.read_nodes([("a", "h:1"), ("b", "h:2"), ("c", "h:3")], 1.0, get)
    assert why is None and len(values) == 3


def test_a_read_that_raises_anything_costs_the_sample_nothing_but_its_counters():
    """An IncompleteRead is no OSError: it escaped, and the sampler replaced the backend's good sample with one that
    read the control plane down (review, 2026-12-06)."""
    import http.client

    def get(url, timeout):
        raise http.client.IncompleteRead(b"")

    s = engine_metrics.EngineCounters(lambda t: Sample(), lambda: [("w1", "h:1")], get=get)(2.0)
    assert s.engine == {"preemptions": None} and "IncompleteRead" in s.errors["engine"]

    def boom():
        raise KeyError("nodes")

    s = engine_metrics.EngineCounters(lambda t: Sample(), boom)(2.0)
    assert s.engine == {"preemptions": None} and "KeyError" in s.errors["engine"]


def test_no_counter_exported_is_null_with_its_reason_not_zero():
    count, why = kv_pressure.preemptions([sample(0, {}), sample(5, {}), sample(12, {})], 10 * NS, 20 * NS)
    assert count is None and "no engine exported" in why


def test_a_node_first_read_in_the_window_counts_from_its_first_read():
    """A node that never answered before the window: what it counted before is unknown, so its first read in the
    window is its baseline (a lower bound), not 0 (review, 2026-12-06)."""
    samples = [sample(0, {"a/r1/0": 5}), sample(12, {"a/r1/0": 6, "b/r2/0": 50}), sample(15, {"a/r1/0": 6, "b/r2/0": 52})]
    assert kv_pressure.preemptions(samples, 10 * NS, 20 * NS) == (1 + 2, None)


def test_before_the_kill_leaves_out_the_requests_in_flight_at_it():
    """The fault's rows include the requests in flight at the injection: counted before too, the kill's broken
    streams read as the pressure's (review, 2026-12-06)."""
    cols = rc.from_records([request(i, i) for i in range(4)] + [request(4, 4, ok=False, ttft=None, itl=None)])
    kv = kv_pressure.kv_pressure(5 * NS, cols, np.arange(4, 5), [sample(0, {"a/r1/0": 0})], 0, 20 * NS, {})
    assert kv["before"]["requests"] == 4 and kv["before"]["failed"] == 0 and kv["failed"] == 1
