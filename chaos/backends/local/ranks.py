"""The local backend's rank faults (``rank-hang``, ``rank-death``: :mod:`chaos.scopes.rank_hang`,
:mod:`chaos.scopes.rank_death`): a replica's engine rank group is its engine processes (:meth:`engine_pids`) and their
children whose command line names the rank (:func:`serve_apps.stream_ranks.rank_pattern`: the stream target's
``availproof::EngineRank<N>``, vLLM's ``VLLM::Worker_TP<N>``). A rank is hung as an engine is wedged (its fault hook
checked to take SIGUSR1 first, a request to wedge left, then the signal: :func:`serve_apps.engine_faults.wedge_path`
of the rank's pid is its hang mark, released at the run's end by ``release_engine`` as a wedge) or SIGKILLed. A replica
whose engine has no such rank is refused in one line, nothing sent. :class:`Methods` is the backend's part (a mixin of
:class:`chaos.backends.local.backend.LocalBackend`)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable

from chaos.backends import engine_faults, rank_hang
from chaos.backends.local import procs
from chaos.backends.local.engines import read
from chaos.base.errors import ClusterError
from serve_apps import engine_faults as app_engine_faults, heartbeat
from serve_apps.stream_ranks import is_any_rank, is_rank

NO_RANK = ("a rank group needs app.ranks >= {need} on the stream target, tensor_parallel_size >= {need} on vLLM "
           "(its MultiprocExecutor's workers)")


def children(pid: int) -> list[int]:
    """The live children of process ``pid`` (in its session: the rig's cluster's)."""
    sid = procs.session_of(pid)
    return [] if sid is None else [p for p in procs.session_members(sid) if procs.parent(p) == pid]


def ranks_of(engines: list[int], rank: int | None = None) -> list[int]:
    """The rank processes of ``engines`` (their children whose command line names rank ``rank``; None: any rank,
    :func:`serve_apps.stream_ranks.is_any_rank`: vLLM's rank 0 worker too, never the stream target's engine)."""
    if rank is None:
        return [p for e in engines for p in children(e) if is_any_rank(procs.cmdline(p))]
    return [p for e in engines for p in children(e) if is_rank(procs.cmdline(p), int(rank))]


def rank_pids(b, r, rank: int, to: str) -> list[int]:
    """Rank ``rank`` of the replica's engine(s); refused in one line when there is none (no rank group)."""
    engines = b.engine_pids(r, to)
    pids = ranks_of(engines, rank)
    if not pids:
        raise ClusterError(f"replica {r.replica_id}: its engine process(es) {', '.join(map(str, engines))} have no "
                           f"rank {int(rank)} process to {to}: " + NO_RANK.format(need=int(rank) + 1) + "; nothing sent")
    return pids


def hang(b, r, rank: int = 1, spin: bool = False) -> Callable[[], list[int]]:
    """Everything but the signal done: the rank found and checked to take SIGUSR1 (its fault hook; without it the
    signal's default action would kill it: a death, not a hang). The returned callable removes a stale hang mark, leaves
    the rank a request to wedge for this run and signals it: its step loop hangs until the run's end releases it."""
    pids = rank_pids(b, r, rank, "hang")
    for p in pids:
        takes, seen = engine_faults.handles(procs_status(p))
        if not takes:
            raise ClusterError(f"replica {r.replica_id}: its rank {int(rank)} process {p} would not hang from inside on "
                               f"SIGUSR1 ({seen}): the app's engine-fault hook is off in the rank "
                               "(AVAILPROOF_ENGINE_FAULTS=1 in the engine's environment); nothing sent")
    request = engine_faults.wedge_request(b.run_id, spin)

    def fire() -> list[int]:
        for p in pids:
            Path(app_engine_faults.wedge_path(p)).unlink(missing_ok=True)  # a reused pid's proves nothing
            Path(app_engine_faults.request_path(p)).write_text(request)
        return procs.signal_pids(pids, engine_faults.ERROR_SIGNAL)
    return fire


def procs_status(pid: int) -> str:
    """/proc/PID/status ("" when the process is gone): its signal masks."""
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def engines_of(fault: dict) -> list[int]:
    """The engine processes of the hung rank(s): each rank's parent (the stream target's engine child, vLLM's
    ``EngineCore``), found at the proof's first look and kept in the fault (``engine_pids``)."""
    if "engine_pids" not in fault:
        fault["engine_pids"] = sorted({p for p in map(procs.parent, fault.get("pids") or []) if p and p > 1})
    return list(fault["engine_pids"])


def beats(pids: list[int]) -> dict[int, heartbeat.Beat | None]:
    """Each engine's step heartbeat as it is now (None: no file to read)."""
    return {p: heartbeat.Reader(p, app_engine_faults.heartbeat_path(p)).read() for p in pids}


def stopped_check(fault: dict) -> dict:
    """rank-hang's proof of the engine (:func:`chaos.backends.rank_hang.stopped_check`): its heartbeat read here."""
    pids = engines_of(fault)
    return rank_hang.stopped_check(fault, pids, beats(pids), time.monotonic())


def hold_to_heal(b, fault: dict) -> dict | None:
    """Just before the run's end releases a hung rank: one more look (its hang mark, its engines' heartbeats) written
    into the fault's effect (:func:`chaos.backends.rank_hang.hold`). Never raises, never in the release's way: a read
    that fails is a look that proves nothing; anything else leaves the fault as it was."""
    try:
        if not rank_hang.holdable(fault):
            return None
        now = time.monotonic()
        try:
            look = {"marks": {p: read(Path(app_engine_faults.wedge_path(p))) for p in fault.get("pids") or []},
                    "beats": beats(engines_of(fault))}
        except Exception as e:  # noqa: BLE001 - a look that fails proves nothing either way
            look = {"error": f"{type(e).__name__}: {e}"[:200]}
        return rank_hang.hold(fault, look, b.run_id, rank_hang.t_s_at(fault, now))
    except Exception:  # noqa: BLE001 - the release still happens
        return None


class Methods:
    """The rank faults' backend methods (:class:`chaos.backends.base.Backend`); the backend gives ``engine_pids``,
    ``engine_children`` and ``run_id``."""

    def hang_rank(self, r, rank: int = 1, spin: bool = False) -> Callable[[], list[int]]:
        return hang(self, r, rank, spin)

    def kill_rank(self, r, rank: int = 1) -> list[int]:
        """SIGKILL of rank ``rank`` of the replica's engine(s), and nothing else."""
        return procs.signal_pids(rank_pids(self, r, rank, "kill"), signal.SIGKILL)

    def rank_children(self, r) -> list[int]:
        """Every rank process of the replica's engines ([] without a rank group): the orphan check's."""
        return ranks_of(self.engine_children(r))
