"""The Kubernetes backend: the fault interface (:class:`chaos.backends.base.Backend`) on KubeRay pods.

It acts only in the one kube context and namespace it is given, selects targets by label
(``ray.io/cluster``, ``ray.io/group``, ``ray.io/node-type``, the node's
``topology.kubernetes.io/zone``) and refuses a selection that matches no pod or more pods
than the experiment's blast-radius limit (``max_pods``), checked once per fault before
anything is deleted. Selection is plain functions over pod and node dicts (what the
``kubernetes`` client's ``to_dict()`` gives), tested without a cluster; the class is a thin
adapter that calls the API with them.

A kill is a crash: deleting a pod is not one. Even with ``gracePeriodSeconds=0`` (the object
leaves the API at once) the kubelet still stops the containers through their grace: SIGTERM,
then SIGKILL after the grace period (Kubernetes ``pkg/kubelet/pod_workers.go``
``calculateEffectiveGracePeriod``: at least 1 s, or the pod's terminationGracePeriodSeconds on
older kubelets; ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer``: at least
``minimumGracePeriodInSeconds`` = 2 s), and a SIGTERM is what ``ray start --block`` (and Redis)
shut down cleanly on. So every kill of a node, zone, region, head (method ``node``), Redis or
replica pod first SIGKILLs the processes inside each pod through exec (:data:`CRASH_SCRIPT`: ``kill
-9 -1``, every process of the container's PID namespace but its PID 1 and the caller; KubeRay v1.7
runs the Ray container as ``/bin/bash -c -- "ulimit ...; ray start ... --block"``
(``ray-operator/controllers/ray/common/pod.go`` BuildPod, ``utils.GetContainerCommand``), so PID
1 is that bash, or ``ray start`` itself where bash execs its last command: either way raylet,
GCS, dashboard and workers die by SIGKILL, and ``ray start --block`` exits 1 as soon as it sees a
subprocess die unexpectedly, without a graceful shutdown (``ray/scripts/scripts.py`` ``start``)),
checks the exit status, and only then deletes the pod (grace 0) for KubeRay or the Deployment to
replace. What the kubelet's SIGTERM reaches afterwards is only what is left of the dead container.

Zone and region loss (KubeRay v1.7): a drain skips pods with emptyDir volumes, and every Ray
pod has one (``/dev/shm``); so every node of the domain that one of this RayCluster's pod templates
admits (where KubeRay's replacements could be scheduled), hosts its pods, or is labelled
``availproof.io/zone-loss-node=true`` is cordoned (:mod:`chaos.backends.kube_zone`), annotated with the
run id (so the heal uncordons only its own), counted against ``max_nodes`` (default: ``max_pods``), and
its Ray pods crashed and force-deleted. KubeRay recreates them once they are gone, but their
groups are pinned to the zone, so they stay Pending on the cordoned nodes until the heal; a watch
proves it from the injection to the heal (a Ray pod Ready in the zone meanwhile: not in effect).
Node autoscalers that would bring the zone back: :mod:`chaos.backends.kube_autoscale`.
Partitions: :mod:`chaos.backends.kube_partition`. Commands in pods: :mod:`chaos.backends.kube_exec`.
Leftovers of a run that crashed (helper pods, NetworkPolicies, labelled pods, cordoned nodes)
are found by label and annotation: :meth:`KubeRayBackend.leftovers`, :meth:`KubeRayBackend.remove_leftovers`.

Upgrades and drains (the disruptions users cause themselves): see :meth:`KubeRayBackend.upgrade_app`,
:meth:`KubeRayBackend.drain_node` and kuberay/README.md.

Before any fault (:meth:`KubeRayBackend.prepare`): a SelfSubjectAccessReview for every verb the faults
and their heals call (:mod:`chaos.backends.kube_access`), the leftovers check, the refusal of a zone or
region loss on an autoscaled cluster unless acknowledged, of a ``cluster`` upgrade KubeRay would not roll
out, and admission's dry run for a partition (and for the load workers' Job). :meth:`KubeRayBackend.plan`
says, reading only, what a fault would touch (``availproof run --plan``).

The load workers can run in the cluster, as pods of a Job off the Ray cluster's nodes
(``kubernetes.load.in_cluster``: :mod:`chaos.backends.kube_load`, :meth:`KubeRayBackend.load_pool`); a fault
whose scope reaches a node hosting one is refused before anything is done
(:meth:`KubeRayBackend.refuse_reaching_load`).
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import json
import math
import re
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

from chaos.backends import kube_access, kube_autoscale as ka, kube_exec, kube_load as kl, kube_partition as kp
from chaos.backends import kube_zone as kz
from chaos.errors import ClusterError, SetupError, UsageError, parse_bool

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
CORDON_MARK = "availproof.io/cordoned"  # annotation on a node a zone loss cordoned; its value: the run id
ZONE_LOSS_LABEL = kz.ZONE_LOSS_LABEL  # "true" on a node a zone loss may cordon though no template of ours admits it
ZONE_WATCH_POLL_S = 2.0  # how often a zone loss's watch looks for a Ray pod Ready in the lost zones (kube_zone)
# The crash of a pod's processes from inside its main container: SIGKILL to every process of the
# container's PID namespace but its PID 1 (the kernel protects a namespace's init from signals sent
# inside it) and the caller. Exit 0: sent; 137: the exec'd shell itself was SIGKILLed, as the kernel
# does to what is left in a PID namespace once its init exits (bash exits when `ray start` dies),
# i.e. the container went down under it; 1: nothing to signal.
CRASH_SCRIPT = "kill -9 -1"
CRASH_OK = (0, 137)
# Redis: its image's command execs redis-server, so it is PID 1 unless the pod shares its process
# namespace (kuberay/base/redis.yaml sets shareProcessNamespace: true; PID 1 is then the pause process)
REDIS_CRASH_SCRIPT = ('c=$(cat /proc/1/comm 2>/dev/null); if [ "$c" = redis-server ]; then echo "redis-server is '
                      'PID 1 of its container, which no signal sent inside the container reaches: set '
                      'shareProcessNamespace: true on the Redis pod" >&2; exit 3; fi; kill -9 -1')
GCS_EXIT_WINDOW_S = 30.0  # how long after a Redis kill the head's GCS is watched for its exit (Ray 2.60: seconds)
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
# After a cluster upgrade's patch: how long KubeRay has to answer it (its RayService controller reconciles
# on the watch event, else requeues every 2 s: ServiceDefaultRequeueDuration), and how often it is read
KUBERAY_ANSWER_S = 30.0
KUBERAY_POLL_S = 1.0
# Autoscaling (zone and region loss): the CRD's default maxReplicas, i.e. none set (ray.io_rayclusters.yaml
# v1.7.0: workerGroupSpecs[].maxReplicas default 2147483647)
UNSET_MAX_REPLICAS = 2147483647
KARPENTER_LABELS = ("karpenter.sh/nodepool", "karpenter.sh/provisioner-name")  # on the nodes Karpenter made
# cluster-autoscaler's status ConfigMap (its --status-config-map-name default; looked for in every namespace)
# and Karpenter's NodePools: chaos.backends.kube_autoscale
AUTOSCALER_STATUS = ka.STATUS_NAME


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


zone_loss_nodes = kz.zone_loss_nodes  # which nodes a zone loss takes out: chaos.backends.kube_zone


def check(what: str, ok: bool, seen: str) -> dict:
    """One effect check: what was looked at, whether it shows the fault in effect, what was seen."""
    return {"check": what, "ok": bool(ok), "seen": seen}


def proc_states_script(pids: list[int]) -> str:
    """Prints "PID STATE" per process (the state letter of /proc/PID/stat, "gone" when there is none)."""
    return ("for p in " + " ".join(str(int(x)) for x in pids) + "; do "
            "s=$(sed -n 's/^.*) \\([A-Za-z]\\).*/\\1/p' /proc/$p/stat 2>/dev/null); echo \"$p ${s:-gone}\"; done")


def _pod_ips(pods: list[dict]) -> list[str]:
    return sorted({(p.get("status") or {}).get("pod_ip") for p in pods} - {None})


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


def autoscaling_signs(cluster_spec: dict | None) -> list[str]:
    """Why a RayCluster spec (or a RayService's ``rayClusterConfig``) may add Ray pods by itself:
    ``enableInTreeAutoscaling: true`` (KubeRay v1.7 ``utils.IsAutoscalingEnabled``: the Ray autoscaler
    then sets each group's replicas) and, with it, each worker group whose ``maxReplicas`` is set above its
    ``replicas`` (its room to grow; the CRD's default, 2147483647, means none was set and is not counted).
    Without in-tree autoscaling nothing in KubeRay changes a group's replicas: ``GetWorkerGroupDesiredReplicas``
    (``utils/util.go``) only clamps ``replicas`` to [minReplicas, maxReplicas], so a ``maxReplicas`` above
    ``replicas`` is no sign there."""
    spec = cluster_spec or {}
    if not spec.get("enableInTreeAutoscaling"):
        return []
    out = ["enableInTreeAutoscaling: true"]
    for g in spec.get("workerGroupSpecs") or []:
        top, replicas = g.get("maxReplicas"), g.get("replicas")
        if top is None or int(top) >= UNSET_MAX_REPLICAS:
            continue
        if int(top) > int(replicas if replicas is not None else g.get("minReplicas") or 0):
            out.append(f"worker group {g.get('groupName')}: maxReplicas {top} > replicas {replicas}")
    return out


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
    nodes of the domain it is told to break that this RayCluster's pods could run on (cordon, annotated
    with ``run_id`` so the heal uncordons only this run's). ``max_pods`` is the experiment's
    blast-radius limit in pods, ``max_nodes`` (default ``max_pods``) in nodes a zone or region loss
    may cordon; ``partition_method`` one of :data:`chaos.backends.kube_partition.METHODS`
    (``node-filter`` by default). Processes inside pods are signalled through the exec API with
    their exit status checked (``stream_fn`` is the ``kubernetes.stream.stream`` seam), over an
    ApiClient of exec's own (``exec_core``). ``run_id`` (settable; default a random token made here)
    marks everything this backend creates or cordons. ``load`` (``kubernetes.load``,
    :class:`chaos.backends.kube_load.LoadJobSettings`): with ``in_cluster`` the run's load workers are pods
    of a Job of this backend's (:meth:`load_pool`), and no fault may reach a node that hosts one
    (:meth:`refuse_reaching_load`).
    """

    name = "kuberay"
    # only the scopes whose methods it has (chaos.backends.base.capabilities_of): no front door of the
    # rig's (the serve Service is the client's), no cluster without GCS fault tolerance (the manifests
    # always set it), no load to the head
    capabilities: frozenset[str] = frozenset()

    def __init__(self, namespace: str, context: str, cluster: str, max_pods: int = 3, serve_url: str | None = None,
                 dashboard_url: str | None = None, partition_method: str = kp.DEFAULT_METHOD,
                 helper_image: str = kp.HELPER_IMAGE, core=None, networking=None, custom=None, stream_fn=None,
                 max_nodes: int | None = None, exec_core=None, run_id: str | None = None,
                 helper_deadline_s: float = kp.DEFAULT_DEADLINE_S, gcs_exit_window_s: float = GCS_EXIT_WINDOW_S,
                 authz=None, allow_autoscaled_zone_loss: bool = False, batch=None,
                 load: kl.LoadJobSettings | None = None, zone_watch_poll_s: float = ZONE_WATCH_POLL_S):
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
            if exec_core is None:  # exec's own ApiClient: stream() patches the one it is given (kube_exec)
                exec_core = client.CoreV1Api(config.new_client_from_config(context=context))
        self.core, self.net, self.custom = core, networking, custom
        if authz is None:  # SelfSubjectAccessReviews over the reads' own ApiClient
            from kubernetes import client

            authz = client.AuthorizationV1Api(core.api_client)
        self.authz = authz
        if batch is None:  # the load workers' Job, over the reads' ApiClient
            from kubernetes import client

            batch = client.BatchV1Api(core.api_client)
        self.batch = batch
        self.load_job = load if load is not None and load.in_cluster else None  # the load workers as a Job: kube_load
        self.allow_autoscaled_zone_loss = parse_bool(allow_autoscaled_zone_loss, "allow_autoscaled_zone_loss")
        self.exec_core = exec_core if exec_core is not None else kube_exec.own_core(core)
        self.stream_fn = stream_fn
        self.max_nodes = max_pods if max_nodes is None else max_nodes
        self.run_id = run_id or secrets.token_hex(4)
        self.helper_deadline_s, self.gcs_exit_window_s = helper_deadline_s, gcs_exit_window_s
        self.paused: list[str] = []  # "pod/pid" of engines we stopped
        self.head_before_redis_kill: tuple[str, int, str | None] | None = None  # (pod name, restarts, uid)
        self.redis_killed_at: float | None = None  # monotonic instant of the last Redis kill
        self.drained: set[str] = set()  # worker pods evicted by drain_node, gone (or going) at their deadline
        # what the effect checks compare with: pods this backend crashed (name -> uid, restarts at the
        # kill), the head as it was at the last head kill, the nodes of each zone loss, each zone's cut
        self.killed: dict[str, dict] = {}
        self.head_at_kill: dict | None = None
        self.lost_nodes: dict[tuple[str, ...], list[str]] = {}
        self.cuts: dict[str, dict] = {}
        # zone and region loss, proven from the injection to the heal (kube_zone.ZoneWatch): one watch per
        # loss, keyed by its zones; every node name known when the loss began (a later one was added since)
        self.zone_watch_poll_s = float(zone_watch_poll_s)
        self.zone_watches: dict[tuple[str, ...], kz.ZoneWatch] = {}
        self.nodes_at_loss: dict[tuple[str, ...], set[str]] = {}
        # tests only: False leaves the cordon of the zone's spare nodes out (only those hosting the pods, or
        # labelled, are cordoned: the loss as it was before, which KubeRay's replacements undid on a spare node)
        self.cordon_spare_nodes = True

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
                "gcs_fault_tolerance": True, "network": "kubernetes", "partition_method": self.partition_method,
                "run_id": self.run_id, "max_pods": self.max_pods, "max_nodes": self.max_nodes,
                "load_workers": ({"where": "pods of a Kubernetes Job", "image": self.load_job.image,
                                  "node_selector": self.load_job.node_selector}
                                 if self.load_job is not None else {"where": "processes of the rig"})}

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
    def exec(self, pod: str, script: str, container: str | None = None, ok_codes: tuple[int, ...] = (0,),
             core=None) -> str:
        """Run ``script`` in ``pod`` (its Ray container, the first, unless named); stdout, or ExecError
        unless it exited with one of ``ok_codes``. Through exec's own ApiClient (:attr:`exec_core`, or
        ``core``: execs run in parallel each need their own, stream() patching the one it is given)."""
        if container is None:
            found = [p for p in self._pods() if _name(p) == pod]
            containers = ((found[0].get("spec") or {}).get("containers") or []) if found else []
            container = containers[0].get("name") if containers else None
        return kube_exec.run(core or self.exec_core, self.namespace, pod, script, container=container,
                             stream_fn=self.stream_fn, ok_codes=ok_codes)

    def _exec_in(self, pod: dict, script: str, ok_codes: tuple[int, ...] = (0,), core=None) -> str:
        """:meth:`exec` in the first container of a pod already read (no second read of the pod)."""
        containers = (pod.get("spec") or {}).get("containers") or []
        return self.exec(_name(pod), script, container=containers[0].get("name") if containers else None,
                         ok_codes=ok_codes, core=core)

    # ------------------------------------------------------------- nodes, head, domains
    def _delete(self, pods: list[dict]) -> list[str]:
        for p in pods:
            try:
                self.core.delete_namespaced_pod(_name(p), self.namespace, grace_period_seconds=0)
            except Exception as e:  # noqa: BLE001 - ApiException; a pod already gone is what we wanted
                if not _not_found(e):
                    raise
        return [_name(p) for p in pods]

    def _crash(self, pods: list[dict], what: str, script: str = CRASH_SCRIPT) -> None:
        """SIGKILL every process of each pod's main container from inside it (``script``, exit status
        checked: :data:`CRASH_OK`), all the pods at once (one exec each, in parallel); raise
        :class:`~chaos.backends.kube_exec.ExecError` naming every pod whose kill failed, after trying
        them all. What each pod was (uid, container restarts) is kept for :meth:`effect_checks`."""
        for p in pods:
            self.killed[_name(p)] = {"uid": (p.get("metadata") or {}).get("uid"), "restarts": restarts(p)}

        def one(p: dict) -> str | None:
            try:  # an ApiClient per exec: they run at once
                self._exec_in(p, script, ok_codes=CRASH_OK,
                              core=kube_exec.own_core(self.exec_core) if len(pods) > 1 else None)
            except kube_exec.ExecError as e:
                return str(e)
            return None

        if len(pods) == 1:
            failed = [one(pods[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(16, len(pods))) as pool:
                failed = list(pool.map(one, pods))
        errors = [e for e in failed if e]
        if errors:
            raise kube_exec.ExecError(f"{what}: the SIGKILL of {len(errors)} of {len(pods)} pod(s) failed, "
                                      f"none of them deleted: {'; '.join(errors)}"[:900])

    def _kill_pods(self, pods: list[dict], what: str, script: str = CRASH_SCRIPT) -> list[str]:
        """A crash, then the pod's removal: :meth:`_crash`, then a delete with grace 0 (KubeRay or the
        Deployment replaces the pod; the kubelet's SIGTERM finds only what is left of the dead container)."""
        self._crash(pods, what, script)
        return self._delete(pods)

    def kill_node(self, node: str) -> list[str]:
        if node in self.drained:
            return self._end_drain(node)
        pods = limit([p for p in self._ray(node_type="worker") if _name(p) == node], 1, f"worker pod {node}")
        self.refuse_reaching_load(f"kill of worker pod {node}", nodes=[_node_of(p) for p in pods])
        return self._kill_pods(pods, f"kill of worker pod {node}")

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
        head = self._head()
        self.head_at_kill = {"name": _name(head), "uid": (head.get("metadata") or {}).get("uid"),
                             "restarts": restarts(head)}
        if method == "gcs":
            # -x: the process name exactly, so pgrep never matches the shell running it
            out = self._exec_in(head, "pids=$(pgrep -x gcs_server) && kill -9 $pids && echo $pids")
            return [f"{_name(head)}/{pid}" for pid in out.split()]
        return self._kill_pods([head], f"kill of head pod {_name(head)}")

    def restart_head(self) -> None:
        """KubeRay (a deleted pod) or the kubelet (an exited container) restarts the head: wait for it."""
        self._wait(self.head_alive, 300, "the head pod to be ready")

    def head_alive(self) -> bool:
        return any(pod_ready(p) for p in self._ray(node_type="head"))

    def kill_zones(self, zones: list[str]) -> list[str]:
        """Zone (or region) loss: one blast-radius check for every Ray pod of ``zones`` (``max_pods``) and
        for every node it would cordon (``max_nodes``: every node of the zones one of the cluster's pod
        templates admits, that hosts its pods, or that carries :data:`ZONE_LOSS_LABEL`:
        :func:`chaos.backends.kube_zone.zone_loss_nodes`), then cordon those nodes (annotated with the run
        id; one someone else cordoned is left alone), SIGKILL the pods' processes and force-delete the pods;
        they stay out until :meth:`restore_zones`. From then on a :class:`~chaos.backends.kube_zone.ZoneWatch`
        looks every ``zone_watch_poll_s`` for a Ray pod of the cluster Ready in the zones (the proof that the
        loss holds until the heal: :meth:`effect_checks`, :meth:`effect_held`, :meth:`restore_zones`)."""
        started, started_ns = time.monotonic(), time.time_ns()
        what = f"loss of {', '.join(zones)}"
        key = tuple(sorted(zones))
        nodes, pods, cordon, theirs = self._zone_loss_reach(zones, what)
        if not self.cordon_spare_nodes:  # tests only: the loss as it was, which a zone's spare nodes undid
            cordon, theirs = zone_loss_nodes(nodes, pods, zones)
        self.lost_nodes[key] = sorted(set(cordon) | set(theirs))
        self.nodes_at_loss[key] = {_name(n) for n in nodes}
        by_name = {_name(n): n for n in nodes}
        for n in cordon:
            self._cordon(by_name[n])
        killed = self._kill_pods(pods, what)
        old = self.zone_watches.pop(key, None)
        if old is not None:
            old.stop(final_look=False)
        self.zone_watches[key] = kz.ZoneWatch(list(key), self.cluster, lambda: self._ready_in_lost_zones(key),
                                              self.zone_watch_poll_s, started, started_ns,
                                              max_life_s=self.helper_deadline_s).start()
        return killed

    def _ready_in_lost_zones(self, key: tuple[str, ...]) -> list[dict]:
        """One look of a zone loss's watch: each Ray pod of the cluster Ready on a node of the lost zones,
        with why that node could take it (uncordoned since, added since the loss began, or left schedulable)."""
        nodes = self._nodes()
        by_name = {_name(n): n for n in nodes}
        lost, known = set(self.lost_nodes.get(key) or ()), self.nodes_at_loss.get(key) or set()
        out = []
        for p in select(self._pods(), nodes, cluster=self.cluster, zones=list(key)):
            if not pod_ready(p):
                continue
            n = _node_of(p)
            cordoned = bool(((by_name.get(n) or {}).get("spec") or {}).get("unschedulable"))
            if n not in known:
                how = "a node added after the loss began (an autoscaler's?), never cordoned"
            elif n in lost:
                how = ("one the loss cordoned, uncordoned since by someone else" if not cordoned else
                       "one the loss cordoned, still cordoned (the pod was bound to it anyway)")
            else:
                how = "one the loss left schedulable"
            out.append({"pod": _name(p), "node": n, "zone": _labels(by_name.get(n) or {}).get(ZONE_LABEL),
                        "how": how})
        return out

    def _watch_of(self, zones) -> kz.ZoneWatch | None:
        return self.zone_watches.get(tuple(sorted(zones or [])))

    def effect_held(self, fault: dict) -> list[dict]:
        """For a zone or region loss: whether it held so far, from its injection until now, as effect checks
        (one look now, added to what the watch saw since the loss began; [] for other scopes). What a fault's
        wait loop may call before its heal; :meth:`restore_zones` records the same into the fault itself."""
        if fault.get("scope") not in ("zone", "region"):
            return []
        w = self._watch_of(fault.get("zones"))
        if w is None:
            return [check(f"the loss of {', '.join(fault.get('zones') or [])} watched from the injection", False,
                          "this backend has no watch of it")]
        self._adopt_fault(w, fault)
        w.look_once()
        return [w.check()]

    @staticmethod
    def _adopt_fault(w: kz.ZoneWatch, fault: dict) -> None:
        if not any(f is fault for f in w.faults):
            w.faults.append(fault)

    def _zone_loss_reach(self, zones: list[str], what: str) -> tuple[list[dict], list[dict], list[str], list[str]]:
        """What a loss of ``zones`` would touch, within the blast-radius limits (``max_pods``,
        ``max_nodes``; refused beyond them): (the nodes read, the zones' Ray pods, the nodes this
        run would cordon, those someone else cordoned)."""
        nodes = self._nodes()
        self.refuse_reaching_load(what, zones=zones, nodes_read=nodes)
        pods = limit(select(self._pods(), nodes, cluster=self.cluster, zones=zones), self.max_pods, what)
        cordon, theirs = zone_loss_nodes(nodes, pods, zones, kz.cluster_templates(self._raycluster()))
        if len(cordon) > self.max_nodes:
            raise UsageError(f"{what}: it would cordon {len(cordon)} nodes, more than the limit of {self.max_nodes} "
                             f"(max_nodes): refusing to act ({', '.join(cordon[:5])}...)")
        return nodes, pods, cordon, theirs

    def _patch_node(self, node: dict, body: dict) -> None:
        """A patch of a node read before, with its resourceVersion as precondition: a node changed
        meanwhile (someone cordoned or uncordoned it) fails it (409) instead of being overwritten."""
        rv = (node.get("metadata") or {}).get("resource_version")
        if rv:
            body = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": rv}}
        try:
            self.core.patch_node(_name(node), body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise ClusterError(f"node {_name(node)}: the patch failed (HTTP {status}: {_api_message(e)})") from None

    def _cordon(self, node: dict) -> None:
        self._patch_node(node, {"metadata": {"annotations": {CORDON_MARK: self.run_id}}, "spec": {"unschedulable": True}})

    def _uncordon(self, node: dict) -> None:
        """Drop the mark; uncordon unless someone did already (a schedulable node stays as it is)."""
        body: dict = {"metadata": {"annotations": {CORDON_MARK: None}}}
        if (node.get("spec") or {}).get("unschedulable"):
            body["spec"] = {"unschedulable": False}
        self._patch_node(node, body)

    def restore_zones(self, zones: list[str] | None = None) -> list[str]:
        """Uncordon the nodes this run cordoned (annotated with its run id; of ``zones``, or all):
        KubeRay's Pending pods then schedule. Another run's cordon, or a node cordoned by someone
        else (no annotation of ours), is left alone. First the watch of each loss healed here stops,
        after one last look: what it found goes into the fault it proves (:meth:`ZoneWatch.record
        <chaos.backends.kube_zone.ZoneWatch.record>`; a zone that came back makes it not in effect)."""
        self._stop_watches(zones)
        done = []
        for n in self._nodes():
            ann = (n.get("metadata") or {}).get("annotations") or {}
            if ann.get(CORDON_MARK) != self.run_id or (zones is not None and _labels(n).get(ZONE_LABEL) not in zones):
                continue
            self._uncordon(n)
            done.append(_name(n))
        return done

    def _stop_watches(self, zones: list[str] | None) -> dict[tuple[str, ...], dict]:
        """Stop the watches of the losses of ``zones`` (all when None), each after a last look; record each
        finding into the faults it proves. Returns the findings."""
        out = {}
        for key in list(self.zone_watches):
            if zones is not None and not set(key) <= set(zones):
                continue
            w = self.zone_watches.pop(key)
            out[key] = w.stop()
            for f in w.faults:
                w.record(f)
        return out

    # ------------------------------------------------------------- partition
    def _cut_pods(self, zone: str) -> list[dict]:
        self.refuse_reaching_load(f"partition of {zone}", zones=[zone])
        return limit(self._ray(zone=zone, node_type="worker"), self.max_pods, f"partition of {zone}")

    def prepare(self, run_id: str, scope: str, faults: list[dict] | None = None) -> None:
        """Before any fault, in this order (each refusal one line, nothing injected): act under the
        run's id (cordons and helpers carry it); ask the API server whether this context may do every
        verb the faults and their heals need (:meth:`preflight_access`); refuse while any object of
        the rig is left on the cluster (a crashed run's: `availproof recover --backend kuberay` removes
        them); refuse a zone or region loss on an autoscaled cluster unless acknowledged
        (:meth:`refuse_autoscaled_zone_loss`); refuse a ``cluster`` upgrade KubeRay would not roll out
        (:meth:`preflight_upgrade`); for a partition ask admission first (a dry-run create of every
        helper or policy), so nothing is half-applied. ``faults``: the experiment's planned faults
        (:func:`chaos.plan.faults_of`: scope and arguments of each), which may name more scopes than
        ``scope`` (a second fault) and the variant, zones and methods."""
        self.run_id = run_id
        planned = list(faults or [])
        scopes = ({scope} | {f.get("scope") for f in planned}) - {None}
        self.preflight_access(scopes)
        left = self.leftovers()
        if left:
            shown = ", ".join(f"{x['kind']} {x['name']} (run {x.get('run_id')})" for x in left[:5])
            raise SetupError(f"the cluster still has {len(left)} object(s) of an earlier run of the rig: {shown}"
                             f"{' ...' if len(left) > 5 else ''}; run `availproof recover --backend kuberay` first")
        if scopes & {"zone", "region"}:
            self.refuse_autoscaled_zone_loss(self._planned_lost_zones(scope, planned))
        if any(f.get("scope") == "upgrade" and (f.get("arguments") or {}).get("variant") == "cluster" for f in planned):
            self.preflight_upgrade("cluster")
        if "partition" in scopes:
            named = {(f.get("arguments") or {}).get("zone") for f in planned if f.get("scope") == "partition"}
            for zone in sorted(named - {None}) or self.zones():
                self.preflight_partition(zone)
        if self.load_job is not None:
            self.preflight_load()

    def _planned_lost_zones(self, scope: str, planned: list[dict]) -> list[str] | None:
        """The zones the planned zone and region losses name (None: one names none, so every zone)."""
        zones: set[str] = set()
        losses = [f for f in planned if f.get("scope") in ("zone", "region")]
        if not losses:
            return None
        for f in losses:
            a = f.get("arguments") or {}
            named = [a["zone"]] if f["scope"] == "zone" and a.get("zone") else (
                self.zones_in_region(a["region"]) if f["scope"] == "region" and a.get("region") else None)
            if not named:
                return None
            zones |= set(named)
        return sorted(zones)

    def preflight_access(self, scopes) -> list[str]:
        """One SelfSubjectAccessReview per verb and resource the faults of ``scopes`` and their heals call
        (:func:`chaos.backends.kube_access.needed`, with this backend's partition method); any denial
        raises one line naming each missing access. Returns what was reviewed (as ``kubectl auth can-i``
        words it)."""
        wanted = kube_access.needed(scopes, self.partition_method, load_in_cluster=self.load_job is not None,
                                    autoscalers=not self.allow_autoscaled_zone_loss)
        try:
            missing = kube_access.denied(self.authz, self.namespace, wanted)
        except Exception as e:  # noqa: BLE001 - ApiException: the review itself failed
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise SetupError(f"kube context {self.context}: the permissions check (SelfSubjectAccessReview) failed "
                             f"(HTTP {status}: {_api_message(e)})") from None
        if missing:
            raise SetupError(kube_access.refusal(self.context, self.namespace, missing))
        return [a.text(self.namespace) for a in wanted]

    def preflight_load(self) -> dict:
        """Before a run whose load workers are a Job (``kubernetes.load.in_cluster``): a server-side dry-run
        create of that Job (one worker: the pod template is the same for every index), through admission
        (Pod Security, policy engines), nothing stored. A refusal raises one line."""
        job = kl.job_manifest(self.load_job, self.run_id, kl.job_name(self.run_id, "dryrun"), 1, self.cluster, 600)
        try:
            self.batch.create_namespaced_job(self.namespace, job, dry_run="All")
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise SetupError(f"the load workers' Job {_name(job)}: admission refuses it in namespace {self.namespace} "
                             f"(HTTP {status}: {_api_message(e)})") from None
        return {"would_create": f"Job/{_name(job)}", "image": self.load_job.image}

    def load_pods(self) -> list[dict]:
        """The rig's load worker pods (any run's) that are or may be running: Pending or Running."""
        return [p for p in self._pods(label_selector=kl.RUN_LABEL)
                if (p.get("status") or {}).get("phase") in ("Pending", "Running", None)]

    def refuse_reaching_load(self, what: str, nodes=(), zones=(), nodes_read: list[dict] | None = None) -> None:
        """The blast-radius check for the load: refuse (one line) a fault whose scope reaches a node hosting
        a load worker pod of the rig (:mod:`chaos.backends.kube_load`), that is one of ``nodes`` or in one of
        ``zones`` (a zone or region loss, a zone's partition), whichever run's pod it is: the load that
        measures a fault must stay outside its reach."""
        load = [p for p in self.load_pods() if _node_of(p)]
        if not load:
            return
        zone_of = node_zones(nodes_read if nodes_read is not None else self._nodes())
        hit = [p for p in load if _node_of(p) in set(nodes) or zone_of.get(_node_of(p)) in set(zones)]
        if hit:
            where = sorted({f"{_node_of(p)} ({zone_of.get(_node_of(p)) or 'no zone'})" for p in hit})
            raise UsageError(f"{what}: its scope reaches node(s) {', '.join(where)} hosting load worker pod(s) "
                             f"{', '.join(sorted(_name(p) for p in hit)[:5])}: refusing to act (the load that measures "
                             f"a fault must stay outside its reach: place the load pods elsewhere with "
                             f"kubernetes.load.node_selector)")

    def load_pool(self, shape, events, **kw):
        """The run's load workers as pods of a Job (:class:`chaos.backends.kube_load_pool.JobPool`), or None
        when ``kubernetes.load.in_cluster`` is off (the workers are then processes of the rig)."""
        if self.load_job is None:
            return None
        from chaos.backends.kube_load_pool import JobPool

        return JobPool(self, self.load_job, shape, events, **kw)

    def preflight_partition(self, zone: str) -> dict:
        """Before any run that partitions ``zone``: a server-side dry-run create (``dryRun=All``: through
        admission, nothing stored) of every object the partition would create: the node-filter helper
        pod for each node of the zone's Ray pods (``hostNetwork`` + ``NET_ADMIN``: Pod Security
        ``baseline`` or a policy engine refuses it), or the NetworkPolicy. A refusal raises one line;
        else what would be created."""
        pods = self._cut_pods(zone)
        what = f"partition of {zone} ({self.partition_method})"
        if self.partition_method == "networkpolicy":
            objects = [("NetworkPolicy", kp.policy_name(zone),
                        lambda: self.net.create_namespaced_network_policy(
                            self.namespace, kp.partition_policy(zone, self.cluster, self.run_id), dry_run="All"))]
        else:
            objects = [("Pod", kp.helper_name(node),
                        lambda node=node: self.core.create_namespaced_pod(
                            self.namespace, kp.helper_pod(node, zone, self.helper_image, self.run_id,
                                                          self.helper_deadline_s), dry_run="All"))
                       for node in sorted({_node_of(p) for p in pods})]
        for kind, name, create in objects:
            try:
                create()
            except Exception as e:  # noqa: BLE001 - ApiException: one line
                status = getattr(e, "status", None)
                if status is None:
                    raise
                hint = (" (the helper needs hostNetwork and NET_ADMIN: a namespace whose Pod Security admits "
                        "them, privileged; or --partition-method networkpolicy, whose effect is checked)"
                        if kind == "Pod" else "")
                raise ClusterError(f"{what}: admission refuses the {kind} {name} in namespace {self.namespace} "
                                   f"(HTTP {status}: {_api_message(e)}){hint}") from None
        return {"method": self.partition_method, "would_create": [f"{k}/{n}" for k, n, _ in objects],
                "pods": [_name(p) for p in pods]}

    def autoscaling(self, zones: list[str] | None = None) -> list[str]:
        """What may add nodes or Ray pods in ``zones`` (all when None) by itself, each sign in a few words:
        Ray's in-tree autoscaling on this RayCluster or its RayService's ``rayClusterConfig``
        (:func:`autoscaling_signs`), nodes of those zones made by Karpenter (:data:`KARPENTER_LABELS`), and
        (:mod:`chaos.backends.kube_autoscale`) a cluster-autoscaler's status ConfigMap in any namespace, a
        cluster-autoscaler's pod in any namespace, a Karpenter NodePool that admits one of the zones (with no
        node there yet too). A read refused or failed is a sign too ("unknown": an autoscaler there would
        not be seen). Read-only: one list of configmaps (by name), of pods and of NodePools, cluster-wide.
        A node autoscaler running off the cluster that writes no status ConfigMap is not visible through the
        Kubernetes API: none found is not proof that none runs."""
        signs: list[str] = []
        specs = [(f"RayCluster {self.cluster}", (self._raycluster() or {}).get("spec"))]
        if self.service:
            specs.append((f"RayService {self.service}", ((self._get_rayservice() or {}).get("spec") or {})
                          .get("rayClusterConfig")))
        seen = set()  # the RayService's rayClusterConfig usually says what its RayCluster says: once
        for where, spec in specs:
            for sign in autoscaling_signs(spec):
                if sign not in seen:
                    seen.add(sign)
                    signs.append(f"{where}: {sign}")
        wanted = set(zones) if zones else None
        karpenter = sorted(_name(n) for n in self._nodes()
                           if (wanted is None or _labels(n).get(ZONE_LABEL) in wanted)
                           and any(k in _labels(n) for k in KARPENTER_LABELS))
        if karpenter:
            signs.append(f"Karpenter nodes in the zone(s): {', '.join(karpenter[:3])}{' ...' if len(karpenter) > 3 else ''}")
        return signs + self._node_autoscaler_signs(zones)

    def _node_autoscaler_signs(self, zones: list[str] | None) -> list[str]:
        """The cluster-wide reads of :mod:`chaos.backends.kube_autoscale`; each refused or failed one: unknown."""
        signs: list[str] = []
        try:
            cms = self.core.list_config_map_for_all_namespaces(field_selector=f"metadata.name={ka.STATUS_NAME}")
            signs += ka.status_configmap_signs([c.to_dict() for c in cms.items])
        except Exception as e:  # noqa: BLE001 - ApiException: refused or failed, the answer is unknown
            if getattr(e, "status", None) is None:
                raise
            signs.append(ka.unknown(f"ConfigMaps named {ka.STATUS_NAME} (list configmaps, all namespaces)", e))
        try:
            signs += ka.autoscaler_pod_signs([p.to_dict() for p in self.core.list_pod_for_all_namespaces().items])
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) is None:
                raise
            signs.append(ka.unknown("cluster-autoscaler's pods (list pods, all namespaces)", e))
        group, versions, plural = ka.KARPENTER
        for version in versions:
            try:
                pools = self.custom.list_cluster_custom_object(group, version, plural)
            except Exception as e:  # noqa: BLE001
                if _not_found(e):
                    continue  # no such resource (this version of the CRD, or no Karpenter)
                if getattr(e, "status", None) is None:
                    raise
                signs.append(ka.unknown(f"Karpenter NodePools (list {plural}.{group}/{version})", e))
                break
            signs += ka.nodepool_signs((pools or {}).get("items") or [], zones,
                                       kz.cluster_templates(self._raycluster()))
            break
        return signs

    def refuse_autoscaled_zone_loss(self, zones: list[str] | None = None) -> None:
        """A zone or region loss on an autoscaled cluster is refused (one line), unless acknowledged
        (``allow_autoscaled_zone_loss``: ``--allow-autoscaled-zone-loss``). The loss cordons the zone's nodes
        and crashes its Ray pods; KubeRay's replacements are pinned to the zone (their group's
        nodeSelector) and stay Pending there. A Ray autoscaler asks for more pods of the zone's group for
        the replicas it cannot place, and a node autoscaler (cluster-autoscaler, Karpenter, GKE's) adds a
        node in that zone for Pending pods pinned to it: a new node is not cordoned, so the zone comes back
        before the heal and the loss is not what the run says it measured."""
        if self.allow_autoscaled_zone_loss:
            return
        signs = self.autoscaling(zones)
        if signs:
            raise SetupError(f"zone or region loss on an autoscaled cluster ({'; '.join(signs)}): KubeRay's "
                             f"replacement pods stay Pending in the lost zone and an autoscaler adds nodes there "
                             f"for them (new nodes are not cordoned), which ends the loss early: refusing. Run where "
                             f"autoscaling of those zones is off, or acknowledge it with --allow-autoscaled-zone-loss "
                             f"(kubernetes.allow_autoscaled_zone_loss: true; a zone that comes back makes the "
                             f"zone's effect check fail, an ERROR, not a PASS)")

    def preflight_upgrade(self, variant: str) -> dict:
        """Before a run whose method upgrades: refuse what KubeRay would not roll out, before any load.
        ``cluster`` under ``upgradeStrategy.type: None`` (KubeRay v1.7 ``rayservice_controller.go``
        ``isZeroDowntimeUpgradeEnabled``: false, so ``shouldPrepareNewCluster`` never prepares a new
        RayCluster and the change is never applied), or while an upgrade is under way (a pending
        RayCluster). What the API does not show (the operator's ``ENABLE_ZERO_DOWNTIME=false`` when the
        type is unset; ``NewClusterWithIncrementalUpgrade`` without its feature gate) :meth:`upgrade_app`
        learns from KubeRay's answer to the patch itself. Returns the strategy as read."""
        what = f"upgrade ({variant})"
        rs = self._rayservice(what)
        spec, status = rs.get("spec") or {}, rs.get("status") or {}
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if pending:
            raise ClusterError(f"{what}: RayService {self.service} is already upgrading (pending RayCluster "
                               f"{pending}): wait for it to finish")
        if variant == "cluster" and strategy == "None":
            raise UsageError(f"{what}: RayService {self.service} has upgradeStrategy.type None: KubeRay would not "
                             f"roll out a rayClusterConfig change (use the serve_config variant)")
        return {"upgrade_strategy": strategy, "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY}

    def partition_zone(self, zone: str, deadline_s: float | None = None) -> None:
        """Cut ``zone``'s Ray worker pods off the rest (:mod:`chaos.backends.kube_partition`): the set-up
        (:meth:`partition_armer`), then the cut itself. ``deadline_s``: how long the helper pods and the
        probe live at most (default ``helper_deadline_s``)."""
        self.partition_armer(zone, deadline_s)()

    def partition_armer(self, zone: str, deadline_s: float | None = None):
        """Everything a partition of ``zone`` needs but the cut, done now, as :meth:`replica_killer` arms a
        kill: the probe connection opened across the future cut (echoing), and per method what makes the
        cut one step: ``node-filter``, the helper pod on each node of the zone's Ray pods created and
        Running (its image pulled); ``networkpolicy``, the zone's pods labelled (a label selects, it cuts
        nothing). Returns the cut: a callable that only applies the nft table through each helper (or creates
        the NetworkPolicy), so that the fault's inject mark, taken just before it, is the cut's instant and
        the time to impact counts from it. It returns ``{"cut_at_ns", "armed_s"}``. A set-up or a cut that
        fails removes what it made (helpers, labels, the probe) and raises."""
        t0 = time.monotonic()
        pods = self._cut_pods(zone)
        ips = _pod_ips(pods)
        if len(ips) != len(pods):
            raise ClusterError(f"partition of {zone}: {len(pods) - len(ips)} of its Ray pods have no IP yet")
        life = float(deadline_s or self.helper_deadline_s)
        probe = self._open_probe(zone, pods, life)
        self.cuts[zone] = {"method": self.partition_method, "ips": ips, "probe": probe, "cut_at_ns": None}
        helpers: list[str] = []
        try:
            if self.partition_method == "networkpolicy":
                self._label_members(zone, pods)
            else:
                helpers = self._start_helpers(zone, pods, life)
        except BaseException:
            with contextlib.suppress(Exception):  # the cause is raised
                self._close_probe(zone)
            raise
        armed_s = round(time.monotonic() - t0, 3)

        def cut() -> dict:
            try:
                if self.partition_method == "networkpolicy":
                    self.net.create_namespaced_network_policy(self.namespace,
                                                              kp.partition_policy(zone, self.cluster, self.run_id))
                else:
                    for helper in helpers:
                        self.exec(helper, kp.apply_script(ips), container="nft")
            except BaseException:
                with contextlib.suppress(Exception):  # never leave half a partition behind; the cause is raised
                    if self.partition_method == "networkpolicy":
                        self._unlabel(pods)
                    else:
                        self._remove_helpers(helpers)
                with contextlib.suppress(Exception):
                    self._close_probe(zone)
                raise
            self.cuts[zone]["cut_at_ns"] = time.time_ns()
            return {"cut_at_ns": self.cuts[zone]["cut_at_ns"], "armed_s": armed_s}

        return cut

    def _open_probe(self, zone: str, pods: list[dict], life: float) -> dict:
        """A TCP connection from a Ray pod inside the zone to one outside (the head unless it is in the
        cut), both ends pod IPs, opened and echoing before the cut (:mod:`chaos.backends.kube_partition`)."""
        inside = pods[0]
        cut = set(_pod_ips(pods))
        others = sorted((p for p in self._ray() if (p.get("status") or {}).get("pod_ip") not in cut | {None}),
                        key=lambda p: (_labels(p).get("ray.io/node-type") != "head", _name(p)))
        if not others:
            raise ClusterError(f"partition of {zone}: no Ray pod of {self.cluster} outside the zone to hold the far "
                               f"end of the connection that proves the cut")
        outside = others[0]
        host = outside["status"]["pod_ip"]
        pid = kp.probe_id(self.run_id, zone)
        out = self._exec_in(outside, kp.probe_server_script(pid, life, ipaddress.ip_address(host).version))
        try:
            port = int(out.split()[0])
            state = self._exec_in(inside, kp.probe_client_script(pid, host, port, life)).split()
            if not state or state[0] != "open":
                raise ClusterError(f"partition of {zone}: the connection {_name(inside)} -> {host}:{port} that "
                                   f"proves the cut could not be opened ({' '.join(state) or 'no answer'})")
        except BaseException:
            with contextlib.suppress(Exception):
                self._exec_in(outside, kp.probe_stop_script(pid))
            raise
        return {"id": pid, "inside": _name(inside), "outside": _name(outside), "host": host, "port": port}

    def _close_probe(self, zone: str) -> None:
        probe = (self.cuts.get(zone) or {}).get("probe")
        if not probe:
            return
        self.cuts[zone]["probe"] = None
        for pod in (probe["inside"], probe["outside"]):
            with contextlib.suppress(kube_exec.ExecError):  # a pod gone took the probe's process with it
                self.exec(pod, kp.probe_stop_script(probe["id"]))

    def _label_members(self, zone: str, pods: list[dict]) -> None:
        """The networkpolicy variant's set-up: label exactly the zone's pods (the policy will select them)."""
        labelled = []
        try:
            for p in pods:
                self.core.patch_namespaced_pod(_name(p), self.namespace, {"metadata": {"labels": {kp.MEMBER_LABEL: zone}}})
                labelled.append(p)
        except BaseException:
            with contextlib.suppress(Exception):
                self._unlabel(labelled)
            raise

    def _unlabel(self, pods: list[dict]) -> None:
        for p in pods:
            try:
                self.core.patch_namespaced_pod(_name(p), self.namespace, {"metadata": {"labels": {kp.MEMBER_LABEL: None}}})
            except Exception as e:  # noqa: BLE001 - ApiException; a pod gone needs no label removed
                if not _not_found(e):
                    raise

    def _start_helpers(self, zone: str, pods: list[dict], life: float) -> list[str]:
        """The node-filter variant's set-up: a helper pod on each node of the zone's pods, each Running (its
        image pulled) before this returns; no rule applied yet. Any failure deletes the ones made."""
        created = []
        try:
            for node in sorted({_node_of(p) for p in pods}):
                self.core.create_namespaced_pod(self.namespace, kp.helper_pod(node, zone, self.helper_image,
                                                                              self.run_id, life))
                created.append(kp.helper_name(node))
            for helper in created:
                self._wait(lambda h=helper: self._running(h), 120, f"partition helper {helper} to run")
        except BaseException:
            with contextlib.suppress(Exception):  # never leave half a partition behind; the cause is raised
                self._remove_helpers(created)
            raise
        return created

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

    def _helpers(self, zone: str | None = None, run_id: str | None = None) -> list[dict]:
        want = {**kp.HELPER_LABEL, **({kp.ZONE_KEY: zone} if zone else {}), **({kp.RUN_KEY: run_id} if run_id else {})}
        return self._pods(label_selector=",".join(f"{k}={v}" for k, v in want.items()))

    def heal_zone(self, zone: str) -> None:
        """Undo this run's partition of ``zone`` by either method (whichever is in place): the
        NetworkPolicy (when it is this run's) and the pods' labels, or the helpers' tables and the
        helpers; then the probe connection."""
        try:
            pol = self.net.read_namespaced_network_policy(kp.policy_name(zone), self.namespace).to_dict()
        except Exception as e:  # noqa: BLE001 - ApiException; already healed is fine
            if not _not_found(e):
                raise
            pol = None
        if pol is not None and _labels(pol).get(kp.RUN_KEY) in (self.run_id, None):
            try:
                self.net.delete_namespaced_network_policy(kp.policy_name(zone), self.namespace)
            except Exception as e:  # noqa: BLE001 - ApiException; already healed is fine
                if not _not_found(e):
                    raise
        self._unlabel(self._pods(label_selector=f"{kp.MEMBER_LABEL}={zone}"))
        self._remove_helpers([_name(p) for p in self._helpers(zone, self.run_id)])
        self._close_probe(zone)

    def partitioned_zones(self) -> list[str]:
        """Zones partitioned now, by any run (a NetworkPolicy or helper pods of the rig's)."""
        selector = ",".join(f"{k}={v}" for k, v in kp.POLICY_LABEL.items())
        pols = self.net.list_namespaced_network_policy(self.namespace, label_selector=selector)
        zones = {_name(p.to_dict()).removeprefix("availproof-partition-") for p in pols.items}
        zones |= {_labels(p).get(kp.ZONE_KEY) for p in self._helpers()} - {None}
        return sorted(zones)

    # ------------------------------------------------------------- leftovers
    def leftovers(self) -> list[dict]:
        """Every object of the rig's still in place, whatever run left it (found by label and annotation):
        partition helper pods, partition NetworkPolicies, Ray pods labelled for a partition, Jobs of load
        workers (by their pods), nodes cordoned for a zone loss. Each: {"kind", "name", "namespace",
        "run_id", "zone", "what"}."""
        out = []
        for p in self._helpers():
            lab = _labels(p)
            out.append({"kind": "Pod", "name": _name(p), "namespace": self.namespace, "run_id": lab.get(kp.RUN_KEY),
                        "zone": lab.get(kp.ZONE_KEY), "what": f"partition helper of {lab.get(kp.ZONE_KEY)} on node {_node_of(p)} "
                                f"({(p.get('status') or {}).get('phase')})"})
        selector = ",".join(f"{k}={v}" for k, v in kp.POLICY_LABEL.items())
        for pol in self.net.list_namespaced_network_policy(self.namespace, label_selector=selector).items:
            pol = pol.to_dict()
            lab = _labels(pol)
            out.append({"kind": "NetworkPolicy", "name": _name(pol), "namespace": self.namespace,
                        "run_id": lab.get(kp.RUN_KEY), "zone": lab.get(kp.ZONE_KEY), "what": f"partition of {lab.get(kp.ZONE_KEY)}"})
        for p in self._pods(label_selector=kp.MEMBER_LABEL):
            out.append({"kind": "Pod", "name": _name(p), "namespace": self.namespace, "run_id": None,
                        "zone": _labels(p).get(kp.MEMBER_LABEL), "what": f"Ray pod labelled {kp.MEMBER_LABEL}={_labels(p).get(kp.MEMBER_LABEL)} for a partition"})
        jobs: dict[str, list[dict]] = {}
        for p in self._pods(label_selector=kl.RUN_LABEL):  # a Job of load workers keeps its pods until it is deleted
            lab = _labels(p)
            name = next((lab[k] for k in kl.JOB_NAME_LABELS if lab.get(k)), None)
            if name:
                jobs.setdefault(name, []).append(p)
        for name, pods in sorted(jobs.items()):
            phases = ", ".join(sorted({str((p.get("status") or {}).get("phase")) for p in pods}))
            out.append({"kind": "Job", "name": name, "namespace": self.namespace,
                        "run_id": _labels(pods[0]).get(kl.RUN_LABEL), "zone": None,
                        "what": f"load workers ({len(pods)} pod(s): {phases})"})
        for n in self._nodes():
            ann = (n.get("metadata") or {}).get("annotations") or {}
            if CORDON_MARK in ann:
                out.append({"kind": "Node", "name": _name(n), "namespace": None, "run_id": ann[CORDON_MARK],
                            "zone": _labels(n).get(ZONE_LABEL), "what": f"cordoned for a zone loss (unschedulable: "
                                    f"{bool((n.get('spec') or {}).get('unschedulable'))})"})
        return out

    def remove_leftovers(self) -> dict:
        """Remove every leftover :meth:`leftovers` finds, whatever its run: helpers (their table deleted
        first, checked), NetworkPolicies, the pods' partition labels, load workers' Jobs (deleted with
        ``propagationPolicy: Foreground``: their pods and ConfigMaps go too), and the cordons (a node someone
        uncordoned meanwhile only loses the annotation). ``availproof recover --backend kuberay``."""
        found = self.leftovers()
        errors = []
        helpers = [x["name"] for x in found if x["kind"] == "Pod" and x["what"].startswith("partition helper")]
        try:
            self._remove_helpers(helpers)
        except ClusterError as e:
            errors.append(str(e))
        for x in found:
            if x["kind"] == "NetworkPolicy":
                try:
                    self.net.delete_namespaced_network_policy(x["name"], self.namespace)
                except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
                    if not _not_found(e):
                        raise
        self._unlabel([{"metadata": {"name": x["name"]}} for x in found
                       if x["kind"] == "Pod" and x["what"].startswith("Ray pod labelled")])
        for x in found:
            if x["kind"] == "Job":  # its pods first, then the Job (its ConfigMaps are its dependents too)
                try:
                    self.batch.delete_namespaced_job(x["name"], self.namespace, propagation_policy="Foreground")
                except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
                    if not _not_found(e):
                        raise
        nodes = {_name(n): n for n in self._nodes()}
        for x in found:
            if x["kind"] == "Node" and x["name"] in nodes:
                self._uncordon(nodes[x["name"]])
        if errors:
            raise ClusterError("; ".join(errors))
        return {"removed": found}

    # ------------------------------------------------------------- redis
    def _redis_pods(self) -> list[dict]:
        return [p for p in self._pods() if _labels(p).get("app") == "redis"]

    def kill_redis(self) -> list[str]:
        """SIGKILL redis-server inside its pod (:data:`REDIS_CRASH_SCRIPT`: refused when it runs as its
        container's PID 1), then delete the pod (grace 0) for the Deployment to replace."""
        head = self._head()
        self.head_before_redis_kill = (_name(head), restarts(head), (head.get("metadata") or {}).get("uid"))
        pods = limit(self._redis_pods(), 1, "redis pod")
        self.redis_killed_at = time.monotonic()
        return self._kill_pods(pods, "kill of Redis", REDIS_CRASH_SCRIPT)

    def _head_restarted(self) -> bool:
        """Whether the head's GCS went down since the Redis kill: the head container restarted, or the
        head pod was replaced (or is going)."""
        if self.head_before_redis_kill is None:
            return False
        name, count, uid = self.head_before_redis_kill
        heads = select(self._pods(), [], cluster=self.cluster, node_type="head", terminating=True)
        same = [p for p in heads if _name(p) == name and (p.get("metadata") or {}).get("uid") == uid
                and not (p.get("metadata") or {}).get("deletion_timestamp")]
        return not same or restarts(same[0]) > count

    def start_redis(self, poll_s: float = 1.0) -> bool:
        """Redis is a Deployment: wait for its new pod; then watch the head for its GCS's exit (Ray
        2.60's GCS exits a few seconds after losing Redis; the kubelet restarts the head container),
        polling every ``poll_s`` until it is seen or ``gcs_exit_window_s`` after the kill has passed;
        then wait for the head to be ready. True when the GCS exited (the head container restarted, or
        the head pod was replaced)."""
        self._wait(lambda: any(pod_ready(p) for p in self._redis_pods()), 300, "the Redis pod to be ready")
        since = self.redis_killed_at if self.redis_killed_at is not None else time.monotonic()
        exited = self._head_restarted()
        polls = max(1, math.ceil(self.gcs_exit_window_s / poll_s))
        while not exited and polls > 0 and time.monotonic() - since < self.gcs_exit_window_s:
            time.sleep(poll_s)
            polls -= 1
            exited = self._head_restarted()
        self.restart_head()
        return exited or self._head_restarted()

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
            return self._armed_actor_kill(r)
        if method == "pod":
            pods = limit([p for p in self._ray(node_type="worker") if _name(p) == r.node], 1,
                         f"pod of replica {r.replica_id}")
            return lambda: self._kill_pods(pods, f"kill of the pod of replica {r.replica_id}")
        raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")

    def _armed_actor_kill(self, r):
        """``ray.kill`` of the replica's actor through a Ray driver in the head container, connected *before*
        the fault's instant (:func:`chaos.ray_actor.arm_script`: ``ray.init`` and the actor's lookup take
        seconds); the returned callable fires it (:func:`chaos.ray_actor.fire_script`): one exec and the
        kill. A driver that could not connect raises here, before any mark."""
        from chaos import ray_actor

        if not r.actor_name:
            raise ClusterError(f"replica {r.replica_id} has no actor name: cannot kill it through Ray")
        head = self._head()
        kill_id = f"availproof-actor-kill-{self.run_id}-{secrets.token_hex(3)}"
        ready, line = ray_actor.parse_word(self._exec_in(head, ray_actor.arm_script(kill_id, r.actor_name)), "ready")
        if not ready:
            raise ClusterError(f"replica {r.replica_id}: the Ray driver in head pod {_name(head)} is not ready to kill "
                               f"actor {r.actor_name} ({line or 'no answer within 60 s'})")
        driver = int(line.split()[1])

        def fire() -> list[str]:
            killed, word = ray_actor.parse_word(self._exec_in(head, ray_actor.fire_script(kill_id, driver)), "killed")
            if not killed:
                raise ClusterError(f"ray.kill of actor {r.actor_name} from head pod {_name(head)} failed "
                                   f"({word or 'no answer within 10 s'})")
            return [f"{r.node}/{r.pid}"]

        return fire

    def pause_engine(self, r) -> list[str]:
        """SIGSTOP the replica's vLLM EngineCore children (else the replica process: the stream target's
        hang is its whole replica) inside its pod."""
        pid = int(r.pid)
        out = self.exec(r.node, f"p=$(pgrep -P {pid} -f VLLM::EngineCore); [ -n \"$p\" ] || p={pid}; "
                                f"kill -STOP $p && echo $p")
        pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
        if not pids:
            raise ClusterError(f"engine of replica {r.replica_id}: `kill -STOP` reported no process")
        self.paused += pids
        return pids

    def crash_engine(self, r) -> list[str]:
        """``kill -9`` the replica's engine children (vLLM's EngineCore; the stream target's engine
        child) inside its pod, and nothing else: the replica's process lives on. Refused when the
        replica has no engine child."""
        pid = int(r.pid)
        out = self.exec(r.node, f"p=$(pgrep -P {pid} -f EngineCore); [ -z \"$p\" ] || {{ kill -9 $p && echo $p; }}")
        pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
        if not pids:
            raise ClusterError(f"replica {r.replica_id} (pid {pid}) in pod {r.node}: no engine child process to crash")
        return pids

    def resume_engine(self, pids: list[str]) -> list[str]:
        """SIGCONT each stopped process that is still there: Serve may have replaced a stopped replica
        (its health check failed) in a live pod, and a process gone is nothing left stopped."""
        done = []
        for item in pids:
            pod, pid = item.rsplit("/", 1)
            try:
                self.exec(pod, f"if kill -0 {int(pid)} 2>/dev/null; then kill -CONT {int(pid)}; else echo gone; fi")
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
        ``upgradeStrategy.type: None`` (KubeRay would ignore the change: :meth:`preflight_upgrade`, which
        the run's :meth:`prepare` calls before any load). After a ``cluster`` patch, KubeRay's answer is read
        (:meth:`_kuberay_answer`): a change it will not roll out (zero-downtime upgrades off in the
        operator) is reverted and raised at once, not waited for until the upgrade's timeout. No pod is
        deleted here.
        """
        if variant not in UPGRADE_VARIANTS:
            raise UsageError(f"upgrade variant must be one of {', '.join(UPGRADE_VARIANTS)} on KubeRay, got {variant!r}")
        what = f"upgrade ({variant})"
        strategy = self.preflight_upgrade(variant)["upgrade_strategy"]
        rs = self._rayservice(what)
        spec = rs.get("spec") or {}
        rv = (rs.get("metadata") or {}).get("resourceVersion")
        meta = {"metadata": {"resourceVersion": rv}} if rv else {}
        out = {"variant": variant, "version": str(version), "rayservice": self.service, "cluster_before": self.cluster,
               "upgrade_strategy": strategy}
        if variant == "serve_config":
            text, previous = serve_config_with_version(spec.get("serveConfigV2"), version, f"RayService {self.service}")
            self._patch_rayservice({**meta, "spec": {"serveConfigV2": text}}, what)
            return {**out, "patched": "spec.serveConfigV2", "previous_versions": previous,
                    "changed": f"applications[*].runtime_env.env_vars.{VERSION_ENV}"}
        rcc = spec.get("rayClusterConfig") or {}
        patch = cluster_config_patch(rcc, version)
        patched = self._patch_rayservice({**meta, "spec": {"rayClusterConfig": patch}}, what)
        pending = self._kuberay_answer(int(((patched or {}).get("metadata") or {}).get("generation") or 0), rcc,
                                       patch, what)
        groups = [g.get("groupName") for g in rcc.get("workerGroupSpecs") or []]
        return {**out, "patched": "spec.rayClusterConfig",
                "changed": f"headGroupSpec and workerGroupSpecs[{', '.join(map(str, groups))}]"
                           f".template.metadata.annotations[{VERSION_ANNOTATION}]",
                "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY, "pending_cluster": pending}

    def _kuberay_answer(self, generation: int, rcc_before: dict, patch: dict, what: str) -> str | None:
        """After a ``cluster`` upgrade's patch: KubeRay's answer, read as it gives it.

        What KubeRay v1.7.0 writes (``ray-operator/controllers/ray/rayservice_controller.go``): a new
        generation of the RayService is reconciled (its watch has ``GenerationChangedPredicate``; else the
        2 s requeue, ``ServiceDefaultRequeueDuration``); ``calculateStatus`` sets ``status.observedGeneration``
        to it and names a pending RayCluster when it will roll the change out (``shouldPrepareNewCluster`` ->
        ``isZeroDowntimeUpgradeEnabled``); ``calculateConditions`` sets ``Ready`` and ``UpgradeInProgress``
        through ``setCondition``, which stamps each condition with that ``observedGeneration``. ``Reconcile``
        writes the status only when ``utils.InconsistentRayServiceStatuses`` (``utils/consistency.go``) says it
        changed. That check ignores ``observedGeneration`` and ``lastUpdateTime`` themselves but compares the
        conditions whole, and ``meta.SetStatusCondition`` (k8s.io/apimachinery v0.36.0, KubeRay v1.7.0's
        go.mod) updates a condition's ``observedGeneration``, so a new generation is always written, in one
        update with the pending cluster if any, even when nothing else changes (``ENABLE_ZERO_DOWNTIME=false``).
        So ``status.observedGeneration`` reaching the patch's generation is the reconcile, and the pending
        cluster (or none) in that status is the answer. tests/unit/kube_fake.py (``KubeRay``) writes the status
        only when that check says it changed.

        Read every ``KUBERAY_POLL_S`` for at most ``KUBERAY_ANSWER_S``: a pending (or new active) cluster
        is the answer; the generation reconciled with none means zero-downtime upgrades are off (the
        operator's ``ENABLE_ZERO_DOWNTIME=false``, or NewClusterWithIncrementalUpgrade without its feature
        gate) and KubeRay will never apply the change; no answer at all, an operator that is not
        reconciling (down, or failing before ``calculateStatus``: its Events on the RayService say why). Either
        way the patch is reverted and one line raised, instead of waiting for the upgrade's timeout.
        ``generation`` 0 (an API server that counts none) is not waited for."""
        if not generation:
            return None
        status: dict = {}
        for _ in range(max(1, math.ceil(KUBERAY_ANSWER_S / KUBERAY_POLL_S))):
            status = self._get_rayservice().get("status") or {}
            pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
            active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
            if pending or (active and active != self.cluster):
                return pending or active
            if int(status.get("observedGeneration") or 0) >= generation:
                why = ("KubeRay reconciled the change and prepared no new RayCluster: zero-downtime upgrades are "
                       "off (the operator's ENABLE_ZERO_DOWNTIME=false, or NewClusterWithIncrementalUpgrade "
                       "without its feature gate), so it would never apply it")
                break
            time.sleep(KUBERAY_POLL_S)
        else:
            why = (f"KubeRay did not reconcile the change within {KUBERAY_ANSWER_S:.0f} s (observedGeneration "
                   f"{status.get('observedGeneration')} < {generation}): is the operator running? (its Events on "
                   f"the RayService say why a reconcile failed)")
        self._revert_cluster_patch(rcc_before, patch)
        raise ClusterError(f"{what}: RayService {self.service}: {why}; the patch was reverted")

    def _revert_cluster_patch(self, rcc_before: dict, patch: dict) -> None:
        """Put ``spec.rayClusterConfig`` back as it was read, if it is still what the patch made it (else a
        user changed it meanwhile: left alone), with the resourceVersion read as precondition."""
        rs = self._get_rayservice()
        now = copy.deepcopy(((rs.get("spec") or {}).get("rayClusterConfig")) or {})
        if now.get("workerGroupSpecs") != patch.get("workerGroupSpecs", now.get("workerGroupSpecs")):
            return
        meta = ((rcc_before.get("headGroupSpec") or {}).get("template") or {}).get("metadata")
        if meta is None:  # a merge patch's null deletes: what the patch added goes, parents included
            head: dict = {"metadata": None}
        elif meta.get("annotations") is None:
            head = {"metadata": {"annotations": None}}
        else:
            head = {"metadata": {"annotations": {VERSION_ANNOTATION: meta["annotations"].get(VERSION_ANNOTATION)}}}
        body: dict = {"headGroupSpec": {"template": head}}
        if "workerGroupSpecs" in patch:
            body["workerGroupSpecs"] = copy.deepcopy(rcc_before.get("workerGroupSpecs") or [])
        rv = (rs.get("metadata") or {}).get("resourceVersion")
        self._patch_rayservice({**({"metadata": {"resourceVersion": rv}} if rv else {}),
                                "spec": {"rayClusterConfig": body}}, "revert of the upgrade")

    def _patch_rayservice(self, body: dict, what: str) -> dict:
        """One merge patch of the RayService; the object as the API server returns it (its new generation)."""
        try:
            return self.custom.patch_namespaced_custom_object(*RAYSERVICE[:2], self.namespace, RAYSERVICE[2],
                                                              self.service, body)
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
        the node down (ray/_private/node.py). KubeRay v1.7 does not replace the pod meanwhile: its
        reconcilePods counts the group's pods terminating ones included (raycluster_controller.go:
        the list is by labels, ``diff`` = desired - listed), so the replacement is created once the
        evicted pod is gone.

        At the deadline :func:`chaos.faults.drain_node` calls :meth:`kill_node`: for a pod drained
        here it force-deletes what is left of it and accepts that it is gone already."""
        pods = limit([p for p in self._ray(node_type="worker") if _name(p) == node], min(1, self.max_pods),
                     f"drain of worker pod {node}")
        self.refuse_reaching_load(f"drain of worker pod {node}", nodes=[_node_of(p) for p in pods])
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
        for f in faults:  # the faults the watches prove: their finding is written into them at the heal
            if f["scope"] in ("zone", "region") and self._watch_of(f.get("zones")) is not None:
                self._adopt_fault(self._watch_of(f.get("zones")), f)
        lost = sorted({z for f in faults if f["scope"] in ("zone", "region") for z in f["zones"]})
        if lost:
            done["uncordoned"] = self.restore_zones(lost)
        self.wait_healthy(timeout=timeout)
        return done

    def heal_all(self, timeout: float = 300.0) -> dict:
        """``availproof recover``: resume the engines this backend stopped, then remove every leftover
        of the rig's, whatever run left it (:meth:`remove_leftovers`: partitions, labels, cordons)."""
        done: dict[str, list] = {"resumed": self.resume_engine(list(self.paused))}
        for zone in list(self.cuts):
            self._close_probe(zone)
        self._stop_watches(None)
        removed = self.remove_leftovers()["removed"]
        done["healed"] = sorted({x["zone"] for x in removed if x["kind"] != "Node" and x["zone"]})
        done["uncordoned"] = [x["name"] for x in removed if x["kind"] == "Node"]
        done["removed"] = removed
        self.wait_healthy(timeout=timeout)
        return done

    # ------------------------------------------------------------- plan
    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]:
        """Every object a fault of ``scope`` with these action ``arguments`` would touch now, and what the
        heal (or the cluster) then does: ``{"kind", "name", "where", "does", "after"}`` per object. Only
        reads (GETs of pods, nodes, the RayService and RayCluster, a ConfigMap; the dashboard for a
        replica's pod): nothing is created, patched, deleted or reviewed. The fault's guards run as they
        would (the blast radius, max_nodes, an autoscaled zone, an upgrade KubeRay would not roll out);
        what they refuse raises, one line."""
        a = dict(arguments or {})
        self._follow_active()
        look = {"replica": self._plan_replica, "engine": self._plan_engine, "engine-crash": self._plan_engine_crash,
                "node": self._plan_node,
                "head": self._plan_head, "zone": self._plan_zones, "region": self._plan_zones,
                "partition": self._plan_partition, "redis": self._plan_redis, "upgrade": self._plan_upgrade,
                "drain": self._plan_drain}.get(scope)
        if look is None:
            raise UsageError(f"scope {scope}: the KubeRay backend has no fault of it")
        return look(scope, a)

    def _row(self, kind: str, name: str, does: str, after: str, where: str | None = None) -> dict:
        return {"kind": kind, "name": name, "where": where or f"namespace {self.namespace}", "does": does,
                "after": after}

    def _pod_row(self, pod: dict, does: str, after: str) -> dict:
        node = _node_of(pod)
        zone = node_zones(self._nodes()).get(node)
        return self._row("Pod", _name(pod), does, after, f"{self.namespace}, node {node} ({zone or 'no zone'})")

    def _crash_text(self, pod: dict) -> str:
        containers = (pod.get("spec") or {}).get("containers") or []
        c = containers[0].get("name") if containers else "?"
        return f"exec `{CRASH_SCRIPT}` in container {c} (SIGKILL of its processes), then delete with grace 0"

    def _plan_replica(self, scope: str, a: dict) -> list[dict]:
        method = a.get("method", "sigkill")
        r = self.pick_replica(zone=a.get("zone"), deployment=a.get("deployment"))
        pod = limit([p for p in self._ray(terminating=True) if _name(p) == r.node], 1, f"pod of replica {r.replica_id}")[0]
        if method == "sigkill":
            return [self._pod_row(pod, f"exec `kill -9 {r.pid}` (replica {r.replica_id}, a RUNNING one picked now)",
                                  "Serve replaces the replica")]
        if method == "actor":
            head = self._head()
            return [self._pod_row(head, f"exec: a Ray driver connected before the injection, then ray.kill of actor "
                                        f"{r.actor_name}", "the driver exits"),
                    self._pod_row(pod, f"its replica {r.replica_id} (pid {r.pid}) killed through Ray",
                                  "Serve replaces the replica")]
        if method == "pod":
            pod = limit([p for p in self._ray(node_type="worker") if _name(p) == r.node], 1,
                        f"pod of replica {r.replica_id}")[0]
            return [self._pod_row(pod, self._crash_text(pod), "KubeRay recreates the pod; Serve the replica")]
        raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")

    def _plan_engine(self, scope: str, a: dict) -> list[dict]:
        r = self.pick_replica(zone=a.get("zone"))
        pod = limit([p for p in self._ray(terminating=True) if _name(p) == r.node], 1, f"pod of replica {r.replica_id}")[0]
        return [self._pod_row(pod, f"exec: SIGSTOP of the EngineCore children of {r.pid} (else {r.pid} itself)",
                              "SIGCONT at the heal (a process Serve replaced meanwhile is skipped)")]

    def _plan_engine_crash(self, scope: str, a: dict) -> list[dict]:
        """The replica's pod (exec'd) and its engine children, as :meth:`crash_engine` finds them at the
        injection (``pgrep -P PID -f EngineCore``): their pids are known only inside the pod, and the plan
        does not exec."""
        r = self.pick_replica(zone=a.get("zone"))
        pod = limit([p for p in self._ray(terminating=True) if _name(p) == r.node], 1, f"pod of replica {r.replica_id}")[0]
        where = f"{self.namespace}, pod {_name(pod)}, node {_node_of(pod)}"
        return [self._pod_row(pod, f"exec `pgrep -P {r.pid} -f EngineCore`, then `kill -9` of what it finds (none: "
                                   f"refused, nothing injected)", "the pod and the replica's process live on"),
                self._row("Process", f"EngineCore children of {r.pid}", f"SIGKILL; the process of replica {r.replica_id} "
                          f"({r.pid}, a RUNNING one picked now) is left alive", "nothing to heal: the replica's health "
                          "check fails on its dead engine and Serve replaces it", where)]

    def _plan_node(self, scope: str, a: dict) -> list[dict]:
        node = a.get("node") or (self.nodes_in(zone=a.get("zone")) or [None])[0]
        if node is None:
            raise UsageError(f"node loss: no worker pod in zone {a.get('zone')}")
        pod = limit([p for p in self._ray(node_type="worker") if _name(p) == node], 1, f"worker pod {node}")[0]
        self.refuse_reaching_load(f"kill of worker pod {node}", nodes=[_node_of(pod)])
        return [self._pod_row(pod, self._crash_text(pod), "KubeRay recreates the pod once it is gone")]

    def _plan_head(self, scope: str, a: dict) -> list[dict]:
        head = self._head()
        if a.get("method", "node") == "gcs":
            return [self._pod_row(head, "exec `pgrep -x gcs_server` and `kill -9` of it (the container then exits)",
                                  "the kubelet restarts the head container in place")]
        return [self._pod_row(head, self._crash_text(head), "KubeRay recreates the head pod once it is gone")]

    def _plan_zones(self, scope: str, a: dict) -> list[dict]:
        zones = [a["zone"]] if scope == "zone" else self.zones_in_region(a.get("region", ""))
        if not zones:
            raise UsageError(f"region {a.get('region')!r} has no zone")
        nodes, pods, cordon, theirs = self._zone_loss_reach(zones, f"loss of {', '.join(zones)}")
        self.refuse_autoscaled_zone_loss(zones)
        by_zone = node_zones(nodes)
        rows = [self._row("Node", n, f"cordon (spec.unschedulable) and annotate {CORDON_MARK}=<run id>",
                          "uncordoned at the heal (this run's annotation only)", f"cluster-wide, zone {by_zone.get(n)}")
                for n in cordon]
        rows += [self._row("Node", n, "left alone: cordoned by someone else", "-", f"cluster-wide, zone {by_zone.get(n)}")
                 for n in theirs]
        rows += [self._pod_row(p, self._crash_text(p), "KubeRay's replacement stays Pending on the cordoned nodes "
                                                       "until the heal") for p in pods]
        return rows

    def _plan_partition(self, scope: str, a: dict) -> list[dict]:
        zone = a["zone"]
        pods = self._cut_pods(zone)
        ips = _pod_ips(pods)
        cut = set(ips)
        others = sorted((p for p in self._ray() if (p.get("status") or {}).get("pod_ip") not in cut | {None}),
                        key=lambda p: (_labels(p).get("ray.io/node-type") != "head", _name(p)))
        rows = []
        if others:
            rows.append(self._pod_row(others[0], "exec: the echo server of the connection that proves the cut "
                                                 "(python, ends by itself at the partition's deadline)",
                                      "stopped at the heal"))
        rows.append(self._pod_row(pods[0], "exec: the client of that connection, opened before the cut",
                                  "stopped at the heal"))
        if self.partition_method == "networkpolicy":
            rows += [self._pod_row(p, f"label {kp.MEMBER_LABEL}={zone}", "label removed at the heal") for p in pods]
            rows.append(self._row("NetworkPolicy", kp.policy_name(zone), "create: no ingress, no egress for the zone's "
                                  "labelled pods", "deleted at the heal"))
        else:
            for node in sorted({_node_of(p) for p in pods}):
                rows.append(self._row("Pod", kp.helper_name(node), f"create the helper ({self.helper_image}, hostNetwork, "
                                      f"NET_ADMIN, activeDeadlineSeconds), then exec: nft table inet {kp.TABLE} "
                                      f"dropping forwarded packets between {', '.join(ips)} and the rest",
                                      "table deleted, then the helper deleted at the heal",
                                      f"{self.namespace}, node {node}"))
        return rows

    def _plan_redis(self, scope: str, a: dict) -> list[dict]:
        redis = limit(self._redis_pods(), 1, "redis pod")[0]
        return [self._pod_row(redis, f"exec the crash of redis-server (refused when it is its container's PID 1), "
                                     f"then delete with grace 0", "the Deployment replaces it"),
                self._pod_row(self._head(), "read only: watched for its GCS's exit", "the kubelet restarts the head "
                                                                                      "container if its GCS exits")]

    def _plan_upgrade(self, scope: str, a: dict) -> list[dict]:
        variant = a.get("variant", "code")
        if variant not in UPGRADE_VARIANTS:
            raise UsageError(f"upgrade variant must be one of {', '.join(UPGRADE_VARIANTS)} on KubeRay, got {variant!r}")
        strategy = self.preflight_upgrade(variant)["effective_strategy"]
        where = f"namespace {self.namespace}"
        if variant == "serve_config":
            return [self._row("RayService", self.service, f"merge patch of spec.serveConfigV2: {VERSION_ENV} set in "
                              f"every application's runtime_env", "KubeRay applies it in place; Serve replaces "
                              f"every replica", where)]
        return [self._row("RayService", self.service, f"merge patch of spec.rayClusterConfig: the {VERSION_ANNOTATION} "
                          f"annotation on every pod template", f"KubeRay ({strategy}) brings up a new RayCluster, "
                          f"switches the Services to it, deletes RayCluster {self.cluster} 60 s later", where)]

    def _plan_drain(self, scope: str, a: dict) -> list[dict]:
        node = a.get("node") or (self.nodes_in(zone=a.get("zone")) or [None])[0]
        if node is None:
            raise UsageError(f"drain: no worker pod in zone {a.get('zone')}")
        pod = limit([p for p in self._ray(node_type="worker") if _name(p) == node], min(1, self.max_pods),
                    f"drain of worker pod {node}")[0]
        self.refuse_reaching_load(f"drain of worker pod {node}", nodes=[_node_of(pod)])
        grace = max(1, math.ceil(float(a.get("deadline_s", 30.0))))
        return [self._pod_row(pod, f"eviction (policy/v1) with gracePeriodSeconds {grace}; at the deadline a delete "
                                   f"with grace 0 of what is left", "KubeRay recreates the pod once it is gone")]

    # ------------------------------------------------------------- proof
    def effect_checks(self, fault: dict) -> list[dict]:
        """One look at whether ``fault`` (as :mod:`chaos.faults` builds it: ``scope``, ``target``,
        ``zones``, and what the backend's call returned) is in effect: a list of
        ``{"check", "ok", "seen"}``. One or two API reads (and an exec where only the inside of a pod
        tells), so that :func:`chaos.faults.prove` can call it until every check is ok:

        - replica: its process gone from its pod (``/proc/PID``; a zombie counts as gone), or, killed
          with its pod, that pod gone, replaced or restarted;
        - node, redis: each pod the kill named gone, replaced (a new uid) or its container restarted;
        - zone, region: no Ready Ray pod of this cluster left in the zones, the nodes the loss took
          out all unschedulable, and none Ready there since the loss began (its watch, which keeps
          looking until the heal and writes what it saw into the fault then: :meth:`restore_zones`);
        - head: the head pod gone, replaced or restarted, or else its GCS not answering;
        - engine: each stopped process in state T (``/proc/PID/stat``);
        - partition: the connection opened across the cut before it carries no more bytes and a new
          one is refused or times out (from the Ray pod inside the zone), and per method the cut in
          place (node-filter: the table, with every zone address, in each helper's node;
          networkpolicy: the policy and the labels on the zone's pods);
        - upgrade: ``serve_config``: every application's deployed config carries the new version and
          is RUNNING; ``cluster``: the RayService's active cluster is a new one, nothing pending;
        - drain: the evicted pod terminating or gone.
        """
        scope = fault.get("scope")
        look = {"replica": self._effect_replica, "node": self._effect_pods, "redis": self._effect_pods,
                "zone": self._effect_zones, "region": self._effect_zones, "head": self._effect_head,
                "engine": self._effect_engine, "engine-crash": self._effect_engine_crash,
                "partition": self._effect_partition, "upgrade": self._effect_upgrade,
                "drain": self._effect_drain}.get(scope)
        if look is None:
            return [check(f"an effect check for scope {scope}", False, "the KubeRay backend has none")]
        return look(fault)

    def _pod_ended(self, name: str, pods: list[dict]) -> tuple[bool, str]:
        """Whether the pod the rig crashed is gone, replaced (new uid) or restarted; and what was seen."""
        was = self.killed.get(name) or {}
        now = [p for p in pods if _name(p) == name]
        if not now:
            return True, "gone"
        p = now[0]
        uid = (p.get("metadata") or {}).get("uid")
        if was.get("uid") and uid != was["uid"]:
            return True, "replaced (a new pod of that name)"
        if "restarts" in was and restarts(p) > was["restarts"]:
            return True, f"its container restarted ({was['restarts']} -> {restarts(p)})"
        going = " (terminating)" if (p.get("metadata") or {}).get("deletion_timestamp") else ""
        return False, f"still there{going}, {'ready' if pod_ready(p) else 'not ready'}, {restarts(p)} restart(s)"

    def _effect_pods(self, fault: dict) -> list[dict]:
        names = fault.get("pids") if isinstance(fault.get("pids"), list) else [fault["target"]]
        pods = self._pods()
        out = []
        for name in names or [fault["target"]]:
            ok, seen = self._pod_ended(str(name), pods)
            out.append(check(f"pod {name} crashed: gone, replaced or restarted", ok, seen))
        return out

    def _proc_states(self, pod: str, pids: list[int]) -> dict[int, str] | None:
        """State letter of each process in ``pod`` ("gone" for none); None when the pod is gone."""
        try:
            out = self.exec(pod, proc_states_script(pids))
        except kube_exec.ExecError:
            if any(_name(p) == pod for p in self._pods()):
                raise
            return None
        states = {}
        for line in out.splitlines():
            words = line.split()
            if len(words) == 2 and words[0].isdigit():
                states[int(words[0])] = words[1]
        return states

    def _by_pod(self, items: list) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for item in items:
            pod, _, pid = str(item).rpartition("/")
            out.setdefault(pod, []).append(int(pid))
        return out

    def _effect_replica(self, fault: dict) -> list[dict]:
        items = list(fault.get("pids") or [])
        if not items:
            return [check("the replica's process gone", False, "the kill named no process")]
        if not any("/" in str(i) for i in items):  # method pod: the pod itself was crashed
            return self._effect_pods(fault)
        out = []
        for pod, pids in self._by_pod(items).items():
            states = self._proc_states(pod, pids)
            if states is None:
                out.append(check(f"the replica's process {', '.join(map(str, pids))} gone from pod {pod}", True,
                                 "the pod is gone"))
                continue
            left = {p: s for p, s in states.items() if s not in ("gone", "Z", "X")}
            out.append(check(f"the replica's process {', '.join(map(str, pids))} gone from pod {pod}", not left,
                             ", ".join(f"{p} {s}" for p, s in sorted(states.items())) or "no answer"))
        return out

    def _effect_engine(self, fault: dict) -> list[dict]:
        items = list(fault.get("pids") or [])
        if not items:
            return [check("the engine's processes stopped (state T)", False, "the pause named no process")]
        out = []
        for pod, pids in self._by_pod(items).items():
            states = self._proc_states(pod, pids)
            what = f"engine process(es) {', '.join(map(str, pids))} in pod {pod} stopped (state T)"
            if states is None:
                out.append(check(what, False, "the pod is gone"))
                continue
            out.append(check(what, all(states.get(p) in ("T", "t") for p in pids),
                             ", ".join(f"{p} {states.get(p, '?')}" for p in pids)))
        return out

    def _effect_engine_crash(self, fault: dict) -> list[dict]:
        """The killed engine processes gone from the pod, and the replica's own process still there."""
        items = list(fault.get("pids") or [])
        if not items:
            return [check("the engine's processes gone", False, "the kill named no process")]
        out = []
        for pod, pids in self._by_pod(items).items():
            replica = int(fault["pid"]) if str(fault.get("pid") or "").isdigit() else None
            states = self._proc_states(pod, pids + ([replica] if replica else []))
            if states is None:
                out.append(check(f"engine process(es) {', '.join(map(str, pids))} gone from pod {pod}", False,
                                 "the pod is gone (a pod loss, not an engine crash)"))
                continue
            left = {p: states.get(p, "gone") for p in pids if states.get(p, "gone") not in ("gone", "Z", "X")}
            out.append(check(f"engine process(es) {', '.join(map(str, pids))} gone from pod {pod}", not left,
                             ", ".join(f"{p} {states.get(p, 'gone')}" for p in pids)))
            alive = replica is not None and states.get(replica, "gone") not in ("gone", "Z", "X")
            out.append(check(f"the replica's process {replica} alive in pod {pod} without its engine", alive,
                             f"state {states.get(replica, 'gone')}" if replica else "no replica pid recorded"))
        return out

    def _effect_zones(self, fault: dict) -> list[dict]:
        zones = list(fault.get("zones") or [])
        nodes = self._nodes()
        pods = select(self._pods(), nodes, cluster=self.cluster, zones=zones)
        ready = [_name(p) for p in pods if pod_ready(p)]
        lost = self.lost_nodes.get(tuple(sorted(zones)))
        if lost is None:  # not known here (another backend object): the nodes this run cordoned there
            lost = [_name(n) for n in nodes if _labels(n).get(ZONE_LABEL) in set(zones)
                    and ((n.get("metadata") or {}).get("annotations") or {}).get(CORDON_MARK) == self.run_id]
        by_name = {_name(n): n for n in nodes}
        open_ = [n for n in lost if not ((by_name.get(n) or {}).get("spec") or {}).get("unschedulable")]
        where = ", ".join(zones)
        out = [check(f"no Ready Ray pod of {self.cluster} left in {where}", not ready,
                     "none" if not ready else f"{len(ready)} Ready: {', '.join(ready[:5])}"),
               check(f"the nodes the loss of {where} took out unschedulable", bool(lost) and not open_,
                     "no node was taken out" if not lost else
                     (f"{len(lost)} unschedulable" if not open_ else f"schedulable: {', '.join(open_)}"))]
        w = self._watch_of(zones)
        if w is not None:  # what the watch saw since the loss began; the fault is this watch's to record at the heal
            self._adopt_fault(w, fault)
            w.look_once()
            out.append(w.check())
        return out

    def _effect_head(self, fault: dict) -> list[dict]:
        from chaos import sampler

        was = self.head_at_kill or {}
        what = "the head pod gone, replaced or restarted, or its GCS not answering"
        heads = select(self._pods(), [], cluster=self.cluster, node_type="head", terminating=True)
        same = [p for p in heads if _name(p) == was.get("name")]
        if not same:
            return [check(what, True, f"head pod {was.get('name')} gone")]
        p = same[0]
        if was.get("uid") and (p.get("metadata") or {}).get("uid") != was["uid"]:
            return [check(what, True, f"head pod {was.get('name')} replaced")]
        if restarts(p) > int(was.get("restarts") or 0):
            return [check(what, True, f"its container restarted ({was.get('restarts')} -> {restarts(p)})")]
        answered, _, why = sampler.gcs_health(self.dashboard_url, 1.0)
        return [check(what, not answered, "the pod unchanged; the GCS answers" if answered else
                      f"the GCS does not answer ({why or 'unhealthy'})")]

    def _effect_partition(self, fault: dict) -> list[dict]:
        zone = fault["target"]
        cut = self.cuts.get(zone)
        if not cut:
            return [check(f"the cut of {zone} in place", False, "this backend made no cut of it")]
        out = []
        probe = cut.get("probe")
        if not probe:
            out.append(check(f"a connection across the cut of {zone}, opened before it", False, "none is open"))
        else:
            where = f"{probe['inside']} -> {probe['outside']} ({probe['host']}:{probe['port']})"
            try:
                line = (self.exec(probe["inside"], kp.probe_check_script(probe["id"], probe["host"], probe["port"]))
                        .strip().splitlines() or [""])[-1]
            except kube_exec.ExecError as e:
                out.append(check(f"the connection {where} opened before the cut carries no more bytes", False,
                                 f"not looked at: {e}"[:200]))
            else:
                (est, est_seen), (new, new_seen) = kp.probe_verdict(line)
                out.append(check(f"the connection {where} opened before the cut carries no more bytes", est, est_seen))
                out.append(check(f"a new connection {where} times out (only silence is a cut)", new, new_seen))
        if cut["method"] == "node-filter":
            helpers = self._helpers(zone, self.run_id)
            if not helpers:
                out.append(check(f"the nft table of the cut of {zone} on its nodes", False, "no helper pod"))
            for h in helpers:
                try:
                    listing = self.exec(_name(h), kp.CHECK_SCRIPT, container="nft")
                except kube_exec.ExecError as e:
                    ok, seen = False, f"not looked at: {e}"[:200]
                else:
                    ok, seen = kp.table_holds(listing, cut["ips"])
                out.append(check(f"the nft table on node {_node_of(h)} (helper {_name(h)})", ok, seen))
        else:
            try:
                self.net.read_namespaced_network_policy(kp.policy_name(zone), self.namespace)
                present = True
            except Exception as e:  # noqa: BLE001 - ApiException
                if not _not_found(e):
                    raise
                present = False
            out.append(check(f"NetworkPolicy {kp.policy_name(zone)} in place", present,
                             "present" if present else "absent"))
        return out

    def _effect_upgrade(self, fault: dict) -> list[dict]:
        from chaos import placement

        variant, version = fault.get("target"), str(fault.get("version"))
        if variant == "cluster":
            rs = self._get_rayservice()
            status = rs.get("status") or {}
            active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
            pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
            ok = bool(active) and active != fault.get("cluster_before") and not pending
            return [check(f"RayService {self.service}: a new RayCluster active, none pending", ok,
                          f"active {active}, pending {pending or 'none'} (before: {fault.get('cluster_before')})")]
        details = placement.serve_details(self.dashboard_url, timeout=2.0)
        if details is None:
            return [check(f"every application deployed with {VERSION_ENV}={version} and RUNNING", False,
                          "the dashboard did not answer")]
        apps = (details.get("applications") or {})
        seen = {name: (((a.get("deployed_app_config") or {}).get("runtime_env") or {}).get("env_vars") or {})
                .get(VERSION_ENV) for name, a in apps.items()}
        status = {name: a.get("status") for name, a in apps.items()}
        ok = bool(apps) and all(v == version for v in seen.values()) and all(s == "RUNNING" for s in status.values())
        return [check(f"every application deployed with {VERSION_ENV}={version} and RUNNING", ok,
                      ", ".join(f"{n}: {seen[n]} {status[n]}" for n in sorted(apps)) or "no application")]

    def _effect_drain(self, fault: dict) -> list[dict]:
        name = fault["target"]
        now = [p for p in self._pods() if _name(p) == name]
        if not now:
            return [check(f"pod {name} evicted: terminating or gone", True, "gone")]
        going = (now[0].get("metadata") or {}).get("deletion_timestamp")
        return [check(f"pod {name} evicted: terminating or gone", bool(going),
                      "terminating" if going else "still there, not terminating")]

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
            # a terminating pod (evicted by a drain) still hosts its replicas until it is gone: its
            # zone is known, but it is no capacity any more
            pods = select(self._pods(), nodes, cluster=self.cluster, terminating=True)
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
                going = bool((p.get("metadata") or {}).get("deletion_timestamp"))
                ready[z] = ready.get(z, 0) + (1 if pod_ready(p) and not going else 0)
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
