"""Accelerator loss on KubeRay (scope ``accelerator``, :mod:`chaos.scopes.faults_accelerator`): the accelerator of a GPU
replica's node lost to Kubernetes while the node's pods run.

**How: what NVIDIA's own tooling does.** NVIDIA's MIG manager, to reconfigure a GPU under a running node, pauses
the GPU operator's device plugin there by setting its DaemonSet's node-selector label
``nvidia.com/gpu.deploy.device-plugin`` to ``paused-for-mig-change``, waits for the plugin's pod to be deleted, and
puts ``true`` back afterwards (a label already ``false`` it leaves alone: NVIDIA/mig-parted
``cmd/nvidia-mig-manager/clients.go``). The GPU operator adds its deploy labels only where they are missing
(NVIDIA/gpu-operator ``controllers/state_manager.go`` ``addGPUStateLabels``: "If a required state label already
exists on the node, honor the current value"), so a paused value stays. The DaemonSet controller deletes a daemon
pod from a node its template's nodeSelector or required node affinity no longer matches, and creates none there
(Kubernetes ``pkg/controller/daemon/daemon_controller.go`` ``NodeShouldRunDaemonPod``: shouldRun and
shouldContinueRunning both false; ``podsShouldBeOnNode``: "If daemon pod isn't supposed to run on node, but it is,
delete all daemon pods on node"). The rig does the same with the GPU operator's own label, and with no other (a node pool's, a node
group's, ``nvidia.com/gpu.present`` select far more than the plugin), when the plugin pod's nodeSelector names it
and no other pod on the node selects on it, set to :data:`PAUSED`; the label's value and the plugin are recorded
on the node in the same patch
(:data:`~chaos.backends.kuberay.kube.marks.ACCELERATOR_MARK`, with the run id and a deadline) for the heal and ``recover``.
The rig never deletes the plugin's pod itself (its DaemonSet's controller does, and re-creating it is what the
label prevents), so it needs no access to kube-system or gpu-operator. Patching the node's ``status.allocatable``
is no way to do it: the kubelet owns the node's status and writes it again at its next update. A plugin whose pod
has no such label is refused in one line: NVIDIA's static manifest (no nodeSelector), GKE's (required affinity on
``cloud.google.com/gke-accelerator`` Exists, GKE's own add-on), a plugin run as a host service (no pod at all), one
selected by any other label. So is a node that also runs another namespace's GPU pods (they lose scheduling too,
and a container of theirs that restarts after the device manager's 5-minute grace fails), unless acknowledged
(``acknowledge_other_gpu_pods``); the outage itself is capped below that grace
(:data:`chaos.scopes.faults_accelerator.MAX_OUTAGE_S`).

**What it is not.** A device-plugin outage, not a device loss: the running engine keeps its GPU and a working CUDA
context. The sticky device loss is the scope ``device-loss`` (:mod:`chaos.scopes.device_loss`).

**Held to the heal, healed only where still the rig's.** The pause is looked at again during the outage
(:meth:`Accelerators.hold_accelerator`) and at the heal: a label someone put back, or an allocatable back above 0,
is a proof that did not hold (the effect ``verified: false``, ``lost_until_s``). The heal and ``recover`` write the
old value back only while the label still reads :data:`PAUSED`, with the node's resourceVersion as precondition;
on a conflict the node is read again, and a label someone else set meanwhile (an admin's ``false``, the MIG
manager's own pause) is left as it is, only the rig's mark dropped, and said. A failed read at the heal (a 403 or a
timeout of the cluster-wide pod list) is recorded, never a reason to leave the plugin paused.

**What the kubelet does** (Kubernetes ``pkg/kubelet/cm/devicemanager``): the plugin's ListAndWatch stream ends when
its process exits (its pod's SIGTERM), and ``plugin/v1beta1/handler.go`` ``runClient`` -> ``disconnectClient`` ->
``client.go`` ``Disconnect`` -> ``manager.go`` ``PluginDisconnected`` marks every device of the resource unhealthy
(``markResourceUnhealthy``) and sets the endpoint's stop time; ``GetCapacity`` then gives allocatable 0 (no healthy
device) and capacity the unhealthy count, and drops the resource once ``endpointStopGracePeriod`` (5 min) has
passed, which the node status setter writes as capacity 0 (``pkg/kubelet/nodestatus/setters.go`` ``MachineInfo``).
The API sees it at the kubelet's next node status update (``nodeStatusUpdateFrequency``, 10 s by default). Pods
already running keep their devices (the plugin is not in their data path); a new pod asking for
``nvidia.com/gpu`` no longer fits the node (kube-scheduler ``NodeResourcesFit``: "Insufficient nvidia.com/gpu")
and stays Pending. The plugin's new pod registers again (``PluginConnected``, its first ListAndWatch answer: the
devices healthy), and the allocatable is back with the next status update.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

from chaos.backends.kuberay import plan as plan_rows
from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import ZONE_LABEL, api_message, check, labels_of, limit, name_of, node_of
from chaos.base.errors import ClusterError, UsageError
from chaos.scopes.faults_accelerator import outage_refusal

RESOURCE = "nvidia.com/gpu"
OPERATOR_LABEL = "nvidia.com/gpu.deploy.device-plugin"  # the GPU operator's switch for its device plugin
PAUSED = "paused-for-availproof"  # as the MIG manager's paused-for-mig-change: not "true", not an operator's "false"
# The NVIDIA device plugin's pod labels: the GPU operator's DaemonSet, NVIDIA's static manifest
# (deployments/static/nvidia-device-plugin.yml), its Helm chart (templateLabels), GKE's
PLUGIN_LABELS = (("app", "nvidia-device-plugin-daemonset"), ("name", "nvidia-device-plugin-ds"),
                 ("app.kubernetes.io/name", "nvidia-device-plugin"), ("k8s-app", "nvidia-gpu-device-plugin"))
RESTORE_S = 180.0  # how long the heal waits for the plugin's new pod and the allocatable to come back
POLL_S = 2.0
CONFLICT_TRIES = 3  # writes of the label back refused on a changed resourceVersion before the heal gives up
HELD = "the device plugin kept off from the injection to the heal"


def _failed(e: Exception) -> str:
    """A failed API call (or any error) as one line."""
    status = getattr(e, "status", None)
    text = f"HTTP {status}: {api_message(e)}" if status is not None else f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:300]


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def quantity(resources: dict | None, name: str = RESOURCE) -> int | None:
    """A count of ``name`` in a resource list (``status.allocatable``, a container's limits); None when absent."""
    value = (resources or {}).get(name)
    if value is None:
        return None
    try:
        return int(float(str(value)))
    except ValueError:
        return None


def requested(pod: dict) -> int:
    """The GPUs a pod asks for (its containers' limits or requests: equal for an extended resource)."""
    total = 0
    for c in _spec(pod).get("containers") or []:
        r = c.get("resources") or {}
        total += max(quantity(r.get("limits")) or 0, quantity(r.get("requests")) or 0)
    return total


def running(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not (pod.get("metadata") or {}).get(
        "deletion_timestamp")


def where(pod: dict) -> str:
    return f"{(pod.get('metadata') or {}).get('namespace')}/{name_of(pod)}"


def is_plugin(pod: dict) -> bool:
    labels = labels_of(pod)
    return any(labels.get(k) == v for k, v in PLUGIN_LABELS)


def _affinity_keys(pod: dict) -> set[str]:
    terms = ((((_spec(pod).get("affinity") or {}).get("node_affinity") or {})
              .get("required_during_scheduling_ignored_during_execution") or {}).get("node_selector_terms") or [])
    return {e.get("key") for t in terms for e in (t.get("match_expressions") or [])}


def selects_on(pod: dict, key: str) -> bool:
    """Whether the pod's nodeSelector or required node affinity names the label ``key``."""
    return key in (_spec(pod).get("node_selector") or {}) or key in _affinity_keys(pod)


def off_switch(plugin: dict, others: list[dict], node_labels: dict[str, str]) -> tuple[str, str]:
    """The label to pause the plugin with on its node, and its value there: the GPU operator's
    (:data:`OPERATOR_LABEL`), and no other (a node pool's, a node group's, ``nvidia.com/gpu.present`` select far more
    than the plugin), when the plugin pod's nodeSelector names it with the node's value and no other pod on the node
    selects on it (its DaemonSet would take that pod off too). Refused, one line, otherwise."""
    selector = _spec(plugin).get("node_selector") or {}
    also = [where(p) for p in others if selects_on(p, OPERATOR_LABEL) and (p.get("status") or {}).get("phase")
            not in ("Succeeded", "Failed")]
    if selector.get(OPERATOR_LABEL) is not None and node_labels.get(OPERATOR_LABEL) == selector[OPERATOR_LABEL] \
            and not also:
        return OPERATOR_LABEL, selector[OPERATOR_LABEL]
    what = (f"nodeSelector {selector}" if selector else "no nodeSelector") + (
        f", required node affinity on {sorted(_affinity_keys(plugin) - {None})}" if _affinity_keys(plugin) else "")
    taken = f"; {OPERATOR_LABEL} also selects {', '.join(also)}" if also and OPERATOR_LABEL in selector else ""
    raise UsageError(
        f"device plugin pod {where(plugin)} has no node-selector label of its own to pause ({what}{taken}): give its "
        f"DaemonSet one (the GPU operator's {OPERATOR_LABEL}: \"true\", on the nodes too) and run again; only the "
        f"GPU operator's {OPERATOR_LABEL} is paused, never another label; nothing was changed")


@dataclass
class Loss:
    """An accelerator loss ready to inject (:meth:`Accelerators.lose_accelerator`): the node, its zone, what the marks
    say of it; calling it pauses the plugin and returns what it changed."""

    node: str
    zone: str | None
    info: dict
    fire: Callable[[], dict] = field(repr=False)

    def detail(self) -> dict:
        return dict(self.info)

    def __call__(self) -> dict:
        return self.fire()


class Accelerators:
    """``lose_accelerator`` and ``restore_accelerator``; the rows of the plan, the leftovers: a part the backend holds
    (``backend.accelerators``)."""

    accelerator_restore_s = RESTORE_S
    accelerator_poll_s = POLL_S

    def __init__(self, kube: KubeClient, target: Target, pods: Pods):
        self.kube, self.target, self.pods = kube, target, pods
        self.paused_at: dict[str, float] = {}  # node -> the monotonic instant this backend paused its plugin

    def pods_on(self, node: str) -> list[dict]:
        """Every pod bound to ``node``, in every namespace (the plugin's is in kube-system or gpu-operator)."""
        pods = self.kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return [p.to_dict() for p in pods]

    def node_named(self, node: str) -> dict | None:
        return next((n for n in self.pods.nodes() if name_of(n) == node), None)

    def target_for(self, r, acknowledge_other_gpu_pods: bool = False) -> dict:
        """Reads only: the node of replica ``r``'s pod, and everything the loss needs there checked (the pod asks
        for a GPU, the node has some allocatable and no pause of the rig's yet, the device plugin's pod is there
        and the GPU operator's label pauses it alone, no other namespace's GPU pod on the node unless
        ``acknowledge_other_gpu_pods``). Refused in one line otherwise."""
        if not r.node:
            raise UsageError(f"replica {r.replica_id}: its pod is not known (node IP {r.node_ip})")
        pods = [p for p in self.pods.ray(terminating=True) if name_of(p) == r.node]
        pod = limit(pods, 1, f"pod of replica {r.replica_id}")[0]
        if requested(pod) < 1:
            raise UsageError(f"replica {r.replica_id}: its pod {r.node} asks for no {RESOURCE}, so there is no "
                             "accelerator to lose (the GPU overlay, kuberay/overlays/vllm-gpu, gives each worker one)")
        return self.node_target(node_of(pod), acknowledge_other_gpu_pods, f"replica {r.replica_id}")

    def node_target(self, node: str, acknowledge_other_gpu_pods: bool = False, who: str = "") -> dict:
        """Reads only: everything a pause of the device plugin on Kubernetes node ``node`` needs, checked (some
        allocatable, no pause of the rig's yet, the device plugin's pod there and the GPU operator's label pausing
        it alone, no other namespace's GPU pod unless acknowledged); refused in one line otherwise. Shared by the
        ``accelerator`` scope (:meth:`target_for`) and ``device-loss``'s pause beside its marker
        (:mod:`chaos.backends.kuberay.device_node`); ``who``: what the node hosts, for the refusals."""
        n = self.node_named(node) or {}
        have = quantity((n.get("status") or {}).get("allocatable"))
        if not have:
            raise UsageError(f"node {node}{f' ({who})' if who else ''}: allocatable {RESOURCE} is "
                             f"{'absent' if have is None else have}: no accelerator to lose there")
        mark = km.read(km.annotations(n).get(km.ACCELERATOR_MARK))
        if mark:
            raise UsageError(f"node {node}: its device plugin is paused already (run {mark.get('run')}, label "
                             f"{mark.get('label')}): run `availproof recover --backend kuberay` first")
        on_node = self.pods_on(node)
        plugins = [p for p in on_node if is_plugin(p)]
        if not plugins:
            raise UsageError(f"node {node}: no NVIDIA device plugin pod on it (pods labelled "
                             f"{', '.join(f'{k}={v}' for k, v in PLUGIN_LABELS)}); a plugin run on the host (not "
                             "as a pod) cannot be taken away by the rig")
        plugin = limit(plugins, 1, f"NVIDIA device plugin pod on node {node}")[0]
        label, was = off_switch(plugin, [p for p in on_node if p is not plugin], labels_of(n))
        theirs = sorted(where(p) for p in on_node if requested(p) and (p.get("metadata") or {}).get("namespace")
                        != self.target.namespace and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
        if theirs and not acknowledge_other_gpu_pods:
            raise UsageError(f"node {node} also runs GPU pods of other namespaces ({', '.join(theirs[:5])}"
                             f"{' ...' if len(theirs) > 5 else ''}): they would lose scheduling there too, and a "
                             "container of theirs that restarts after the device manager's 5-minute grace fails; "
                             "refused (acknowledge_other_gpu_pods: true in the fault's arguments to run it anyway); "
                             "nothing was changed")
        out = {"node": node, "zone": labels_of(n).get(ZONE_LABEL), "plugin": where(plugin), "label": label,
               "was": was, "gpus": have, "gpu_pods": sorted(where(p) for p in on_node if requested(p) and running(p))}
        return {**out, "other_gpu_pods": theirs} if theirs else out

    def lose_accelerator(self, r, acknowledge_other_gpu_pods: bool = False) -> Loss:
        """Everything but the pause done (:meth:`_accelerator_target`); the returned :class:`Loss` pauses the device
        plugin on the node: its label set to :data:`PAUSED` and the mark written in one patch, on the node as just
        read again (its label still the value seen, its resourceVersion the precondition: a node changed meanwhile
        refuses it). The DaemonSet's controller then deletes the plugin's pod; the kubelet does the rest."""
        t = self.target_for(r, acknowledge_other_gpu_pods)
        info = {k: t[k] for k in ("plugin", "label", "was", "gpus", "gpu_pods", "other_gpu_pods") if k in t}
        return Loss(t["node"], t["zone"], info, lambda: self.pause(t))

    def pause(self, t: dict) -> dict:
        """The pause of :meth:`node_target`'s ``t``: the label set to :data:`PAUSED` and the mark written in one patch,
        on the node as just read again (its label still the value seen, its resourceVersion the precondition)."""
        n = self.node_named(t["node"]) or {}
        if labels_of(n).get(t["label"]) != t["was"]:
            raise ClusterError(f"node {t['node']}: label {t['label']} changed to {labels_of(n).get(t['label'])!r} "
                               f"since it was read ({t['was']!r}): nothing was changed")
        mark = km.record(self.target.run_id, self.target.helper_deadline_s, label=t["label"], was=t["was"],
                         plugin=t["plugin"], gpus=t["gpus"])
        self.pods.patch_node(n, {"metadata": {"labels": {t["label"]: PAUSED},
                                              "annotations": {km.ACCELERATOR_MARK: mark}}})
        self.paused_at[t["node"]] = self.kube.monotonic()  # the hold's instants count from here
        out = {"plugin_pod": t["plugin"], "label": t["label"], "was": t["was"], "set": PAUSED,
               "allocatable_before": t["gpus"], "gpu_pods": t["gpu_pods"]}
        return {**out, "other_gpu_pods": t["other_gpu_pods"]} if "other_gpu_pods" in t else out


    def _outage_seen(self, node: str) -> dict:
        """What the cluster did while the accelerator was lost, looked at before it is given back: the GPU pods
        still Running on the node, and the pods of the namespace asking for a GPU left Pending (with the
        scheduler's word, their PodScheduled condition)."""
        on = self.pods_on(node)
        pending = []
        for p in self.pods.pods():
            status = p.get("status") or {}
            if requested(p) and status.get("phase") == "Pending" and not node_of(p):
                cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
                pending.append({"pod": name_of(p), "reason": cond.get("reason"), "message": cond.get("message")})
        return {"gpu_pods_running": sorted(where(p) for p in on if requested(p) and running(p)),
                "gpu_pods_pending": pending}

    def held(self, n: dict | None, node: str, allocatable_zero: bool = True) -> dict:
        """One look at the hold, of the node as read: the label still the rig's pause and (``allocatable_zero``) the
        allocatable still 0; without it the allocatable is only said (device-loss looks from its first second, before
        the kubelet's status update can have dropped it: :mod:`chaos.backends.kuberay.device_node`)."""
        if n is None:
            return check(f"node {node}: {HELD}", False, "the node is gone")
        key = km.read(km.annotations(n).get(km.ACCELERATOR_MARK)).get("label") or OPERATOR_LABEL
        value, have = labels_of(n).get(key), quantity((n.get("status") or {}).get("allocatable"))
        return check(f"node {node}: {HELD} (label {key}={PAUSED}" + (f", allocatable {RESOURCE} 0)" if allocatable_zero
                                                                     else ")"),
                     value == PAUSED and (not have or not allocatable_zero),
                     f"label {key} reads {value!r}, allocatable {RESOURCE} {'absent' if have is None else have}")

    def record_hold(self, fault: dict, c: dict, node: str | None = None) -> None:
        """A look at the hold written into the fault's effect (a copy: the inject end mark keeps the proof of its
        instant); the first look that saw the pause gone makes it ``verified: false`` with ``lost_until_s`` (as a
        zone loss's watch: :meth:`chaos.backends.kuberay.kube.zone.ZoneWatch.record`), and stays."""
        node = node or fault["target"]
        started = self.paused_at.get(node)
        c = dict(c, t_s=round(self.kube.monotonic() - started, 3) if started is not None else None)
        effect = copy.deepcopy(fault.get("effect")) if isinstance(fault.get("effect"), dict) else {
            "verified": None, "time_to_effect_s": None, "bound_s": None, "checks": []}
        if effect.get("came_back"):
            return  # lost already: the first look that saw it is the one that counts
        effect["checks"] = [x for x in effect.get("checks") or [] if not x.get("check", "").startswith(
            f"node {node}: {HELD}")] + [c]
        if not c["ok"]:
            effect["verified"] = False
            effect["lost_until_s"] = c["t_s"]
            effect["came_back"] = {"t_s": c["t_s"], "how": c["seen"]}
        fault["effect"] = effect

    def hold_accelerator(self, fault: dict) -> dict:
        """One look, during the outage, at whether the pause still holds (:meth:`held`), written into the fault
        (:meth:`record_hold`). A look that fails proves nothing either way: said in the check, not a loss."""
        try:
            c = self.held(self.node_named(fault["target"]), fault["target"])
        except Exception as e:  # noqa: BLE001 - a failed read is no finding; the heal looks again
            return check(f"node {fault['target']}: {HELD}", True, f"the look failed ({_failed(e)})")
        self.record_hold(fault, c)
        return c

    def restore_accelerator(self, node: str, wait_s: float | None = None, fault: dict | None = None,
                            look: bool = True) -> dict:
        """Give the node's plugin back: what the outage left recorded (:meth:`_outage_seen`, unless ``look`` is
        False; a read that fails there is recorded, never a reason to leave it paused), the hold looked at once
        more and written into ``fault`` (when given), the label put back to the value the mark recorded and the
        mark dropped (:meth:`_put_label_back`: only while the label still reads :data:`PAUSED`), then (unless
        ``wait_s`` is 0, or the label was left as someone else set it) the plugin's new pod Running on the node and
        the allocatable back to what it was waited for, at most ``wait_s`` (default :attr:`accelerator_restore_s`);
        not back by then raises, one line. A node without the rig's mark has nothing to give back (idempotent)."""
        try:
            n = self.node_named(node)
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            raise ClusterError(f"node {node}: could not be read to give its device plugin back ({_failed(e)})") \
                from None
        mark = km.read(km.annotations(n or {}).get(km.ACCELERATOR_MARK))
        if n is None or not mark.get("label"):
            if fault is not None:
                self.record_hold(fault, self.held(n, node))
            return {"node": node, "note": "no pause of the rig's on the node" if n is not None else "the node is gone"}
        out = {"node": node, "label": f"{mark['label']}={mark.get('was')}"}
        if look:
            try:
                out.update(self._outage_seen(node))
            except Exception as e:  # noqa: BLE001 - recorded; the label goes back all the same
                out["outage_seen_error"] = _failed(e)
        if fault is not None:
            self.record_hold(fault, self.held(n, node))
        put_back, out["note"] = self._put_label_back(n, mark)
        wait = self.accelerator_restore_s if wait_s is None else wait_s
        if wait and put_back:
            out.update(self._await_accelerator(node, int(mark.get("gpus") or 1), wait))
        return out

    def _put_label_back(self, n: dict, mark: dict) -> tuple[bool, str]:
        """The label back to its old value and the mark dropped, in one patch with the node's resourceVersion as
        precondition, only while the label still reads :data:`PAUSED`; one that reads anything else (set meanwhile
        by an admin, the GPU operator, the MIG manager) is left, only the mark dropped. On a conflict (409: the
        node changed since it was read) it is read again and decided again, :data:`CONFLICT_TRIES` times at most.
        (whether the label was put back, what was done)."""
        node, key, was = name_of(n), mark["label"], mark.get("was")
        for _ in range(CONFLICT_TRIES):
            value = labels_of(n).get(key)
            mine = value == PAUSED
            meta: dict = {"annotations": {km.ACCELERATOR_MARK: None}}
            if mine:
                meta["labels"] = {key: was}
            rv = (n.get("metadata") or {}).get("resource_version")
            if rv:
                meta["resourceVersion"] = rv
            try:
                self.kube.core.patch_node(node, {"metadata": meta})
            except Exception as e:  # noqa: BLE001 - ApiException: a conflict read again, else one line
                if getattr(e, "status", None) != 409:
                    raise ClusterError(f"node {node}: the device plugin's label could not be put back ({_failed(e)})"
                                       ) from None
                n = self.node_named(node)
                if n is None:
                    return False, "the node is gone"
                if not km.annotations(n).get(km.ACCELERATOR_MARK):
                    return False, "the rig's mark is gone from the node (removed meanwhile): nothing done"
                continue
            if mine:
                return True, f"label {key}={was} put back"
            return False, (f"label {key} left as {value!r}: set meanwhile by someone else (not the rig's {PAUSED}), "
                           "so not the rig's to put back; only the rig's mark dropped")
        raise ClusterError(f"node {node}: the device plugin's label could not be put back: the node changed under "
                           f"each of {CONFLICT_TRIES} tries (HTTP 409); run `availproof recover --backend kuberay`")

    def _await_accelerator(self, node: str, gpus: int, wait_s: float) -> dict:
        t0 = self.kube.monotonic()
        have, plugins, error = None, [], ""
        while True:
            try:  # a look that fails is no answer: looked at again until the wait is over
                n = self.node_named(node) or {}
                have = quantity((n.get("status") or {}).get("allocatable"))
                plugins = [p for p in self.pods_on(node) if is_plugin(p) and running(p)]
                error = ""
            except Exception as e:  # noqa: BLE001
                error = f"; the last look failed: {_failed(e)}"
            waited = round(self.kube.monotonic() - t0, 3)
            if plugins and (have or 0) >= gpus:
                return {"allocatable_after": have, "plugin_pod_after": where(plugins[0]), "back_after_s": waited}
            if waited >= wait_s:
                raise ClusterError(f"node {node}: the device plugin's label is back, but not the accelerator within "
                                   f"{wait_s:g} s (allocatable {RESOURCE} {have}, was {gpus}; device plugin pod "
                                   f"{'Running' if plugins else 'not Running'} there{error})")
            self.kube.sleep(self.accelerator_poll_s)

    def leftovers(self, nodes: list[dict]) -> list[dict]:
        """The nodes whose device plugin a run paused (the mark), whatever run: leftover rows."""
        out = []
        for n in nodes:
            mark = km.read(km.annotations(n).get(km.ACCELERATOR_MARK))
            if mark:
                out.append({"kind": "Accelerator", "name": name_of(n), "namespace": None, "run_id": mark.get("run"),
                            "zone": labels_of(n).get(ZONE_LABEL), "expires": mark.get("expires"),
                            "what": f"device plugin {mark.get('plugin')} kept off: label {mark.get('label')}={PAUSED} "
                                    f"(was {mark.get('was')})"})
        return out

    def remove(self, x: dict) -> None:
        """A leftover device-plugin pause given back (its label put back while still the rig's, the mark dropped;
        not waited for, nothing looked at but the node: ``recover``)."""
        self.restore_accelerator(x["name"], wait_s=0, look=False)


# ---------------------------------------------------------------- the scope's implementation (chaos.backends.base)
def plan(self, scope: str, a: dict) -> list[dict]:
    """What a loss would touch now: the node's label (and mark), the plugin's pod its DaemonSet deletes, the GPU pods
    left running. Reads only."""
    refusal = outage_refusal(a.get("outage_s"))
    if refusal:
        raise UsageError(refusal)
    t = self.accelerators.target_for(self.pick_replica(zone=a.get("zone")), bool(a.get("acknowledge_other_gpu_pods")))
    back = f"after {a['outage_s']:g} s" if a.get("outage_s") is not None else "at the rollback"
    node, where_ = t["node"], f"node {t['node']} ({t['zone'] or 'no zone'})"
    return [plan_rows.row(self, "Node", node, f"label {t['label']}={PAUSED} (now {t['was']}) and annotation "
                                    f"{km.ACCELERATOR_MARK}, one patch: the device plugin's DaemonSet stops matching "
                                    "the node", f"label {t['label']}={t['was']} again {back}, the annotation dropped",
                      f"zone {t['zone'] or '-'}"),
            plan_rows.row(self, "Pod", t["plugin"], f"deleted by its DaemonSet's controller, not by the rig: the kubelet marks "
                                          f"the node's {RESOURCE} unhealthy, allocatable {t['gpus']} -> 0",
                      "recreated by its DaemonSet; registers again, the allocatable comes back", where_),
            *[plan_rows.row(self, "Pod", p, f"left running, its {RESOURCE} kept", "-", where_) for p in t["gpu_pods"]],
            *[plan_rows.row(self, "Pod", p, f"another namespace's, left running (acknowledged): no new {RESOURCE} pod of "
                                  "theirs fits the node meanwhile", "-", where_) for p in t.get("other_gpu_pods", [])]]


def effect(self, fault: dict) -> list[dict]:
    """One look: the plugin's pod gone from the node, the node's allocatable at 0, its GPU pods still Running."""
    node = fault["target"]
    n = self.accelerators.node_named(node) or {}
    pods = self.accelerators.pods_on(node)
    left = [p for p in pods if is_plugin(p)]
    status = n.get("status") or {}
    have, cap = quantity(status.get("allocatable")), quantity(status.get("capacity"))
    gpu_pods = list(fault.get("gpu_pods") or [])
    up = {where(p) for p in pods if running(p)}
    down = [p for p in gpu_pods if p not in up]
    return [
        check(f"node {node}: the device plugin's pod ({fault.get('plugin_pod')}) gone", not left,
              "gone" if not left else "; ".join(f"{where(p)} {(p.get('status') or {}).get('phase')}"
                                                 f"{' (terminating)' if not running(p) else ''}" for p in left)),
        check(f"node {node}: allocatable {RESOURCE} dropped to 0 (was {fault.get('allocatable_before')})", have == 0,
              f"allocatable {'absent' if have is None else have}, capacity {'absent' if cap is None else cap}"),
        check(f"node {node}: its GPU pods still Running", bool(gpu_pods) and not down,
              f"{len(gpu_pods) - len(down)} of {len(gpu_pods)} Running" + (f"; not: {', '.join(down)}" if down else
                                                                             "")),
    ]
