"""What a response says of who served it (``serve_apps.served_by``'s headers), onto its record."""

from __future__ import annotations

from typing import Any, Mapping

from chaos.recording import records as rec
from serve_apps import served_by


def read(r: rec.RequestRecord, headers: Mapping[str, str], engines_seen: set[str]) -> None:
    """Fill ``r``'s ``served_*`` fields from the response headers; the engine's description only on
    the first response of each replica (``engines_seen``: the replicas already described)."""
    get = headers.get
    r.served_replica = get(served_by.REPLICA)
    r.served_zone = get(served_by.ZONE)
    r.served_region = get(served_by.REGION)
    r.served_version = get(served_by.VERSION)
    engine = get(served_by.ENGINE)
    if engine and r.served_replica and r.served_replica not in engines_seen:
        parsed = served_by.parse_engine(engine)
        if parsed is not None:
            engines_seen.add(r.served_replica)
            r.engine = parsed


def engines(requests: list[rec.RequestRecord]) -> dict[str, Any] | None:
    """What the engines resolved, from the records: per replica, and the values every replica agreed on
    (``null`` where they differed or none said). None when no response described its engine."""
    per_replica = {r.served_replica: r.engine for r in requests if r.engine and r.served_replica}
    if not per_replica:
        return None
    keys = sorted({k for e in per_replica.values() for k in e})
    agreed = {}
    for k in keys:
        values = {repr(e.get(k)) for e in per_replica.values()}
        agreed[k] = next(iter(per_replica.values())).get(k) if len(values) == 1 else None
    return {**agreed, "replicas": dict(sorted(per_replica.items()))}


def environment(requests: list[rec.RequestRecord], shape: Any) -> dict[str, Any]:
    """What a run's environment records of the engines and the sessions' prefixes: ``engine`` (what
    the engines resolved, :func:`engines`), ``router`` (the Serve request router the replicas named)
    and ``sessions`` (the prefix groups' KV footprint against the KV cache, when the load has sessions)."""
    eng = engines(requests)
    out: dict[str, Any] = {"engine": eng, "router": (eng or {}).get("router")}
    spec = getattr(shape, "sessions", None)
    if spec is not None:
        block = (eng or {}).get("block_size")
        kv = (eng or {}).get("kv_cache_tokens")
        per_group = spec.system_prompt_tokens
        if isinstance(block, int) and block > 0:
            per_group = -(-per_group // block) * block  # whole blocks: what a cache holds
        footprint = spec.prefix_groups * per_group
        out["sessions"] = {
            **spec.to_dict(),
            "prefix_footprint_tokens": footprint,
            "kv_cache_tokens": kv,
            "fits_kv_cache": None if not isinstance(kv, int) else footprint <= kv,
            "what": "every group's system prompt (tokens counted as words, in whole blocks of the engine's block "
                    "size) against one replica's KV cache: when it fits, a warm replica holds every shared prefix",
        }
    return out
