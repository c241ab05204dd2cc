"""accelerator: a GPU node's accelerator lost to Kubernetes while its pods run (:func:`chaos.faults_accelerator.
lose_accelerator`; KubeRay only). The NVIDIA device plugin's pod is taken off the node of a GPU replica the way
NVIDIA's own MIG manager pauses it (its DaemonSet's node-selector label set to a paused value: the DaemonSet
controller deletes the pod and keeps it off), so the kubelet marks the node's ``nvidia.com/gpu`` devices unhealthy
and its allocatable drops to 0. The pods holding a GPU keep running (the plugin is not in their data path); what
the cluster cannot do meanwhile is place a new pod asking for one there. The heal puts the label back: the
plugin's pod returns, registers again, and the allocatable comes back. No accelerator on the local backend:
refused there in one line."""

from chaos.backends.kube_access import Access
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "accelerator", "accelerator loss", fault="lose_accelerator",
    backend_methods=("lose_accelerator", "restore_accelerator"),
    # the replica on the node is routed to from every zone's proxy; the marks name the node's zone
    zoned=True, every_target_affected=True,
    # the plugin's pod deleted by its DaemonSet controller (its grace), the kubelet's next node status
    # (nodeStatusUpdateFrequency, 10 s by default) with the devices unhealthy: allocatable 0
    effect_bound_s=90.0,
    kube_access=(
        Access("patch", "nodes", namespaced=False,
               why="the device plugin's node-selector label paused and its mark on the node, and both undone "
                   "(lose_accelerator, restore_accelerator)"),
        Access("list", "pods", namespaced=False,
               why="the pods on the GPU node in every namespace: the device plugin's (kube-system, gpu-operator) "
                   "and any other the paused label would also select (list_pod_for_all_namespaces)"),
    ),
)
