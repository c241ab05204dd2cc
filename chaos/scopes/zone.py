"""zone: a whole zone lost at once (:func:`chaos.faults.kill_zone`; local: its nodes killed; KubeRay: its
nodes cordoned and its Ray pods crashed), brought back at the heal."""

from chaos.backends.kube_access import zone_loss
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "zone", "zone loss", fault="kill_zone", backend_methods=("kill_zones", "restore_zones"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # every node of the zone DEAD in the GCS
    kube_access=zone_loss,  # the crash, the cordon and its uncordon; the autoscaler reads unless acknowledged
)
