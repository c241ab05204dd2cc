"""``rank-hang`` and ``rank-death`` on KubeRay (:mod:`chaos.scopes.rank_hang`, :mod:`chaos.scopes.rank_death`): the
rank processes of a replica's engine rank group are the children of its engine children (``pgrep -P ENGINE -f``
:func:`serve_apps.stream_ranks.rank_pattern`: vLLM's ``VLLM::Worker_TP<N>`` workers with tensor_parallel_size >= 2, the
stream target's ``availproof::EngineRank<N>``), found and their signal masks read by one exec (:func:`ranks_script`).
A hang goes as ``engine-wedge``'s (:mod:`.wedge`: the request to wedge written and ``kill -USR1`` by one exec, the
proof the rank's wedge mark, its hang mark, and its state; released at the run's end while it names the run); a death
is ``kill -9`` of the rank (:func:`kill_script`), proven by the rank gone and the replica's process alive. No rank:
refused in one line, nothing sent. On KubeRay the app is the RayService's (an experiment's ``app.ranks`` does not
reach it): a rank group is there only where its manifests give the engine one."""

from __future__ import annotations

from chaos.backends import engine_faults
from chaos.backends.kuberay import plan, proofs
from chaos.backends.kuberay.common import check, name_of, parse_masks
from chaos.backends.kuberay.wedge import by_pod, wedge_script
from chaos.base.errors import ClusterError
from serve_apps.engine_faults import WEDGE
from serve_apps.stream_ranks import ANY_RANK_PATTERN, rank_pattern


def ranks_script(pid: int, rank: int | None) -> str:
    """Each rank process of the replica's engine children (rank ``rank``; None: any, :data:`ANY_RANK_PATTERN`: vLLM's
    rank 0 worker too) on a line: its pid and signal masks (``58 SigBlk:... SigIgn:... SigCgt:...``); nothing when
    there is none."""
    pattern = ANY_RANK_PATTERN if rank is None else rank_pattern(rank)
    return (f": availproof-rank look; for e in $(pgrep -P {int(pid)} -f EngineCore); do "
            f"for p in $(pgrep -P $e -f '{pattern}'); do "
            "echo \"$p $(grep -E '^Sig(Blk|Ign|Cgt):' /proc/$p/status | tr -d ' \\t' | tr '\\n' ' ')\"; done; done")


def kill_script(pids: list[int]) -> str:
    """SIGKILL of the rank processes, their pids printed."""
    ps = " ".join(str(int(p)) for p in pids)
    return f": availproof-rank-death; kill -9 {ps} && echo {ps}"


class Ranks:
    """The rank faults' part, held by the engines part (``backend.engines.ranks``)."""

    def __init__(self, target, pods):
        self.target, self.pods = target, pods

    def found(self, r, rank: int | None) -> dict[int, str]:
        """pid -> signal masks of the replica's rank ``rank`` processes (one exec)."""
        return parse_masks(self.pods.exec(r.node, ranks_script(int(r.pid), rank)))

    def rank_pids(self, r, rank: int, to: str) -> dict[int, str]:
        masks = self.found(r, int(rank))
        if not masks:
            raise ClusterError(f"replica {r.replica_id} (pid {r.pid}) in pod {r.node}: its engine has no rank "
                               f"{int(rank)} process to {to}: a rank group needs tensor_parallel_size >= {int(rank) + 1} "
                               f"(vLLM's MultiprocExecutor workers) or app.ranks >= {int(rank) + 1} (the stream target) "
                               "in the RayService's app; nothing sent")
        return masks

    def hang_rank(self, r, rank: int = 1, spin: bool = False):
        """Everything but the signal done: the rank found and its masks read (one exec; it must take SIGUSR1, else
        refused, nothing sent). The returned callable leaves the request to wedge and signals (one exec)."""
        masks = self.rank_pids(r, rank, "hang")
        for p, status in sorted(masks.items()):
            takes, seen = engine_faults.handles(status)
            if not takes:
                raise ClusterError(f"replica {r.replica_id}: its rank {int(rank)} process {p} in pod {r.node} would not "
                                   f"hang from inside on SIGUSR1 ({seen}): the app's engine-fault hook is off in the "
                                   "rank; nothing sent")
        request = engine_faults.wedge_request(self.target.run_id, spin).strip()

        def fire() -> list[str]:
            out = self.pods.exec(r.node, wedge_script(sorted(masks), request, WEDGE))
            pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
            if not pids:
                raise ClusterError(f"replica {r.replica_id} in pod {r.node}: no rank took the signal")
            return pids
        return fire

    def kill_rank(self, r, rank: int = 1) -> list[str]:
        """``kill -9`` of rank ``rank`` of the replica's engine in its pod (found first: none, refused)."""
        pids = sorted(self.rank_pids(r, rank, "kill"))
        out = self.pods.exec(r.node, kill_script(pids))
        killed = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
        if not killed:
            raise ClusterError(f"replica {r.replica_id} in pod {r.node}: no rank process was killed")
        return killed

    def rank_children(self, r) -> list[int]:
        """Every rank process of the replica's engines in its pod, vLLM's rank 0 worker included (one exec; [] without
        a rank group)."""
        return sorted(self.found(r, None))


