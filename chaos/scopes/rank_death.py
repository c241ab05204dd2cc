"""rank-death: one rank process of a replica's engine rank group SIGKILLed (:func:`kill_rank`), as a
tensor-parallel worker dies in production (an OOM kill, a segfault, a GPU XID: vllm-project/vllm #20657 "Worker proc
VllmWorker-2 died unexpectedly, shutting down executor"; #15295, a worker died with exit code -15; intel/llm-scaler #154,
VllmWorker-3 died while /health answered 200, then "EngineCore encountered a fatal error"; vllm-project/vllm PR #11737,
a simulated illegal memory access on rank 1 of TP 2 under load). vLLM's ``MultiprocExecutor`` watches its
workers' process sentinels (``start_worker_monitor``'s ``MultiprocWorkerMonitor`` thread,
``vllm/v1/executor/multiproc_executor.py``): a dead one makes it shut the executor down and call the engine's failure
callback (``EXECUTOR_FAILED``: "Executor failed."), so the engine dies (``EngineDeadError`` to every request, its
health check failing) and Serve replaces the replica. The stream target's rank group (``app.ranks``,
:mod:`serve_apps.stream_ranks`) notices a dead rank the same way (its process sentinel) and its engine exits, its
replica reporting ``engine rank died``. The proof: the rank process gone, the replica's process alive (the death is
the rank's, Serve left to notice it). Nothing to heal."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.scopes.rank_hang import check_rank
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope


def kill_rank(backend, marker: faults.Marker, zone: str | None = None, rank: int = 1) -> dict:
    """SIGKILL rank ``rank`` of one replica's engine rank group (no such rank: refused, nothing killed): the engine
    must notice through its executor's monitor and die, the replica's health check fail, and Serve replace it. The
    whole group (engine and ranks) is followed by the orphan check. Nothing to heal."""
    rank = check_rank(SCOPE.name, rank)
    r = backend.pick_replica(zone=zone)
    group, why = orphan_watch.group_before_fault(backend, r)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "rank": int(rank)}) as f:
        pids = backend.kill_rank(r, rank=int(rank))  # a kill refused or failed leaves nothing in the records
        f["pid"], f["pids"] = r.pid, pids  # the replica's process, which must outlive its rank (the proof looks)
        orphan_watch.record_victim(f, r, group, why)  # the replaced replica leaves no engine nor rank behind
        faults.prove(backend, marker, f)
    return f


SCOPE = Scope(
    "rank-death", "rank death", fault=kill_rank, backend_methods=("kill_rank",),
    zoned=True, every_target_affected=True,
    orphan_check=True,  # the replaced replica leaves no engine nor rank behind (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # a SIGKILLed process is gone at once
    kube_access=EXEC,  # pgrep and kill -9 of the rank process inside the pod; nothing to heal
    conflict_class="replica-level",  # nothing to heal: Serve replaces it (held for its recovery window)
    min_ranks=2,  # a rank group: app.ranks 2 (the stream target), tensor_parallel_size 2 (vLLM)
)
