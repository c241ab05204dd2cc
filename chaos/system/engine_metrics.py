"""vLLM's preemption counters, sampled into the run's records (KV pressure, issue 48).

With ``app.kv_cache`` (:mod:`serve_apps.kv_cache`) each vLLM engine exports its statistics through Ray
(``RayPrometheusStatLogger``): its counter ``vllm:num_preemptions`` appears on the Ray node's metrics endpoint
(``--metrics-export-port``) as ``ray_vllm_num_preemptions_total``, one series per engine, labelled with its Serve
replica (``ReplicaId``) and engine index (``engine``). A series starts at 0 with its replica and is gone (or frozen)
with it.

:func:`observer` wraps a backend's ``observe`` (the sampler's, :mod:`chaos.system.sampler`): every ``PERIOD_S`` the
sample also reads every node's endpoint and records, in its ``engine`` field, ``{"preemptions": {series: value}}``
(``series``: ``node/replica/engine``; ``null`` when no endpoint answered, its reason in the sample's
``errors["engine"]``). Ray's metrics agent exports on its own period (``metrics_report_interval_ms``), so a value
is up to that old, and what a killed replica's engine counted after its last export is never seen: the count
derived from the samples (:mod:`chaos.analysis.kv_pressure`) is a lower bound. Only the local backend's nodes are
read (their endpoints are in the cluster's state file); on KubeRay the samples say so.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.request
from typing import Any, Callable

PERIOD_S = 5.0  # between two reads: Ray's agent exports every few seconds, and a 2-core machine reads every node
NAME = re.compile(r"^(?:ray_)?vllm[:_]num_preemptions(?:_total)?$")
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
NOT_LOCAL = "engine counters are read from the local backend's nodes only (their metrics endpoints)"


def parse_preemptions(text: str, node: str) -> dict[str, float]:
    """The preemption counters in one metrics endpoint's Prometheus text, by series ``node/replica/engine``."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = LINE.match(line)
        if not m or not NAME.match(m.group(1)):
            continue
        labels = dict(LABEL.findall(m.group(3) or ""))
        replica = labels.get("ReplicaId") or labels.get("WorkerId") or "?"
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        key = f"{node}/{replica}/{labels.get('engine', '0')}"
        out[key] = out.get(key, 0.0) + value
    return out


def fetch(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the cluster's own loopback endpoints
        return r.read().decode("utf-8", "replace")


def read_nodes(targets: list[tuple[str, str]], timeout: float,
               get: Callable[[str, float], str] = fetch) -> tuple[dict[str, float] | None, str | None]:
    """(preemption counters of every node that answered, why some or all did not); ``targets``: (node, host:port)."""
    if not targets:
        return None, "no node with a metrics endpoint in the cluster's state"
    values: dict[str, float] = {}
    failed = []

    def one(target: tuple[str, str]) -> tuple[str, dict[str, float] | None, str | None]:
        node, address = target
        try:
            return node, parse_preemptions(get(f"http://{address}/metrics", timeout), node), None
        except Exception as e:  # noqa: BLE001 - an IncompleteRead is no OSError: one node's, said, never the sample's
            return node, None, type(e).__name__

    # every node at once: read one after another they held a sample up to a timeout each, and the sampler fell
    # more than 5 s behind (2026-12-06, the first KV-pressure run with a kill: its planes read unmeasured)
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        for node, got, error in pool.map(one, targets):
            if error is None:
                values.update(got)
            else:
                failed.append(f"{node}: {error}")
    why = f"{len(failed)} of {len(targets)} metrics endpoints did not answer ({', '.join(failed)})"[:200] if failed else None
    return (values if len(failed) < len(targets) else None), why


def local_targets(backend: Any) -> list[tuple[str, str]] | None:
    """(node, host:port) of every node's metrics endpoint of a local cluster; None for a backend without one."""
    from chaos.system import prometheus

    cluster = getattr(backend, "cluster", None)
    cluster_dir = getattr(cluster, "cluster_dir", None)
    if cluster_dir is None:
        return None
    return [(entry["labels"]["node"], entry["targets"][0]) for entry in prometheus.ray_targets(cluster_dir)]


class EngineCounters:
    """``observe`` with the engines' counters read into its sample every ``period_s`` (module doc)."""

    def __init__(self, observe: Callable[[float], Any], targets: Callable[[], list[tuple[str, str]] | None],
                 period_s: float = PERIOD_S, clock: Callable[[], float] = time.monotonic,
                 get: Callable[[str, float], str] = fetch):
        self.observe, self.targets, self.period_s, self.clock, self.get = observe, targets, period_s, clock, get
        self._next = None

    def __call__(self, timeout: float):
        sample = self.observe(timeout)
        now = self.clock()
        if self._next is not None and now < self._next:
            return sample
        self._next = now + self.period_s
        try:  # the counters are an extra: what fails reading them never costs the backend's sample its planes
            targets = self.targets()
            if targets is None:
                values, why = None, NOT_LOCAL
            else:
                values, why = read_nodes(targets, min(timeout, 1.0), self.get)
        except Exception as e:  # noqa: BLE001 - said in the sample, as an endpoint that did not answer is
            values, why = None, f"reading the engines' counters failed: {type(e).__name__}"
        sample.engine = {"preemptions": values}
        if why:
            sample.errors["engine"] = why
        return sample


def observer(backend: Any, app: str, app_overrides: dict[str, Any]) -> Callable[[float], Any]:
    """The sampler's ``observe``: the backend's, with the engines' counters when the vLLM app runs a small KV cache
    (``app.kv_cache``); the backend's own otherwise (its samples as before)."""
    if app != "llm" or not app_overrides.get("kv_cache"):
        return backend.observe
    return EngineCounters(backend.observe, lambda: local_targets(backend))
