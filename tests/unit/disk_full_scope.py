"""disk-full: a node's disk filled, then freed. A throwaway scope module, written as a module of
chaos/scopes/ is (tests/unit/test_adding_a_scope.py registers it, and only there): its fault function (also
its Chaos Toolkit action, chaos.ctk.actions.fill_disk, once registered), and its Scope: name, label and flags,
the bound on its effect's proof, the Kubernetes accesses its fault and heal would need, what the soak reads."""

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import EXEC, Access
from chaos.base.scope_registry import Scope


def fill_disk(backend, marker: faults.Marker, node: str, duration_s: float | None = None) -> dict:
    """Fill ``node``'s disk (proven in effect before the inject end mark); free it after ``duration_s``
    (else in the rollback), as every scope's fault function is written."""
    z = backend.zone_of(node)
    with marker.inject(SCOPE.name, node, [z] if z else []) as f:
        f["pids"] = backend.fill_disk(node)
        faults.prove(backend, marker, f, poll_s=0.01)
    faults.outage(backend, marker, f, duration_s, lambda: backend.free_disk(node))
    return f


SCOPE = Scope(
    "disk-full", "disk full", fault=fill_disk, backend_methods=("fill_disk", "free_disk"),
    zoned=True, routed=True,
    effect_bound_s=2.0,  # a full disk is seen at once
    kube_access=EXEC + (Access("patch", "pods", why="the filled disk recorded on its pod, for recover"),),
    heal_args=("duration_s",), conflict_class="ray-nodes",
)
