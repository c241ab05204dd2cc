"""redis: the GCS's Redis SIGKILLed (:func:`kill_redis`), restarted on the same port and append-only file;
the GCS may exit meanwhile (and is restarted)."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import DELETE_PODS, EXEC
from chaos.base.scope_registry import Scope


def kill_redis(backend, marker: faults.Marker, outage_s: float | None = 5.0) -> dict:
    """SIGKILL the GCS's Redis; restart it (same port, same append-only file) after ``outage_s``.

    Ray 2.60's GCS exits a few seconds after its Redis connection breaks, even when Redis is
    back at once: the backend's ``start_redis`` then also restarts the head, as a kubelet
    restarts the head container on KubeRay. Whether the GCS exited is recorded in the fault's
    detail (``gcs_exited``).
    """
    with marker.inject(SCOPE.name, SCOPE.name, []) as f:
        f["pids"] = backend.kill_redis()
        faults.prove(backend, marker, f)

    def restore():
        f["gcs_exited"] = bool(backend.start_redis())

    faults.outage(backend, marker, f, outage_s, restore)
    return f


SCOPE = Scope(
    "redis", "GCS Redis loss", fault=kill_redis, backend_methods=("kill_redis", "start_redis"),
    control_plane=True,
    effect_bound_s=15.0,  # the process gone and nothing answering PING
    kube_access=EXEC + DELETE_PODS,
    heal_args=("outage_s",), conflict_class="control-plane",
)
