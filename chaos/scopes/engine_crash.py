"""engine-crash: a replica's engine process SIGKILLed while the replica's own process lives
(:func:`crash_engine`): the replica must notice, fail its health check, and Serve replace it."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope


def crash_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """SIGKILL one replica's engine process (vLLM's EngineCore; the stream target's engine child)
    while the replica's own process lives: the replica must notice its engine died (vLLM's
    ``EngineDeadError``), fail its health check, and Serve replace it. Nothing to heal."""
    r = backend.pick_replica(zone=zone)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment}) as f:
        pids = backend.crash_engine(r)  # a crash refused or failed leaves nothing in the records
        f["pid"] = r.pid  # the replica's process, which must outlive its engine (the proof looks)
        f["pids"] = pids
        orphan_watch.record_victim(f, r, pids)  # the replica replaced must leave no engine behind
        faults.prove(backend, marker, f)
    return f


SCOPE = Scope(
    "engine-crash", "engine crash", fault=crash_engine, backend_methods=("crash_engine",),
    zoned=True, every_target_affected=True,
    orphan_check=True,  # the replaced replica leaves no engine behind (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # a SIGKILLed process is gone at once
    kube_access=EXEC,  # pgrep and kill -9 of the replica's EngineCore children; nothing to heal
    conflict_class="replica-level",  # nothing to heal: Serve replaces it (held for its recovery window)
)
