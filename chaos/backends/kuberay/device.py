"""``device-loss`` on KubeRay (:mod:`chaos.scopes.device_loss`): the marker in **the replica's Kubernetes node**: a
hostPath directory of the node (``/var/lib/availproof/device-loss``) that every Ray worker pod mounts at
:data:`NODE_DIR` (the shipped manifests, ``serve_apps.kuberay``), where the engines' hook reads it (the node key empty).
It is written, read and removed through exec of ``python -m serve_apps.device_loss`` (one JSON line back; the same
code, marker and records as on the local backend) in the replica's pod, or, once that pod is gone, in any Ray pod of
the rig on that node. Every new replica Serve starts on that node fails (or hangs) as it starts, in a replacement pod
KubeRay places there too, as on a node whose GPU stays bad.

The marker is recorded on its node too (:data:`~chaos.backends.kuberay.kube.marks.DEVICE_MARK`: the run, the fault,
its token, the pod written through and its image, whether the node was tainted, a deadline), written before it, so a
crashed run's marker is found by one read of the nodes (no exec) and removed by ``availproof recover``
(:meth:`Devices.remove`) through any Ray pod of the rig on the node, else through a helper pod pinned to it.

**The remedy** (the rig's own health monitor, ``remedy="cordon"``): the Kubernetes node the pod runs on cordoned
(``spec.unschedulable``, annotated with the run as a zone loss's cordon: :data:`~chaos.backends.kuberay.kube.marks.
CORDON_MARK`, which ``recover`` already lifts), then the pod evicted (policy/v1, its PodDisruptionBudgets checked, a
grace of :data:`EVICT_GRACE_S`): cordon and drain, as a health monitor does; KubeRay's replacement pod cannot land on
the cordoned node. A node someone else cordoned is left as it is (only the pod evicted), and never uncordoned by the
heal; the heal uncordons only while the annotation still names the run (the node's resourceVersion as
precondition). The marker stays in the cordoned node's directory: the proof's hold ends at the eviction, and the
heal removes it through a Ray pod of the rig still on the node, else through a helper pod pinned there.

Once no Ray pod of the rig is on the node (the remedy evicted it, KubeRay placed the replacement elsewhere), the heal
and ``recover`` clear the marker through a short-lived helper pod pinned to the node
(:mod:`chaos.backends.kuberay.device_helper_pod`: the same hostPath, the Ray workers' image, ``clear --token``: only
the marker that still holds the fault's token), deleted after; one that does not run in time is said in one line and
the marker kept (recorded on the node). Beside the marker (:mod:`chaos.backends.kuberay.device_node`): the node's
NVIDIA device plugin paused where the node carries the GPU operator's label (skipped and said where it does not), and
with ``taint`` the node tainted :data:`~chaos.backends.kuberay.device_node.TAINT` as a health monitor would; each
undone at the heal only while still the rig's."""

from __future__ import annotations

import json
import math
import shlex

from chaos.backends import device_loss as shared
from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay import device_node as dn
from chaos.backends.kuberay.accelerators import PAUSED, Accelerators
from chaos.backends.kuberay.common import CORDON_MARK, api_message, name_of, node_of
from chaos.backends.kuberay.device_helper_pod import HOST_DIR, DeviceHelpers, failed, helper_name
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.base.errors import ClusterError

CLI = "python -m serve_apps.device_loss"
NODE_DIR = "/tmp/availproof-device-loss"  # where the Ray pods mount their node's directory (node_dir(""))
EVICT_GRACE_S = 30.0  # the bad pod's eviction: its containers' SIGTERM, then SIGKILL after this


def script(action: str, **args) -> str:
    """The exec in a Ray pod (the node key empty: :data:`NODE_DIR` is the node's directory, mounted)."""
    extra = "".join(f" --{k} {shlex.quote(str(v))}" for k, v in args.items())
    return f": availproof-device-loss; {CLI} {action} --node ''{extra}"


