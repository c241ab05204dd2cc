"""region: every zone of a region lost at once, one fault for all of them (:func:`chaos.faults.kill_region`)."""

from chaos.backends.kube_access import zone_loss
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "region", "region loss", fault="kill_region", backend_methods=("kill_zones", "restore_zones"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # every node of its zones DEAD in the GCS
    kube_access=zone_loss,  # as a zone loss
)
