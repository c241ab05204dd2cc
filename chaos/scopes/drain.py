"""drain: a graceful drain with a deadline on one worker node (:func:`chaos.faults.drain_node`), as a
preemption notice gives; the node goes at its deadline and comes back after the outage."""

from chaos.backends.kube_access import DRAIN
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "drain", "node drain", fault="drain_node", backend_methods=("drain_node", "kill_node", "start_node"),
    zoned=True, routed=True, replacing=True,
    effect_bound_s=30.0,  # after its deadline: the node gone, as a node loss
    kube_access=DRAIN,
)
