"""redis: the GCS's Redis SIGKILLed (:func:`chaos.faults.kill_redis`), restarted on the same port and
append-only file; the GCS may exit meanwhile (and is restarted)."""

from chaos.backends.kube_access import DELETE_PODS, EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "redis", "GCS Redis loss", fault="kill_redis", backend_methods=("kill_redis", "start_redis"),
    control_plane=True,
    effect_bound_s=15.0,  # the process gone and nothing answering PING
    kube_access=EXEC + DELETE_PODS,
)
