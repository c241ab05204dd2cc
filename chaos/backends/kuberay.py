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

Upgrades and drains (the disruptions users cause themselves): see :meth:`KubeRayBackend.upgrade_app`,
:meth:`KubeRayBackend.drain_node` and kuberay/README.md.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
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
RAYSERVICE = ("ray.io", "v1", "rayservices")  # group, version, plural
# serve_config: an application-level runtime_env change is a new code version for Serve (a hash of
# the import path and the app's runtime_env: ray/serve/_private/deploy_utils.py get_app_code_version),
# so Serve replaces every replica; the local backend sets the same variable
VERSION_ENV = "AVAILPROOF_APP_VERSION"
# cluster: any change of spec.rayClusterConfig outside the fields KubeRay mutes in its hash
# (workerGroupSpecs[*].replicas/minReplicas/maxReplicas/scaleStrategy.workersToDelete) makes it
# prepare a new RayCluster; a pod-template annotation changes nothing in what the pods run
VERSION_ANNOTATION = "availproof.io/app-version"
UPGRADE_VARIANTS = ("serve_config", "cluster")
# Ray Serve's defaults when a deployment leaves them unset (ray/serve/_private/constants.py, Ray 2.60)
SERVE_SHUTDOWN_DEFAULTS = {"graceful_shutdown_timeout_s": 20.0, "graceful_shutdown_wait_loop_s": 2.0}
# KubeRay when spec.upgradeStrategy.type is unset: NewCluster, unless the operator runs with
# ENABLE_ZERO_DOWNTIME=false (rayservice_controller.go isZeroDowntimeUpgradeEnabled)
DEFAULT_UPGRADE_STRATEGY = "NewCluster"


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


def ray_pods(pods: list[dict], cluster: str | None = None, terminating: bool = False) -> list[dict]:
    """Ray pods not being deleted (of one RayCluster when named); with ``terminating``, those too."""
    out = []
    for p in pods:
        lab = _labels(p)
        if lab.get("ray.io/is-ray-node") != "yes":
            continue
        if cluster and lab.get("ray.io/cluster") != cluster:
            continue
        if (p.get("metadata") or {}).get("deletion_timestamp") and not terminating:
            continue
        out.append(p)
    return out


def select(pods: list[dict], nodes: list[dict], *, cluster: str | None = None, zone: str | None = None,
           zones: list[str] | None = None, node_type: str | None = None, group: str | None = None,
           terminating: bool = False) -> list[dict]:
    """Ray pods matching every given criterion; a pod's zone is the zone of its node."""
    by_node = node_zones(nodes)
    wanted = set(zones or []) | ({zone} if zone else set())
    out = []
    for p in ray_pods(pods, cluster, terminating):
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


def _api_message(e: Exception) -> str:
    """The ``message`` of the Status an ApiException carries (else its reason), on one line."""
    try:
        status = json.loads(getattr(e, "body", None) or "{}")
        msg = status.get("message")
        causes = [c.get("message") for c in (status.get("details") or {}).get("causes") or [] if c.get("message")]
    except (TypeError, ValueError, AttributeError):
        msg, causes = None, []
    text = " ".join([str(msg or getattr(e, "reason", None) or e), *causes])
    return " ".join(text.split())[:300]


def _load_serve_config(text: str | None, where: str) -> dict:
    import yaml

    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError as e:
        raise ClusterError(f"{where}: spec.serveConfigV2 is not YAML ({' '.join(str(e).split())[:160]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("applications"), list) or not doc["applications"]:
        raise ClusterError(f"{where}: spec.serveConfigV2 has no applications")
    return doc


def serve_config_with_version(text: str, version: str, where: str = "RayService") -> tuple[str, dict]:
    """``serveConfigV2`` with ``runtime_env.env_vars.AVAILPROOF_APP_VERSION = version`` on every
    application (everything else as it was), and {application: previous value}."""
    import yaml

    doc = _load_serve_config(text, where)
    previous = {}
    for app in doc["applications"]:
        env = app.setdefault("runtime_env", {}) or {}
        app["runtime_env"] = env
        env_vars = env.setdefault("env_vars", {}) or {}
        env["env_vars"] = env_vars
        previous[app.get("name", "default")] = env_vars.get(VERSION_ENV)
        env_vars[VERSION_ENV] = str(version)
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), previous


def _annotated(template: dict | None, version: str) -> dict:
    template = copy.deepcopy(template or {})
    meta = template.setdefault("metadata", {}) or {}
    template["metadata"] = meta
    meta["annotations"] = {**(meta.get("annotations") or {}), VERSION_ANNOTATION: str(version)}
    return template


