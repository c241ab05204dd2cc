"""engine: a replica's engine SIGSTOPped, alive but stuck (:func:`hang_engine`); Serve must
detect it from health checks. SIGCONT at the heal."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import EXEC, Access
from chaos.base.scope_registry import Scope


def hang_engine(backend, marker: faults.Marker, zone: str | None = None, duration_s: float | None = None) -> dict:
    """SIGSTOP a replica's engine process(es) (vLLM's EngineCore; the stream target's engine child), alive
    but stuck, and nothing else: the replica's process runs on. Refused without an engine child.

    With ``duration_s`` the engine is resumed (SIGCONT) after that long; otherwise the rollback
    resumes it.
    """
    r = backend.pick_replica(zone=zone)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [], {"node": r.node}) as f:
        f["pids"] = backend.pause_engine(r)
        f["pid"] = r.pid  # the replica's process, which must run on while its engine is stopped (the proof looks)
        orphan_watch.record_victim(f, r, f["pids"])  # replaced when detected: the stopped engine must go with it
        faults.prove(backend, marker, f)
    if duration_s:
        faults.sleep(max(0.0, duration_s - marker.since_inject(f)))
        with marker.heal(f):
            backend.resume_engine(f["pids"])
    return f


SCOPE = Scope(
    "engine", "engine hang", fault=hang_engine, backend_methods=("pause_engine", "resume_engine"),
    zoned=True, every_target_affected=True,
    orphan_check=True,  # a stopped engine must go with its replaced replica (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # a stopped process is in state T at once
    kube_access=EXEC + (Access("patch", "pods", why="the stopped processes recorded on their pod, for recover "
                                                     "(_mark_paused)"),),
    heal_args=("duration_s",), conflict_class="replica-level",
)
