"""The load workers as a Kubernetes Job, off the Ray cluster's nodes: settings and manifests (no API calls).

Opt-in with ``kubernetes.load.in_cluster: true`` in the experiment (or ``--load-in-cluster``); without it the
workers of ``load.workers`` stay processes of the rig (:mod:`chaos.load.workers`). The Job
(:func:`job_manifest`, batch/v1, Kubernetes ``pkg/controller/job``):

- ``completionMode: Indexed`` with ``completions = parallelism = N``: the Job controller makes one pod per
  index 0..N-1 (named ``<job>-<index>-<5 chars>``, hostname ``<job>-<index>``) and sets
  ``JOB_COMPLETION_INDEX`` in every container from the pod's ``batch.kubernetes.io/job-completion-index``
  label or annotation (``indexed_job_utils.go`` ``addCompletionIndexEnvVariable``); pod ``W`` reads its
  share of the one plan from the ConfigMap ``<job>-w<W>`` (:func:`configmap_manifest`: the spec gzip'd,
  in ``binaryData``; at most 1 MiB each, the API server's limit on a ConfigMap's data);
- ``backoffLimitPerIndex: 0``, ``maxFailedIndexes: 1`` (a ``FailIndex`` pod failure policy for disruptions) and
  ``restartPolicy: Never``: a worker that fails or is lost is not run again (its share would be sent twice), the
  others run on; a second one fails the Job; ``activeDeadlineSeconds`` bounds the whole Job (the controller then terminates its
  pods); ``ttlSecondsAfterFinished`` removes a Job its rig never deleted;
- placement: ``nodeSelector`` (and tolerations) from the settings, and a required pod anti-affinity on
  ``kubernetes.io/hostname`` against every pod labelled ``ray.io/cluster`` (any RayCluster: a
  ``cluster`` upgrade's new RayCluster has another name): no load pod shares a node with a Ray pod; a soft topology spread puts the workers on
  different nodes where there are several. The backend's blast-radius checks refuse a
  fault whose scope reaches a node hosting a load pod (:meth:`KubeRayBackend.refuse_reaching_load`);
- every object carries :data:`RUN_LABEL` (the run id): a crashed run's Job is a leftover, found by it.

The ConfigMaps are owned by the Job (``ownerReferences``): deleting the Job with ``propagationPolicy``
Background or Foreground removes its pods and them (the API server's default for batch/v1 Jobs is to
orphan the pods: ``pkg/registry/batch/job/strategy.go`` ``DefaultGarbageCollectionPolicy``).
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, field
from typing import Any

from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay.kube.labels import ZONE_LABEL
from chaos.base.errors import UsageError, parse_bool
from chaos.load import pod_worker

RUN_LABEL = "availproof.io/load-run"  # on the Job, its pods and ConfigMaps: the run id
COMPONENT = {"app.kubernetes.io/name": "availproof", "app.kubernetes.io/component": "load-worker"}
CONTAINER = "load"
SPEC_KEY = "spec.json.gz"
MAX_CONFIGMAP_BYTES = 1024 * 1024  # core.MaxSecretSize: what ValidateConfigMap allows for data + binaryData
HOSTNAME_KEY = "kubernetes.io/hostname"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")  # what the API server adds to the pod template
DEFAULT_IMAGE = "availproof:dev"  # kuberay/Dockerfile's image: the rig's package installed
DEFAULT_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}}  # no CPU limit: throttling would skew timing
TTL_AFTER_FINISHED_S = 600
SETTINGS_KEYS = ("in_cluster", "image", "node_selector", "tolerations", "serve_url", "start_timeout_s", "resources",
                 "image_pull_policy")
MAX_LOST_PODS = 1  # load pods a Job outlives (maxFailedIndexes); one more fails it


@dataclass
class LoadJobSettings:
    """``kubernetes.load`` (the experiment's, with ``--load-in-cluster`` / ``--load-image`` over it)."""

    in_cluster: bool = False
    image: str = DEFAULT_IMAGE
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)  # e.g. a node pool of the load's own, tainted
    serve_url: str | None = None  # the serve Service as the pods reach it (default: the RayService's, in-cluster)
    start_timeout_s: float = 300.0  # the pods scheduled, the image pulled, each worker ready
    resources: dict = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    image_pull_policy: str | None = None

    @classmethod
    def from_dict(cls, d: dict | None) -> "LoadJobSettings":
        d = dict(d or {})
        unknown = sorted(set(d) - set(SETTINGS_KEYS))
        if unknown:
            raise UsageError(f"kubernetes.load: unknown field(s) {', '.join(unknown)} (known: {', '.join(SETTINGS_KEYS)})")
        problems = []
        if not isinstance(d.get("in_cluster", False), bool):
            problems.append("in_cluster must be true or false")
        if "image" in d and (not isinstance(d["image"], str) or not d["image"]):
            problems.append("image must be a non-empty image reference")
        sel = d.get("node_selector", {})
        if not isinstance(sel, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items()):
            problems.append("node_selector must map label keys to values (strings)")
        if not isinstance(d.get("tolerations", []), list):
            problems.append("tolerations must be a list of pod tolerations")
        url = d.get("serve_url")
        if url is not None and (not isinstance(url, str) or not re.match(r"https?://[^/]+", url)):
            problems.append(f"serve_url must be an http(s) URL, got {url!r}")
        t = d.get("start_timeout_s", 300.0)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 10 <= t <= 3600:
            problems.append(f"start_timeout_s must be in [10, 3600], got {t!r}")
        if not isinstance(d.get("resources", {}), dict):
            problems.append("resources must be a container's resources (requests, limits)")
        if d.get("image_pull_policy") not in (None, "Always", "IfNotPresent", "Never"):
            problems.append("image_pull_policy must be Always, IfNotPresent or Never")
        if problems:
            raise UsageError("kubernetes.load: " + "; ".join(problems))
        return cls(**d)


