"""node: every process of one worker node SIGKILLed (:func:`kill_node`), the node restarted at the heal.
Its zone's users reach Serve through the node's own proxy."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import DELETE_PODS, EXEC
from chaos.base.scope_registry import Scope


def kill_node(backend, marker: faults.Marker, node: str | None = None, zone: str | None = None,
              outage_s: float | None = None) -> dict:
    """Kill every process of one worker node; restart it after ``outage_s`` (else in the rollback)."""
    if node is None:
        candidates = backend.nodes_in(zone=zone)
        node = candidates[0]
    z = backend.zone_of(node)
    with marker.inject(SCOPE.name, node, [z] if z else []) as f:
        f["pids"] = len(backend.kill_node(node))
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, outage_s, lambda: backend.start_node(node))
    return f


SCOPE = Scope(
    "node", "node loss", fault=kill_node, backend_methods=("kill_node", "start_node"),
    zoned=True, routed=True,
    effect_bound_s=30.0,  # the GCS marks a lost node DEAD within its health checks (1 s x 3, more when loaded)
    kube_access=EXEC + DELETE_PODS,
    heal_args=("outage_s",), conflict_class="ray-nodes",
)
