"""The replica-kill-kv-pressure experiment (issue 48: KV pressure on vLLM, a replica kill on top), written by
``experiments/_make.py`` from its template (:func:`make`). The vLLM app only: ``app.kv_cache`` is refused with the
stream target, in one line, before anything starts."""

from serve_apps import kv_cache

MAX_MODEL_LEN = 512  # the vLLM app's (serve_apps/config.py LLMOptions)
BLOCKS = 9  # 8 blocks of 128 tokens for requests, and vLLM's null block
PROMPT_WORDS = [8, 16]  # ~2 tokens a word at most with the tiny tokenizer, and 8 of chat template: <= 40 tokens
MAX_TOKENS = [400, 448]  # long outputs: 40 + 448 = 488 <= 512, so every request runs to 4 blocks
CONCURRENCY = 12  # closed loop: ~4 per replica of 3, ~6 per survivor after the kill
LONGEST = 16 * 2 + 8 + MAX_TOKENS[1]
FIT = kv_cache.fit(BLOCKS, LONGEST)  # full-length requests one engine holds at once: 2
TIMEOUT_S = 180  # a 448-token stream at a few tokens/s a stream, preempted and recomputed on the way
ENGINE_START_S = 102  # as _make.ENGINE_START_S: a replacement vLLM CPU engine's start, measured

# TTFT under the cache's pressure: a preempted request waits for blocks (measured 2026-12-06 20:51 UTC, the first
# run: p95 up to 13.6 s in the baseline's 20 s windows, 66 preemptions in 3 engines): the steady state and the SLO
# allow that, the pressure's cost being what kv_pressure reports
TTFT_S = 30.0
LOAD = {"mode": "closed", "concurrency": CONCURRENCY, "duration_s": 600, "warmup_s": 10, "timeout_s": TIMEOUT_S,
        "prompt_words": PROMPT_WORDS, "max_tokens": MAX_TOKENS, "seed": 48}


def make(experiment, action, base_load):
    """Write replica-kill-kv-pressure with ``experiment`` and ``action`` (the template's); ``base_load`` is the
    template's load, which this one replaces whole (a closed loop of long outputs)."""
    load = {k: v for k, v in base_load.items() if k not in ("arrival", "rate")} | LOAD
    per_block = kv_cache.bytes_per_block() // 1024
    experiment(
        "replica-kill-kv-pressure", "SIGKILL one vLLM replica while a small KV cache forces preemption",
        f"The vLLM app only (--app llm; app.kv_cache is refused with the stream target). Each engine's KV cache is "
        f"{BLOCKS} blocks of {kv_cache.BLOCK_TOKENS} tokens (app.kv_cache: vLLM's num_gpu_blocks_override, one "
        f"block vLLM's null block; {per_block} KiB a block on the tiny checkpoint, serve_apps/kv_cache.py): a "
        f"request of up to {LONGEST} tokens holds {kv_cache.blocks_per_request(LONGEST)} blocks at its end, so "
        f"{FIT} fit an engine at once. A closed loop of {CONCURRENCY} clients asks for long outputs (max_tokens "
        f"{MAX_TOKENS[0]}-{MAX_TOKENS[1]}): ~{CONCURRENCY // 3} per replica, more than fit, so the scheduler "
        "preempts running requests (recomputed later) from the baseline on. Then one RUNNING replica in zone-a is "
        "SIGKILLed: its streams fail and the survivors carry ~6 each under the same cache. summary.json's "
        "kv_pressure says, per fault, the engines' preemptions before and after the kill (their counters, read "
        "from the nodes' metrics endpoints into the records every 5 s), the requests failed, and TTFT and mean "
        "inter-token latency p50 and p99.",
        "replica", [action("kill-one-replica-in-zone-a", "kill_replica", zone="zone-a")],
        {"max_failed_requests": 8, "max_time_to_steady_state_s": 60,
         "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
         "min_capacity_ratio": 0.6},
        "Measured once (2026-12-06, the baseline alone: TTFT p95 up to 13.6 s, 9, 21 and 36 preemptions in the three engines in 100 s; the steady state's TTFT bound 30 s since); the rest a claim. Preemption recomputes a request, it does not fail "
        "it: only the streams in flight on the killed replica may fail (~4 of the 12 clients), plus a few sent to it "
        "again before Serve drops it: 8. The survivors' requests take longer (more preemption, half again the "
        f"streams each) but end within the {TIMEOUT_S} s timeout: a failure there is a finding (a request starved by "
        "preemption). Steady state within 60 s (20 s windows: a closed loop of long streams sends a few requests a "
        "window). Control plane untouched (5 s allows a slow health answer). Capacity: 2 of 3 replicas (0.67) "
        f"until the replacement, with --app llm within 60 + 2 x {ENGINE_START_S} s (a vLLM CPU engine's measured "
        "start, twice). Expected, not bounded: preemptions > 0 before the kill (the cache's pressure alone) and "
        "more per second after it, TTFT p99 and mean-ITL p99 higher after the kill.",
        app={"kv_cache": {"blocks": BLOCKS}}, load=load, llm_load=load, baseline_s=60, recovery_window_s=60,
        steady_state={"window_s": 20, "min_success_ratio": 0.99, "max_p95_ttft_s": TTFT_S, "min_requests": 3},
        slo={"ttft_s": TTFT_S, "itl_s": 2.0},
        llm_overrides={"steady_state": {"max_p95_ttft_s": TTFT_S, "min_requests": 3},
                       "slo": {"ttft_s": TTFT_S, "itl_s": 2.0}},
    )