def settings_of(kube: dict) -> LoadJobSettings | None:
    """The in-cluster load's settings from the KubeRay target (``kubernetes`` section merged with the flags:
    ``load_in_cluster``, ``load_image``); None when the workers stay processes of the rig."""
    d = dict(kube.get("load") or {})
    if parse_bool(kube.get("load_in_cluster"), "load_in_cluster"):
        d["in_cluster"] = True
    if kube.get("load_image"):
        d["image"] = kube["load_image"]
    s = LoadJobSettings.from_dict(d)
    return s if s.in_cluster else None


def check_load(shape, sends_token: bool) -> None:
    """What the pods cannot do, refused before anything starts (one line each)."""
    if shape.sessions is not None:
        raise UsageError("kubernetes.load.in_cluster: sessions run in one harness process of the rig (their turns "
                         "follow the answers); run them without in_cluster")
    if sends_token:
        raise UsageError("kubernetes.load.in_cluster: the pods would need the client's bearer token, which the rig "
                         "never writes anywhere (no Secret is made for it); send without auth_token_env or run the "
                         "workers on the rig")


def job_name(run_id: str, load_id: str) -> str:
    """``availproof-load-<run id>-<load id>`` (a run may start several loads), a DNS
    label short enough for the pods' ``<job>-<index>`` hostnames."""
    def part(x: str, n: int) -> str:
        return re.sub(r"[^a-z0-9-]", "-", x.lower()).strip("-")[:n].strip("-") or "x"

    return f"availproof-load-{part(run_id, 16)}-{part(load_id, 6)}"


def configmap_name(job: str, w: int) -> str:
    return f"{job}-w{w}"


def labels(run_id: str) -> dict[str, str]:
    return {**COMPONENT, RUN_LABEL: run_id}


def serve_url(settings: LoadJobSettings, service: str | None, namespace: str) -> str:
    """Where the pods send: the setting, else KubeRay's serve Service of the RayService
    (``<rayservice>-serve-svc``, port 8000), by its in-cluster name."""
    if settings.serve_url:
        return settings.serve_url
    if not service:
        raise UsageError("kubernetes.load.serve_url: a plain RayCluster has no serve Service of KubeRay's; name the "
                         "URL the load pods send to")
    return f"http://{service}-serve-svc.{namespace}.svc:8000"


def deadline_s(shape, start_timeout_s: float) -> int:
    """activeDeadlineSeconds: the start, the sending phase, the drain, the end's clock and a margin."""
    drain = shape.drain_bound_s()
    return int(math.ceil(start_timeout_s + shape.duration_s + drain + pod_worker.LINGER_S + 120))


