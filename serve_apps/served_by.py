"""Who served a request: the response headers both apps set, and what the client reads from them.

Serve routes a request from any proxy to any replica, across zones and regions, so which zone a
client sent to says nothing of where it was served. Each response says it (the stream target on
every answer; the vLLM app through :mod:`serve_apps.llm_served`):

- ``x-availproof-replica``: the Serve replica id (``serve.get_replica_context().replica_id.unique_id``;
  for the vLLM app the ``LLMServer`` replica, the one holding the engine and its prefix cache);
- ``x-availproof-zone``, ``x-availproof-region``, ``x-availproof-node``: the Ray node labels of the
  node it runs on (``zone``, ``region``, ``node``: the local cluster starts every node with them,
  KubeRay's worker groups carry them too, ``serve_apps/kuberay.py``);
- ``x-availproof-version``: the app version, ``AVAILPROOF_APP_VERSION`` from the application's
  ``runtime_env`` (what an upgrade changes; ``initial`` before any upgrade);
- ``x-availproof-engine``: what the engine resolved, compact JSON: ``prefix_caching`` (on/off),
  ``block_size`` and ``kv_cache_tokens`` (blocks x block size, where known) and ``router`` (the
  Serve request router class of the deployment).

This module imports Ray only inside a replica (:func:`identity`), so the client side can use the
names without it.
"""

from __future__ import annotations

import json
import os
from typing import Any

PREFIX = "x-availproof-"
REPLICA, ZONE, REGION, NODE, VERSION, ENGINE = (PREFIX + k for k in ("replica", "zone", "region", "node", "version",
                                                                      "engine"))
VERSION_ENV = "AVAILPROOF_APP_VERSION"
INITIAL_VERSION = "initial"


def identity() -> dict[str, str | None]:
    """The replica, node, zone, region and app version of the replica this runs in."""
    import ray
    from ray import serve

    replica = None
    try:
        replica = serve.get_replica_context().replica_id.unique_id
    except Exception:  # noqa: BLE001 - outside a replica (a test): no id to give
        pass
    labels: dict[str, str] = {}
    try:
        if ray.is_initialized():  # in a replica; elsewhere asking would start a local Ray
            labels = ray.get_runtime_context().get_node_labels() or {}
    except Exception:  # noqa: BLE001 - labels are informative only
        pass
    return {"replica": replica, "zone": labels.get("zone"), "region": labels.get("region"),
            "node": labels.get("node"), "version": os.environ.get(VERSION_ENV) or INITIAL_VERSION}


def router_name() -> str | None:
    """The request router of this replica's deployment (its class name), as Serve configured it."""
    try:
        from ray import serve

        cfg = serve.get_replica_context()._deployment_config.request_router_config
        cls = getattr(cfg, "request_router_class", None) or getattr(cfg, "_serialized_request_router_cls", None)
    except Exception:  # noqa: BLE001 - informative only
        return None
    if isinstance(cls, str):
        return cls.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    return getattr(cls, "__name__", None) if cls is not None else None


def headers(ident: dict[str, Any], engine: dict[str, Any] | None = None) -> dict[str, str]:
    """The response headers for ``ident`` (and the engine), leaving out what is not known."""
    out = {name: str(ident[key]) for name, key in ((REPLICA, "replica"), (ZONE, "zone"), (REGION, "region"),
                                                   (NODE, "node"), (VERSION, "version")) if ident.get(key) is not None}
    if engine:
        out[ENGINE] = json.dumps(engine, separators=(",", ":"), sort_keys=True)
    return out


def parse_engine(value: str | None) -> dict[str, Any] | None:
    """The engine header as a dict, or None when absent or not a JSON object."""
    if not value:
        return None
    try:
        obj = json.loads(value)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


# ---------------------------------------------------------------- the vLLM app (serve_apps.llm_served)
# LLMServer puts its description ahead of its stream as one item; the ingress takes it off and sets the headers.
MARK = "availproof_served_by"


def served_item(item: Any) -> dict | None:
    """What :class:`LLMServer` said of itself, when ``item`` is its leading item (else None)."""
    if isinstance(item, dict) and set(item) == {MARK} and isinstance(item[MARK], dict):
        return item[MARK]
    return None


async def prepend_served(served: dict, stream):
    """``stream`` with the replica's description ahead of it."""
    yield {MARK: served}
    async for item in stream:
        yield item


async def strip_served(stream, holder: dict | None):
    """``stream`` without its leading description, which goes into ``holder``."""
    first = True
    async for item in stream:
        if first:
            first = False
            served = served_item(item)
            if served is not None:
                if holder is not None:
                    holder.update(served)
                continue
        yield item


def set_headers(response, served: dict) -> None:
    """The ``x-availproof-*`` headers of ``served`` on ``response`` (nothing when it said nothing)."""
    if served and hasattr(response, "headers"):
        response.headers.update(headers(served.get("identity") or {}, served.get("engine")))


def engine_info(engine: Any) -> dict[str, Any]:
    """What vLLM resolved: prefix caching, block size, KV cache tokens, max_model_len (where known)."""
    info: dict[str, Any] = {"router": router_name()}
    vllm_config = getattr(getattr(engine, "_engine_client", None), "vllm_config", None)
    cache = getattr(vllm_config, "cache_config", None)
    if cache is not None:
        info["prefix_caching"] = bool(getattr(cache, "enable_prefix_caching", False))
        block = getattr(cache, "block_size", None)
        info["block_size"] = block
        blocks = getattr(cache, "num_gpu_blocks", None)
        if blocks and block:
            info["kv_cache_tokens"] = int(blocks) * int(block)
    model = getattr(vllm_config, "model_config", None)
    if model is not None and getattr(model, "max_model_len", None):
        info["max_model_len"] = model.max_model_len
    return info
