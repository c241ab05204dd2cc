"""restart-fails: a replica killed while the weights its replacement needs are unreadable, **held until the
replacement's start has failed** (issue 48): what operators meet as "the deployment failed to start N times" when a
checkpoint moved, a volume was truncated or the model store errors. :func:`fail_restart`: the weights file the app's
replicas load at their start (vLLM: ``model.safetensors`` of its checkpoint; the stream target: its weights file,
:mod:`serve_apps.stream_weights`) swapped for a truncated copy of itself (:mod:`serve_apps.weights_swap`: the
original copied aside first, its size and sha256 and the aside's path in a mark naming the run), then one RUNNING
replica in ``zone`` SIGKILLed. Its replacement's start then fails for real (vLLM's safetensors load; the stream
target's constructor raises), and Serve retries it; the replicas already running keep serving (their weights are
loaded).

**The hold.** The weights stay unreadable until a new replica's start of the killed one's deployment has been seen
failing ``hold_until_failed_starts`` times (default 1), looked at every ``poll_s`` (0.5 s) through the backend
(``replica_states``, :class:`chaos.system.start_watch.StartWatch`), and at least ``outage_s`` after the injection;
at the latest ``max_outage_s`` after it (the cap), they are put back anyway. A vLLM replacement reads its checkpoint
only after Ray Serve LLM's node and engine set-up (~60-165 s after the kill on 2 loaded cores, measured 2026-12-06):
a fixed outage shorter than that restores the weights before any start reads them and the fault never takes effect
on what it claims to break. The fault's entry says why the hold ended, ``held_until``: ``"outage_s"`` (the failed
starts were seen before it), ``"failed_starts"`` (the hold went past ``outage_s`` until they were), ``"cap"`` (not
seen by ``max_outage_s``) or ``"replacement_ran"`` (a new replica served while the weights were the fault's: nothing
held it back); ``failed_starts_seen`` (each ``{"replica", "starting_s", "failed_s", "seen"}``, from the injection)
and ``hold`` (its arguments, the looks, ``ended_s``). The proof is held to the heal: unless the failed starts were
seen, the effect's check "a replacement's start failed while the weights were unreadable" is not ok and the
effect ``verified: false`` (the run's verdict ERROR, "fault not in effect"). ``hold_until_failed_starts`` 0: a plain
outage of ``outage_s``, no watch; ``outage_s`` None: no hold, the rollback restores the weights.

The original is put back only while the file still reads as the fault's truncated copy (the heal never undoes what
someone else set). Where the file is: on the local backend one file shared by every node (one machine); on KubeRay in
the zone's pods (each pod its own copy: Serve's placement keeps a replacement in its zone, on the node its
predecessor left room on). What it measures: ``restart`` in the fault's entry (:mod:`chaos.analysis.restart`: starts
failed, the back-off between them, the deployment unhealthy or not, the time to the first replacement RUNNING after
the weights' return)."""

from __future__ import annotations

import math
import time

from chaos.scopes import faults
from chaos.system import orphan_watch, start_watch
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.errors import ClusterError, UsageError
from chaos.base.scope_registry import Scope

HELD_CHECK = "a replacement's start failed while the weights were unreadable"
MAX_OUTAGE_S = 600.0


def refusal(outage_s, hold_until_failed_starts, max_outage_s, poll_s) -> str | None:
    """Why the hold's arguments are refused (one line), else None."""
    def seconds(v, none_ok=False) -> bool:
        return (v is None and none_ok) or (not isinstance(v, bool) and isinstance(v, (int, float))
                                           and math.isfinite(v) and v >= 0)
    n = hold_until_failed_starts
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        return f"restart-fails: hold_until_failed_starts must be a whole number >= 0, got {n!r}"
    for name, v, none_ok in (("outage_s", outage_s, True), ("max_outage_s", max_outage_s, False),
                             ("poll_s", poll_s, False)):
        if not seconds(v, none_ok):
            return f"restart-fails: {name} must be a number of seconds >= 0, got {v!r}"
    if poll_s <= 0:
        return f"restart-fails: poll_s must be above 0, got {poll_s!r}"
    if outage_s is not None and max_outage_s < outage_s:
        return f"restart-fails: max_outage_s ({max_outage_s}) is below outage_s ({outage_s}), the hold's minimum"
    return None


