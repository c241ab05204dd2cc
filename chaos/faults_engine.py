"""The engine faults, the replica's own process left alive (:mod:`chaos.faults` for the others, and for
:class:`~chaos.faults.Marker` and :func:`~chaos.faults.prove`): ``engine`` (a hang: SIGSTOP), ``engine-crash``
(SIGKILL), ``engine-error`` (SIGUSR1 to the app's fault hook: the engine fails from inside its step loop) and
``engine-slow`` (a straggler: a SIGSTOP/SIGCONT duty cycle). Each hits the engine process(es) of one replica
(vLLM's ``EngineCore``, the stream target's engine child), proves its effect, and heals itself where there is
something to heal."""

from __future__ import annotations

from chaos import faults
from chaos.backends import engine_faults


def hang_engine(backend, marker: faults.Marker, zone: str | None = None, duration_s: float | None = None) -> dict:
    """SIGSTOP a replica's engine process(es) (vLLM's EngineCore; the stream target's engine child), alive
    but stuck, and nothing else: the replica's process runs on. Refused without an engine child.

    With ``duration_s`` the engine is resumed (SIGCONT) after that long; otherwise the rollback
    resumes it.
    """
    r = backend.pick_replica(zone=zone)
    with marker.inject("engine", r.replica_id, [r.zone] if r.zone else [], {"node": r.node}) as f:
        f["pids"] = backend.pause_engine(r)
        f["pid"] = r.pid  # the replica's process, which must run on while its engine is stopped (the proof looks)
        faults.prove(backend, marker, f)
    if duration_s:
        faults._sleep(max(0.0, duration_s - marker.since_inject(f)))
        with marker.heal(f):
            backend.resume_engine(f["pids"])
    return f


def crash_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """SIGKILL one replica's engine process (vLLM's EngineCore; the stream target's engine child)
    while the replica's own process lives: the replica must notice its engine died (vLLM's
    ``EngineDeadError``), fail its health check, and Serve replace it. Nothing to heal."""
    r = backend.pick_replica(zone=zone)
    with marker.inject("engine-crash", r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment}) as f:
        pids = backend.crash_engine(r)  # a crash refused or failed leaves nothing in the records
        f["pid"] = r.pid  # the replica's process, which must outlive its engine (the proof looks)
        f["pids"] = pids
        faults.prove(backend, marker, f)
    return f


def error_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """One replica's engine made to fail from inside its step loop (as a device error does): SIGUSR1 to its
    engine, whose hook (the app's: ``AVAILPROOF_ENGINE_FAULTS=1``) raises at its next step and records it (its
    tombstone, :func:`serve_apps.engine_faults.tombstone_path`). The replica lives; Serve replaces it. The engine is
    found and checked to take the signal before the mark; the proof: each engine's tombstone, the replica alive."""
    r = backend.pick_replica(zone=zone)
    fire = backend.error_engine(r)
    with marker.inject("engine-error", r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment}) as f:
        pids = fire()  # a signal that failed leaves nothing in the records (stale tombstones removed first)
        f["pid"], f["pids"] = r.pid, pids  # the replica's process must outlive its engine (the proof looks)
        faults.prove(backend, marker, f)
    return f


def slow_engine(backend, marker: faults.Marker, zone: str | None = None, factor: float = 4.0, period_s: float = 0.2,
                duration_s: float = 20.0) -> dict:
    """A straggler: one replica's engine throttled by a SIGSTOP/SIGCONT duty cycle (:class:`~chaos.backends.
    engine_faults.Throttle`) for ``duration_s``; the heal stops it, the engine left continued."""
    throttle = engine_faults.Throttle(factor, period_s, duration_s)  # refused here when out of range
    r = backend.pick_replica(zone=zone)
    with marker.inject("engine-slow", r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "deployment": r.deployment, **throttle.detail()}) as f:
        pids = backend.slow_engine(r, throttle.factor, throttle.period_s, throttle.duration_s)  # refused: no record
        f.update(throttle.detail(), pid=r.pid, pids=pids)  # what the proof looks at: the cycle, the replica's process
        faults.prove(backend, marker, f, bound_s=max(faults.EFFECT_BOUND_S.get("engine-slow", 10.0), 3 * throttle.cycle_s))
    faults._sleep(max(0.0, duration_s - marker.since_inject(f)))
    with marker.heal(f):
        backend.resume_engine(f["pids"])
    return f
