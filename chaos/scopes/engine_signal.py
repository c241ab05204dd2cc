"""What the engine faults sent through the app's fault hook share (engine-wedge, engine-garbage, engine-stall,
engine-error; :mod:`serve_apps.engine_faults`): one replica picked, its engine armed (found, and checked to take
the signal, before any mark), the fault marked and fired, the engines signalled recorded as the victims a
replacement of the replica must take with it (:mod:`chaos.system.orphan_watch`), and the proof (:func:`chaos.scopes.faults.prove`:
the backend's effect checks for the scope, each its own). No heal here: the run's end (or a detector) ends them.
Not a scope itself: each of those scopes' modules calls :func:`signal_one_engine` with its name and its backend
method."""

from __future__ import annotations

from typing import Any, Callable

from chaos.scopes import faults
from chaos.system import orphan_watch


def signal_one_engine(backend, marker: faults.Marker, scope: str, arm: Callable[[Any], Callable[[], list[int]]],
                      zone: str | None = None, detail: dict[str, Any] | None = None) -> dict:
    """The fault ``scope`` on one replica's engine(s) in ``zone`` (None: any): ``arm(replica)`` (the backend's
    method) finds and checks the engines and gives what fires the signal; the mark's detail is the replica's
    node, pid and deployment with ``detail``; the fault's ``pid`` is the replica's, ``pids`` the engines
    signalled. A signal that failed raises inside the mark and leaves nothing in the records."""
    r = backend.pick_replica(zone=zone)
    fire = arm(r)
    with marker.inject(scope, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, **(detail or {})}) as f:
        pids = fire()  # a signal that failed leaves nothing in the records (stale marks removed first)
        f["pid"], f["pids"] = r.pid, pids  # the replica's process must outlive its engine (the proofs look)
        orphan_watch.record_victim(f, r, pids)  # a replacement must take the engine with it
        faults.prove(backend, marker, f)
    return f
