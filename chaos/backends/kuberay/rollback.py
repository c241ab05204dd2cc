"""A ``cluster`` upgrade that fails is rolled back, and one that cannot fit is refused before it starts.

KubeRay's NewCluster strategy brings up a second RayCluster (the pending one) beside the active one and
switches to it once its Serve applications are RUNNING; it needs room for both. Before the patch the rig
writes what undoing it needs into a ConfigMap of its own (``availproof-upgrade-<run id>``: the
``rayClusterConfig`` as read and the patch; labelled with the run id, annotated with its deadline), and the
patch itself stamps the pod templates with the run id (so the pending RayCluster KubeRay makes of them carries
it). An upgrade that did not complete (the fault's ``complete: false``), or the record of a crashed run found
by ``recover``, is rolled back: the patch reverted (only if the RayService still holds it), the pending
RayCluster deleted when it carries that run id, the record deleted.

KubeRay v1.7 has no cancel of its own (``rayservice_controller.go``): ``shouldPrepareNewCluster`` compares
the goal spec with the pending cluster when there is one, so a reverted spec makes it name another pending
cluster (of the original spec) and let the first one dangle until ``cleanUpRayClusterInstance`` deletes it
60 s later; a pending RayCluster deleted under a pending name makes ``reconcileRayCluster`` create it again
from the (reverted) goal. Either way the rig's own pending cluster goes now, and what comes up after is the
original spec, not the upgrade."""

from __future__ import annotations

import copy
import json
import re

from chaos.backends.kuberay.kube import marks as km, partition as kp
from chaos.backends.kuberay.common import RAYSERVICE, VERSION_ANNOTATION, api_message, is_not_found, name_of
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.base.errors import ClusterError, SetupError

UPGRADE_LABEL = {kp.FAULT_LABEL: "upgrade"}  # on the record of a cluster upgrade
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")  # what a second cluster is checked against allocatable for
_UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50}


def quantity(value) -> float:
    """A Kubernetes resource quantity (``500m``, ``2Gi``, ``1``) as a number."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"not a quantity: {value!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _get(d: dict | None, *keys):
    for k in keys:
        if d and d.get(k) is not None:
            return d[k]
    return None


def pod_requests(pod_spec: dict | None) -> dict[str, float]:
    """What a pod asks the scheduler for: its containers' requests summed (a limit alone counts as the
    request, as the API server defaults it), each init container's largest (they run one at a time)."""
    out: dict[str, float] = {}
    spec = pod_spec or {}
    for c in _get(spec, "containers") or []:
        res = _get(c, "resources") or {}
        req = {**(_get(res, "limits") or {}), **(_get(res, "requests") or {})}
        for k in RESOURCES:
            if k in req:
                out[k] = out.get(k, 0.0) + quantity(req[k])
    for c in _get(spec, "initContainers", "init_containers") or []:
        res = _get(c, "resources") or {}
        req = {**(_get(res, "limits") or {}), **(_get(res, "requests") or {})}
        for k in RESOURCES:
            if k in req:
                out[k] = max(out.get(k, 0.0), quantity(req[k]))
    return out


def cluster_requests(cluster_spec: dict) -> dict[str, float]:
    """What a RayCluster of ``cluster_spec`` asks for: its head and every worker group's replicas."""
    out: dict[str, float] = {}
    groups = [((cluster_spec.get("headGroupSpec") or {}), 1)]
    groups += [(g, int(g.get("replicas", g.get("minReplicas", 0)) or 0)) for g in cluster_spec.get("workerGroupSpecs") or []]
    for g, n in groups:
        for k, v in pod_requests((g.get("template") or {}).get("spec")).items():
            out[k] = out.get(k, 0.0) + v * n
    return out


def _show(k: str, v: float) -> str:
    return f"{v / 2 ** 30:.1f}Gi" if k == "memory" else (f"{v:g}" if k != "cpu" else f"{v:.2f}")


