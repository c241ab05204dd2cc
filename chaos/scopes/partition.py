"""partition: a zone cut off the network (:func:`partition_zone`; local: its network namespaces' links
down; KubeRay: a node-level packet filter or a NetworkPolicy), healed after its duration."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import partition
from chaos.base.scope_registry import Scope


def partition_zone(backend, marker: faults.Marker, zone: str, duration_s: float | None = None) -> dict:
    """Cut a zone off the network, heal after ``duration_s``. Local: the links of the zone's
    network namespaces down. KubeRay: a NetworkPolicy or a node-level packet filter
    (``kubernetes.partition_method``)."""
    # the cut's helpers (KubeRay) end by themselves a while after the partition should have
    deadline = duration_s + 300 if duration_s else None
    # a backend that must set the cut up first (KubeRay: helper pods Running, probes open) arms it before the
    # mark, so the mark is the cut and time to impact counts from it (as the actor kill is armed before it)
    armer = getattr(backend, "partition_armer", None)
    cut = armer(zone, deadline_s=deadline) if armer is not None else None
    with marker.inject(SCOPE.name, zone, [zone]) as f:
        if cut is not None:
            f.update(cut())
        else:
            backend.partition_zone(zone, deadline_s=deadline)
        f["cut"] = True
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, duration_s, lambda: backend.heal_zone(zone))
    return f


SCOPE = Scope(
    "partition", "zone partition", fault=partition_zone, backend_methods=("partition_zone", "heal_zone"),
    zoned=True, routed=True,
    effect_bound_s=10.0,  # a link set down cuts at once
    kube_access=partition,  # the probe's exec, and the cut's accesses by the backend's partition method
    heal_args=("duration_s",), conflict_class="network",
)