def cluster_config_patch(ray_cluster_config: dict, version: str) -> dict:
    """The merge patch of ``spec.rayClusterConfig`` that annotates the head's and every worker
    group's pod template with the version. A JSON merge patch replaces lists whole, so
    ``workerGroupSpecs`` is the list as read with only the annotation added."""
    groups = []
    for g in ray_cluster_config.get("workerGroupSpecs") or []:
        g = copy.deepcopy(g)
        g["template"] = _annotated(g.get("template"), version)
        groups.append(g)
    out: dict = {"headGroupSpec": {"template": {"metadata": {"annotations": {VERSION_ANNOTATION: str(version)}}}}}
    if groups:
        out["workerGroupSpecs"] = groups
    return out


def graceful_shutdown_settings(text: str | None, where: str = "RayService") -> dict[str, dict]:
    """Per deployment of ``serveConfigV2``: its application and its graceful-shutdown settings as
    written (None: unset, Serve's default applies). Keyed by deployment name (``app/name`` when two
    applications have a deployment of the same name)."""
    doc = _load_serve_config(text, where)
    rows = [(app.get("name", "default"), d) for app in doc["applications"] for d in app.get("deployments") or []]
    names = [d.get("name") for _, d in rows]
    out = {}
    for app, d in rows:
        key = d.get("name") if names.count(d.get("name")) == 1 else f"{app}/{d.get('name')}"
        out[key] = {"application": app, **{k: d.get(k) for k in SERVE_SHUTDOWN_DEFAULTS}}
    return out


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
    # only the scopes whose methods it has (chaos.backends.base.capabilities_of): no front door of the
    # rig's (the serve Service is the client's), no cluster without GCS fault tolerance (the manifests
    # always set it), no load to the head
    capabilities: frozenset[str] = frozenset()

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
        self.drained: set[str] = set()  # worker pods evicted by drain_node, gone (or going) at their deadline

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

    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]:
        """The front door's listeners: on KubeRay the serve Service itself (see :meth:`front_door`)."""
        return self.targets()

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
        if node in self.drained:
            return self._end_drain(node)
        pods = [p for p in self._ray(node_type="worker") if _name(p) == node]
        return self._delete(limit(pods, 1, f"worker pod {node}"))

    def _end_drain(self, node: str) -> list[str]:
        """The deadline of a drain (:func:`chaos.faults.drain_node` kills the node then): the evicted
        pod, still terminating, is force-deleted (grace 0: its grace period, the deadline, is over;
        the kubelet's SIGKILL comes now too); one already gone left before its deadline: nothing to
        kill, not an error. Only pods this backend evicted get here (checked at the eviction)."""
        self.drained.discard(node)
        left = [p for p in self._pods() if _name(p) == node and _labels(p).get("ray.io/is-ray-node") == "yes"]
        return self._delete(left)

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

        self._follow_active()
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        by_ip = {}
        # a terminating pod (evicted by a drain) still hosts its replicas until it is gone
        for p in select(self._pods(), nodes, cluster=self.cluster, terminating=True):
            n = _node_of(p)
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                by_ip[ip] = (_name(p), zones.get(n), regions.get(n))
        details = placement.serve_details(self.dashboard_url)
        if details is None:
            raise placement.PlacementUnknown(f"the dashboard of {self.cluster} did not answer: placement unknown")
        rows = placement.replicas_from_details(details, by_ip)
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

    # ------------------------------------------------------------- planned disruptions
    def _get_rayservice(self) -> dict:
        return self.custom.get_namespaced_custom_object(*RAYSERVICE[:2], self.namespace, RAYSERVICE[2], self.service)

    def _adopt_active(self, rs: dict | None) -> None:
        """Act on the RayService's active cluster: after a ``cluster`` upgrade KubeRay promotes the new
        RayCluster (and deletes the old one 60 s later, RayClusterDeletionDelayDuration)."""
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if active and active != self.cluster:
            self.cluster = active

    def _follow_active(self) -> None:
        if self.service:
            self._adopt_active(self._get_rayservice())

    def _rayservice(self, what: str) -> dict:
        """The RayService, read for ``what``; a bare RayCluster (no RayService) is refused."""
        if not self.service:
            raise UsageError(f"{what}: {self.cluster} is a bare RayCluster, not a RayService's: KubeRay upgrades "
                             f"only RayServices (--ray-cluster must name the RayService)")
        return self._get_rayservice()

    def upgrade_variants(self) -> tuple[str, ...]:
        return UPGRADE_VARIANTS

    def upgrade_app(self, variant: str, version: str) -> dict:
        """Start a rolling upgrade by changing the RayService, as a user's ``kubectl apply`` does; what
        KubeRay and Serve do with it is what the run measures.

        ``serve_config``: ``spec.serveConfigV2`` with ``AVAILPROOF_APP_VERSION=version`` in every
        application's ``runtime_env.env_vars``: KubeRay applies it in place to the active cluster
        (no new RayCluster); Serve sees a new code version and replaces every replica in a rolling
        update. ``cluster``: the head's and every worker group's pod template annotated
        ``availproof.io/app-version: version`` in ``spec.rayClusterConfig``: the hash KubeRay keeps
        of that spec (without replicas, min/maxReplicas, workersToDelete) changes, so under the
        NewCluster strategy (the default) it brings up a new RayCluster, switches the serve and head
        Services to it once its Serve apps are RUNNING, and deletes the old one 60 s later.

        One JSON merge patch of the RayService, with the resourceVersion read as its precondition
        (a concurrent change makes it fail rather than be overwritten). Refused: an unknown variant,
        a bare RayCluster, an upgrade already in progress, and ``cluster`` under
        ``upgradeStrategy.type: None`` (KubeRay would ignore the change). No pod is deleted here.
        """
        if variant not in UPGRADE_VARIANTS:
            raise UsageError(f"upgrade variant must be one of {', '.join(UPGRADE_VARIANTS)} on KubeRay, got {variant!r}")
        what = f"upgrade ({variant})"
        rs = self._rayservice(what)
        spec, status = rs.get("spec") or {}, rs.get("status") or {}
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if pending:
            raise ClusterError(f"{what}: RayService {self.service} is already upgrading (pending RayCluster "
                               f"{pending}): wait for it to finish")
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        rv = (rs.get("metadata") or {}).get("resourceVersion")
        meta = {"metadata": {"resourceVersion": rv}} if rv else {}
        out = {"variant": variant, "version": str(version), "rayservice": self.service, "cluster_before": self.cluster,
               "upgrade_strategy": strategy}
        if variant == "serve_config":
            text, previous = serve_config_with_version(spec.get("serveConfigV2"), version, f"RayService {self.service}")
            self._patch_rayservice({**meta, "spec": {"serveConfigV2": text}}, what)
            return {**out, "patched": "spec.serveConfigV2", "previous_versions": previous,
                    "changed": f"applications[*].runtime_env.env_vars.{VERSION_ENV}"}
        if strategy == "None":
            raise UsageError(f"{what}: RayService {self.service} has upgradeStrategy.type None: KubeRay would not "
                             f"roll out a rayClusterConfig change (use the serve_config variant)")
        rcc = spec.get("rayClusterConfig") or {}
        patch = cluster_config_patch(rcc, version)
        self._patch_rayservice({**meta, "spec": {"rayClusterConfig": patch}}, what)
        groups = [g.get("groupName") for g in rcc.get("workerGroupSpecs") or []]
        return {**out, "patched": "spec.rayClusterConfig",
                "changed": f"headGroupSpec and workerGroupSpecs[{', '.join(map(str, groups))}]"
                           f".template.metadata.annotations[{VERSION_ANNOTATION}]",
                "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY}

    def _patch_rayservice(self, body: dict, what: str) -> None:
        try:
            self.custom.patch_namespaced_custom_object(*RAYSERVICE[:2], self.namespace, RAYSERVICE[2], self.service,
                                                       body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line, no injection recorded
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise ClusterError(f"{what}: the patch of RayService {self.service} failed (HTTP {status}: "
                               f"{_api_message(e)})") from None

    def drain_node(self, node: str, deadline_s: float) -> dict:
        """A graceful drain of one worker pod with a deadline: a policy/v1 Eviction with
        ``deleteOptions.gracePeriodSeconds`` = the deadline (whole seconds, rounded up, at least 1:
        0 would be a force delete). The API server checks the pod's PodDisruptionBudgets (a refusal,
        HTTP 429, raises: no injection recorded), then deletes the pod gracefully: the kubelet sends
        SIGTERM to its containers and SIGKILL when the grace period ends. Ray 2.60's ``ray start
        --block`` handles that SIGTERM as a drain notice: it marks its node draining (reason
        PREEMPTION) for up to RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S (default 30 s) before tearing
        the node down (ray/_private/node.py). KubeRay replaces the pod meanwhile.

        At the deadline :func:`chaos.faults.drain_node` calls :meth:`kill_node`: for a pod drained
        here it force-deletes what is left of it and accepts that it is gone already."""
        pods = limit([p for p in self._ray(node_type="worker") if _name(p) == node], min(1, self.max_pods),
                     f"drain of worker pod {node}")
        grace = max(1, math.ceil(deadline_s))
        from kubernetes import client as k8s

        body = k8s.V1Eviction(api_version="policy/v1", kind="Eviction",
                              metadata=k8s.V1ObjectMeta(name=node, namespace=self.namespace),
                              delete_options=k8s.V1DeleteOptions(grace_period_seconds=grace))
        try:
            self.core.create_namespaced_pod_eviction(node, self.namespace, body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line, no injection recorded
            status = getattr(e, "status", None)
            if status is None:
                raise
            why = "refused by a PodDisruptionBudget" if status == 429 else "failed"
            raise ClusterError(f"drain of {node}: the eviction was {why} (HTTP {status}: {_api_message(e)})") from None
        self.drained.add(node)
        return {"method": "eviction", "pods": [_name(p) for p in pods], "grace_period_s": grace,
                "k8s_node": _node_of(pods[0])}

    def graceful_shutdown(self) -> dict:
        """For the environment record: each deployment's graceful-shutdown settings as the RayService's
        ``serveConfigV2`` writes them (None: unset, Serve's default in ``defaults`` applies), and the
        RayService's upgrade strategy (None: unset, KubeRay's default in ``effective_strategy``)."""
        where = f"RayService {self.service}"
        rs = self._rayservice("graceful_shutdown")
        spec = rs.get("spec") or {}
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        return {"source": f"{where} spec.serveConfigV2",
                "deployments": graceful_shutdown_settings(spec.get("serveConfigV2"), where),
                "defaults": {**SERVE_SHUTDOWN_DEFAULTS,
                             "source": "Ray Serve (ray/serve/_private/constants.py DEFAULT_GRACEFUL_SHUTDOWN_*)"},
                "upgrade_strategy": strategy, "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY,
                "strategy_note": None if strategy else
                "unset: KubeRay's default, NewCluster unless the operator runs with ENABLE_ZERO_DOWNTIME=false"}

    def front_door(self) -> dict:
        """What stands between the client and the Serve proxies: KubeRay's serve Service."""
        svc = f"{self.service}-serve-svc" if self.service else None
        return {"kind": "kubernetes-service", "shape": "lb", "service": svc, "namespace": self.namespace,
                "serve_url": self.serve_url,
                "selector": {"ray.io/cluster": self.cluster, "ray.io/serve": "true"},
                "detection": "endpoints follow the pod readiness probe (KubeRay's on RayService workers: the "
                             "raylet's health and the Serve proxy's /-/healthz)",
                "what": "a Kubernetes Service over the active RayCluster's serve-ready pods (the head excluded: "
                        "excludeHeadPodFromServeSvc); KubeRay moves its selector to the new RayCluster when it "
                        "promotes one. serve_url is what the client sends to: it must reach this Service (or a "
                        "Service that follows the active cluster the same way) for an upgrade that replaces "
                        "the cluster"}

    # ------------------------------------------------------------- health
    def healthy(self) -> bool:
        self._follow_active()
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

    def heal(self, faults: list[dict], timeout: float = 300.0) -> dict:
        """Heal what ``faults`` (this run's) broke, and nothing else: their engines resumed, their
        zones' partitions healed, the nodes cordoned for their zone or region losses uncordoned; pods
        deleted by the other faults are KubeRay's (or the kubelet's) to bring back: wait for health."""
        done: dict[str, list] = {"resumed": [], "healed": [], "uncordoned": []}
        done["resumed"] = self.resume_engine([p for f in faults if f["scope"] == "engine" for p in f.get("pids") or []])
        for zone in sorted({f["target"] for f in faults if f["scope"] == "partition"}):
            self.heal_zone(zone)
            done["healed"].append(zone)
        lost = sorted({z for f in faults if f["scope"] in ("zone", "region") for z in f["zones"]})
        if lost:
            done["uncordoned"] = self.restore_zones(lost)
        self.wait_healthy(timeout=timeout)
        return done

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
        self._adopt_active(rs)
        return {c.get("type", "?"): c.get("status", "?") for c in ((rs or {}).get("status") or {}).get("conditions") or []}

    def app_status(self) -> str | None:
        from chaos import deploy

        return deploy.app_status(self.dashboard_url)
