"""The one source of truth for the Serve config.

:func:`serve_config` turns an :class:`AppSpec` into a Serve declarative config (Ray Serve's
``ServeDeploySchema``). The local backend PUTs that document to the dashboard's
``/api/serve/applications/`` (what ``serve deploy`` does); the KubeRay manifests embed the very
same document as ``serveConfigV2`` (which KubeRay PUTs to the same endpoint). Nothing else
describes the deployment.

Placement: one deployment with ``replicas_per_zone x zones`` replicas, kept off the head with a
``label_selector`` on the zone label, and spread with ``max_replicas_per_node``. The shipped
topologies have one node per zone, so that is one replica set per zone; where each replica
actually landed is read back after deploy and checked (see ``chaos.system.deploy``).

The progress watchdog (``serve_apps.watchdog``, both apps) is off unless ``AppSpec.stall_s`` is set:
then the engine deployment (``StreamTarget``; vLLM's ``LLMServer``) gets ``user_config: {"stall_s": N}``,
which its replicas read in ``reconfigure`` (a change reconfigures them in place, no restart). Off, the
config has no ``user_config`` at all, as before the watchdog existed. ``AppSpec.watchdog`` 2 selects the
watchdog v2 (``serve_apps.watchdog_v2``): ``{"stall_s": N, "watchdog": 2}``; absent (None) or 1, v1, and the
``user_config`` is the same as before v2 existed. ``AppSpec.on_stall`` "exit" (v2 only) adds ``"on_stall": "exit"``:
a replica whose v2 found its engine stalled ends itself and its engine at once (``serve_apps.replica_exit``).

Request migration (issue 47) is off unless ``AppSpec.migration_limit`` is set (an experiment's ``app.migration:
{limit: N}``): then the stream target app is ``serve_apps.migrating_ingress:app_builder``, two deployments, the
``MigratingIngress`` (the route prefix's ingress) in front of the ``StreamTarget`` engine replicas, which keep
their options (placement, health checks, the watchdog's ``user_config``); the ingress is placed as they are, one
per zone (an ingress in one zone would be a single point of failure), with half a CPU. The vLLM app keeps its
two deployments and their options; its OpenAI ingress's class is the migrating one (``ingress_cls_config``:
:data:`serve_apps.llm_app.MIGRATING_INGRESS_CLS`, ``ingress_extra_kwargs: {"migration_limit": N}``,
:mod:`serve_apps.llm_migrating`). Off, either app's config is the same as before migration existed.

A small KV cache (issue 48's KV pressure) is off unless ``AppSpec.kv_cache_blocks`` is set (an experiment's
``app.kv_cache: {blocks: N}``): then the vLLM engine has exactly N blocks and exports its metrics
(:mod:`serve_apps.kv_cache`). Off, the config is the same as before it existed. The stream target has no KV cache:
refused.

Admission limits (issue 48) are Serve's unless ``AppSpec.admission`` is set (an experiment's ``app.admission``,
:mod:`serve_apps.admission`): then every deployment takes its ``max_ongoing_requests`` and the deployment the
proxies call (the stream target; the migrating ingress; vLLM's ingress) its ``max_queued_requests`` and the
refusal's ``backpressure_config`` (fast refusal: a 503 with ``Retry-After``). Unset, the config is byte-identical
to what it was before.

A rank group (issue 44's ``rank-hang`` and ``rank-death``) is off unless ``AppSpec.ranks`` is 2 or more (an
experiment's ``app.ranks``): then the stream target's engine runs its steps as a group of that many ranks
(:mod:`serve_apps.stream_ranks`, its ``ranks`` argument) and vLLM's engine has ``tensor_parallel_size`` ranks, its
``MultiprocExecutor``'s workers (:mod:`serve_apps.llm_app`). 1 (the default): the config is the same as before.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from serve_apps import replica_exit
from serve_apps.admission import Admission, engine_options, ingress_options
from serve_apps.stream_ranks import check_ranks

APPS = ("stream", "llm")
APP_NAME = "llm"  # the Serve application name, whichever backs it
ROUTE = "/"
STREAM_IMPORT = "serve_apps.stream_target:app_builder"
MIGRATING_IMPORT = "serve_apps.migrating_ingress:app_builder"  # the stream target behind a migrating ingress
INGRESS_DEPLOYMENT = "MigratingIngress"


@dataclass
class StreamOptions:
    prefill_s: float = 0.05
    token_s: float = 0.02
    jitter: float = 0.2
    max_model_len: int = 512  # as the llm app's: a longer prompt + max_tokens is refused with a 400
    # the simulated prefix cache (serve_apps/prefix_cache.py), per replica: TTFT cost per prompt token
    # not served from it, block size in tokens (words), capacity in blocks
    uncached_token_s: float = 0.002
    block_tokens: int = 16
    prefix_cache_blocks: int = 256
    # how long a replica's start takes to read its weights before it knows whether they load (a vLLM start reads its
    # checkpoint after its engine has initialised: tens of seconds on CPU). A start that failed in a tenth of a second
    # ended between two of the sampler's samples (0.5 s): 0 of 7 failed starts seen in a CI run (2026-12-06), so
    # restart-fails' failed_starts read 0 while Serve had failed 7 times
    weights_load_s: float = 1.0


@dataclass
class LLMOptions:
    model_path: str = ""  # a local checkpoint directory (the tiny one by default)
    model_id: str = "availproof-tiny"
    max_model_len: int = 512
    kv_cache_bytes: int = 64 * 1024 * 1024
    dtype: str = "float32"
    num_cpus: float = 5.0  # logical CPUs the engine bundle reserves: with the replica actor (1) more
    # than half a default worker (8), so no two LLM replicas share a node (see llm_app)


@dataclass
class AppSpec:
    app: str = "stream"
    zones: list[str] = field(default_factory=lambda: ["zone-a", "zone-b", "zone-c"])
    replicas_per_zone: int = 1
    http_port: int = 8000
    health_check_period_s: float = 2.0
    health_check_timeout_s: float = 5.0
    max_ongoing_requests: int = 64
    graceful_shutdown_timeout_s: float = 2.0
    graceful_shutdown_wait_loop_s: float = 2.0  # Serve's default
    max_replicas_per_node: int | None = None  # None: replicas_per_zone (pins each replica set to its zone)
    # the progress watchdog (serve_apps/watchdog.py): a replica with requests in flight and no token for
    # stall_s seconds fails its health check; None: off
    stall_s: float | None = None
    watchdog: int | None = None  # 2: the watchdog v2 (serve_apps/watchdog_v2.py); None or 1: v1
    # v2 only: "exit" ends a stalled replica at once (serve_apps/replica_exit.py); None: fail its health check
    on_stall: str | None = None
    # request migration (serve_apps/migrating_ingress.py): at most this many per request; None: off
    migration_limit: int | None = None
    # the vLLM app's KV cache in blocks (serve_apps/kv_cache.py: app.kv_cache, KV pressure); None: vLLM's own sizing
    kv_cache_blocks: int | None = None
    # admission limits and fast refusal (serve_apps/admission.py); None: Serve's, as before
    admission: Admission | None = None
    # the engine's rank group (serve_apps/stream_ranks.py: app.ranks; vLLM: tensor_parallel_size); 1: none, as before
    ranks: int = 1
    stream: StreamOptions = field(default_factory=StreamOptions)
    llm: LLMOptions = field(default_factory=LLMOptions)

    @property
    def num_replicas(self) -> int:
        return self.replicas_per_zone * len(self.zones)

    @property
    def model_id(self) -> str:
        return self.llm.model_id if self.app == "llm" else "availproof-tiny"


def _zone_selector(zones: list[str]) -> dict[str, str]:
    return {"zone": f"in({','.join(zones)})"}


def _deployment_common(spec: AppSpec) -> dict[str, Any]:
    """The engine deployment's options, either app (the LLM app's ingress takes some of them)."""
    common = {
        "num_replicas": spec.num_replicas,
        "max_replicas_per_node": spec.max_replicas_per_node or spec.replicas_per_zone,
        "max_ongoing_requests": spec.max_ongoing_requests,
        "health_check_period_s": spec.health_check_period_s,
        "health_check_timeout_s": spec.health_check_timeout_s,
        "graceful_shutdown_timeout_s": spec.graceful_shutdown_timeout_s,
        "graceful_shutdown_wait_loop_s": spec.graceful_shutdown_wait_loop_s,
    }
    if spec.watchdog not in (None, 1, 2):
        raise ValueError(f"watchdog must be 1 or 2, got {spec.watchdog!r}")
    if spec.on_stall is not None and spec.on_stall not in replica_exit.MODES:
        raise ValueError(f"on_stall must be fail or exit, got {spec.on_stall!r}")
    if spec.on_stall == "exit" and not (spec.stall_s and spec.watchdog == 2):
        raise ValueError("on_stall exit needs the watchdog v2 on (watchdog 2 and stall_s)")
    common.update(engine_options(spec.admission))
    if spec.stall_s:
        common["user_config"] = {"stall_s": spec.stall_s, **({"watchdog": 2} if spec.watchdog == 2 else {}),
                                 **({"on_stall": "exit"} if spec.on_stall == "exit" else {})}
    return common


def serve_config(spec: AppSpec) -> dict[str, Any]:
    """The Serve declarative config (``ServeDeploySchema``) for ``spec``."""
    if spec.app not in APPS:
        raise ValueError(f"app must be one of {APPS}, got {spec.app!r}")
    limit = spec.migration_limit
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"migration limit must be a positive integer, got {limit!r}")
    if spec.app == "stream" and spec.kv_cache_blocks is not None:
        raise ValueError("kv_cache: the stream target has no KV cache (issue 48's KV pressure is vLLM's): run it with "
                         "--app llm")
    try:
        check_ranks(spec.ranks)
    except ValueError as e:
        raise ValueError(f"app.{e}") from None
    if spec.app == "stream":
        common = _deployment_common(spec)
        application = {
            "name": APP_NAME,
            "route_prefix": ROUTE,
            "import_path": STREAM_IMPORT,
            # a rank group only when asked for (app.ranks): one rank, the args as before
            "args": {"model": spec.model_id, **asdict(spec.stream), **({"ranks": spec.ranks} if spec.ranks > 1 else {})},
            "deployments": [{
                "name": "StreamTarget",
                **common,
                "ray_actor_options": {"num_cpus": 1, "label_selector": _zone_selector(spec.zones)},
            }],
        }
        if limit is None:  # the stream target is the proxies' ingress: the queue limit and the refusal its
            application["deployments"][0].update(ingress_options(spec.admission))
        if limit is not None:
            application["import_path"] = MIGRATING_IMPORT
            application["args"]["migration"] = {"limit": limit}
            ingress = {k: v for k, v in common.items() if k != "user_config"}  # the watchdog is the engines'
            ingress.update(ingress_options(spec.admission))
            ingress["ray_actor_options"] = {"num_cpus": 0.5, "label_selector": _zone_selector(spec.zones)}
            application["deployments"].append({"name": INGRESS_DEPLOYMENT, **ingress})
    else:
        from serve_apps import llm_app

        application = llm_app.application_config(spec, _deployment_common(spec), _zone_selector(spec.zones),
                                                 migration_limit=limit)
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": "0.0.0.0", "port": spec.http_port},
        "applications": [application],
    }


def validate(config: dict[str, Any]) -> None:
    """Check a config with Ray's own ``ServeDeploySchema`` and for unknown keys (which it accepts)."""
    from ray.serve.schema import ServeDeploySchema

    parsed = ServeDeploySchema.model_validate(config)
    _check_unknown(config, parsed, "")


def _check_unknown(doc: Any, model: Any, path: str) -> None:
    from pydantic import BaseModel

    if isinstance(model, BaseModel) and isinstance(doc, dict):
        fields = type(model).model_fields
        aliases = {f.alias for f in fields.values() if f.alias}
        for key, value in doc.items():
            if key not in fields and key not in aliases:
                raise ValueError(f"serve config: unknown key {path + key!r}")
            if key in ("args", "runtime_env", "user_config", "label_selector", "env_vars"):
                continue  # free-form by design
            _check_unknown(value, getattr(model, key, None), f"{path}{key}.")
    elif isinstance(model, list) and isinstance(doc, list):
        for i, (d, m) in enumerate(zip(doc, model)):
            _check_unknown(d, m, f"{path[:-1]}[{i}].")
