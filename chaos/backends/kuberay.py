"""The Kubernetes backend: the fault interface (:class:`chaos.backends.base.Backend`) on KubeRay pods.

It acts only in the one kube context and namespace it is given, selects targets by label
(``ray.io/cluster``, ``ray.io/group``, ``ray.io/node-type``, the node's
``topology.kubernetes.io/zone``) and refuses a selection that matches no pod or more pods
than the experiment's blast-radius limit (``max_pods``), checked once per fault before
anything is deleted. Selection is plain functions over pod and node dicts (what the
``kubernetes`` client's ``to_dict()`` gives), tested without a cluster; the class is a thin
adapter that calls the API with them.

Zone and region loss (KubeRay v1.7): a drain skips pods with emptyDir volumes, and every Ray
pod has one (``/dev/shm``); so the domain's nodes are cordoned (and annotated, so the heal
uncordons only those) and its Ray pods force-deleted. KubeRay recreates them at once, but
their groups are pinned to the zone's nodes, so they stay Pending until the heal uncordons.
Partitions: :mod:`chaos.backends.kube_partition`. Commands in pods: :mod:`chaos.backends.kube_exec`.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time

from chaos.backends import kube_exec, kube_partition as kp
from chaos.errors import ClusterError, UsageError

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
CORDON_MARK = "availproof.io/cordoned"
# KubeRay v1.7 names a RayService's cluster <service>-<5 chars of k8s.io/apimachinery's rand.String>
RAND_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def _labels(obj: dict) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _node_of(pod: dict) -> str | None:
    return (pod.get("spec") or {}).get("node_name")


def node_zones(nodes: list[dict]) -> dict[str, str | None]:
    return {_name(n): _labels(n).get(ZONE_LABEL) for n in nodes}


def node_regions(nodes: list[dict]) -> dict[str, str | None]:
    return {_name(n): _labels(n).get(REGION_LABEL) for n in nodes}


def ray_pods(pods: list[dict], cluster: str | None = None) -> list[dict]:
    """Ray pods not being deleted (of one RayCluster when named)."""
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
           zones: list[str] | None = None, node_type: str | None = None, group: str | None = None) -> list[dict]:
    """Ray pods matching every given criterion; a pod's zone is the zone of its node."""
    by_node = node_zones(nodes)
    wanted = set(zones or []) | ({zone} if zone else set())
    out = []
    for p in ray_pods(pods, cluster):
        lab = _labels(p)
        if node_type and lab.get("ray.io/node-type") != node_type:
            continue
        if group and lab.get("ray.io/group") != group:
            continue
        if wanted and by_node.get(_node_of(p)) not in wanted:
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


def zone_nodes(nodes: list[dict], zones: list[str]) -> list[str]:
    return sorted(_name(n) for n in nodes if _labels(n).get(ZONE_LABEL) in set(zones))


def cluster_name(service: str, names: list[str]) -> list[str]:
    """The RayCluster names among ``names`` that are ``service`` itself or KubeRay's name for its cluster."""
    pattern = re.compile(re.escape(service) + f"-[{RAND_CHARS}]{{5}}")
    return [n for n in names if n == service or pattern.fullmatch(n)]


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


def _not_found(e: Exception) -> bool:
    return getattr(e, "status", None) == 404


