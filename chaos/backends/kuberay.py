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

import shlex
import time
from typing import Any

from chaos.errors import UsageError

ZONE_LABEL = "topology.kubernetes.io/zone"
PARTITION_LABEL = {"availproof.io/fault": "partition"}  # on every NetworkPolicy a partition creates


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
        "metadata": {"name": f"availproof-partition-{zone}", "labels": dict(PARTITION_LABEL)},
        "spec": {
            "podSelector": {"matchLabels": {"ray.io/cluster": cluster},
                            "matchExpressions": [{"key": "ray.io/group", "operator": "In", "values": groups}]},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


REGION_LABEL = "topology.kubernetes.io/region"
CORDON_MARK = "availproof.io/cordoned"


def node_regions(nodes: list[dict]) -> dict[str, str | None]:
    return {_name(n): _labels(n).get(REGION_LABEL) for n in nodes}


def pod_ready(p: dict) -> bool:
    status = p.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def restarts(p: dict) -> int:
    return sum(int(c.get("restart_count") or 0) for c in (p.get("status") or {}).get("container_statuses") or [])


def expected_pods(raycluster: dict) -> int:
    """Ray pods a RayCluster asks for: the head plus each worker group's replicas."""
    spec = raycluster.get("spec") or {}
    return 1 + sum(int(g.get("replicas", 0) or 0) for g in spec.get("workerGroupSpecs") or [])


class KubeRayBackend:
    """Faults on a KubeRay cluster, within one context and namespace only.

    Every write goes to ``namespace`` (pods, NetworkPolicies) or to the nodes of the zone it is
    told to break (cordon, recorded with an annotation so the heal uncordons only those).
    ``max_pods`` is the experiment's blast-radius limit. Processes inside pods are signalled
    through ``kubectl exec`` (the ``exec_fn`` seam: pod name and a shell command).
    """

    name = "kuberay"

    def __init__(self, namespace: str, context: str, cluster: str, max_pods: int = 3, serve_url: str | None = None,
                 dashboard_url: str | None = None, core=None, networking=None, custom=None, exec_fn=None):
        if not namespace or not context:
            raise UsageError("the Kubernetes backend needs an explicit namespace and kube context")
        self.namespace, self.context, self.cluster, self.max_pods = namespace, context, cluster, max_pods
        self.serve_url, self._dashboard_url = serve_url, dashboard_url
        if core is None or networking is None or custom is None:
            from kubernetes import client, config

            api = config.new_client_from_config(context=context)
            core = core or client.CoreV1Api(api)
            networking = networking or client.NetworkingV1Api(api)
            custom = custom or client.CustomObjectsApi(api)
        self.core, self.net, self.custom = core, networking, custom
        self._exec = exec_fn or self._kubectl_exec
        self.paused: list[str] = []  # "pod/pid" of engines we stopped
        self._head_before_redis_kill: tuple[str, int] | None = None  # (pod name, container restarts)

    # ------------------------------------------------------------- reads
    def _pods(self) -> list[dict]:
        return [p.to_dict() for p in self.core.list_namespaced_pod(self.namespace).items]

    def _nodes(self) -> list[dict]:
        return [n.to_dict() for n in self.core.list_node().items]

    def resolve_cluster(self) -> str:
        """The RayCluster's name from the given prefix (a RayService names it ``<svc>-raycluster-xxxxx``)."""
        names = sorted({_labels(p).get("ray.io/cluster", "") for p in ray_pods(self._pods())} - {""})
        exact = [n for n in names if n == self.cluster]
        match = exact or [n for n in names if n.startswith(self.cluster)]
        if len(match) != 1:
            raise UsageError(f"RayCluster {self.cluster!r} in namespace {self.namespace}: "
                             f"{'no' if not match else len(match)} matching cluster(s) ({', '.join(names) or 'none'})")
        self.cluster = match[0]
        return self.cluster

    def _ray(self, **kw) -> list[dict]:
        return select(self._pods(), self._nodes(), cluster=self.cluster, **kw)

    def _head(self) -> dict:
        return limit(self._ray(node_type="head"), 1, "head pod")[0]

    def zones(self) -> list[str]:
        """The zones the RayCluster's worker groups are pinned to (nodeSelector), else every labelled zone."""
        try:
            rc = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayclusters", self.cluster)
            pinned = {((g.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get(ZONE_LABEL)
                      for g in (rc.get("spec") or {}).get("workerGroupSpecs") or []} - {None}
            if pinned:
                return sorted(pinned)
        except Exception:  # noqa: BLE001 - fall back to the nodes' labels
            pass
        return sorted({z for z in node_zones(self._nodes()).values() if z})

    def regions(self) -> list[str]:
        return sorted({r for r in node_regions(self._nodes()).values() if r})

    def zones_in_region(self, region: str) -> list[str]:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        return sorted({zones[n] for n in zones if regions.get(n) == region and zones[n]})

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        """Worker pods of a zone or region (a "node" of the rig is a Ray pod here)."""
        nodes = self._nodes()
        pods = select(self._pods(), nodes, cluster=self.cluster, zone=zone, node_type="worker")
        if region:
            zones, regions = node_zones(nodes), node_regions(nodes)
            pods = [p for p in pods if regions.get((p.get("spec") or {}).get("node_name")) == region
                    and zones.get((p.get("spec") or {}).get("node_name"))]
        return [_name(p) for p in pods]

    def zone_of(self, pod: str) -> str | None:
        nodes = node_zones(self._nodes())
        for p in self._pods():
            if _name(p) == pod:
                return nodes.get((p.get("spec") or {}).get("node_name"))
        return None

    def targets(self) -> list[tuple[str, str, str | None, str | None]]:
        if not self.serve_url:
            raise UsageError("the Kubernetes backend needs the serve Service's URL (port-forwarded to loopback)")
        return [("serve-svc", self.serve_url, None, None)]

    def head_target(self):
        raise UsageError("targets: head: the head serves no traffic on KubeRay (excludeHeadPodFromServeSvc)")

    def own_hosts(self) -> tuple[str, ...]:
        return ()

    @property
    def dashboard_url(self) -> str:
        if not self._dashboard_url:
            raise UsageError("the Kubernetes backend needs the head's dashboard URL (port-forwarded to loopback)")
        return self._dashboard_url

    def describe(self) -> dict:
        return {"backend": "kuberay", "context": self.context, "namespace": self.namespace, "cluster": self.cluster,
                "gcs_fault_tolerance": True, "network": "kubernetes"}

    def topology_doc(self) -> dict:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        tree: dict[str, dict[str, list]] = {}
        for p in self._ray(node_type="worker"):
            n = (p.get("spec") or {}).get("node_name")
            tree.setdefault(regions.get(n) or "-", {}).setdefault(zones.get(n) or "-", []).append({"name": _name(p)})
        return {"name": f"kuberay:{self.cluster}", "regions": [
            {"name": r, "zones": [{"name": z, "nodes": ns} for z, ns in sorted(zs.items())]}
            for r, zs in sorted(tree.items())]}

    # ------------------------------------------------------------- exec
    def _kubectl_exec(self, pod: str, command: str) -> str:
        from kubernetes.stream import stream

        return stream(self.core.connect_get_namespaced_pod_exec, pod, self.namespace, command=["sh", "-c", command],
                      stderr=True, stdin=False, stdout=True, tty=False)

    # ------------------------------------------------------------- faults
    def _delete(self, pods: list[dict]) -> list[str]:
        for p in pods:
            self.core.delete_namespaced_pod(_name(p), self.namespace, grace_period_seconds=0)
        return [_name(p) for p in pods]

    def kill_node(self, node: str) -> list[str]:
        pods = [p for p in self._ray(node_type="worker") if _name(p) == node]
        return self._delete(limit(pods, 1, f"worker pod {node}"))

    def start_node(self, node: str) -> None:
        """Nothing to do: KubeRay recreates a deleted worker pod; :meth:`wait_healthy` waits for it."""

    def kill_head(self, method: str = "node") -> list[str]:
        head = self._head()
        if method == "gcs":
            self._exec(_name(head), "kill -9 $(pgrep -f gcs_server | head -n 1)")
            return [f"{_name(head)}/gcs_server"]
        return self._delete([head])

    def restart_head(self) -> None:
        """KubeRay (a deleted pod) or the kubelet (an exited container) restarts the head: wait for it."""
        self._wait(self.head_alive, 300, "the head pod to be ready")

    def head_alive(self) -> bool:
        return any(pod_ready(p) for p in self._ray(node_type="head"))

    def kill_zone(self, zone: str) -> list[str]:
        nodes = self._nodes()
        pods = limit(select(self._pods(), nodes, cluster=self.cluster, zone=zone), self.max_pods, f"zone {zone}")
        for n in zone_nodes(nodes, zone):
            self.core.patch_node(n, {"metadata": {"annotations": {CORDON_MARK: "true"}},
                                     "spec": {"unschedulable": True}})
        return self._delete(pods)

    def heal_zone_nodes(self, zone: str | None = None) -> list[str]:
        """Uncordon the nodes this backend cordoned (of one zone, or all)."""
        done = []
        for n in self._nodes():
            ann = (n.get("metadata") or {}).get("annotations") or {}
            if ann.get(CORDON_MARK) != "true" or (zone and _labels(n).get(ZONE_LABEL) != zone):
                continue
            self.core.patch_node(_name(n), {"metadata": {"annotations": {CORDON_MARK: None}},
                                            "spec": {"unschedulable": False}})
            done.append(_name(n))
        return done

    def partition_zone(self, zone: str) -> None:
        pods = limit(self._ray(zone=zone, node_type="worker"), self.max_pods, f"partition of {zone}")
        groups = sorted({_labels(p).get("ray.io/group") for p in pods})
        self.net.create_namespaced_network_policy(self.namespace, partition_policy(zone, self.cluster, groups))

    def heal_zone(self, zone: str) -> None:
        try:
            self.net.delete_namespaced_network_policy(f"availproof-partition-{zone}", self.namespace)
        except Exception as e:  # noqa: BLE001 - already healed is fine
            if getattr(e, "status", None) != 404:
                raise
        self.heal_zone_nodes(zone)

    def partitioned_zones(self) -> list[str]:
        selector = ",".join(f"{k}={v}" for k, v in PARTITION_LABEL.items())
        pols = self.net.list_namespaced_network_policy(self.namespace, label_selector=selector)
        return sorted(_name(p.to_dict()).removeprefix("availproof-partition-") for p in pols.items)

    def _redis_pods(self) -> list[dict]:
        return [p for p in self._pods() if _labels(p).get("app") == "redis"]

    def kill_redis(self) -> list[str]:
        head = self._head()
        self._head_before_redis_kill = (_name(head), restarts(head))
        return self._delete(limit(self._redis_pods(), 1, "redis pod"))

    def start_redis(self) -> bool:
        """Redis is a Deployment: wait for its new pod; True when the head's GCS exited meanwhile
        (the head container restarted, or the head pod was replaced)."""
        self._wait(lambda: any(pod_ready(p) for p in self._redis_pods()), 300, "the Redis pod to be ready")
        time.sleep(10)  # the GCS exits a few seconds after losing Redis (Ray 2.60)
        self.restart_head()
        head = self._head()
        name, count = self._head_before_redis_kill or (_name(head), restarts(head))
        return _name(head) != name or restarts(head) > count

    # ------------------------------------------------------------- replicas
    def replicas(self, state: str | None = "RUNNING") -> list:
        from chaos import placement

        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        by_ip = {}
        for p in self._ray():
            n = (p.get("spec") or {}).get("node_name")
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                by_ip[ip] = (_name(p), zones.get(n), regions.get(n))
        rows = placement.replicas_from_details(placement.serve_details(self.dashboard_url), by_ip)
        return [r for r in rows if state is None or r.state == state]

    def pick_replica(self, zone: str | None = None, replica_id: str | None = None, deployment: str | None = None):
        from chaos import placement

        return placement.pick(self.replicas(), zone=zone, replica_id=replica_id, deployment=deployment)

    def replica_killer(self, r, method: str):
        if not r.node:
            raise UsageError(f"replica {r.replica_id}: its pod is not known (node IP {r.node_ip})")
        if method == "sigkill":
            return lambda: (self._exec(r.node, f"kill -9 {int(r.pid)}"), [f"{r.node}/{r.pid}"])[1]
        if method == "actor":
            from chaos.ray_actor import ONE_SHOT

            head = _name(self._head())
            return lambda: (self._exec(head, f"python -c {shlex.quote(ONE_SHOT)} {shlex.quote(r.actor_name)}"),
                            [f"{r.node}/{r.pid}"])[1]
        if method == "pod":
            pods = [p for p in self._ray(node_type="worker") if _name(p) == r.node]
            limit(pods, 1, f"pod of replica {r.replica_id}")
            return lambda: self._delete(pods)
        raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")

    def kill_replica(self, r) -> list[str]:
        return self.replica_killer(r, "sigkill")()

    def pause_engine(self, r) -> list[str]:
        """SIGSTOP the replica's vLLM EngineCore children (else the replica process) inside its pod."""
        pid = int(r.pid)
        out = self._exec(r.node, f"p=$(pgrep -P {pid} -f EngineCore); [ -n \"$p\" ] || p={pid}; "
                                 f"kill -STOP $p && echo $p")
        pids = [f"{r.node}/{x}" for x in str(out).split() if x.isdigit()]
        self.paused += pids
        return pids

    def resume_engine(self, pids: list[str]) -> list[str]:
        done = []
        for item in pids:
            pod, pid = item.rsplit("/", 1)
            self._exec(pod, f"kill -CONT {int(pid)}")
            done.append(item)
            if item in self.paused:
                self.paused.remove(item)
        return done

    # ------------------------------------------------------------- health
    def expected_pods(self) -> int:
        rc = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayclusters", self.cluster)
        return expected_pods(rc)

    def healthy(self) -> bool:
        pods = self._ray()
        redis = self._redis_pods()
        return (len([p for p in pods if pod_ready(p)]) >= self.expected_pods() and all(pod_ready(p) for p in pods)
                and (not redis or any(pod_ready(p) for p in redis)))

    def _wait(self, ok, timeout: float, what: str) -> None:
        from chaos.errors import ClusterError

        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(2)

    def wait_healthy(self, timeout: float = 300.0) -> None:
        self._wait(self.healthy, timeout, f"every Ray pod of {self.cluster} to be ready")

    def heal_all(self, timeout: float = 300.0) -> dict:
        done: dict[str, list] = {"resumed": [], "healed": [], "uncordoned": []}
        done["resumed"] = self.resume_engine(list(self.paused))
        for zone in self.partitioned_zones():
            self.heal_zone(zone)
            done["healed"].append(zone)
        done["uncordoned"] = self.heal_zone_nodes()
        self.wait_healthy(timeout=timeout)
        return done

    def app_status(self) -> str | None:
        from chaos import deploy

        return deploy.app_status(self.dashboard_url)