class Rollbacks:
    """The room a second RayCluster needs, the record of a ``cluster`` upgrade, its rollback, and the RayService's
    patches: held by the lifecycle part (``backend.lifecycle.rollbacks``)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods):
        self.kube, self.target, self.pods = kube, target, pods

    def second_cluster_room(self, cluster_spec: dict) -> dict:
        """Whether a second RayCluster of ``cluster_spec`` fits beside what runs now: its total requests
        (:func:`cluster_requests`) against the allocatable of the schedulable nodes less what their pods (every
        namespace) request. Refused (one line) when it does not (the GPU overlay needs twice the GPUs); nodes
        that report no allocatable: unknown, said, not refused."""
        need = cluster_requests(cluster_spec)
        nodes = [n for n in self.pods.nodes() if not (n.get("spec") or {}).get("unschedulable")]
        alloc: dict[str, float] = {}
        for n in nodes:
            for k, v in (((n.get("status") or {}).get("allocatable")) or {}).items():
                if k in RESOURCES:
                    alloc[k] = alloc.get(k, 0.0) + quantity(v)
        if not alloc:
            return {"need": need, "free": None, "fits": None, "seen": "the nodes report no allocatable"}
        names = {name_of(n) for n in nodes}
        used: dict[str, float] = {}
        for p in self.kube.core.list_pod_for_all_namespaces().items:
            p = p.to_dict()
            if (p.get("spec") or {}).get("node_name") not in names or (p.get("status") or {}).get("phase") in (
                    "Succeeded", "Failed"):
                continue
            for k, v in pod_requests(p.get("spec")).items():
                used[k] = used.get(k, 0.0) + v
        free = {k: alloc.get(k, 0.0) - used.get(k, 0.0) for k in RESOURCES if k in need}
        short = [k for k in need if need[k] > free.get(k, 0.0) + 1e-9]
        if short:
            raise SetupError(f"upgrade (cluster): RayService {self.target.service}'s NewCluster upgrade brings up a second "
                             f"RayCluster beside {self.target.cluster}, which cannot fit: "
                             + "; ".join(f"{k} needs {_show(k, need[k])}, {_show(k, max(free[k], 0.0))} free of "
                                         f"{_show(k, alloc.get(k, 0.0))} allocatable" for k in short)
                             + " (add nodes, or use the serve_config variant)")
        return {"need": need, "free": free, "fits": True}

    def record(self, rcc_before: dict, patch: dict) -> str:
        """The ConfigMap holding what undoing the patch needs (:mod:`.rollback`); its name."""
        name = f"availproof-upgrade-{self.target.run_id}"
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {**UPGRADE_LABEL, kp.RUN_KEY: self.target.run_id},
                             "annotations": {km.EXPIRES: km.deadline(self.target.helper_deadline_s)}},
                "data": {"record": json.dumps({"rayservice": self.target.service, "cluster_before": self.target.cluster,
                                               "run": self.target.run_id, "before": rcc_before, "patch": patch})}}
        try:
            self.kube.core.create_namespaced_config_map(self.target.namespace, body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line, nothing patched
            if getattr(e, "status", None) is None:
                raise
            raise ClusterError(f"upgrade (cluster): the record {name} could not be written (HTTP {e.status}: "
                               f"{api_message(e)}); nothing patched") from None
        return name

    def drop_record(self, name: str | None) -> None:
        if not name:
            return
        try:
            self.kube.core.delete_namespaced_config_map(name, self.target.namespace)
        except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
            if not is_not_found(e):
                raise

    def leftovers(self) -> list[dict]:
        selector = ",".join(f"{k}={v}" for k, v in UPGRADE_LABEL.items())
        out = []
        for cm in self.kube.core.list_namespaced_config_map(self.target.namespace, label_selector=selector).items:
            cm = cm.to_dict()
            meta = cm.get("metadata") or {}
            rec = (cm.get("data") or {}).get("record") or "{}"
            out.append({"kind": "Upgrade", "name": name_of(cm), "namespace": self.target.namespace,
                        "run_id": (meta.get("labels") or {}).get(kp.RUN_KEY), "zone": None,
                        "what": f"a cluster upgrade of RayService {json.loads(rec).get('rayservice')} (its record)",
                        "expires": (meta.get("annotations") or {}).get(km.EXPIRES), "record": rec})
        return out

    def roll_back_upgrade(self, fault: dict) -> dict:
        """Roll back this run's ``cluster`` upgrade (``fault`` as :func:`chaos.scopes.upgrade.upgrade_app` made it)."""
        name = fault.get("record")
        if not name:
            return {}
        cm = self.kube.core.read_namespaced_config_map(name, self.target.namespace).to_dict()
        return self.roll_back_record(json.loads((cm.get("data") or {}).get("record") or "{}"), name)

    def roll_back_record(self, record: dict, name: str) -> dict:
        """The patch reverted (when the RayService still holds it), the pending RayCluster carrying the record's
        run id deleted, the record deleted. Returns what was done."""
        self.target.service = self.target.service or record.get("rayservice")
        rs = self.pods.get_rayservice()
        pending = (((rs.get("status") or {}).get("pendingServiceStatus")) or {}).get("rayClusterName")
        self.revert_cluster_patch(record.get("before") or {}, record.get("patch") or {})
        removed = None
        if pending:
            try:
                rc = self.kube.custom.get_namespaced_custom_object("ray.io", "v1", self.target.namespace, "rayclusters", pending)
            except Exception as e:  # noqa: BLE001 - ApiException; not made yet, or gone
                if not is_not_found(e):
                    raise
                rc = None
            head = ((((rc or {}).get("spec") or {}).get("headGroupSpec") or {}).get("template") or {})
            if rc and ((head.get("metadata") or {}).get("annotations") or {}).get(km.RUN) == record.get("run"):
                try:
                    self.kube.custom.delete_namespaced_custom_object("ray.io", "v1", self.target.namespace, "rayclusters", pending)
                except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
                    if not is_not_found(e):
                        raise
                removed = pending
        self.drop_record(name)
        return {"reverted": record.get("rayservice"), "pending_removed": removed}

    def revert_cluster_patch(self, rcc_before: dict, patch: dict) -> None:
        """Put ``spec.rayClusterConfig`` back as it was read, if it is still what the patch made it (else a
        user changed it meanwhile: left alone), with the resourceVersion read as precondition."""
        rs = self.pods.get_rayservice()
        now = copy.deepcopy(((rs.get("spec") or {}).get("rayClusterConfig")) or {})
        if now.get("workerGroupSpecs") != patch.get("workerGroupSpecs", now.get("workerGroupSpecs")):
            return
        meta = ((rcc_before.get("headGroupSpec") or {}).get("template") or {}).get("metadata")
        if meta is None:  # a merge patch's null deletes: what the patch added goes, parents included
            head: dict = {"metadata": None}
        elif meta.get("annotations") is None:
            head = {"metadata": {"annotations": None}}
        else:
            head = {"metadata": {"annotations": {k: meta["annotations"].get(k)
                                                 for k in (VERSION_ANNOTATION, km.RUN, km.EXPIRES)}}}
        body: dict = {"headGroupSpec": {"template": head}}
        if "workerGroupSpecs" in patch:
            body["workerGroupSpecs"] = copy.deepcopy(rcc_before.get("workerGroupSpecs") or [])
        rv = (rs.get("metadata") or {}).get("resourceVersion")
        self.patch_rayservice({**({"metadata": {"resourceVersion": rv}} if rv else {}),
                                "spec": {"rayClusterConfig": body}}, "revert of the upgrade")

    def patch_rayservice(self, body: dict, what: str) -> dict:
        """One merge patch of the RayService; the object as the API server returns it (its new generation)."""
        try:
            return self.kube.custom.patch_namespaced_custom_object(*RAYSERVICE[:2], self.target.namespace, RAYSERVICE[2],
                                                              self.target.service, body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line, no injection recorded
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise ClusterError(f"{what}: the patch of RayService {self.target.service} failed (HTTP {status}: "
                               f"{api_message(e)})") from None
