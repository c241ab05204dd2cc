"""restart-fails: a replica killed while the weights its replacement needs are unreadable, for ``outage_s``, then
restored (issue 48): what operators meet as "the deployment failed to start N times" when a checkpoint moved, a
volume was truncated or the model store errors. :func:`fail_restart`: the weights file the app's replicas load at
their start (vLLM: ``model.safetensors`` of its checkpoint; the stream target: its weights file,
:mod:`serve_apps.stream_weights`) swapped for a truncated copy of itself (:mod:`serve_apps.weights_swap`: the
original copied aside first, its size and sha256 and the aside's path in a mark naming the run), then one RUNNING
replica in ``zone`` SIGKILLed. Its replacement's start then fails for real (vLLM's safetensors load; the stream
target's constructor raises), and Serve retries it; the replicas already running keep serving (their weights are
loaded). After ``outage_s`` the original is put back, only while the file still reads as the fault's truncated copy
(the heal never undoes what someone else set). Where the file is: on the local backend one file shared by every
node (one machine); on KubeRay in the zone's pods (each pod its own copy: Serve's placement keeps a replacement in
its zone, on the node its predecessor left room on). What it measures: ``restart`` in the fault's entry
(:mod:`chaos.analysis.restart`: starts failed, the back-off between them, the deployment unhealthy or not, the time
to the first replacement RUNNING after the weights' return)."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope


def fail_restart(backend, marker: faults.Marker, zone: str | None = None, outage_s: float | None = 30.0) -> dict:
    """Make the weights a replacement needs unreadable, kill one RUNNING replica (of ``zone``), restore the
    weights ``outage_s`` after the injection (None: at the rollback). The weights file is found and read before the
    mark; the proof: the weights read as the fault's truncated copy, the replica's process gone; at the restore,
    that they read so until then (``weights_restored.unreadable_until_restore``)."""
    r = backend.pick_replica(zone=zone)
    break_weights = backend.weights_breaker(r)  # the file found and read: nothing changed yet
    do_kill = backend.replica_killer(r, "sigkill")
    engines, why = orphan_watch.engines_before_kill(backend, r)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "outage_s": outage_s}) as f:
        # in the fault first (each pod's as it is swapped): a kill, or a later pod's swap, that fails is still restored
        f["weights"] = break_weights(f["fault_id"], f)
        f["pids"] = do_kill()
        orphan_watch.record_victim(f, r, engines, why)
        faults.prove(backend, marker, f)
    faults.outage(backend, marker, f, outage_s, lambda: f.update(weights_restored=backend.restore_weights(f)))
    return f


SCOPE = Scope(
    "restart-fails", "restart fails", fault=fail_restart,
    backend_methods=("weights_breaker", "replica_killer", "restore_weights"),
    zoned=True, every_target_affected=True,  # a replica: Serve routes to it from every zone's proxy
    failing_restart=True,  # its replacement's starts are counted (chaos.analysis.restart)
    orphan_check=True,  # the killed replica's engines must die with it (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # the swap is done before the kill; a SIGKILLed process is gone at once
    kube_access=EXEC,  # the swap and its restore (python in the pod), the kill
    heal_args=("outage_s",), conflict_class="replica-level",
)
