"""The Kubernetes backend: the same fault interface, aimed at KubeRay pods instead of processes.

It acts only in the one kube context and namespace it is given, selects targets by label
(``ray.io/cluster``, ``ray.io/group``, ``ray.io/node-type``, the node's
``topology.kubernetes.io/zone``) and refuses a selection that matches no pod or more pods
than the experiment's blast-radius limit. Selection is plain functions over pod and node
dicts (what the ``kubernetes`` client's ``to_dict()`` gives), tested without a cluster; the
class is a thin adapter that calls the API with them.

Notes (KubeRay v1.7): a drain skips pods with emptyDir volumes, and every Ray pod has one
(``/dev/shm``): zone loss therefore cordons the zone's nodes and force-deletes its Ray pods.
A zone partition is a NetworkPolicy that denies all traffic to and from the zone's Ray pods
(it needs a CNI that enforces policies; kind's default kindnet does since v0.24).
"""

from __future__ import annotations

from typing import Any

from chaos.errors import UsageError

ZONE_LABEL = "topology.kubernetes.io/zone"


def _labels(obj: dict) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def node_zones(nodes: list[dict]) -> dict[str, str | None]:
    return {_name(n): _labels(n).get(ZONE_LABEL) for n in nodes}


def ray_pods(pods: list[dict], cluster: str | None = None) -> list[dict]:
    """Running Ray pods (of one RayCluster when named)."""
    out = []
    for p in pods:
        lab = _labels(p)
        if lab.get("ray.io/is-ray-node") != "yes":
            continue
        if cluster and lab.get("ray.io/cluster") != cluster:
            continue
        if (p.get("metadata") or {}).get("deletion_timestamp"):
            continue
        out.append(p)
    return out


def select(pods: list[dict], nodes: list[dict], *, cluster: str | None = None, zone: str | None = None,
           node_type: str | None = None, group: str | None = None) -> list[dict]:
    """Ray pods matching every given criterion; the zone is the zone of the pod's node."""
    zones = node_zones(nodes)
    out = []
    for p in ray_pods(pods, cluster):
        lab = _labels(p)
        if node_type and lab.get("ray.io/node-type") != node_type:
            continue
        if group and lab.get("ray.io/group") != group:
            continue
        if zone and zones.get((p.get("spec") or {}).get("node_name")) != zone:
            continue
        out.append(p)
    return sorted(out, key=_name)


def limit(selected: list[dict], max_pods: int, what: str) -> list[dict]:
    """The blast-radius guard: refuse an empty selection or one larger than allowed."""
    if not selected:
        raise UsageError(f"{what}: the selector matches no pod: refusing to act")
    if len(selected) > max_pods:
        raise UsageError(f"{what}: the selector matches {len(selected)} pods, more than the limit of {max_pods}: "
                         f"refusing to act ({', '.join(_name(p) for p in selected[:5])}...)")
    return selected


def zone_nodes(nodes: list[dict], zone: str) -> list[str]:
    return sorted(_name(n) for n in nodes if _labels(n).get(ZONE_LABEL) == zone)


def partition_policy(zone: str, cluster: str, groups: list[str]) -> dict[str, Any]:
    """A NetworkPolicy isolating the zone's Ray worker pods (no ingress, no egress)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"availproof-partition-{zone}", "labels": {"availproof.io/fault": "partition"}},
        "spec": {
            "podSelector": {"matchLabels": {"ray.io/cluster": cluster},
                            "matchExpressions": [{"key": "ray.io/group", "operator": "In", "values": groups}]},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


class KubeRayBackend:
    """Faults on a KubeRay cluster, within one context and namespace only."""

    name = "kuberay"

    def __init__(self, namespace: str, context: str, cluster: str, max_pods: int = 3, core=None, networking=None):
        if not namespace or not context:
            raise UsageError("the Kubernetes backend needs an explicit namespace and kube context")
        self.namespace, self.context, self.cluster, self.max_pods = namespace, context, cluster, max_pods
        if core is None or networking is None:
            from kubernetes import client, config

            api = config.new_client_from_config(context=context)
            core = core or client.CoreV1Api(api)
            networking = networking or client.NetworkingV1Api(api)
        self.core, self.net = core, networking

    # ------------------------------------------------------------- reads
    def _pods(self) -> list[dict]:
        return [p.to_dict() for p in self.core.list_namespaced_pod(self.namespace).items]

    def _nodes(self) -> list[dict]:
        return [n.to_dict() for n in self.core.list_node().items]

    def zones(self) -> list[str]:
        return sorted({z for z in node_zones(self._nodes()).values() if z})

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        return [_name(p) for p in select(self._pods(), self._nodes(), cluster=self.cluster, zone=zone,
                                         node_type="worker")]

    # ------------------------------------------------------------- faults
    def _delete(self, pods: list[dict]) -> list[str]:
        for p in pods:
            self.core.delete_namespaced_pod(_name(p), self.namespace, grace_period_seconds=0)
        return [_name(p) for p in pods]

    def kill_node(self, node: str) -> list[str]:
        pods = [p for p in ray_pods(self._pods(), self.cluster) if _name(p) == node]
        return self._delete(limit(pods, 1, f"worker pod {node}"))

    def kill_head(self) -> list[str]:
        pods = select(self._pods(), self._nodes(), cluster=self.cluster, node_type="head")
        return self._delete(limit(pods, 1, "head pod"))

    def kill_zone(self, zone: str) -> list[str]:
        nodes = self._nodes()
        pods = limit(select(self._pods(), nodes, cluster=self.cluster, zone=zone), self.max_pods, f"zone {zone}")
        for n in zone_nodes(nodes, zone):
            self.core.patch_node(n, {"spec": {"unschedulable": True}})
        return self._delete(pods)

    def heal_zone_nodes(self, zone: str) -> None:
        for n in zone_nodes(self._nodes(), zone):
            self.core.patch_node(n, {"spec": {"unschedulable": False}})

    def partition_zone(self, zone: str) -> None:
        pods = limit(select(self._pods(), self._nodes(), cluster=self.cluster, zone=zone, node_type="worker"),
                     self.max_pods, f"partition of {zone}")
        groups = sorted({_labels(p).get("ray.io/group") for p in pods})
        self.net.create_namespaced_network_policy(self.namespace, partition_policy(zone, self.cluster, groups))

    def heal_zone(self, zone: str) -> None:
        try:
            self.net.delete_namespaced_network_policy(f"availproof-partition-{zone}", self.namespace)
        except Exception as e:  # noqa: BLE001 - already healed is fine
            if getattr(e, "status", None) != 404:
                raise
        self.heal_zone_nodes(zone)

    def kill_redis(self) -> list[str]:
        pods = [p for p in self._pods() if _labels(p).get("app") == "redis"]
        return self._delete(limit(pods, 1, "redis pod"))
