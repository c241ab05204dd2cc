"""What every room of the KubeRay backend shares: its constants, and the selection of pods and nodes
as plain functions over the dicts the ``kubernetes`` client's ``to_dict()`` gives (tested without a cluster)."""

from __future__ import annotations

import json
import re

from chaos.backends.kuberay.kube import autoscale as ka, marks as km
from chaos.backends.kuberay.kube import zone as kz
from chaos.backends.kuberay.kube.labels import REGION_LABEL, ZONE_LABEL
from chaos.base.errors import UsageError


CORDON_MARK = km.CORDON_MARK  # annotation on a node a zone loss cordoned; its value: the run id
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
# and Karpenter's NodePools: chaos.backends.kuberay.kube.autoscale
AUTOSCALER_STATUS = ka.STATUS_NAME


def labels_of(obj: dict) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def name_of(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def node_of(pod: dict) -> str | None:
    return (pod.get("spec") or {}).get("node_name")


def node_zones(nodes: list[dict]) -> dict[str, str | None]:
    return {name_of(n): labels_of(n).get(ZONE_LABEL) for n in nodes}


def node_regions(nodes: list[dict]) -> dict[str, str | None]:
    return {name_of(n): labels_of(n).get(REGION_LABEL) for n in nodes}


def ray_pods(pods: list[dict], cluster: str | None = None, terminating: bool = False) -> list[dict]:
    """Ray pods not being deleted (of one RayCluster when named); with ``terminating``, those too."""
    out = []
    for p in pods:
        lab = labels_of(p)
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
        lab = labels_of(p)
        if node_type and lab.get("ray.io/node-type") != node_type:
            continue
        if group and lab.get("ray.io/group") != group:
            continue
        if wanted and by_node.get(node_of(p)) not in wanted:
            continue
        out.append(p)
    return sorted(out, key=name_of)


def limit(selected: list[dict], max_pods: int, what: str) -> list[dict]:
    """The blast-radius guard: refuse an empty selection or one larger than allowed."""
    if not selected:
        raise UsageError(f"{what}: the selector matches no pod: refusing to act")
    if len(selected) > max_pods:
        raise UsageError(f"{what}: the selector matches {len(selected)} pods, more than the limit of {max_pods}: "
                         f"refusing to act ({', '.join(name_of(p) for p in selected[:5])}...)")
    return selected


zone_loss_nodes = kz.zone_loss_nodes  # which nodes a zone loss takes out: chaos.backends.kuberay.kube.zone


def check(what: str, ok: bool, seen: str) -> dict:
    """One effect check: what was looked at, whether it shows the fault in effect, what was seen."""
    return {"check": what, "ok": bool(ok), "seen": seen}


def proc_states_script(pids: list[int]) -> str:
    """Prints "PID STATE" per process (the state letter of /proc/PID/stat, "gone" when there is none)."""
    return ("for p in " + " ".join(str(int(x)) for x in pids) + "; do "
            "s=$(sed -n 's/^.*) \\([A-Za-z]\\).*/\\1/p' /proc/$p/stat 2>/dev/null); echo \"$p ${s:-gone}\"; done")


def pod_ips(pods: list[dict]) -> list[str]:
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


def is_not_found(e: Exception) -> bool:
    return getattr(e, "status", None) == 404


def api_message(e: Exception) -> str:
    """The ``message`` of the Status an ApiException carries (else its reason), on one line."""
    try:
        status = json.loads(getattr(e, "body", None) or "{}")
        msg = status.get("message")
        causes = [c.get("message") for c in (status.get("details") or {}).get("causes") or [] if c.get("message")]
    except (TypeError, ValueError, AttributeError):
        msg, causes = None, []
    text = " ".join([str(msg or getattr(e, "reason", None) or e), *causes])
    return " ".join(text.split())[:300]


def parse_masks(out: str) -> dict[int, str]:
    """pid -> its masks as /proc/PID/status lines (what :func:`chaos.backends.engine_faults.handles` reads)."""
    found = {}
    for line in out.splitlines():
        words = line.split()
        if words and words[0].isdigit():
            found[int(words[0])] = "\n".join(words[1:])
    return found
