"""partition: a zone cut off the network (:func:`chaos.faults.partition_zone`; local: its network
namespaces' links down; KubeRay: a node-level packet filter or a NetworkPolicy), healed after its duration."""

from chaos.backends.kube_access import partition
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "partition", "zone partition", fault="partition_zone", backend_methods=("partition_zone", "heal_zone"),
    zoned=True, routed=True,
    effect_bound_s=10.0,  # a link set down cuts at once
    kube_access=partition,  # the probe's exec, and the cut's accesses by the backend's partition method
)