def plan_hang(self, scope: str, a: dict) -> list[dict]:
    """The replica's pod and its engine's rank, as :meth:`Ranks.hang_rank` finds it (the plan does not exec)."""
    r, pod = _replica_pod(self, a)
    return [plan.pod_row(self, pod, f"exec: rank {a.get('rank', 1)} of the EngineCore children of {r.pid} (`pgrep -P "
                                    f"ENGINE -f '{rank_pattern(int(a.get('rank', 1)))}'`, none: refused) and its signal "
                                    "masks (it must take SIGUSR1), the request to wedge written into /tmp, then `kill "
                                    "-USR1`: its step stays blocked and the engine's collective with it",
                         "nothing but a detector ends it; the run's end removes its hang mark if still this run's")]


def plan_death(self, scope: str, a: dict) -> list[dict]:
    r, pod = _replica_pod(self, a)
    return [plan.pod_row(self, pod, f"exec: rank {a.get('rank', 1)} of the EngineCore children of {r.pid} (none: "
                                    "refused), then `kill -9` of it; the engine and the replica's process live on",
                         "the engine notices its dead rank and dies; Serve's health check replaces the replica")]


def _replica_pod(self, a: dict):
    r = self.pick_replica(zone=a.get("zone"))
    pods = [p for p in self.pods.ray(terminating=True) if name_of(p) == r.node]
    if not pods:
        raise ClusterError(f"replica {r.replica_id}: its pod {r.node} is not one of this cluster's")
    return r, pods[0]


def proof_hang(self, fault: dict) -> list[dict]:
    """The rank's hang mark (its wedge mark, this run's) and its state, the replica's process alive (:mod:`.wedge`).
    Not the engine's step heartbeat: no exec reads it here yet (the local backend's proof does,
    :mod:`chaos.backends.rank_hang`), so nothing of the engine is held to the heal on KubeRay."""
    return self.engines.wedges.proof(fault)


def proof_death(self, fault: dict) -> list[dict]:
    """The killed rank processes gone from the pod, and the replica's own process still there."""
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the rank's processes gone", False, "the kill named no process")]
    out = []
    replica = int(fault["pid"]) if str(fault.get("pid") or "").isdigit() else None
    for pod, pids in by_pod(items).items():
        states = proofs.proc_states(self, pod, pids + ([replica] if replica else []))
        what = f"rank process(es) {', '.join(map(str, pids))} gone from pod {pod}"
        if states is None:
            out.append(check(what, False, "the pod is gone (a pod loss, not the rank's alone)"))
            continue
        left = [p for p in pids if states.get(p, "gone") not in ("gone", "Z", "X")]
        out.append(check(what, not left, ", ".join(f"{p} {states.get(p, 'gone')}" for p in pids)))
        alive = replica is not None and states.get(replica, "gone") not in ("gone", "Z", "X")
        out.append(check(f"the replica's process {replica} alive in pod {pod}", alive,
                                f"state {states.get(replica, 'gone')}" if replica else "no replica pid recorded"))
    return out
