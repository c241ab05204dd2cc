"""Where each Serve replica actually runs: read from the dashboard REST API, mapped to domains.

Reading placement through the dashboard needs no Ray driver and keeps working across head
restarts (it simply answers nothing while the head is down). A read that got no answer is not
a read that found no replicas: :func:`replicas` raises :class:`PlacementUnknown` for it, so a
caller that polls (a drain watching its node empty) skips it instead of taking it as empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from chaos.system import ray_dashboard
from chaos.base.errors import ClusterError


# deployments that hold the model (or stand in for it), as opposed to an OpenAI ingress
MODEL_DEPLOYMENTS = ("LLMServer", "StreamTarget")


@dataclass(frozen=True)
class Replica:
    app: str
    deployment: str
    replica_id: str
    state: str
    actor_name: str | None
    actor_id: str | None
    pid: int | None
    node_ip: str | None
    node: str | None
    zone: str | None
    region: str | None


class PlacementUnknown(ClusterError):
    """The dashboard did not answer: where the replicas are (and whether there are any) is not known."""


def replicas_from_details(details: dict | None, nodes_by_ip: dict[str, tuple[str, str | None, str | None]]) -> list[Replica]:
    """Flatten Serve details into replicas; ``nodes_by_ip`` maps an IP to (node, zone, region)."""
    out: list[Replica] = []
    for app_name, app in ((details or {}).get("applications") or {}).items():
        for dep_name, dep in (app.get("deployments") or {}).items():
            for r in dep.get("replicas") or []:
                ip = r.get("node_ip")
                node, zone, region = nodes_by_ip.get(ip, (None, None, None))
                out.append(Replica(
                    app=app_name, deployment=dep_name, replica_id=r.get("replica_id", ""),
                    state=r.get("state", "?"), actor_name=r.get("actor_name"), actor_id=r.get("actor_id"),
                    pid=r.get("pid"), node_ip=ip, node=node, zone=zone, region=region,
                ))
    return out


def replicas(cluster, app: str | None = None) -> list[Replica]:
    """Replicas of a local cluster (all apps, or one); :class:`PlacementUnknown` when the
    dashboard does not answer."""
    by_ip = {n.ip: (n.name, n.zone, n.region) for n in cluster.state.nodes.values()}
    details = ray_dashboard.serve_details(cluster.state.dashboard_url)
    if details is None:
        raise PlacementUnknown(f"the dashboard at {cluster.state.dashboard_url} did not answer: "
                               "where the Serve replicas are is not known")
    return [r for r in replicas_from_details(details, by_ip) if app is None or r.app == app]


def zones_of(rows: list[Replica], state: str = "RUNNING") -> dict[str, int]:
    """Number of replicas in ``state`` per zone."""
    out: dict[str, int] = {}
    for r in rows:
        if r.state == state and r.zone:
            out[r.zone] = out.get(r.zone, 0) + 1
    return out


def pick(rows: list[Replica], zone: str | None = None, replica_id: str | None = None,
         deployment: str | None = None) -> Replica:
    """A RUNNING replica; by default of the deployment that serves the model (not the ingress)."""
    rows = [r for r in rows if r.state == "RUNNING"]
    if deployment:
        rows = [r for r in rows if r.deployment.startswith(deployment)]
    elif not replica_id:
        rows = [r for r in rows if r.deployment.startswith(MODEL_DEPLOYMENTS)]
    if replica_id:
        rows = [r for r in rows if r.replica_id == replica_id]
    if zone:
        rows = [r for r in rows if r.zone == zone]
    if not rows:
        raise ClusterError(f"no RUNNING replica{' in zone ' + zone if zone else ''} to act on")
    return sorted(rows, key=lambda r: (r.zone or "", r.replica_id))[0]
