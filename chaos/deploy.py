"""Deploy a Serve app on a local cluster through the dashboard's REST API, and wait for it.

The same declarative document KubeRay sends (``serveConfigV2``) is PUT to
``/api/serve/applications/``; then the app status and the replica placement are polled until
every replica is RUNNING, and where each landed is checked against the zones asked for.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Callable

from chaos import placement
from chaos.errors import ClusterError
from serve_apps import config as serve_config


def put_config(dashboard_url: str, config: dict, timeout: float = 30.0) -> None:
    req = urllib.request.Request(f"{dashboard_url}/api/serve/applications/", method="PUT",
                                 data=json.dumps(config).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
    except urllib.error.HTTPError as e:
        raise ClusterError(f"Serve refused the config: HTTP {e.code}: {e.read()[:300].decode(errors='replace')}") from None
    except OSError as e:
        raise ClusterError(f"cannot reach the dashboard at {dashboard_url}: {e}") from None


def app_status(dashboard_url: str, app: str = serve_config.APP_NAME) -> str | None:
    details = placement.serve_details(dashboard_url)
    if not details:
        return None
    a = (details.get("applications") or {}).get(app)
    return a.get("status") if a else None


def wait_running(cluster, spec: serve_config.AppSpec, timeout: float, log: Callable[[str], None] = lambda m: None,
                 per_zone: bool = True) -> list[placement.Replica]:
    """Wait until the app is RUNNING with every replica RUNNING where it should be."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        status = app_status(cluster.state.dashboard_url)
        rows = [r for r in placement.replicas(cluster, serve_config.APP_NAME) if r.state == "RUNNING"]
        zones = placement.zones_of(rows)
        now = f"app {status}, running replicas per zone {zones}"
        if now != last:
            log(now)
            last = now
        if status == "RUNNING" and len(rows) == spec.num_replicas:
            if per_zone and any(zones.get(z, 0) != spec.replicas_per_zone for z in spec.zones):
                raise ClusterError(f"replicas landed on {zones}, expected {spec.replicas_per_zone} in each of {spec.zones}")
            return rows
        if status in ("DEPLOY_FAILED",):
            details = placement.serve_details(cluster.state.dashboard_url) or {}
            msg = ((details.get("applications") or {}).get(serve_config.APP_NAME) or {}).get("message", "")
            raise ClusterError(f"deploy failed: {msg[:400]}")
        time.sleep(1.0)
    raise ClusterError(f"app not RUNNING after {timeout:.0f} s ({last})")


def deploy(cluster, spec: serve_config.AppSpec, timeout: float = 300.0,
           log: Callable[[str], None] = lambda m: None) -> list[placement.Replica]:
    """Deploy ``spec`` on a local cluster; return the RUNNING replicas with their domains."""
    spec.http_port = cluster.state.head.serve_port
    cfg = serve_config.serve_config(spec)
    serve_config.validate(cfg)
    t0 = time.monotonic()
    put_config(cluster.state.dashboard_url, cfg)
    rows = wait_running(cluster, spec, timeout, log)
    log(f"{spec.app} app RUNNING in {time.monotonic() - t0:.1f} s: "
        + ", ".join(f"{r.replica_id[:8]}@{r.node}/{r.zone}" for r in rows))
    return rows


def undeploy(cluster, timeout: float = 60.0) -> None:
    req = urllib.request.Request(f"{cluster.state.dashboard_url}/api/serve/applications/", method="DELETE")
    try:
        urllib.request.urlopen(req, timeout=timeout).read()
    except OSError:
        pass
