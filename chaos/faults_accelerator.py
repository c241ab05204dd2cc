"""The accelerator loss (scope ``accelerator``, :mod:`chaos.scopes.accelerator`): the accelerator of the node a GPU
replica runs on lost to Kubernetes while the node's pods run (:mod:`chaos.faults` for the other scopes, and for
:class:`~chaos.faults.Marker` and :func:`~chaos.faults.prove`).

Everything is checked before the mark (the replica's pod asks for a GPU, the node has some allocatable, the device
plugin's pod is found on it and its DaemonSet can be paused there without touching anything else); the mark's
instant is the pause itself; the proof, before the inject end mark, is the node's allocatable at 0 with the
plugin's pod gone and the node's GPU pods still Running. Healed after ``outage_s`` (else by the rollback): the
plugin's label put back, then waited for until the allocatable is back; what the cluster did meanwhile (the pods
left running, the pods asking for a GPU left Pending) is recorded in the fault's ``restored``."""

from __future__ import annotations

from chaos import faults


def lose_accelerator(backend, marker: faults.Marker, zone: str | None = None, outage_s: float | None = None) -> dict:
    """Take the accelerator of the node hosting one GPU replica (in ``zone`` if given) from Kubernetes: the NVIDIA
    device plugin's pod off that node, ``nvidia.com/gpu`` allocatable 0, the node's pods left running. Given back
    after ``outage_s`` (else in the rollback)."""
    r = backend.pick_replica(zone=zone)
    loss = backend.lose_accelerator(r)  # everything checked, nothing changed yet: refused here leaves no record
    with marker.inject("accelerator", loss.node, [loss.zone] if loss.zone else [],
                       {"replica": r.replica_id, "pod": r.node, **loss.detail()}) as f:
        f.update(loss())  # the pause: the DaemonSet's label on the node
        faults.prove(backend, marker, f)
    faults._outage(backend, marker, f, outage_s, lambda: f.update(restored=backend.restore_accelerator(f["target"])))
    return f
