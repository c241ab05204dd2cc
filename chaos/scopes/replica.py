"""replica: one RUNNING Serve replica killed (its worker process SIGKILLed, its actor killed, or its pod
crashed: :func:`chaos.faults.kill_replica`); Serve replaces it. Serve routes to it from every zone's proxy."""

from chaos.backends.kube_access import DELETE_PODS, EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "replica", "replica kill", fault="kill_replica", backend_methods=("replica_killer",),
    zoned=True, every_target_affected=True,
    effect_bound_s=10.0,  # a SIGKILLed process is gone at once
    kube_access=EXEC + DELETE_PODS,  # sigkill and actor: exec; pod: the crash, then the delete
)
