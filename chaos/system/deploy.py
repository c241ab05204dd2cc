"""Deploy a Serve app on a local cluster through the dashboard's REST API, and wait for it.

The same declarative document KubeRay sends (``serveConfigV2``) is PUT to
``/api/serve/applications/`` (:mod:`chaos.system.ray_dashboard`); then the app status and the replica placement are polled until
every replica is RUNNING, and where each landed is checked against the zones asked for.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Callable

from chaos.system import placement, ray_dashboard
from chaos.base.errors import ClusterError
from serve_apps import config as serve_config

DEPLOY_FAILED_GRACE_S = 120.0


class PlacementError(ClusterError):
    """The app runs, but its replicas are not spread over the zones as asked (Serve does not move
    replicas back, e.g. to a zone whose drained node returned)."""


def proxy_ready(url: str, timeout: float = 2.0) -> bool:
    """A Serve proxy that answers /-/routes with the app's route (proxies start after the app)."""
    try:
        with urllib.request.urlopen(f"{url}/-/routes", timeout=timeout) as r:
            return r.status == 200 and serve_config.ROUTE in json.load(r)
    except (OSError, ValueError):
        return False


def app_status(dashboard_url: str, app: str = serve_config.APP_NAME, since: float | None = None) -> str | None:
    """The app's status; with ``since`` (wall clock), a status from an older deploy reads PENDING."""
    details = ray_dashboard.serve_details(dashboard_url)
    if not details:
        return None
    a = (details.get("applications") or {}).get(app)
    if not a:
        return None
    if since is not None and (a.get("last_deployed_time_s") or 0) < since - 1.0:
        return "PENDING"
    return a.get("status")


def deployed_app(cluster) -> str | None:
    """Which of our apps (stream, llm) the cluster runs, from its deployed config."""
    details = ray_dashboard.serve_details(cluster.state.dashboard_url) or {}
    app = (details.get("applications") or {}).get(serve_config.APP_NAME) or {}
    path = ((app.get("deployed_app_config") or {}).get("import_path")) or ""
    if path in (serve_config.STREAM_IMPORT, serve_config.MIGRATING_IMPORT):  # migration's ingress in front or not
        return "stream"
    if "serve.llm" in path:
        return "llm"
    return None


def deployments_differ(cluster, spec: serve_config.AppSpec) -> bool:
    """The deployed app's deployments, or its arguments, are not what ``spec`` asks for (an experiment's
    overrides): it must be deployed again. The LLM app carries its deployments' settings in its arguments
    (``args.llm_configs[].deployment_config``: the progress watchdog's ``user_config`` among them), the
    stream target in ``deployments``. The application's runtime_env is not compared (an upgrade changes it)."""
    details = ray_dashboard.serve_details(cluster.state.dashboard_url) or {}
    app = (details.get("applications") or {}).get(serve_config.APP_NAME) or {}
    have = app.get("deployed_app_config") or {}
    spec.http_port = cluster.state.head.serve_port
    want = serve_config.serve_config(spec)["applications"][0]
    return (_norm(have.get("deployments")) != _norm(want.get("deployments"))
            or _plain(have.get("args")) != _plain(want.get("args")))


def _num(v):
    """``v`` with every integer a float (Serve returns 1.0 for 1)."""
    if isinstance(v, dict):
        return {k: _num(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_num(x) for x in v]
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _norm(deps) -> str:
    """Deployments as comparable text: in name order, numbers as floats."""
    return json.dumps(_num(sorted(deps or [], key=lambda d: d.get("name", ""))), sort_keys=True)


def _plain(args) -> str:
    """An application's arguments as comparable text (none: empty)."""
    return json.dumps(_num(args or {}), sort_keys=True)


def wait_running(cluster, spec: serve_config.AppSpec, timeout: float, log: Callable[[str], None] = lambda m: None,
                 per_zone: bool = True, since: float | None = None) -> list[placement.Replica]:
    """Wait until the app is RUNNING with every replica RUNNING where it should be."""
    deadline = time.monotonic() + timeout
    last = ""
    failed_since = None
    while time.monotonic() < deadline:
        status = app_status(cluster.state.dashboard_url, since=since)
        try:
            rows = [r for r in placement.replicas(cluster, serve_config.APP_NAME) if r.state == "RUNNING"]
        except placement.PlacementUnknown:
            rows = None  # not read: not known to be running, asked again below
        by_dep: dict[str, list[placement.Replica]] = {}
        for r in rows or []:
            by_dep.setdefault(r.deployment, []).append(r)
        zones = {d: placement.zones_of(rs) for d, rs in sorted(by_dep.items())}
        now = f"app {status}, running replicas per zone {zones if rows is not None else 'unknown'}"
        if now != last:
            log(now)
            last = now
        if status == "RUNNING" and by_dep and all(len(rs) == spec.num_replicas for rs in by_dep.values()):
            for dep, z in zones.items():
                if per_zone and any(z.get(zone, 0) != spec.replicas_per_zone for zone in spec.zones):
                    raise PlacementError(f"{dep} replicas landed on {z}, expected {spec.replicas_per_zone} "
                                         f"in each of {spec.zones}")
            waiting = [u for u in cluster.proxy_urls().values() if not proxy_ready(u)]
            if not waiting:
                return rows
            last = f"app RUNNING; waiting for the proxies at {', '.join(waiting)}"
        failed_since = (failed_since or time.monotonic()) if status == "DEPLOY_FAILED" else None
        # Serve keeps retrying a failed replica: give up only when the failure persists
        if failed_since is not None and time.monotonic() - failed_since > DEPLOY_FAILED_GRACE_S:
            details = ray_dashboard.serve_details(cluster.state.dashboard_url) or {}
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
    if app_status(cluster.state.dashboard_url) == "DEPLOY_FAILED":
        log("the app is in DEPLOY_FAILED: deleting it before deploying again")
        undeploy(cluster)
    since = time.time()
    ray_dashboard.put_serve_config(cluster.state.dashboard_url, cfg)
    rows = wait_running(cluster, spec, timeout, log, since=since)
    log(f"{spec.app} app RUNNING in {time.monotonic() - t0:.1f} s: "
        + ", ".join(f"{r.replica_id[:8]}@{r.node}/{r.zone}" for r in rows))
    return rows


def undeploy(cluster, timeout: float = 60.0) -> None:
    """Delete every Serve app and wait until it is gone."""
    ray_dashboard.delete_serve_applications(cluster.state.dashboard_url, timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and app_status(cluster.state.dashboard_url) is not None:
        time.sleep(1.0)
