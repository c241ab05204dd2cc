"""engine-error: a replica's engine made to fail from inside its step loop, the way a device error does
(:func:`error_engine`): the rig sends SIGUSR1 to the engine process, whose fault hook (the app
installs it when ``AVAILPROOF_ENGINE_FAULTS=1``) raises in the next step, so the serving stack's own error
path runs (vLLM: the exception inside EngineCore that becomes its EngineDeadError). The replica's process
lives: it must answer its requests with errors, fail its health check, and Serve replace it. Nothing to heal."""

from __future__ import annotations

from chaos import faults, orphan_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.scope_registry import Scope


def error_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """One replica's engine made to fail from inside its step loop (as a device error does): SIGUSR1 to its
    engine, whose hook (the app's: ``AVAILPROOF_ENGINE_FAULTS=1``) raises at its next step and records it (its
    tombstone, :func:`serve_apps.engine_faults.tombstone_path`). The replica lives; Serve replaces it. The engine is
    found and checked to take the signal before the mark; the proof: each engine's tombstone, the replica alive."""
    r = backend.pick_replica(zone=zone)
    fire = backend.error_engine(r)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment}) as f:
        pids = fire()  # a signal that failed leaves nothing in the records (stale tombstones removed first)
        f["pid"], f["pids"] = r.pid, pids  # the replica's process must outlive its engine (the proof looks)
        orphan_watch.record_victim(f, r, pids)  # the replica replaced must leave no engine behind
        faults.prove(backend, marker, f)
    return f


SCOPE = Scope(
    "engine-error", "engine error", fault=error_engine, backend_methods=("error_engine",),
    zoned=True, every_target_affected=True,
    orphan_check=True,  # the failed engine exits; the replaced replica leaves none (chaos.orphan_watch)
    # the hook fires at the engine's next step, then its error path runs and the process exits
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep of the EngineCore children, their signal masks read, kill -USR1; nothing to heal
    conflict_class="replica-level",  # nothing to heal: Serve replaces it (held for its recovery window)
)
