"""Accelerator loss on KubeRay (scope ``accelerator``, :mod:`chaos.faults_accelerator`): the accelerator of a GPU
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
delete all daemon pods on node"). The rig does the same with a label of the plugin pod's own nodeSelector (the GPU
operator's if there, else one that no other pod on the node selects on and that is not a Kubernetes label), set to
:data:`PAUSED`; the label's value and the plugin are recorded on the node in the same patch
(:data:`~chaos.backends.kube_marks.ACCELERATOR_MARK`, with the run id and a deadline) for the heal and ``recover``.
The rig never deletes the plugin's pod itself (its DaemonSet's controller does, and re-creating it is what the
label prevents), so it needs no access to kube-system or gpu-operator. Patching the node's ``status.allocatable``
is no way to do it: the kubelet owns the node's status and writes it again at its next update. A plugin whose pod
has no such label is refused in one line: NVIDIA's static manifest (no nodeSelector), GKE's (required affinity on
``cloud.google.com/gke-accelerator`` Exists, GKE's own add-on), a plugin run as a host service (no pod at all).

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

import time
from dataclasses import dataclass, field
from typing import Callable

from chaos.backends import kube_marks as km
from chaos.backends.kuberay.common import ZONE_LABEL, _api_message, _labels, _name, _node_of, check, limit
from chaos.errors import ClusterError, UsageError

RESOURCE = "nvidia.com/gpu"
OPERATOR_LABEL = "nvidia.com/gpu.deploy.device-plugin"  # the GPU operator's switch for its device plugin
PAUSED = "paused-for-availproof"  # as the MIG manager's paused-for-mig-change: not "true", not an operator's "false"
# The NVIDIA device plugin's pod labels: the GPU operator's DaemonSet, NVIDIA's static manifest
# (deployments/static/nvidia-device-plugin.yml), its Helm chart (templateLabels), GKE's
PLUGIN_LABELS = (("app", "nvidia-device-plugin-daemonset"), ("name", "nvidia-device-plugin-ds"),
                 ("app.kubernetes.io/name", "nvidia-device-plugin"), ("k8s-app", "nvidia-gpu-device-plugin"))
RESTORE_S = 180.0  # how long the heal waits for the plugin's new pod and the allocatable to come back
POLL_S = 2.0


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
    return f"{(pod.get('metadata') or {}).get('namespace')}/{_name(pod)}"


def is_plugin(pod: dict) -> bool:
    labels = _labels(pod)
    return any(labels.get(k) == v for k, v in PLUGIN_LABELS)


def _affinity_keys(pod: dict) -> set[str]:
    terms = ((((_spec(pod).get("affinity") or {}).get("node_affinity") or {})
              .get("required_during_scheduling_ignored_during_execution") or {}).get("node_selector_terms") or [])
    return {e.get("key") for t in terms for e in (t.get("match_expressions") or [])}


def selects_on(pod: dict, key: str) -> bool:
    """Whether the pod's nodeSelector or required node affinity names the label ``key``."""
    return key in (_spec(pod).get("node_selector") or {}) or key in _affinity_keys(pod)


def kubernetes_label(key: str) -> bool:
    """A label of Kubernetes' own (``kubernetes.io/os``, ``topology.kubernetes.io/zone``, ...): never paused."""
    prefix = key.partition("/")[0] if "/" in key else ""
    return prefix.endswith("kubernetes.io") or prefix.endswith("k8s.io")


