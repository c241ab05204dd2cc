"""head: the head's processes (or its GCS alone) SIGKILLed (:func:`chaos.faults.kill_head`), restarted
after the outage: the control plane down."""

from chaos.backends.kube_access import DELETE_PODS, EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "head", "head loss", fault="kill_head", backend_methods=("kill_head", "restart_head"),
    control_plane=True,
    effect_bound_s=15.0,  # the processes gone at once, the GCS not answering
    kube_access=EXEC + DELETE_PODS,
)
