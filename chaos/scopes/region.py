"""region: every zone of a region lost at once, one fault for all of them (:func:`kill_region`)."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import zone_loss
from chaos.base.errors import UsageError
from chaos.base.scope_registry import Scope


def kill_region(backend, marker: faults.Marker, region: str, outage_s: float | None = None) -> dict:
    """Lose every zone of a region at once (as :func:`chaos.scopes.zone.kill_zone`, one fault for all of them)."""
    zones = backend.zones_in_region(region)
    if not zones:
        raise UsageError(f"region {region!r} has no zone")
    nodes = backend.nodes_in(region=region)
    with marker.inject(SCOPE.name, region, zones, {"nodes": nodes}) as f:
        f["pids"] = len(backend.kill_zones(zones))
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, outage_s, lambda: backend.restore_zones(zones))
    return f


SCOPE = Scope(
    "region", "region loss", fault=kill_region, backend_methods=("kill_zones", "restore_zones"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # every node of its zones DEAD in the GCS
    kube_access=zone_loss,  # as a zone loss
    heal_args=("outage_s",), conflict_class="ray-nodes",
)