def off_switch(plugin: dict, others: list[dict], node_labels: dict[str, str]) -> tuple[str, str]:
    """The label of the plugin pod's nodeSelector to pause on its node, and its value there: the GPU operator's
    (:data:`OPERATOR_LABEL`) if it selects on it, else one that is no Kubernetes label and that no other pod on the
    node selects on (its DaemonSet would take that pod off too). Refused, one line, when there is none."""
    selector = _spec(plugin).get("node_selector") or {}
    mine = [k for k, v in selector.items() if node_labels.get(k) == v and not kubernetes_label(k)]
    mine.sort(key=lambda k: (k != OPERATOR_LABEL, k))
    for key in mine:
        also = [where(p) for p in others if selects_on(p, key) and (p.get("status") or {}).get("phase")
                not in ("Succeeded", "Failed")]
        if not also:
            return key, selector[key]
    what = (f"nodeSelector {selector}" if selector else "no nodeSelector") + (
        f", required node affinity on {sorted(_affinity_keys(plugin) - {None})}" if _affinity_keys(plugin) else "")
    taken = "; ".join(f"{k} also selects {', '.join(where(p) for p in others if selects_on(p, k))}" for k in mine)
    raise UsageError(
        f"device plugin pod {where(plugin)} has no node-selector label of its own to pause "
        f"({what}{'; ' if taken else ''}{taken}): give its DaemonSet one (the GPU operator's {OPERATOR_LABEL}: "
        "\"true\", on the nodes too) and run again; nothing was changed")


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
    """``lose_accelerator`` and ``restore_accelerator``; the rows of the plan, the leftovers."""

    accelerator_restore_s = RESTORE_S
    accelerator_poll_s = POLL_S

    def _pods_on(self, node: str) -> list[dict]:
        """Every pod bound to ``node``, in every namespace (the plugin's is in kube-system or gpu-operator)."""
        pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return [p.to_dict() for p in pods]

    def _node_named(self, node: str) -> dict | None:
        return next((n for n in self._nodes() if _name(n) == node), None)

    def _accelerator_target(self, r) -> dict:
        """Reads only: the node of replica ``r``'s pod, and everything the loss needs there checked (the pod asks
        for a GPU, the node has some allocatable and no pause of the rig's yet, the device plugin's pod is there
        and can be paused alone). Refused in one line otherwise."""
        if not r.node:
            raise UsageError(f"replica {r.replica_id}: its pod is not known (node IP {r.node_ip})")
        pods = [p for p in self._ray(terminating=True) if _name(p) == r.node]
        pod = limit(pods, 1, f"pod of replica {r.replica_id}")[0]
        if requested(pod) < 1:
            raise UsageError(f"replica {r.replica_id}: its pod {r.node} asks for no {RESOURCE}, so there is no "
                             "accelerator to lose (the GPU overlay, kuberay/overlays/vllm-gpu, gives each worker one)")
        node = _node_of(pod)
        n = self._node_named(node) or {}
        have = quantity((n.get("status") or {}).get("allocatable"))
        if not have:
            raise UsageError(f"node {node} (replica {r.replica_id}): allocatable {RESOURCE} is "
                             f"{'absent' if have is None else have}: no accelerator to lose there")
        mark = km.read(km.annotations(n).get(km.ACCELERATOR_MARK))
        if mark:
            raise UsageError(f"node {node}: its device plugin is paused already (run {mark.get('run')}, label "
                             f"{mark.get('label')}): run `availproof recover --backend kuberay` first")
        on_node = self._pods_on(node)
        plugins = [p for p in on_node if is_plugin(p)]
        if not plugins:
            raise UsageError(f"node {node}: no NVIDIA device plugin pod on it (pods labelled "
                             f"{', '.join(f'{k}={v}' for k, v in PLUGIN_LABELS)}); a plugin run on the host (not "
                             "as a pod) cannot be taken away by the rig")
        plugin = limit(plugins, 1, f"NVIDIA device plugin pod on node {node}")[0]
        label, was = off_switch(plugin, [p for p in on_node if p is not plugin], _labels(n))
        return {"node": node, "zone": _labels(n).get(ZONE_LABEL), "plugin": where(plugin), "label": label,
                "was": was, "gpus": have, "gpu_pods": sorted(where(p) for p in on_node if requested(p) and running(p))}

    def lose_accelerator(self, r) -> Loss:
        """Everything but the pause done (:meth:`_accelerator_target`); the returned :class:`Loss` pauses the device
        plugin on the node: its label set to :data:`PAUSED` and the mark written in one patch, on the node as just
        read again (its label still the value seen, its resourceVersion the precondition: a node changed meanwhile
        refuses it). The DaemonSet's controller then deletes the plugin's pod; the kubelet does the rest."""
        t = self._accelerator_target(r)
        info = {k: t[k] for k in ("plugin", "label", "was", "gpus", "gpu_pods")}

        def fire() -> dict:
            n = self._node_named(t["node"]) or {}
            if _labels(n).get(t["label"]) != t["was"]:
                raise ClusterError(f"node {t['node']}: label {t['label']} changed to {_labels(n).get(t['label'])!r} "
                                   f"since it was read ({t['was']!r}): nothing was changed")
            mark = km.record(self.run_id, self.helper_deadline_s, label=t["label"], was=t["was"], plugin=t["plugin"],
                             gpus=t["gpus"])
            self._patch_node(n, {"metadata": {"labels": {t["label"]: PAUSED},
                                              "annotations": {km.ACCELERATOR_MARK: mark}}})
            return {"plugin_pod": t["plugin"], "label": t["label"], "was": t["was"], "set": PAUSED,
                    "allocatable_before": t["gpus"], "gpu_pods": t["gpu_pods"]}

        return Loss(t["node"], t["zone"], info, fire)

    def _outage_seen(self, node: str) -> dict:
        """What the cluster did while the accelerator was lost, looked at before it is given back: the GPU pods
        still Running on the node, and the pods of the namespace asking for a GPU left Pending (with the
        scheduler's word, their PodScheduled condition)."""
        on = self._pods_on(node)
        pending = []
        for p in self._pods():
            status = p.get("status") or {}
            if requested(p) and status.get("phase") == "Pending" and not _node_of(p):
                cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
                pending.append({"pod": _name(p), "reason": cond.get("reason"), "message": cond.get("message")})
        return {"gpu_pods_running": sorted(where(p) for p in on if requested(p) and running(p)),
                "gpu_pods_pending": pending}

    def restore_accelerator(self, node: str, wait_s: float | None = None) -> dict:
        """Give the node's accelerator back: what the outage left recorded (:meth:`_outage_seen`), the plugin's label
        put back to the value the mark recorded and the mark dropped (one patch), then (unless ``wait_s`` is 0) the
        plugin's new pod Running on the node and the allocatable back to what it was waited for, at most
        ``wait_s`` (default :attr:`accelerator_restore_s`); not back by then raises, one line. A node without the
        rig's mark has nothing to give back (idempotent: a fault healed already)."""
        n = self._node_named(node)
        mark = km.read(km.annotations(n or {}).get(km.ACCELERATOR_MARK))
        if n is None or not mark.get("label"):
            return {"node": node, "note": "no pause of the rig's on the node" if n is not None else "the node is gone"}
        out = {"node": node, "label": f"{mark['label']}={mark.get('was')}", **self._outage_seen(node)}
        try:
            self.core.patch_node(node, {"metadata": {"labels": {mark["label"]: mark.get("was")},
                                                     "annotations": {km.ACCELERATOR_MARK: None}}})
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            if getattr(e, "status", None) is None:
                raise
            raise ClusterError(f"node {node}: the device plugin's label could not be put back (HTTP {e.status}: "
                               f"{_api_message(e)})") from None
        wait = self.accelerator_restore_s if wait_s is None else wait_s
        if wait:
            out.update(self._await_accelerator(node, int(mark.get("gpus") or 1), wait))
        return out

    def _await_accelerator(self, node: str, gpus: int, wait_s: float) -> dict:
        t0 = time.monotonic()
        while True:
            n = self._node_named(node) or {}
            have = quantity((n.get("status") or {}).get("allocatable"))
            plugins = [p for p in self._pods_on(node) if is_plugin(p) and running(p)]
            waited = round(time.monotonic() - t0, 3)
            if plugins and (have or 0) >= gpus:
                return {"allocatable_after": have, "plugin_pod_after": where(plugins[0]), "back_after_s": waited}
            if waited >= wait_s:
                raise ClusterError(f"node {node}: the device plugin's label is back, but not the accelerator within "
                                   f"{wait_s:g} s (allocatable {RESOURCE} {have}, was {gpus}; device plugin pod "
                                   f"{'Running' if plugins else 'not Running'} there)")
            time.sleep(self.accelerator_poll_s)

    def _accelerator_leftovers(self, nodes: list[dict]) -> list[dict]:
        """The nodes whose device plugin a run paused (the mark), whatever run: leftover rows."""
        out = []
        for n in nodes:
            mark = km.read(km.annotations(n).get(km.ACCELERATOR_MARK))
            if mark:
                out.append({"kind": "Accelerator", "name": _name(n), "namespace": None, "run_id": mark.get("run"),
                            "zone": _labels(n).get(ZONE_LABEL), "expires": mark.get("expires"),
                            "what": f"device plugin {mark.get('plugin')} kept off: label {mark.get('label')}={PAUSED} "
                                    f"(was {mark.get('was')})"})
        return out

    def _remove_accelerators(self, found: list[dict]) -> list[str]:
        """Each leftover accelerator loss given back (its label put back, the mark dropped; not waited for); errors."""
        errors = []
        for x in found:
            if x["kind"] == "Accelerator":
                try:
                    self.restore_accelerator(x["name"], wait_s=0)
                except ClusterError as e:
                    errors.append(str(e))
        return errors