def parse(out: str) -> dict:
    """The command's one JSON line (the last line that parses)."""
    for line in reversed((out or "").strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {"error": f"no answer from {CLI}: {(out or '').strip()[:200]!r}"}


class Devices:
    """The marker in the nodes' directories, the remedy's cordon and its undoing: held by the engines part
    (``backend.engines.devices``), which checks the engine's hook for it."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, engines, accelerators: Accelerators | None = None):
        self.kube, self.target, self.pods, self.engines = kube, target, pods, engines
        self.accelerators = accelerators or Accelerators(kube, target, pods)
        self.helpers = DeviceHelpers(kube, target, pods)

    def pod(self, name: str) -> dict | None:
        return next((p for p in self.pods.ray() if name_of(p) == name), None)

    def pods_on(self, node: str | None, first: str | None = None) -> list[str]:
        """The rig's Ray pods (not terminating) on Kubernetes node ``node``, the pod ``first`` first: any of them
        reaches the node's marker."""
        names = [name_of(p) for p in self.pods.ray() if node and node_of(p) == node]
        return sorted(names, key=lambda n: (n != first, n))

    def run(self, pod: str, action: str, **args) -> dict:
        return parse(self.pods.exec(pod, script(action, **args), ok_codes=(0, 1)))

    def device_breaker(self, r, mode: str, xid: int, outage_s=None, taint: bool = False,
                       acknowledge_other_gpu_pods: bool = False):
        """Everything but the marker done: the replica's pod and its node found, its engine's hook on (it takes
        SIGUSR1), no marker on the node already (its annotation, then one exec), the device plugin's pause checked
        (:func:`~chaos.backends.kuberay.device_node.plugin_target`: skipped where the node has no GPU operator's
        label). The callable records the marker on the node, writes it (exec in the replica's pod, into the node's
        directory), then pauses the plugin and taints the node (``taint``); a step that fails undoes the others."""
        shared.check_arguments(mode, xid, None, 1.0)
        pod = self.pod(r.node)
        if pod is None:
            raise ClusterError(f"device-loss: replica {r.replica_id}'s pod {r.node} is not one of the cluster's Ray pods")
        node = node_of(pod)
        n = self.node_named(node)
        if n is None:
            raise ClusterError(f"device-loss: node {node} of pod {r.node} could not be read")
        plugin = dn.plugin_target(self.accelerators, n, outage_s, acknowledge_other_gpu_pods, f"replica {r.replica_id}")
        if taint and any(t.get("key") == dn.TAINT for t in dn.taints_of(n)):
            raise ClusterError(f"device-loss: node {node} carries taint {dn.TAINT} already: run `availproof recover` "
                               "first, or remove it")
        self.engines.hooked_engines(r, "fail on its lost device", "fail")
        held = km.read(km.annotations(n).get(km.DEVICE_MARK))
        left = {"marker": held} if held.get("token") else self.run(r.node, "look")
        if left.get("error") or left.get("marker") is not None:
            raise ClusterError(f"device-loss: node {node} (pod {r.node}): " + (
                str(left["error"]) if left.get("error") else f"a marker is already there (run "
                f"{(left['marker'] or {}).get('run')!r}): run `availproof recover` first"))
        containers = (pod.get("spec") or {}).get("containers") or []
        image = containers[0].get("image") if containers else None

        def write(fault_id: str, token: str) -> dict:
            self.annotate(node, km.record(self.target.run_id, self.target.helper_deadline_s, fault=fault_id,
                                          token=token, pod=r.node, image=image, taint=bool(taint)))
            mark = self.run(r.node, "set", run=self.target.run_id, fault=fault_id, token=token, mode=mode, xid=xid)
            if mark.get("error"):
                self.annotate(node, None)
                raise ClusterError(f"device-loss: node {node} (pod {r.node}): {mark['error']}")
            out = {**mark, "pod": r.node, "k8s_node": node,
                   "where": f"node {node} (its {NODE_DIR} directory, mounted in its Ray pods: written through pod "
                            f"{r.node})"}
            try:
                out.update(self.mark_node(node, plugin, taint))
            except BaseException:
                self.undo_mark_node(node, plugin)
                self.run(r.node, "clear", token=token)
                self.annotate(node, None)
                raise
            return out
        return write

    def mark_node(self, node: str, plugin: dict, taint: bool) -> dict:
        """Beside the marker: the device plugin paused (or why not), the taint added (``taint``)."""
        out: dict = {"plugin": None, "plugin_why": plugin["skip"]} if "skip" in plugin else {
            "plugin": self.accelerators.pause(plugin), "plugin_why": None}
        out["taint"] = dn.add_taint(self.pods, self.node_named(node) or {}, self.target.run_id) if taint else None
        return out

    def undo_mark_node(self, node: str, plugin: dict) -> None:
        """What :meth:`mark_node` did, undone where still the rig's (a failed injection)."""
        if "skip" not in plugin:
            self.accelerators.restore_accelerator(node, wait_s=0, look=False)
        dn.remove_taint(self.pods, self.node_named(node), self.target.run_id)

    def annotate(self, node: str, value: str | None) -> None:
        """The node's :data:`~chaos.backends.kuberay.kube.marks.DEVICE_MARK` set or dropped (read first: its
        resourceVersion the precondition)."""
        n = self.node_named(node)
        if n is None:
            raise ClusterError(f"device-loss: node {node} could not be read")
        self.pods.patch_node(n, {"metadata": {"annotations": {km.DEVICE_MARK: value}}})

    def drop_mark(self, node: str, token: str | None) -> None:
        """The node's record dropped while it holds ``token`` (None: whatever it holds)."""
        n = self.node_named(node)
        mark = km.read(km.annotations(n).get(km.DEVICE_MARK)) if n is not None else {}
        if n is not None and km.DEVICE_MARK in km.annotations(n) and (token is None or mark.get("token") == token):
            self.pods.patch_node(n, {"metadata": {"annotations": {km.DEVICE_MARK: None}}})

    @staticmethod
    def node_of_fault(fault: dict) -> str | None:
        return (fault.get("device") or {}).get("k8s_node")

    def marker_look(self, fault: dict) -> dict:
        """The marker and the engines' records in the fault's node's directory (one exec, through the fault's pod or
        any Ray pod of the rig on that node); none left there: said (the marker stays in the node's directory)."""
        node = self.node_of_fault(fault)
        pods = self.pods_on(node, first=fault["target"])
        if not pods:
            return {"error": f"no Ray pod of the rig on node {node} any more (the marker stays in its directory)"}
        try:
            return self.run(pods[0], "look")
        except Exception as e:  # noqa: BLE001 - ApiException or ExecError: the pod gone, or the exec refused
            return {"error": f"pod {pods[0]}: {type(e).__name__}: {e}"[:200]}

    def device_look(self, fault: dict) -> dict:
        """The watch's look (:meth:`marker_look`), and the device plugin's pause made with the marker held
        (:func:`~chaos.backends.kuberay.device_node.plugin_hold`, written into the fault's effect)."""
        seen = self.marker_look(fault)
        dn.plugin_hold(self.accelerators, fault, self.node_of_fault(fault))
        return seen

    def restore_device(self, fault: dict) -> dict:
        """The marker removed while it holds the fault's token (one exec through any Ray pod of the rig on the
        fault's node: the original may be gone, replaced; none there: through a helper pod pinned to the node), its
        record on the node dropped; then what was done beside it undone where still the rig's (the device plugin's
        pause, ``device_plugin_restored``; the taint, ``device_taint_removed``). The first outcome of each kept (the
        rollback's second call does not overwrite the outage's)."""
        first = fault.get("device_restored") or {}
        out = first if first.get("state") in ("ours", "gone", "another") else self.clear_marker(fault)
        self.unmark_node(fault)
        return out

    def clear_marker(self, fault: dict) -> dict:
        token, node = (fault.get("device") or {}).get("token"), self.node_of_fault(fault)
        if not token:
            return {"removed": False, "state": None, "why": "the fault recorded no marker: nothing written"}
        pods = self.pods_on(node, first=fault["target"])
        if pods:
            out, through = self.run(pods[0], "clear", token=token), f"pod {pods[0]}"
        else:
            n = self.node_named(node)
            if n is None:
                return {"removed": False, "state": None, "why": f"node {node} is gone (its directory with it)"}
            out = self.through_helper(node, km.read(km.annotations(n).get(km.DEVICE_MARK)).get("image"), "clear",
                                      token=token)
            through = f"no Ray pod of the rig on node {node} any more; its helper pod"
        if out.get("error"):
            return {"removed": False, "state": None, "why": f"{through}: {out['error']}: the marker stays in the "
                    f"node's {NODE_DIR} directory (recorded on the node: `availproof recover`)"[:400]}
        self.drop_mark(node, token)
        return out

    def through_helper(self, node: str, image: str | None, action: str, **args) -> dict:
        """One command of ``serve_apps.device_loss`` run in a helper pod pinned to ``node``
        (:class:`~chaos.backends.kuberay.device_helper_pod.DeviceHelpers`); its failure as ``{"error": one line}``."""
        image = self.helpers.image(image)
        if not image:
            return {"error": "no image known for the helper pod (none recorded, no Ray worker pod to take it from)"}
        try:
            return parse(self.helpers.run_on(node, image, NODE_DIR, script(action, **args), taints=(dn.TAINT,)))
        except Exception as e:  # noqa: BLE001 - TimeoutError, ApiException, ExecError: one line
            return {"error": failed(e)}

    def unmark_node(self, fault: dict) -> None:
        """The device plugin given back and the taint removed, each only while still the rig's, the first outcome
        kept; a failure recorded (``error``), never a reason to leave the other undone."""
        device, node = fault.get("device") or {}, self.node_of_fault(fault)
        if device.get("plugin") and not (fault.get("device_plugin_restored") or {}).get("label"):
            dn.plugin_hold(self.accelerators, fault, node)  # once more at the heal
            try:
                fault["device_plugin_restored"] = self.accelerators.restore_accelerator(node, look=False)
            except Exception as e:  # noqa: BLE001 - recorded; recover gives it back (its own mark on the node)
                fault["device_plugin_restored"] = {"node": node, "error": failed(e)}
        if device.get("taint") and not (fault.get("device_taint_removed") or {}).get("removed"):
            try:
                fault["device_taint_removed"] = dn.remove_taint(self.pods, self.node_named(node), self.target.run_id)
            except Exception as e:  # noqa: BLE001 - recorded; recover removes it (the node's record says taint)
                fault["device_taint_removed"] = {"removed": False, "why": failed(e)}

    def node_named(self, name: str | None) -> dict | None:
        return next((n for n in self.pods.nodes() if name_of(n) == name), None)

    def cordon_device_node(self, fault: dict) -> dict:
        """The remedy: the pod's Kubernetes node cordoned (annotated with the run; one someone else cordoned left as
        it is), then the pod evicted (:data:`EVICT_GRACE_S`); the load workers' nodes are refused."""
        pod = self.pod(fault["target"])
        if pod is None:
            raise ClusterError(f"device-loss remedy: pod {fault['target']} is gone: nothing to cordon")
        node = node_of(pod)
        self.pods.load.refuse_reaching(f"device-loss remedy on pod {name_of(pod)}", nodes=[node])
        n = self.node_named(node)
        if n is None:
            raise ClusterError(f"device-loss remedy: node {node} of pod {name_of(pod)} could not be read")
        theirs = bool((n.get("spec") or {}).get("unschedulable")) and km.annotations(n).get(CORDON_MARK) != self.target.run_id
        if not theirs:
            self.pods.patch_node(n, {"metadata": {"annotations": {CORDON_MARK: self.target.run_id, km.CORDON_EXPIRES:
                                                                  km.deadline(self.target.helper_deadline_s)}},
                                     "spec": {"unschedulable": True}})
        grace = max(1, math.ceil(EVICT_GRACE_S))
        from kubernetes import client as k8s

        body = k8s.V1Eviction(api_version="policy/v1", kind="Eviction",
                              metadata=k8s.V1ObjectMeta(name=name_of(pod), namespace=self.target.namespace),
                              delete_options=k8s.V1DeleteOptions(grace_period_seconds=grace))
        try:
            self.kube.core.create_namespaced_pod_eviction(name_of(pod), self.target.namespace, body)
            evicted = [name_of(pod)]
        except Exception as e:  # noqa: BLE001 - ApiException: the cordon stands, the eviction said
            status = getattr(e, "status", None)
            if status is None:
                raise
            return {"cordoned": True, "method": "cordon (the eviction refused)", "k8s_node": node,
                    "cordoned_by_rig": not theirs, "evicted": [],
                    "eviction_error": f"HTTP {status}: {api_message(e)}"[:300]}
        return {"cordoned": True, "method": "cordon and evict", "k8s_node": node, "cordoned_by_rig": not theirs,
                "evicted": evicted, "grace_period_s": grace}

    def uncordon_device_node(self, fault: dict) -> dict:
        """The remedy's cordon lifted, only while the node's annotation still names the run (a node someone else
        cordoned, or uncordoned since, is left as it is)."""
        c = fault.get("cordon") or {}
        if not c.get("cordoned_by_rig"):
            return {"uncordoned": False, "why": "the rig did not cordon the node (someone else had, or the remedy "
                                                "did nothing)"}
        n = self.node_named(c.get("k8s_node"))
        if n is None or km.annotations(n).get(CORDON_MARK) != self.target.run_id:
            return {"uncordoned": False, "why": f"node {c.get('k8s_node')}'s cordon is no longer the rig's: left as it is"}
        body: dict = {"metadata": {"annotations": {CORDON_MARK: None, km.CORDON_EXPIRES: None}}}
        if (n.get("spec") or {}).get("unschedulable"):
            body["spec"] = {"unschedulable": False}
        self.pods.patch_node(n, body)
        return {"uncordoned": True, "how": f"node {c.get('k8s_node')} uncordoned (its annotation still the run's)"}

    def leftovers(self, nodes: list[dict]) -> list[dict]:
        """The nodes whose annotation records a device-loss marker (any run's): kind ``DeviceLoss`` (the record's
        token, image and taint with it, for :meth:`remove`)."""
        out = []
        for n in nodes:
            mark = km.read(km.annotations(n).get(km.DEVICE_MARK))
            if mark.get("token"):
                out.append({"kind": "DeviceLoss", "name": name_of(n), "namespace": None,
                            "run_id": mark.get("run"), "zone": None, "expires": mark.get("expires"),
                            "what": f"device-loss marker in the node's {NODE_DIR} directory (fault {mark.get('fault')}, "
                                    f"written through pod {mark.get('pod')})" + (
                                        f", taint {dn.TAINT}" if mark.get("taint") else ""),
                            "token": mark["token"], "image": mark.get("image"), "taint": bool(mark.get("taint"))})
        return out

    def remove(self, x: dict) -> None:
        """``recover``: the node's marker removed whatever run wrote it (exec through any Ray pod of the rig on the
        node; none there: through a helper pod pinned to it, removing only the marker the node's record names, by its
        token), the record's taint removed while it is still that run's, then the record dropped; raises (one
        line) when the marker could not be removed (the record kept)."""
        pods = self.pods_on(x["name"])
        if pods:
            out, through = self.run(pods[0], "clear-any"), f"pod {pods[0]}"
        else:
            out = self.through_helper(x["name"], x.get("image"), "clear", token=x.get("token") or "-")
            through = "no Ray pod of the rig runs there any more; its helper pod"
        if out.get("error"):
            raise ClusterError(f"node {x['name']} ({through}): {out['error']}: the device-loss marker stays in the "
                               f"node's hostPath directory (mounted at {NODE_DIR}); run recover again, or remove it on "
                               "the node")
        if x.get("taint") and x.get("run_id"):
            dn.remove_taint(self.pods, self.node_named(x["name"]), x["run_id"])
        self.drop_mark(x["name"], None)


def plan(self, scope: str, a: dict) -> list[dict]:
    r = self.pick_replica(zone=a.get("zone"))
    devices = self.engines.devices
    pod = devices.pod(r.node)
    node = node_of(pod) if pod else None
    n = devices.node_named(node) or {}
    rows = [{"kind": "file", "name": f"{NODE_DIR}/marker.json", "where": f"pod {r.node}'s node {node}",
             "does": f"written through exec into the node's directory (every Ray pod there sees it): the node's device "
                     f"marked lost ({a.get('mode', 'error')}, XID {a.get('xid', 79)}), recorded on the node",
             "after": "removed after outage_s (through any Ray pod on the node), only while the fault's token"}]
    t = dn.plugin_target(devices.accelerators, n, a.get("outage_s", 150.0), bool(a.get("acknowledge_other_gpu_pods")),
                         f"replica {r.replica_id}") if n else {"skip": f"node {node} could not be read"}
    rows.append({"kind": "Node", "name": node, "where": "cluster-wide",
                 "does": f"skipped: {t['skip']}" if "skip" in t else
                 f"label {t['label']}={PAUSED} (now {t['was']}) and annotation {km.ACCELERATOR_MARK}, one "
                 f"patch: the device plugin {t['plugin']}'s DaemonSet stops matching the node, allocatable 0",
                 "after": "-" if "skip" in t else f"label {t['label']}={t['was']} again at the heal, only while it "
                                                  f"still reads {PAUSED}"})
    if a.get("taint"):
        rows.append({"kind": "Node", "name": node, "where": "cluster-wide",
                     "does": f"taint {dn.TAINT}={self.run_id}:{dn.EFFECT} added (as a health monitor's)",
                     "after": "removed at the heal, only while it still carries the run's value"})
    if a.get("remedy") == "cordon":
        rows.append({"kind": "Node", "name": node, "where": f"pod {r.node}'s",
                     "does": "on the first engine's device error: cordoned (annotated with the run) and the pod evicted",
                     "after": "uncordoned at the heal, only while its annotation is the run's"})
    rows.append({"kind": "Pod", "name": helper_name(node or "node"), "where": f"namespace {self.namespace}, node {node}",
                 "does": "created at the heal only when no Ray pod of the rig is left on the node (the remedy's "
                         f"eviction): pinned there, the node's {HOST_DIR} mounted, the Ray image; exec `clear` of the "
                         "marker, only while it holds the fault's token",
                 "after": "deleted once done (recover deletes one a crashed run left)"})
    return rows


def effect(self, fault: dict) -> list[dict]:
    """The marker's proof (:func:`chaos.backends.device_loss.checks`), and the device plugin's pause where one was
    made (its label the rig's pause: the allocatable follows at the kubelet's next status update, held from then)."""
    devices = self.engines.devices
    out = shared.checks(fault, devices.marker_look(fault))
    device, node = fault.get("device") or {}, devices.node_of_fault(fault)
    if device.get("plugin"):
        out.append(devices.accelerators.held(devices.node_named(node), node, allocatable_zero=False))
    if device.get("taint"):
        taints = dn.taints_of(devices.node_named(node) or {})
        out.append({"check": f"node {node}: tainted {dn.TAINT}:{dn.EFFECT} (the run's)", "ok": any(
            dn.ours(t, self.run_id) for t in taints), "seen": ", ".join(
            f"{t.get('key')}={t.get('value')}:{t.get('effect')}" for t in taints) or "no taint"})
    return out
