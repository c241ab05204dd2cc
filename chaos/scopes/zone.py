"""zone: a whole zone lost at once (:func:`kill_zone`; local: its nodes killed; KubeRay: its nodes cordoned
and its Ray pods crashed), brought back at the heal."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import zone_loss
from chaos.base.scope_registry import Scope


def kill_zone(backend, marker: faults.Marker, zone: str, outage_s: float | None = None) -> dict:
    """Lose a whole zone at once; bring it back after ``outage_s`` (else in the rollback).

    Local: every node of the zone killed, restarted at the heal. KubeRay: the zone's nodes
    cordoned and its Ray pods deleted (one blast-radius check for all of them), uncordoned at
    the heal.
    """
    nodes = backend.nodes_in(zone=zone)
    with marker.inject(SCOPE.name, zone, [zone], {"nodes": nodes}) as f:
        f["pids"] = len(backend.kill_zones([zone]))
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, outage_s, lambda: backend.restore_zones([zone]))
    return f


SCOPE = Scope(
    "zone", "zone loss", fault=kill_zone, backend_methods=("kill_zones", "restore_zones"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # every node of the zone DEAD in the GCS
    kube_access=zone_loss,  # the crash, the cordon and its uncordon; the autoscaler reads unless acknowledged
    heal_args=("outage_s",), conflict_class="ray-nodes",
)
