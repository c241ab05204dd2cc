"""Chaos Toolkit probes: what the steady-state hypotheses check."""

from __future__ import annotations

import asyncio

import httpx

from chaos import analysis
from chaos.core import bounds
from chaos.system import deploy, placement
from chaos.ctk.session import backend_for, run_of


def app_status(configuration: dict | None = None) -> str:
    """The Serve application's status (RUNNING, DEPLOYING, UNHEALTHY, ...), or DOWN."""
    return deploy.app_status(backend_for(configuration).dashboard_url) or "DOWN"


def replicas_per_zone(configuration: dict | None = None) -> dict:
    """RUNNING replicas per zone."""
    return placement.zones_of(backend_for(configuration).replicas())


def _serving_within(b, wait_s: float, serving) -> bool:
    """Ask ``b`` for its replicas (every state) every 2 s until some deployment is listed and ``serving(deployments,
    the RUNNING rows)`` holds (True), or ``wait_s`` has passed (False)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            rows = b.replicas(state=None)
        except placement.PlacementUnknown:
            rows = []  # no answer yet: not serving as far as anyone can tell; asked again
        deployments = {r.deployment for r in rows}
        if deployments and serving(deployments, [r for r in rows if r.state == "RUNNING"]):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(2.0)


def every_zone_serving(min_per_zone: int = 1, wait_s: float = 0.0, configuration: dict | None = None) -> bool:
    """True when every deployment of the app has ``min_per_zone`` RUNNING replicas in every zone,
    within ``wait_s`` seconds (capacity must come back, e.g. a killed replica be replaced)."""
    b = backend_for(configuration)
    return _serving_within(b, wait_s, lambda deployments, running: all(
        placement.zones_of([r for r in running if r.deployment == d]).get(z, 0) >= min_per_zone
        for d in deployments for z in b.zones()))


def every_replica_serving(min_running: int, wait_s: float = 0.0, configuration: dict | None = None) -> bool:
    """True when every deployment of the app has at least ``min_running`` RUNNING replicas, wherever they run,
    within ``wait_s`` seconds: the app's capacity back, not its spread (after a remedy moved a replica to another
    zone, which Serve does not move back: device-loss-remedy)."""
    return _serving_within(backend_for(configuration), wait_s, lambda deployments, running: all(
        sum(r.deployment == d for r in running) >= min_running for d in deployments))


def cluster_healthy(configuration: dict | None = None) -> bool:
    """Every node healthy (local: ALIVE in the GCS with live processes; KubeRay: every Ray pod
    Running and ready), and Redis up when GCS fault tolerance is on."""
    return backend_for(configuration).healthy()


async def _sample(urls: list[str], n: int, timeout_s: float, model: str) -> list[tuple[bool, float | None]]:
    from chaos.load.sse import DONE, SSEParser, parse_openai_event
    import time

    async def one(client, url):
        t0 = time.monotonic()
        try:
            body = {"model": model, "max_tokens": 8, "stream": True,
                    "messages": [{"role": "user", "content": "probe"}]}
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                if r.status_code != 200:
                    return False, None
                p, ttft, done = SSEParser(), None, False
                async for chunk in r.aiter_bytes():
                    for data in p.feed(chunk):
                        if data == DONE:
                            done = True
                        elif ttft is None and parse_openai_event(data).has_token:
                            ttft = time.monotonic() - t0
                return done, ttft
        except (httpx.HTTPError, ValueError):
            return False, None

    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        return await asyncio.gather(*[one(client, u) for u in urls for _ in range(n)])


def _urls(b, which: str) -> list[str]:
    if which == "head":
        return [b.head_target()[1]]
    if which == "front":
        return [t[1] for t in b.front_targets()]
    return [t[1] for t in b.targets()]


def requests_succeed(n: int = 3, via: str = "workers", timeout_s: float = 30.0,
                     configuration: dict | None = None) -> bool:
    """``n`` streaming chat requests through each worker proxy (``via`` workers), the head's (head) or each listener
    of the front door (front: what users reach; a node with no replica has its proxy drained by Serve, 503, which
    the front door takes out of rotation) all succeed."""
    b = backend_for(configuration)
    model = (configuration or {}).get("availproof_model", "availproof-tiny")
    results = asyncio.run(_sample(_urls(b, via), n, timeout_s, model))
    return all(ok for ok, _ in results)


def p95_ttft_below(bound_s: float, n: int = 5, timeout_s: float = 30.0, configuration: dict | None = None) -> bool:
    """p95 TTFT of a short sample through the worker proxies is at most ``bound_s``."""
    b = backend_for(configuration)
    model = (configuration or {}).get("availproof_model", "availproof-tiny")
    results = asyncio.run(_sample(_urls(b, "workers"), n, timeout_s, model))
    ttfts = [t for ok, t in results if ok and t is not None]
    p95 = analysis.percentile(ttfts, 0.95)
    return len(ttfts) == len(results) and p95 is not None and p95 <= bound_s


def recovery_within_bounds(configuration: dict | None = None) -> bool:
    """The measured recovery meets every bound of the experiment (True before any measurement)."""
    run = run_of(configuration)
    if run is None or run.summary is None:
        return True
    return bounds.all_met(run.bound_results or [])


__all__ = ["app_status", "replicas_per_zone", "every_zone_serving", "cluster_healthy", "requests_succeed",
           "p95_ttft_below", "recovery_within_bounds", "promql"]


def promql(query: str, url: str | None = None, configuration: dict | None = None) -> float | None:
    """An instant PromQL query's first value (None when the result is empty).

    The server is ``url``, else the configuration's ``availproof_prometheus_url``, else the run's
    (``availproof run/suite --prometheus`` gives it to the run's options); only a
    server on loopback is queried. Use a tolerance range in the experiment, e.g.
    ``sum(rate(availproof_requests_total{outcome="failed"}[10s]))`` within ``[0, 0.5]``.
    """
    from chaos.system import prometheus
    from chaos.base.errors import UsageError

    run = run_of(configuration)
    url = url or (configuration or {}).get("availproof_prometheus_url") or (run.options.prometheus_url if run else None)
    if not url:
        raise UsageError("promql probe: no Prometheus URL (argument url, configuration availproof_prometheus_url, "
                         "or availproof run/suite --prometheus)")
    return prometheus.query(url, query)
