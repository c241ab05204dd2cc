"""rank-hang: one rank of a replica's engine rank group hangs for good, and the group with it (issue 44). The production
case is the collective hang of tensor parallelism: one rank stops progressing (a GPU that stops, a rank stuck in an
NCCL collective) and every other rank blocks in the collective, with no timeout of its own but NCCL's watchdog (10-30
min, often off; vLLM 0.32's executor waits ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``, 300 s, for a step's answer), while
the engine's I/O threads run on and its ``/health`` answers 200 (vllm-project/vllm #2731: nothing generated while
requests run and wait, a custom all-reduce hang; #8410: a hang in the custom all-reduce; #6370: TP 2 stuck in an NCCL
all-reduce; #1957: an ALLREDUCE ended only by NCCL's watchdog after 1,800,000 ms). :func:`hang_rank`: the rig leaves rank N's process a request
to wedge and sends SIGUSR1 to its fault hook, installed in each rank as in the engine (the stream target's rank group,
``app.ranks``, :mod:`serve_apps.stream_ranks`; vLLM's ``VLLM::Worker_TP<N>`` workers, :mod:`serve_apps.rank_faults`):
the rank's step blocks (or spins) while its process stays out of state T, and the engine, waiting for that rank's
answer in its collective, steps no more. As ``engine-wedge``, **the rig never ends it during the run**: without a
detector the run must read VIOLATED; with one (the watchdog v2, ``app.watchdog: 2``) Serve replaces the replica and the
group goes with it (a rank's death pipe ends it with its engine). The run's end releases a rank still hung, and only
one whose hang mark (its wedge mark, :func:`serve_apps.engine_faults.wedge_path` of the rank's pid) still names the
run; what it found is the fault's ``wedge_at_end``. The proof holds the *engine* to it too (:mod:`chaos.backends.rank_hang`,
on the local backend): its step heartbeat shows a step under way that does not end, and just before the release one
more look must find the mark still the run's and no step since, else the effect is ``verified: false`` (``came_back``)."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.errors import UsageError
from chaos.base.scope_registry import Scope


def check_rank(scope: str, rank) -> int:
    """A rank fault's ``rank``: a whole number >= 1 (rank 0 of the stream target is its engine child: its faults are
    the engine's), refused in one line otherwise."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise UsageError(f"{scope}: rank must be a whole number >= 1 (rank 0 of the stream target is its engine: use "
                         f"engine-wedge or engine-crash), got {rank!r}")
    return rank


def hang_rank(backend, marker: faults.Marker, zone: str | None = None, rank: int = 1, spin: bool = False) -> dict:
    """Rank ``rank`` of one replica's engine rank group hung in its step for the rest of the run (blocked; ``spin``:
    busy at 100 % of a core). The rank is found and checked to take the signal before the mark (no such rank: refused,
    nothing sent); the proof: the rank's hang mark naming this run (its own word, written as its step hangs), the rank
    alive and not stopped, its engine stopped stepping (local backend: a step under way in its heartbeat, its count
    unchanged across the looks; an idle engine is no proof), the replica's process alive. The whole group (engine and
    ranks) is followed by the orphan check. No heal here: a detector ends it, or the run's end does, after one more
    look at the mark and the engine's steps (the effect lost if either moved)."""
    rank = check_rank(SCOPE.name, rank)
    r = backend.pick_replica(zone=zone)
    fire = backend.hang_rank(r, rank=int(rank), spin=bool(spin))
    group, why = orphan_watch.group_before_fault(backend, r)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "rank": int(rank),
                        "spin": bool(spin)}) as f:
        pids = fire()  # a signal that failed leaves nothing in the records (a stale mark removed first)
        f["pid"], f["pids"] = r.pid, pids  # the replica's process must outlive its hung rank (the proof looks)
        orphan_watch.record_victim(f, r, group, why)  # a replacement must take the engine and every rank with it
        faults.prove(backend, marker, f)
    return f


SCOPE = Scope(
    "rank-hang", "rank hang", fault=hang_rank, backend_methods=("hang_rank",),  # release_engine: the heal
    zoned=True, every_target_affected=True,
    orphan_check=True,  # a detector replaces the replica: its engine and every rank must go too
    # the hook hangs the rank at once (its signal handler runs in its step loop's thread): 15 s as engine-wedge's
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep, the signal masks, the request written, kill -USR1; the marks read and removed
    conflict_class="replica-level",  # no heal of its own: held for its recovery window in a soak
    min_ranks=2,  # a rank group: app.ranks 2 (the stream target), tensor_parallel_size 2 (vLLM)
)
