"""engine-slow: an even straggler. Every step of a replica's engine takes ``factor`` times as long for a stated time,
the way a straggler slows in production: a device power- or thermal-capped, a degraded link, a noisy neighbour slow
every step evenly (``engine-stutter`` is the bimodal one, a SIGSTOP/SIGCONT duty cycle). :func:`slow_engine`: the
rig leaves the engine a request naming ``slow``, the run and the factor, and sends SIGUSR1 to its fault hook
(:mod:`serve_apps.engine_faults`, :mod:`serve_apps.held_faults`); from its next step on the engine sleeps
(factor - 1) times each step's duration after it (vLLM: the step's measured duration; the stream target's engine
child: its step period, and its tokens' compute delays stretched as much), for as long as its slow mark exists.
Alive and answering, slowly: what Serve's router does with it is the finding (:mod:`chaos.analysis.slow_replica`).
After ``duration_s`` the rig removes the mark (only while it names the run) and the engine steps at full speed; the
request also says ``hold_s`` (``duration_s`` + :data:`chaos.backends.engine_faults.SLOW_HOLD_MARGIN_S`): past it the
engine removes its mark and lets go by itself, so a rig that died mid-fault leaves no straggler behind."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends import engine_faults
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.errors import UsageError
from chaos.base.scope_registry import Scope


def slow_engine(backend, marker: faults.Marker, zone: str | None = None, factor: float = 4.0,
                duration_s: float = 20.0) -> dict:
    """One replica's engine ``factor`` times slower at every step for ``duration_s``. The engine is found and checked
    to take the signal before the mark; the proof: each engine's slow mark naming this run, each engine alive, not
    stopped and stepping, its mean step since at least half ``factor`` times its mean step before (the engine's own
    clock), the replica's process alive. The heal removes the mark (while this run's): full speed again."""
    factor = engine_faults.slow_factor(factor)  # refused here when out of range
    if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) or not duration_s > 0:
        raise UsageError(f"engine-slow: duration_s must be a number above 0, got {duration_s!r}")
    r = backend.pick_replica(zone=zone)
    fire = backend.slow_engine(r, factor, engine_faults.slow_hold_s(duration_s))  # a dead rig's ends by itself
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "factor": factor,
                        "duration_s": float(duration_s)}) as f:
        pids = fire()  # a signal that failed leaves nothing in the records (stale marks removed first)
        f["pid"], f["pids"] = r.pid, pids
        faults.prove(backend, marker, f)
    faults.sleep(max(0.0, duration_s - marker.since_inject(f)))
    with marker.heal(f):
        f["slow_healed"] = backend.release_engine(list(f["pids"]), "slow")
    return f


SCOPE = Scope(
    "engine-slow", "engine slow", fault=slow_engine, backend_methods=("slow_engine", "release_engine"),
    zoned=True, every_target_affected=True,
    # the hook takes it at the engine's next step (at once under load); the proof needs steps timed since
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep, the signal masks, the request written, kill -USR1; the marks read and removed
    straggler=True,  # alive and answering, slowly: what the router does with it is the finding
    heal_args=("duration_s",), conflict_class="replica-level",
)