def job_manifest(settings: LoadJobSettings, run_id: str, job: str, n: int, cluster: str, active_deadline_s: int,
                 avoid_zones=()) -> dict:
    """The Indexed Job ``job`` of N load workers of run ``run_id`` (see the module's docstring), as API JSON.
    ``avoid_zones``: the zones the experiment's faults will hit; the pods are kept out of them from the start
    (a required node affinity ``topology.kubernetes.io/zone NotIn`` them)."""
    volumes_from = [{"configMap": {"name": configmap_name(job, w),
                                   "items": [{"key": SPEC_KEY, "path": pod_worker.spec_file(w)}]}} for w in range(n)]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": settings.image,
        "command": ["python", "-m", "chaos.load.pod_worker"],
        "env": [{"name": pod_worker.ENV_SPEC_DIR, "value": pod_worker.SPEC_DIR},
                {"name": pod_worker.ENV_CONTROL_DIR, "value": pod_worker.CONTROL_DIR},
                {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": settings.resources,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "spec", "mountPath": pod_worker.SPEC_DIR, "readOnly": True},
                         {"name": "control", "mountPath": pod_worker.CONTROL_DIR}],
    }
    if settings.image_pull_policy:
        container["imagePullPolicy"] = settings.image_pull_policy
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,  # the workers never call the API
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "ray.io/cluster", "operator": "Exists"}]},
            "topologyKey": HOSTNAME_KEY}]}},
        # the workers spread over the load's nodes where they can (their CPU is the load's bottleneck)
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOSTNAME_KEY, "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": labels(run_id)}}],
        "containers": [container],
        "volumes": [{"name": "spec", "projected": {"sources": volumes_from}},
                    {"name": "control", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
    }
    if avoid_zones:  # never where a fault of the run will hit: a lost or cut zone must not take the load with it
        pod_spec["affinity"]["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE_LABEL, "operator": "NotIn",
                                                         "values": sorted(set(avoid_zones))}]}]}}
    if settings.node_selector:
        pod_spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod_spec["tolerations"] = list(settings.tolerations)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job, "labels": labels(run_id), "annotations": km.stamped(run_id, active_deadline_s)},
        # one lost pod (its node gone, evicted, its worker failed) fails its own index only, never run again (its
        # share would be sent twice), while the others run on; a second one fails the Job (batch/v1
        # backoffLimitPerIndex, maxFailedIndexes: Kubernetes 1.29+, GA in 1.33); a disruption (DisruptionTarget:
        # preemption, eviction, a node's loss) fails the index too, as the per-index limit of 0 would
        "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n,
                 "backoffLimitPerIndex": 0, "maxFailedIndexes": MAX_LOST_PODS,
                 "podFailurePolicy": {"rules": [{"action": "FailIndex",
                                                 "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                 "activeDeadlineSeconds": int(active_deadline_s), "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
                 "template": {"metadata": {"labels": labels(run_id),
                                           "annotations": km.stamped(run_id, active_deadline_s)},
                              "spec": pod_spec}},
    }


def configmap_manifest(run_id: str, job: str, w: int, spec: dict, owner_uid: str | None = None,
                       deadline_s: float = 3600) -> dict:
    """Worker ``w``'s spec in a ConfigMap of its own (gzip'd JSON in ``binaryData``), owned by the Job
    (``owner_uid``) so that the Job's deletion takes it; refused beyond the API server's 1 MiB."""
    from chaos.load.pod_worker import encode_spec

    data = encode_spec(spec)
    if len(data) > MAX_CONFIGMAP_BYTES - 1024:
        raise UsageError(f"load worker {w}'s share is {len(data) / 1e6:.2f} MB compressed, more than a ConfigMap "
                         f"holds (1 MiB): raise load.workers or lower load.max_requests or duration_s")
    meta: dict[str, Any] = {"name": configmap_name(job, w), "labels": labels(run_id),
                            "annotations": km.stamped(run_id, deadline_s)}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": owner_uid}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "immutable": True,
            "binaryData": {SPEC_KEY: base64.b64encode(data).decode()}}