# ---------------------------------------------------------------- the scope's implementation (chaos.backends.base)
def plan(self, scope: str, a: dict) -> list[dict]:
    """What a loss would touch now: the node's label (and mark), the plugin's pod its DaemonSet deletes, the GPU pods
    left running. Reads only."""
    t = self._accelerator_target(self.pick_replica(zone=a.get("zone")))
    back = f"after {a['outage_s']:g} s" if a.get("outage_s") is not None else "at the rollback"
    node, where_ = t["node"], f"node {t['node']} ({t['zone'] or 'no zone'})"
    return [self._row("Node", node, f"label {t['label']}={PAUSED} (now {t['was']}) and annotation "
                                    f"{km.ACCELERATOR_MARK}, one patch: the device plugin's DaemonSet stops matching "
                                    "the node", f"label {t['label']}={t['was']} again {back}, the annotation dropped",
                      f"zone {t['zone'] or '-'}"),
            self._row("Pod", t["plugin"], f"deleted by its DaemonSet's controller, not by the rig: the kubelet marks "
                                          f"the node's {RESOURCE} unhealthy, allocatable {t['gpus']} -> 0",
                      "recreated by its DaemonSet; registers again, the allocatable comes back", where_),
            *[self._row("Pod", p, f"left running, its {RESOURCE} kept", "-", where_) for p in t["gpu_pods"]]]


def effect(self, fault: dict) -> list[dict]:
    """One look: the plugin's pod gone from the node, the node's allocatable at 0, its GPU pods still Running."""
    node = fault["target"]
    n = self._node_named(node) or {}
    pods = self._pods_on(node)
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
