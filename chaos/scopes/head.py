"""head: the head's processes (or its GCS alone) SIGKILLed (:func:`kill_head`), restarted after the outage:
the control plane down. :func:`head_outage_second_fault`: a replica or a node killed while the head is down."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import DELETE_PODS, EXEC
from chaos.base.errors import UsageError
from chaos.base.scope_registry import Scope
from chaos.scopes import node as node_scope, replica as replica_scope


def kill_head(backend, marker: faults.Marker, outage_s: float | None = 5.0, method: str = "node") -> dict:
    """Kill the head and restart it after ``outage_s``.

    ``method``: ``node`` (SIGKILL of every head process: GCS, dashboard, Serve controller, head
    proxy; on KubeRay, delete the head pod) or ``gcs`` (SIGKILL of ``gcs_server`` alone, in
    place; on KubeRay the head container then exits and the kubelet restarts it in the same pod).
    """
    if method not in ("node", "gcs"):
        raise UsageError(f"head kill method must be node or gcs, got {method!r}")
    with marker.inject(SCOPE.name, SCOPE.name, [], {"method": method}) as f:
        f["pids"] = len(backend.kill_head(method=method))
        f["method"] = method  # what the proof looks for: the head's processes, or gcs_server alone
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, outage_s, backend.restart_head)
    return f


def head_outage_second_fault(backend, marker: faults.Marker, outage_s: float = 20.0, second: str = "replica",
                             zone: str | None = None, delay_s: float = 3.0) -> dict:
    """Kill the head, then a replica (or node) while the head is down, then restart the head."""
    replica, node = replica_scope.SCOPE.name, node_scope.SCOPE.name
    victim = backend.pick_replica(zone=zone) if second == replica else None  # placement needs the head
    head = kill_head(backend, marker, outage_s=None)
    faults.sleep(delay_s)
    if second == replica:
        other = replica_scope.kill_replica(backend, marker, replica=victim)
    elif second == node:
        other = node_scope.kill_node(backend, marker, zone=zone)
    else:
        raise UsageError(f"second must be {replica!r} or {node!r}, got {second!r}")
    faults.sleep(max(0.0, outage_s - delay_s))
    with marker.heal(head):
        backend.restart_head()
    return {"head": head, "second": other}


def _splits(action: str, args: dict) -> list[tuple[str, dict]]:
    """What one action injects, for the plan: the head alone, or the head then its second fault."""
    if action != head_outage_second_fault.__name__:
        return [(SCOPE.name, args)]
    return [(SCOPE.name, {"method": "node"}),
            (args.get("second", replica_scope.SCOPE.name), {k: v for k, v in (("zone", args.get("zone")),) if v})]


SCOPE = Scope(
    "head", "head loss", fault=kill_head, more_faults=(head_outage_second_fault,), splits=_splits,
    backend_methods=("kill_head", "restart_head"),
    control_plane=True,
    effect_bound_s=15.0,  # the processes gone at once, the GCS not answering
    kube_access=EXEC + DELETE_PODS,
    heal_args=("outage_s",), conflict_class="control-plane",
)