class KubeRayBackend:
    """Faults on a KubeRay cluster, within one context and namespace only.

    Every write goes to ``namespace`` (pods, NetworkPolicies, partition helper pods) or to the
    nodes of the domain it is told to break (cordon, recorded with an annotation so the heal
    uncordons only those). ``max_pods`` is the experiment's blast-radius limit;
    ``partition_method`` one of :data:`chaos.backends.kube_partition.METHODS`. Processes inside
    pods are signalled through the exec API with their exit status checked (``stream_fn`` is the
    ``kubernetes.stream.stream`` seam).
    """

    name = "kuberay"

    def __init__(self, namespace: str, context: str, cluster: str, max_pods: int = 3, serve_url: str | None = None,
                 dashboard_url: str | None = None, partition_method: str = "networkpolicy",
                 helper_image: str = kp.HELPER_IMAGE, core=None, networking=None, custom=None, stream_fn=None):
        if not namespace or not context:
            raise UsageError("the Kubernetes backend needs an explicit namespace and kube context")
        if partition_method not in kp.METHODS:
            raise UsageError(f"kubernetes.partition_method must be one of {', '.join(kp.METHODS)}, "
                             f"got {partition_method!r}")
        self.namespace, self.context, self.cluster, self.max_pods = namespace, context, cluster, max_pods
        self.service: str | None = None  # the RayService, when the cluster is one's (resolve_cluster)
        self.serve_url, self._dashboard_url = serve_url, dashboard_url
        self.partition_method, self.helper_image = partition_method, helper_image
        if core is None or networking is None or custom is None:
            from kubernetes import client, config

            api = config.new_client_from_config(context=context)
            core = core or client.CoreV1Api(api)
            networking = networking or client.NetworkingV1Api(api)
            custom = custom or client.CustomObjectsApi(api)
        self.core, self.net, self.custom = core, networking, custom
        self.stream_fn = stream_fn
        self.paused: list[str] = []  # "pod/pid" of engines we stopped
        self.head_before_redis_kill: tuple[str, int] | None = None  # (pod name, container restarts)

    # ------------------------------------------------------------- reads
    def _pods(self, label_selector: str | None = None) -> list[dict]:
        kw = {"label_selector": label_selector} if label_selector else {}
        return [p.to_dict() for p in self.core.list_namespaced_pod(self.namespace, **kw).items]

    def _nodes(self) -> list[dict]:
        return [n.to_dict() for n in self.core.list_node().items]

    def resolve_cluster(self) -> str:
        """The RayCluster to act on: the active cluster of the RayService named ``cluster``
        (``status.activeServiceStatus.rayClusterName``), else the one Ray cluster whose pods
        carry that name or KubeRay's ``<service>-<5 chars>`` form of it."""
        try:
            rs = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayservices", self.cluster)
        except Exception as e:  # noqa: BLE001 - ApiException; only "no such RayService" falls through
            if not _not_found(e):
                raise
            rs = {}
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if rs:
            self.service = self.cluster  # the RayService, whose conditions the sampler reads
        if active:
            self.cluster = active
            return active
        names = sorted({_labels(p).get("ray.io/cluster", "") for p in ray_pods(self._pods())} - {""})
        match = cluster_name(self.cluster, names)
        if len(match) != 1:
            raise UsageError(f"RayCluster {self.cluster!r} in namespace {self.namespace}: "
                             f"{'no' if not match else len(match)} matching cluster(s) ({', '.join(names) or 'none'})")
        self.cluster = match[0]
        return self.cluster

    def _ray(self, **kw) -> list[dict]:
        return select(self._pods(), self._nodes(), cluster=self.cluster, **kw)

    def _head(self) -> dict:
        return limit(self._ray(node_type="head"), 1, "head pod")[0]

    def _raycluster(self) -> dict:
        return self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayclusters", self.cluster)

    def zones(self) -> list[str]:
        """The zones the RayCluster's worker groups are pinned to (nodeSelector), else every labelled zone."""
        pinned = {((g.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get(ZONE_LABEL)
                  for g in (self._raycluster().get("spec") or {}).get("workerGroupSpecs") or []} - {None}
        return sorted(pinned) or sorted({z for z in node_zones(self._nodes()).values() if z})

    def regions(self) -> list[str]:
        return sorted({r for r in node_regions(self._nodes()).values() if r})

    def zones_in_region(self, region: str) -> list[str]:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        return sorted({zones[n] for n in zones if regions.get(n) == region and zones[n]})

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        """Worker pods of a zone or region (a "node" of the rig is a Ray pod here)."""
        zones = [zone] if zone else (self.zones_in_region(region) if region else None)
        if zones == []:
            return []
        return [_name(p) for p in self._ray(zones=zones, node_type="worker")]

    def zone_of(self, node: str) -> str | None:
        zones = node_zones(self._nodes())
        for p in self._pods():
            if _name(p) == node:
                return zones.get(_node_of(p))
        return None

    def targets(self) -> list[tuple[str, str, str | None, str | None]]:
        if not self.serve_url:
            raise UsageError("the Kubernetes backend needs the serve Service's URL (--serve-url)")
        return [("serve-svc", self.serve_url, None, None)]

    def head_target(self) -> tuple[str, str, str | None, str | None]:
        raise UsageError("targets: head: the head serves no traffic on KubeRay (excludeHeadPodFromServeSvc)")

    def own_hosts(self) -> tuple[str, ...]:
        return ()

    @property
    def dashboard_url(self) -> str:
        if not self._dashboard_url:
            raise UsageError("the Kubernetes backend needs the head's dashboard URL (--dashboard-url)")
        return self._dashboard_url

    def describe(self) -> dict:
        return {"backend": "kuberay", "context": self.context, "namespace": self.namespace, "cluster": self.cluster,
                "gcs_fault_tolerance": True, "network": "kubernetes", "partition_method": self.partition_method}

    def topology_doc(self) -> dict:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        tree: dict[str, dict[str, list]] = {}
        for p in self._ray(node_type="worker"):
            n = _node_of(p)
            tree.setdefault(regions.get(n) or "-", {}).setdefault(zones.get(n) or "-", []).append({"name": _name(p)})
        return {"name": f"kuberay:{self.cluster}", "regions": [
            {"name": r, "zones": [{"name": z, "nodes": ns} for z, ns in sorted(zs.items())]}
            for r, zs in sorted(tree.items())]}

    # ------------------------------------------------------------- exec
    def exec(self, pod: str, script: str, container: str | None = None) -> str:
        """Run ``script`` in ``pod`` (its Ray container, the first, unless named); stdout, or ExecError."""
        if container is None:
            found = [p for p in self._pods() if _name(p) == pod]
            containers = ((found[0].get("spec") or {}).get("containers") or []) if found else []
            container = containers[0].get("name") if containers else None
        return kube_exec.run(self.core, self.namespace, pod, script, container=container, stream_fn=self.stream_fn)

    # ------------------------------------------------------------- nodes, head, domains
    def _delete(self, pods: list[dict]) -> list[str]:
        for p in pods:
            try:
                self.core.delete_namespaced_pod(_name(p), self.namespace, grace_period_seconds=0)
            except Exception as e:  # noqa: BLE001 - ApiException; a pod already gone is what we wanted
                if not _not_found(e):
                    raise
        return [_name(p) for p in pods]

    def kill_node(self, node: str) -> list[str]:
        pods = [p for p in self._ray(node_type="worker") if _name(p) == node]
        return self._delete(limit(pods, 1, f"worker pod {node}"))

    def start_node(self, node: str) -> None:
        """Nothing to do: KubeRay recreates a deleted worker pod; :meth:`wait_healthy` waits for it."""

    def kill_head(self, method: str = "node") -> list[str]:
        head = _name(self._head())
        if method == "gcs":
            # -x: the process name exactly, so pgrep never matches the shell running it
            out = self.exec(head, "pids=$(pgrep -x gcs_server) && kill -9 $pids && echo $pids")
            return [f"{head}/{pid}" for pid in out.split()]
        return self._delete([self._head()])

    def restart_head(self) -> None:
        """KubeRay (a deleted pod) or the kubelet (an exited container) restarts the head: wait for it."""
        self._wait(self.head_alive, 300, "the head pod to be ready")

    def head_alive(self) -> bool:
        return any(pod_ready(p) for p in self._ray(node_type="head"))

    def kill_zones(self, zones: list[str]) -> list[str]:
        """Zone (or region) loss: one blast-radius check for every Ray pod of ``zones``, then cordon
        their nodes (annotated) and force-delete the pods; they stay out until :meth:`restore_zones`."""
        nodes = self._nodes()
        what = f"loss of {', '.join(zones)}"
        pods = limit(select(self._pods(), nodes, cluster=self.cluster, zones=zones), self.max_pods, what)
        for n in zone_nodes(nodes, zones):
            if ((next(x for x in nodes if _name(x) == n).get("spec") or {}).get("unschedulable")):
                continue  # cordoned by someone else: theirs to uncordon, not ours
            self.core.patch_node(n, {"metadata": {"annotations": {CORDON_MARK: "true"}},
                                     "spec": {"unschedulable": True}})
        return self._delete(pods)

    def restore_zones(self, zones: list[str] | None = None) -> list[str]:
        """Uncordon the nodes this backend cordoned (of ``zones``, or all); KubeRay's Pending pods then schedule."""
        done = []
        for n in self._nodes():
            ann = (n.get("metadata") or {}).get("annotations") or {}
            if ann.get(CORDON_MARK) != "true" or (zones is not None and _labels(n).get(ZONE_LABEL) not in zones):
                continue
            self.core.patch_node(_name(n), {"metadata": {"annotations": {CORDON_MARK: None}},
                                            "spec": {"unschedulable": False}})
            done.append(_name(n))
        return done

    # ------------------------------------------------------------- partition
    def partition_zone(self, zone: str) -> None:
        pods = limit(self._ray(zone=zone, node_type="worker"), self.max_pods, f"partition of {zone}")
        if self.partition_method == "networkpolicy":
            groups = sorted({_labels(p).get("ray.io/group") for p in pods})
            self.net.create_namespaced_network_policy(self.namespace, kp.partition_policy(zone, self.cluster, groups))
            return
        ips = sorted({(p.get("status") or {}).get("pod_ip") for p in pods} - {None})
        if len(ips) != len(pods):
            raise ClusterError(f"partition of {zone}: {len(pods) - len(ips)} of its Ray pods have no IP yet")
        created = []
        try:
            for node in sorted({_node_of(p) for p in pods}):
                self.core.create_namespaced_pod(self.namespace, kp.helper_pod(node, zone, self.helper_image))
                created.append(kp.helper_name(node))
            for helper in created:
                self._wait(lambda h=helper: self._running(h), 120, f"partition helper {helper} to run")
            for helper in created:
                self.exec(helper, kp.apply_script(ips), container="nft")
        except BaseException:
            with contextlib.suppress(Exception):  # never leave half a partition behind; the cause is raised
                self._remove_helpers(created)
            raise

    def _running(self, pod: str) -> bool:
        return any(_name(p) == pod and (p.get("status") or {}).get("phase") == "Running" for p in self._pods())

    def _remove_helpers(self, helpers: list[str]) -> None:
        """Delete the filter table in each helper's node (checked, when the helper runs), then the helper."""
        errors = []
        for h in helpers:
            if self._running(h):
                try:
                    self.exec(h, kp.REMOVE_SCRIPT, container="nft")
                except kube_exec.ExecError as e:
                    errors.append(str(e))  # the helper's own TERM trap removes it as the pod is deleted
            self._delete([{"metadata": {"name": h}}])
        if errors:
            raise ClusterError(f"partition heal: {'; '.join(errors)} (helper pods deleted; their exit removes the rules)")

    def _helpers(self, zone: str | None = None) -> list[dict]:
        sel = ",".join(f"{k}={v}" for k, v in {**kp.HELPER_LABEL, **({kp.ZONE_KEY: zone} if zone else {})}.items())
        return self._pods(label_selector=sel)

    def heal_zone(self, zone: str) -> None:
        """Undo a partition of ``zone`` by either method (whichever is in place)."""
        try:
            self.net.delete_namespaced_network_policy(kp.policy_name(zone), self.namespace)
        except Exception as e:  # noqa: BLE001 - ApiException; already healed is fine
            if not _not_found(e):
                raise
        self._remove_helpers([_name(p) for p in self._helpers(zone)])

    def partitioned_zones(self) -> list[str]:
        selector = ",".join(f"{k}={v}" for k, v in kp.POLICY_LABEL.items())
        pols = self.net.list_namespaced_network_policy(self.namespace, label_selector=selector)
        zones = {_name(p.to_dict()).removeprefix("availproof-partition-") for p in pols.items}
        zones |= {_labels(p).get(kp.ZONE_KEY) for p in self._helpers()} - {None}
        return sorted(zones)

    # ------------------------------------------------------------- redis
    def _redis_pods(self) -> list[dict]:
        return [p for p in self._pods() if _labels(p).get("app") == "redis"]

    def kill_redis(self) -> list[str]:
        head = self._head()
        self.head_before_redis_kill = (_name(head), restarts(head))
        return self._delete(limit(self._redis_pods(), 1, "redis pod"))

    def start_redis(self) -> bool:
        """Redis is a Deployment: wait for its new pod; True when the head's GCS exited meanwhile
        (the head container restarted, or the head pod was replaced)."""
        self._wait(lambda: any(pod_ready(p) for p in self._redis_pods()), 300, "the Redis pod to be ready")
        time.sleep(10)  # the GCS exits a few seconds after losing Redis (Ray 2.60)
        self.restart_head()
        head = self._head()
        name, count = self.head_before_redis_kill or (_name(head), restarts(head))
        return _name(head) != name or restarts(head) > count

    # ------------------------------------------------------------- replicas
    def replicas(self, state: str | None = "RUNNING") -> list:
        from chaos import placement

        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        by_ip = {}
        for p in self._ray():
            n = _node_of(p)
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                by_ip[ip] = (_name(p), zones.get(n), regions.get(n))
        rows = placement.replicas_from_details(placement.serve_details(self.dashboard_url), by_ip)
        return [r for r in rows if state is None or r.state == state]

    def pick_replica(self, zone: str | None = None, replica_id: str | None = None, deployment: str | None = None):
        from chaos import placement

        return placement.pick(self.replicas(), zone=zone, replica_id=replica_id, deployment=deployment)

    def replica_killer(self, r, method: str):
        """Everything but the kill itself done; the returned callable kills the replica."""
        if not r.node:
            raise UsageError(f"replica {r.replica_id}: its pod is not known (node IP {r.node_ip})")
        if method == "sigkill":
            pid = int(r.pid)
            return lambda: (self.exec(r.node, f"kill -9 {pid}"), [f"{r.node}/{pid}"])[1]
        if method == "actor":
            from chaos.ray_actor import ONE_SHOT

            head = _name(self._head())
            script = f"python -c {shlex.quote(ONE_SHOT)} {shlex.quote(r.actor_name)}"
            return lambda: (self.exec(head, script), [f"{r.node}/{r.pid}"])[1]
        if method == "pod":
            pods = limit([p for p in self._ray(node_type="worker") if _name(p) == r.node], 1,
                         f"pod of replica {r.replica_id}")
            return lambda: self._delete(pods)
        raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")

    def pause_engine(self, r) -> list[str]:
        """SIGSTOP the replica's vLLM EngineCore children (else the replica process) inside its pod."""
        pid = int(r.pid)
        out = self.exec(r.node, f"p=$(pgrep -P {pid} -f EngineCore); [ -n \"$p\" ] || p={pid}; "
                                f"kill -STOP $p && echo $p")
        pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
        if not pids:
            raise ClusterError(f"engine of replica {r.replica_id}: `kill -STOP` reported no process")
        self.paused += pids
        return pids

    def resume_engine(self, pids: list[str]) -> list[str]:
        done = []
        for item in pids:
            pod, pid = item.rsplit("/", 1)
            try:
                self.exec(pod, f"kill -CONT {int(pid)}")
            except kube_exec.ExecError:
                if any(_name(p) == pod for p in self._ray()):
                    raise
                # the pod is gone (deleted, replaced): nothing is left stopped
            done.append(item)
            if item in self.paused:
                self.paused.remove(item)
        return done

    # ------------------------------------------------------------- health
    def healthy(self) -> bool:
        pods = self._ray()
        redis = self._redis_pods()
        return (len([p for p in pods if pod_ready(p)]) >= expected_pods(self._raycluster())
                and all(pod_ready(p) for p in pods) and (not redis or any(pod_ready(p) for p in redis)))

    def _wait(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(2)

    def wait_healthy(self, timeout: float = 300.0) -> None:
        self._wait(self.healthy, timeout, f"every Ray pod of {self.cluster} to be ready")

    def heal_all(self, timeout: float = 300.0) -> dict:
        """Every experiment's rollback: resume stopped engines, heal partitions, uncordon what we cordoned."""
        done: dict[str, list] = {"resumed": [], "healed": [], "uncordoned": []}
        done["resumed"] = self.resume_engine(list(self.paused))
        for zone in self.partitioned_zones():
            self.heal_zone(zone)
            done["healed"].append(zone)
        done["uncordoned"] = self.restore_zones()
        self.wait_healthy(timeout=timeout)
        return done

    def observe(self, timeout: float):
        """One sample of the control plane and capacity: GCS, controller and replicas through the
        head's dashboard (as locally); nodes alive are the Ray worker pods Ready per zone, from
        the Kubernetes API (a pod the kubelet reports Ready, as the serve Service's endpoints do)."""
        from dataclasses import replace

        from chaos import sampler
        from serve_apps.config import APP_NAME

        try:
            nodes = self._nodes()
            zones = node_zones(nodes)
            pods = self._ray()
        except Exception as e:  # noqa: BLE001 - the API server not answering is a sample saying so
            zones, pods, k8s_error = {}, [], f"{type(e).__name__}: {e}"[:160]
        else:
            k8s_error = None
        zone_of_ip = {}
        ready: dict[str, int] = {}
        for p in pods:
            if _labels(p).get("ray.io/node-type") == "head":
                continue
            z = zones.get(_node_of(p))
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                zone_of_ip[ip] = z
            if z:
                ready[z] = ready.get(z, 0) + (1 if pod_ready(p) else 0)
        smp = sampler.observe_dashboard(self.dashboard_url, zone_of_ip, APP_NAME, timeout, nodes=False)
        errors = dict(smp.errors)
        if k8s_error:
            errors["kubernetes"] = k8s_error
        return replace(smp, nodes_alive=None if k8s_error else ready, errors=errors,
                       conditions=self._service_conditions(errors))

    def _service_conditions(self, errors: dict[str, str]) -> dict[str, str] | None:
        """The RayService's status conditions (``Ready``, ``UpgradeInProgress``: type -> status), when
        the cluster is a RayService's; None when not known."""
        if not self.service:
            return None
        try:
            rs = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayservices", self.service)
        except Exception as e:  # noqa: BLE001 - the API server not answering is a sample saying so
            errors["rayservice"] = f"{type(e).__name__}: {e}"[:160]
            return None
        return {c.get("type", "?"): c.get("status", "?") for c in ((rs or {}).get("status") or {}).get("conditions") or []}

    def app_status(self) -> str | None:
        from chaos import deploy

        return deploy.app_status(self.dashboard_url)
