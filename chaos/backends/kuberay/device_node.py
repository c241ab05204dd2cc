"""device-loss on KubeRay, beside the marker: what a bad GPU does to the Kubernetes node (issue 46: "together with
the device-plugin pause (so allocatable reflects it), and optionally with a node condition or taint the way a health
monitor sets one").

**The device plugin paused** where the node carries the NVIDIA GPU operator's device-plugin label
(:data:`~chaos.backends.kuberay.accelerators.OPERATOR_LABEL`): the ``accelerator`` scope's own pause
(:meth:`~chaos.backends.kuberay.accelerators.Accelerators.node_target` and ``pause``, held by the same rules: only the
operator's own label, another namespace's GPU pods on the node refused unless ``acknowledge_other_gpu_pods``,
``outage_s`` capped below the device manager's grace, the label and its mark patched with the node's resourceVersion
as precondition), so the node's allocatable ``nvidia.com/gpu`` drops to 0 at the kubelet's next status update. Held
during the outage (the label still the rig's pause; the allocatable, once seen at 0, still 0) and at the heal; given
back at the heal (and by ``recover``, as an accelerator's pause) only while the label still reads the rig's pause. A
node without that label (a CPU kind cluster) is skipped and said: ``plugin`` null with ``plugin_why``, never an error.

**The taint** (``taint: true``): :data:`TAINT` NoSchedule, its value the run id, as a health monitor (NVIDIA's
NVSentinel, node-problem-detector with a taint remedy) marks a node whose GPU failed: no new pod without a toleration
lands there. Added with the node's resourceVersion as precondition; removed at the heal (and by ``recover``) only
while it still carries the run's value."""

from __future__ import annotations

from chaos.backends.kuberay.accelerators import OPERATOR_LABEL, RESOURCE, Accelerators, quantity
from chaos.backends.kuberay.common import labels_of, name_of
from chaos.backends.kuberay.reads import Pods
from chaos.base.errors import ClusterError, UsageError
from chaos.scopes.faults_accelerator import outage_refusal

TAINT = "availproof.io/device-lost"
EFFECT = "NoSchedule"


def plugin_target(acc: Accelerators, node: dict, outage_s, acknowledge_other_gpu_pods: bool, who: str) -> dict:
    """Reads only: the pause of the node's device plugin to make with the marker, checked
    (:meth:`Accelerators.node_target`, ``outage_s`` within the device manager's grace), or ``{"skip": why}`` where
    the node carries no GPU operator's label."""
    name = name_of(node)
    if OPERATOR_LABEL not in labels_of(node):
        return {"skip": f"node {name} carries no {OPERATOR_LABEL} label (no NVIDIA GPU operator's device plugin "
                        f"there, a CPU node): the device plugin not paused, allocatable {RESOURCE} not touched"}
    refusal = outage_refusal(outage_s)
    if refusal:
        raise UsageError(f"device-loss (the device plugin of node {name} paused with the marker): {refusal}")
    return acc.node_target(name, acknowledge_other_gpu_pods, who)


def taints_of(node: dict) -> list[dict]:
    return list((node.get("spec") or {}).get("taints") or [])


def ours(t: dict, run_id: str) -> bool:
    return t.get("key") == TAINT and t.get("effect") == EFFECT and t.get("value") == run_id


def add_taint(pods: Pods, node: dict, run_id: str) -> dict:
    """:data:`TAINT` added to the node as read (its resourceVersion the precondition); one already there (another
    run's, a health monitor's of that key) refuses."""
    there = [t for t in taints_of(node) if t.get("key") == TAINT]
    if there:
        raise ClusterError(f"device-loss: node {name_of(node)} carries taint {TAINT} already "
                           f"(value {there[0].get('value')!r}): run `availproof recover` first, or remove it")
    added = {"key": TAINT, "value": run_id, "effect": EFFECT}
    pods.patch_node(node, {"spec": {"taints": taints_of(node) + [added]}})
    return {"taint": f"{TAINT}={run_id}:{EFFECT}", "k8s_node": name_of(node)}


def remove_taint(pods: Pods, node: dict | None, run_id: str) -> dict:
    """The run's :data:`TAINT` removed (the node as read, its resourceVersion the precondition), only while it still
    carries the run's value: someone else's value, or none, is left as it is and said."""
    if node is None:
        return {"removed": False, "why": "the node is gone"}
    mine = [t for t in taints_of(node) if ours(t, run_id)]
    if not mine:
        seen = [t.get("value") for t in taints_of(node) if t.get("key") == TAINT]
        return {"removed": False, "why": (f"taint {TAINT} reads {seen[0]!r} now, not the run's {run_id!r}: left as it "
                                          "is") if seen else f"no taint {TAINT} on node {name_of(node)} any more"}
    pods.patch_node(node, {"spec": {"taints": [t for t in taints_of(node) if not ours(t, run_id)]}})
    return {"removed": True, "why": None}


def plugin_hold(acc: Accelerators, fault: dict, node: str) -> dict | None:
    """One look at the pause made with the marker (nothing when none was): the label still the rig's pause, and
    the allocatable, once a look saw it at 0 (recorded in the fault's ``device.plugin``), still 0; written into the
    fault's effect as the accelerator's hold is. A look that fails proves nothing (said, not a loss)."""
    plugin = (fault.get("device") or {}).get("plugin")
    if not plugin:
        return None
    try:
        n = acc.node_named(node)
    except Exception as e:  # noqa: BLE001 - a failed read is no finding; the heal looks again
        return {"check": f"node {node}: the device plugin's pause looked at", "ok": True,
                "seen": f"the look failed ({type(e).__name__}: {e})"[:200]}
    if n is not None and quantity((n.get("status") or {}).get("allocatable")) == 0:
        plugin["allocatable_dropped"] = True
    c = acc.held(n, node, allocatable_zero=bool(plugin.get("allocatable_dropped")))
    acc.record_hold(fault, c, node)
    return c