def fail_restart(backend, marker: faults.Marker, zone: str | None = None, outage_s: float | None = 30.0,
                 hold_until_failed_starts: int = 1, max_outage_s: float = MAX_OUTAGE_S, poll_s: float = 0.5) -> dict:
    """Make the weights a replacement needs unreadable, kill one RUNNING replica (of ``zone``), hold them so until
    ``hold_until_failed_starts`` starts of its replacements failed and at least ``outage_s`` after the injection, at
    most ``max_outage_s``, then restore them (``outage_s`` None: at the rollback). The weights file is found and read,
    and the deployment's replicas listed, before the mark; the proof: the weights read as the fault's truncated copy,
    the replica's process gone; held to the restore (the module's doc)."""
    why = refusal(outage_s, hold_until_failed_starts, max_outage_s, poll_s)
    if why:
        raise UsageError(why)
    r = backend.pick_replica(zone=zone)
    break_weights = backend.weights_breaker(r)  # the file found and read: nothing changed yet
    do_kill = backend.replica_killer(r, "sigkill")
    engines, why = orphan_watch.engines_before_kill(backend, r)
    watch = None
    if outage_s is not None and hold_until_failed_starts:
        before = backend.replica_states(r.deployment)
        if before is None:
            raise ClusterError("restart-fails: Serve's replicas could not be read before the fault (the dashboard "
                               "did not answer): the replacement's starts could not be told from the others")
        watch = start_watch.StartWatch(r.deployment, before)
    with marker.inject(SCOPE.name, r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "outage_s": outage_s,
                        "hold_until_failed_starts": hold_until_failed_starts, "max_outage_s": max_outage_s}) as f:
        # in the fault first (each pod's as it is swapped): a kill, or a later pod's swap, that fails is still restored
        f["weights"] = break_weights(f["fault_id"], f)
        f["pids"] = do_kill()
        orphan_watch.record_victim(f, r, engines, why)
        faults.prove(backend, marker, f)
    if outage_s is None:
        return f  # the rollback restores them
    hold(backend, marker, f, watch, outage_s, hold_until_failed_starts, max_outage_s, poll_s)
    with marker.heal(f):
        f["weights_restored"] = backend.restore_weights(f)
    return f


def hold(backend, marker: faults.Marker, f: dict, watch: start_watch.StartWatch | None, outage_s: float,
         need: int, max_outage_s: float, poll_s: float) -> None:
    """Until ``outage_s`` after the injection and ``need`` failed starts seen (or a replacement served), at most
    ``max_outage_s``: the deployment's replicas looked at every ``poll_s``. Why it ended and what it saw in the fault
    (``held_until``, ``failed_starts_seen``, ``hold``); the proof's hold check in its effect."""
    while True:
        t = marker.since_inject(f)
        if watch is not None:
            try:
                states = backend.replica_states(watch.deployment)
            except Exception:  # noqa: BLE001 - a look that failed: unknown, nothing concluded
                states = None
            for s in watch.saw(round(t, 3), states):
                marker.log(f"restart-fails: start of {s['replica']} failed ({s['failed_s']} s after the injection)")
        enough = watch is None or len(watch.failed) >= need
        if t >= outage_s and (enough or (watch is not None and watch.ran)):
            break
        if t >= max_outage_s:
            break
        deadline = outage_s if t < outage_s else max_outage_s  # the next instant the hold may end at
        time.sleep(max(0.001, deadline - t) if watch is None else min(poll_s, max(0.001, deadline - t)))
    ended = round(marker.since_inject(f), 3)
    f["hold"] = {"until_failed_starts": need, "outage_s": outage_s, "max_outage_s": max_outage_s, "poll_s": poll_s,
                 "ended_s": ended, **(watch.detail() if watch is not None else {})}
    if watch is None:
        f["held_until"] = "outage_s"
        return
    f["failed_starts_seen"] = list(watch.failed)
    if enough:
        nth = watch.failed[need - 1]["failed_s"]
        f["held_until"] = "outage_s" if nth <= outage_s else "failed_starts"
        seen = (f"{len(watch.failed)} failed start(s) seen, the {_nth(need)} {nth} s after the injection "
                f"(held until {ended} s)")
    elif watch.ran:
        f["held_until"] = "replacement_ran"
        rid, t_ran = next(iter(watch.ran.items()))
        seen = (f"replica {rid} served {t_ran} s after the injection with {len(watch.failed)} of {need} failed "
                "start(s) seen: nothing held the replacement back")
    else:
        f["held_until"] = "cap"
        seen = (f"{len(watch.failed)} of {need} failed start(s) seen by the cap, max_outage_s {max_outage_s} s "
                f"({watch.looks} looks, {watch.unknown} unanswered): the weights were restored anyway")
    held(f, enough, seen, nth if enough else ended)


def _nth(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


def held(f: dict, ok: bool, seen: str, t_s: float) -> dict:
    """The hold's check written into the fault's effect (a copy: the inject end mark keeps the proof of its
    instant); not ok makes the effect ``verified: false``. The check, as recorded."""
    effect = dict(f.get("effect") or faults.effect(False, 0.0, None, []))
    c = {"check": HELD_CHECK, "ok": bool(ok), "seen": seen, "t_s": t_s}
    effect["checks"] = [x for x in effect.get("checks") or [] if x.get("check") != HELD_CHECK] + [c]
    if not ok:
        effect["verified"] = False
        effect["time_to_effect_s"] = None
    f["effect"] = effect
    return c


SCOPE = Scope(
    "restart-fails", "restart fails", fault=fail_restart,
    backend_methods=("weights_breaker", "replica_killer", "restore_weights", "replica_states"),
    action_omits=("poll_s",),  # the hold's looks (a test's)
    zoned=True, every_target_affected=True,  # a replica: Serve routes to it from every zone's proxy
    failing_restart=True,  # its replacement's starts are counted (chaos.analysis.restart)
    orphan_check=True,  # the killed replica's engines must die with it (chaos.system.orphan_watch)
    effect_bound_s=10.0,  # the swap is done before the kill; a SIGKILLed process is gone at once
    kube_access=EXEC,  # the swap and its restore (python in the pod), the kill
    # the hold ends between outage_s and max_outage_s (at the replacement's failed start): the latter bounds it
    heal_args=("outage_s", "max_outage_s"), conflict_class="replica-level",
)
