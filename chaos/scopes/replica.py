"""replica: one RUNNING Serve replica killed (its worker process SIGKILLed, its actor killed, or its pod
crashed: :func:`kill_replica`); Serve replaces it. Serve routes to it from every zone's proxy."""

from __future__ import annotations

import logging

from chaos.scopes import faults
from chaos.system import orphan_watch
from chaos.backends.kuberay.kube.access import DELETE_PODS, EXEC
from chaos.base.errors import UsageError
from chaos.base.scope_registry import Scope

REPLICA_KILL_METHODS = ("sigkill", "actor", "pod")

logger = logging.getLogger(__name__)


def kill_replica(backend, marker: faults.Marker, zone: str | None = None, method: str = "sigkill",
                 replica=None, deployment: str | None = None, min_ongoing: int = 0,
                 ongoing_wait_s: float = 30.0) -> dict:
    """Kill one RUNNING Serve replica; Serve replaces it.

    ``method``: ``sigkill`` (SIGKILL of the replica's worker process), ``actor`` (``ray.kill``
    of its actor through a Ray driver), ``pod`` (KubeRay only: delete the pod hosting it).
    By default a replica of the deployment that holds the model; ``deployment`` (a name
    prefix, e.g. ``OpenAiIngress``) picks another. ``min_ongoing`` N > 0: killed only once it has N
    ongoing requests, as Serve counts them, waiting up to ``ongoing_wait_s`` (never: refused, nothing
    marked; :mod:`chaos.system.replica_ongoing`); the count read just before the kill is the fault's
    ``ongoing_at_kill``. The mark is taken when everything is ready and only the kill itself is left; a refusal
    after the kill was prepared disarms it (:func:`disarm`).
    """
    if method not in REPLICA_KILL_METHODS:
        raise UsageError(f"replica kill method must be one of {', '.join(REPLICA_KILL_METHODS)}, got {method!r}")
    if isinstance(min_ongoing, bool) or not (isinstance(min_ongoing, int) and min_ongoing >= 0) \
            or not (isinstance(ongoing_wait_s, (int, float)) and ongoing_wait_s > 0):
        raise UsageError(f"replica kill: min_ongoing must be a whole number >= 0 and ongoing_wait_s > 0, got "
                         f"{min_ongoing!r} and {ongoing_wait_s!r}")
    if min_ongoing and not callable(getattr(backend, "replica_ongoing", None)):
        raise UsageError("replica kill: this backend cannot read a replica's ongoing requests (min_ongoing)")
    r = replica or backend.pick_replica(zone=zone, deployment=deployment)
    do_kill = backend.replica_killer(r, method)
    fired = False
    try:
        engines, why = orphan_watch.engines_before_kill(backend, r)  # its engines must die with it (the orphan check)
        ongoing = backend.replica_ongoing(r, min_ongoing, ongoing_wait_s) if min_ongoing else None
        detail = {"node": r.node, "pid": r.pid, "deployment": r.deployment, "method": method}
        if min_ongoing:
            detail["ongoing_at_kill"] = ongoing
        with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [], detail) as f:
            if min_ongoing:
                f["ongoing_at_kill"] = ongoing
            fired = True
            f["pids"] = do_kill()
            orphan_watch.record_victim(f, r, engines, why)
            faults.prove(backend, marker, f)
    except BaseException:
        if not fired:  # refused before the kill (an idle replica, an unread count): nothing armed left behind
            disarm(do_kill)
        raise
    return f


def disarm(killer) -> None:
    """Undo what a backend's ``replica_killer`` prepared for a kill that will not come (its ``disarm()``, when it has
    one: KubeRay's ``actor`` method, a Ray driver armed in the head; the local one's, a connected driver process). A
    failure to disarm is logged, never raised over the refusal that made it needed."""
    undo = getattr(killer, "disarm", None)
    if undo is None:
        return
    try:
        undo()
    except Exception as e:  # noqa: BLE001 - the refusal is what the caller must see
        logger.warning("replica kill: the prepared kill could not be disarmed (%s: %s)", type(e).__name__, e)


SCOPE = Scope(
    "replica", "replica kill", fault=kill_replica, backend_methods=("replica_killer",),
    action_omits=("replica",),  # a caller's own pick (head_outage_second_fault's, made while the head is up)
    zoned=True, every_target_affected=True,
    orphan_check=True,  # its engine children must die with it (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # a SIGKILLed process is gone at once
    kube_access=EXEC + DELETE_PODS,  # sigkill and actor: exec; pod: the crash, then the delete
    conflict_class="replica-level",  # nothing to heal: Serve replaces it (held for its recovery window)
)
