"""disk-full: a node's disk filled, then freed. A throwaway scope module, written as a module of
chaos/scopes/ is (tests/unit/test_adding_a_scope.py registers it, and only there): its name, label and
flags, the bound on its effect's proof, the Kubernetes accesses its fault and heal would need, and its
fault function (a built-in scope's lives in chaos/faults.py, where ``fault`` names it)."""

from chaos import faults
from chaos.backends.kube_access import EXEC, Access
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "disk-full", "disk full", fault="fill_disk", backend_methods=("fill_disk", "free_disk"),
    zoned=True, routed=True,
    effect_bound_s=2.0,  # a full disk is seen at once
    kube_access=EXEC + (Access("patch", "pods", why="the filled disk recorded on its pod, for recover"),),
)


def fill_disk(backend, marker: faults.Marker, node: str, duration_s: float | None = None) -> dict:
    """Fill ``node``'s disk (proven in effect before the inject end mark); free it after ``duration_s``
    (else in the rollback), as every fault of chaos/faults.py is written."""
    z = backend.zone_of(node)
    with marker.inject(SCOPE.name, node, [z] if z else []) as f:
        f["pids"] = backend.fill_disk(node)
        faults.prove(backend, marker, f, poll_s=0.01)
    if duration_s is not None:
        with marker.heal(f):
            backend.free_disk(node)
    return f
