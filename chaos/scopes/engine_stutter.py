"""engine-stutter: a straggler. A replica's engine process(es) throttled by a duty cycle of SIGSTOP and SIGCONT
for a stated time (:func:`stutter_engine`; ``factor``: the engine runs one ``period_s`` of every
``factor``): alive and answering, slowly. What Serve's router does with it is the finding: the share of the
requests the slow replica still got, and its TTFT and ITL against the others' (:mod:`chaos.analysis.slow_replica`).
The heal stops the duty cycle and leaves the engine continued."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends import engine_faults
from chaos.backends.kuberay.kube.access import EXEC, Access
from chaos.base.scope_registry import Scope


def stutter_engine(backend, marker: faults.Marker, zone: str | None = None, factor: float = 4.0, period_s: float = 0.2,
                duration_s: float = 20.0) -> dict:
    """A straggler: one replica's engine throttled by a SIGSTOP/SIGCONT duty cycle (:class:`~chaos.backends.
    engine_faults.Throttle`) for ``duration_s``; the heal stops it, the engine left continued."""
    throttle = engine_faults.Throttle(factor, period_s, duration_s)  # refused here when out of range
    r = backend.pick_replica(zone=zone)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "deployment": r.deployment, **throttle.detail()}) as f:
        pids = backend.stutter_engine(r, throttle.factor, throttle.period_s, throttle.duration_s)  # refused: no record
        f.update(throttle.detail(), pid=r.pid, pids=pids)  # what the proof looks at: the cycle, the replica's process
        faults.prove(backend, marker, f, bound_s=max(faults.EFFECT_BOUND_S.get(SCOPE.name, 10.0), 3 * throttle.cycle_s))
    faults.sleep(max(0.0, duration_s - marker.since_inject(f)))
    with marker.heal(f):
        backend.resume_engine(f["pids"])
    return f


SCOPE = Scope(
    "engine-stutter", "engine stutter", fault=stutter_engine, backend_methods=("stutter_engine", "resume_engine"),
    zoned=True, every_target_affected=True,
    effect_bound_s=10.0,  # one look samples two cycles (1.6 s at factor 4, period 0.2 s)
    kube_access=EXEC + (Access("patch", "pods", why="the stopped processes and the duty cycle recorded on their pod, "
                                                     "for recover (_mark_paused)"),),
    straggler=True,  # alive and answering, slowly: what the router does with it is the finding
    heal_args=("duration_s",), conflict_class="replica-level",
)
