"""node: every process of one worker node SIGKILLed (:func:`chaos.faults.kill_node`), the node restarted
at the heal. Its zone's users reach Serve through the node's own proxy."""

from chaos.backends.kube_access import DELETE_PODS, EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "node", "node loss", fault="kill_node", backend_methods=("kill_node", "start_node"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # the GCS marks a lost node DEAD within its health checks (1 s x 3, more when loaded)
    kube_access=EXEC + DELETE_PODS,
)
