"""The device-plugin outage (scope ``accelerator``, :mod:`chaos.scopes.accelerator`): the NVIDIA device plugin of
the node a GPU replica runs on kept off while the node's pods run, so Kubernetes can place no new GPU pod there
(:mod:`chaos.scopes.faults` for the other scopes, and for :class:`~chaos.scopes.faults.Marker` and :func:`~chaos.scopes.faults.prove`).
It is not a device loss: the replica's engine keeps its GPU and a working CUDA context throughout; the sticky
device loss (the engine's GPU gone under it) is the scope ``device-loss`` (:mod:`chaos.scopes.device_loss`).

Everything is checked before the mark (the replica's pod asks for a GPU, the node has some allocatable, the device
plugin's pod is found on it and the GPU operator's own label pauses it alone, no other namespace's GPU pod is on
the node unless acknowledged, ``outage_s`` within :data:`MAX_OUTAGE_S`); the mark's instant is the pause itself;
the proof, before the inject end mark, is the node's allocatable at 0 with the plugin's pod gone and the node's GPU
pods still Running. The proof is then held until the heal: every :data:`HOLD_POLL_S` during ``outage_s``, and once
more at the heal, the label must still read the rig's pause and the allocatable still be 0; a look that sees
otherwise (the GPU operator, a driver manager or an admin put the label back) makes the fault's effect
``verified: false`` with ``lost_until_s``, its instant, as a zone loss's watch records one that did not hold (the
run's verdict: ERROR, "fault not in effect"). Healed after ``outage_s`` (else by the rollback): the plugin's label
put back only while it still reads the rig's pause, then waited for until the allocatable is back; what the
cluster did meanwhile (the pods left running, the pods asking for a GPU left Pending) is recorded in the fault's
``restored``."""

from __future__ import annotations

import time

from chaos.scopes import faults
from chaos.base.errors import UsageError

# The kubelet's device manager drops a resource whose plugin has been gone endpointStopGracePeriod (5 min): from
# then the node's capacity is 0 and a GPU container that restarts there fails its admission. The outage ends, and
# the plugin's new pod registers, well before that.
DEVICE_MANAGER_GRACE_S = 300.0
MAX_OUTAGE_S = 240.0
HOLD_POLL_S = 10.0  # how often the outage looks whether the pause still holds


def outage_refusal(outage_s, required: bool = False) -> str | None:
    """Why ``outage_s`` is refused (one line), else None: more than :data:`MAX_OUTAGE_S`, or (``required``: an
    experiment's fault, whose rollback comes only after its load) not given."""
    if outage_s is None:
        return None if not required else (
            f"accelerator: outage_s is required (at most {MAX_OUTAGE_S:g} s): healed only at the rollback, after "
            f"the load, the outage would outlast the kubelet device manager's {DEVICE_MANAGER_GRACE_S:g} s grace")
    if not isinstance(outage_s, (int, float)) or isinstance(outage_s, bool) or not 0 <= outage_s <= MAX_OUTAGE_S:
        return (f"accelerator: outage_s {outage_s!r} refused: at most {MAX_OUTAGE_S:g} s (past the kubelet device "
                f"manager's {DEVICE_MANAGER_GRACE_S:g} s grace the node's nvidia.com/gpu is dropped and a GPU "
                "container that restarts there fails)")
    return None


def lose_accelerator(backend, marker: faults.Marker, zone: str | None = None, outage_s: float | None = None,
                     acknowledge_other_gpu_pods: bool = False) -> dict:
    """Keep the NVIDIA device plugin off the node hosting one GPU replica (in ``zone`` if given): its pod deleted by
    its DaemonSet, ``nvidia.com/gpu`` allocatable 0, the node's pods left running with their GPUs. Given back after
    ``outage_s`` (at most :data:`MAX_OUTAGE_S`; else in the rollback). A node that also runs another namespace's GPU
    pods is refused unless ``acknowledge_other_gpu_pods``."""
    refusal = outage_refusal(outage_s)
    if refusal:
        raise UsageError(refusal)
    r = backend.pick_replica(zone=zone)
    # everything checked, nothing changed yet: refused here leaves no record
    loss = backend.lose_accelerator(r, acknowledge_other_gpu_pods=acknowledge_other_gpu_pods)
    with marker.inject("accelerator", loss.node, [loss.zone] if loss.zone else [],
                       {"replica": r.replica_id, "pod": r.node, **loss.detail()}) as f:
        f.update(loss())  # the pause: the DaemonSet's label on the node
        faults.prove(backend, marker, f)
    if outage_s is None:
        return f  # the rollback heals it, and looks at the hold once more then (restore_accelerator)
    while (left := outage_s - marker.since_inject(f)) > 0:
        time.sleep(min(HOLD_POLL_S, left))
        if marker.since_inject(f) < outage_s:
            backend.hold_accelerator(f)  # one look: the pause still on, the allocatable still 0
    with marker.heal(f):
        f["restored"] = backend.restore_accelerator(f["target"], fault=f)
    return f
