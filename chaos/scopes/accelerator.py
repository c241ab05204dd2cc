"""accelerator: a device-plugin outage on a GPU replica's node (:func:`chaos.scopes.faults_accelerator.lose_accelerator`;
KubeRay only). What it is: the NVIDIA device plugin's pod kept off the node the way NVIDIA's own MIG manager pauses
it (the GPU operator's label ``nvidia.com/gpu.deploy.device-plugin`` set to a paused value: the DaemonSet
controller deletes the pod and keeps it off), so the kubelet marks the node's ``nvidia.com/gpu`` devices unhealthy
and its allocatable drops to 0: the cluster can place no new GPU pod there. What it is not: a device loss. The
pods holding a GPU keep running with it (the plugin is not in their data path): the replica's engine keeps a
working GPU and CUDA context and serves throughout. The sticky device loss (the engine's GPU gone under it, as an
Xid fault or a fallen-off-the-bus device) is the scope ``device-loss`` (:mod:`chaos.scopes.device_loss`); the
scope's name and its experiment (experiments/accelerator-loss.json) are kept. The proof is held to the heal (the label still the rig's
pause, the allocatable still 0), the outage is capped below the device manager's 5-minute grace, and a node that
also runs other namespaces' GPU pods is refused unless acknowledged. The heal puts the label back (only while it
still reads the rig's pause): the plugin's pod returns, registers again, and the allocatable comes back. No
accelerator on the local backend: refused there in one line."""

from chaos.backends.kuberay.kube.access import Access
# its fault function lives beside this module (chaos/scopes/faults_accelerator.py) because the KubeRay backend reads
# its outage_refusal, and this module imports the KubeRay access table (which loads the backend package): the fault
# here would make that import circle
from chaos.scopes.faults_accelerator import lose_accelerator
from chaos.base.scope_registry import Scope

SCOPE = Scope(
    "accelerator", "device-plugin outage", fault=lose_accelerator,
    backend_methods=("lose_accelerator", "hold_accelerator", "restore_accelerator"),
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
    # its node's accelerator given back after outage_s (else in the rollback); it picks its replica through the
    # control plane and acts on that replica's node, as a replica-level fault does
    heal_args=("outage_s",), conflict_class="replica-level",
)
