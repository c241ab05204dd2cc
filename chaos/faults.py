"""One function per failure scope, written once against :class:`chaos.backends.base.Backend`.

A fault's inject marks are written only when the backend call returned (a backend that fails to inject
raises, and the run records no injection). No fault without proof: before its inject end mark, each fault
looks at the system until it sees itself in effect (:func:`prove`, the fault's ``effect``); one not seen in
effect within its bound makes the run's verdict ERROR. Each fault marks the run's timeline through a
:class:`Marker` (inject and heal, start and end) and heals itself after ``outage_s``, or :func:`heal`
(every experiment's rollback) heals what the run injected.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from chaos import records as rec, scopes
from chaos.errors import UsageError
from chaos.placement import PlacementUnknown


_BASE_KEYS = ("fault_id", "scope", "target", "zones")  # a fault dict with more: its backend call returned


def _detail(fault: dict[str, Any]) -> dict[str, Any]:
    """What a fault dict says beyond its identity: the detail its marks carry."""
    return {k: v for k, v in fault.items() if k not in _BASE_KEYS}


def _effect(verified: bool, t: float, bound_s: float | None, checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"verified": verified, "time_to_effect_s": t if verified else None, "bound_s": bound_s, "checks": checks}


class Marker:
    """Puts fault marks on the run's timeline (and anywhere else subscribed to the events)."""

    def __init__(self, events: rec.Events | None = None, log: Callable[[str], None] = lambda m: None):
        self.events = events
        self.log = log
        self.marks: list[rec.FaultMark] = []
        # every fault whose injection was attempted, in order: the run heals exactly these (chaos.run.heal_injected),
        # a call that raised half-way too (it may have acted on part of its target)
        self.attempted: dict[str, dict[str, Any]] = {}
        self.healed: set[str] = set()
        self.started: dict[str, float] = {}  # fault id -> monotonic instant of its injection

    def since_inject(self, fault: dict) -> float:  # seconds since the fault's injection instant
        return time.monotonic() - self.started[fault["fault_id"]]

    def unhealed(self) -> list[dict[str, Any]]:
        """The faults attempted and not yet healed, in the order they were injected."""
        return [f for fid, f in self.attempted.items() if fid not in self.healed]

    def mark(self, event: str, fault_id: str, scope: str, target: str, zones: list[str],
             detail: dict | None = None, t_ns: int | None = None) -> rec.FaultMark:
        m = rec.FaultMark(event=event, fault_id=fault_id, scope=scope, target=target,
                          t_ns=rec.now_ns() if t_ns is None else t_ns, zones=list(zones), detail=detail or {})
        self.marks.append(m)
        if self.events is not None:
            self.events.emit(self.events.fault_marked, m)
        self.log(f"{event} {scope} {target}")
        return m

    @contextmanager
    def inject(self, scope: str, target: str, zones: list[str], detail: dict | None = None) -> Iterator[dict]:
        """Around the call that injects: its instant is taken before the call, but the inject marks
        are written only once the call returned, so a failed injection records nothing."""
        fault_id = f"{scope}-{uuid.uuid4().hex[:8]}"
        out: dict[str, Any] = {"fault_id": fault_id, "scope": scope, "target": target, "zones": zones}
        self.attempted[fault_id] = out
        t_start = rec.now_ns()
        self.started[fault_id] = time.monotonic()

        def marks() -> None:
            self.mark(rec.INJECT_START, fault_id, scope, target, zones, detail, t_ns=t_start)
            self.mark(rec.INJECT_END, fault_id, scope, target, zones, _detail(out))
        try:
            yield out
        except BaseException:
            # interrupted after the backend acted (a stop condition during the proof or a drain's
            # deadline; Ctrl-C): the fault happened, so it is in the records with what is known of it
            if set(out) - set(_BASE_KEYS):
                marks()
            raise
        marks()

    @contextmanager
    def heal(self, fault: dict) -> Iterator[None]:
        self.heal_started(fault)
        yield
        self.heal_ended(fault)

    def heal_started(self, fault: dict) -> None:
        self.mark(rec.HEAL_START, fault["fault_id"], fault["scope"], fault["target"], fault["zones"])

    def heal_ended(self, fault: dict) -> None:
        """The fault healed; the whole detail again: what was learnt after the inject marks (a drain's
        kill at its deadline, a replacement's figures, its proof) is in the summary's detail too."""
        self.healed.add(fault["fault_id"])
        self.mark(rec.HEAL_END, fault["fault_id"], fault["scope"], fault["target"], fault["zones"], _detail(fault))


class _EffectBounds(Mapping[str, float]):
    """Each registered scope's bound on its effect's proof (:attr:`chaos.scopes.Scope.effect_bound_s`,
    said in the scope's module), read from the registry at each use."""

    def __getitem__(self, scope: str) -> float:
        if not scopes.known(scope):
            raise KeyError(scope)
        return scopes.get(scope).effect_bound_s

    def __iter__(self) -> Iterator[str]:
        return iter(scopes.names())

    def __len__(self) -> int:
        return len(scopes.names())


# How long after its injection each scope's effect must be seen on the system (s), per scope: its module
# says it (a SIGKILL's process is gone at once; the GCS marks a lost node DEAD within its health checks).
# Tests replace this mapping to look once.
EFFECT_BOUND_S: Mapping[str, float] = _EffectBounds()


def prove(backend, marker: Marker, fault: dict, bound_s: float | None = None, poll_s: float = 0.25) -> dict:
    """No fault without proof: look at the system (``backend.effect_checks``) until every check says
    the fault is in effect, or ``bound_s`` (default :data:`EFFECT_BOUND_S`) has passed since the
    injection. The evidence is the fault's ``effect``: ``{"verified", "time_to_effect_s", "bound_s",
    "checks": [{"check", "ok", "seen", "t_s"}]}`` (``t_s``: when that check was first seen ok, else
    of its last look). A fault not seen in effect is not an error here: it is recorded, and the
    run's verdict is ERROR ("fault not in effect", :mod:`chaos.verdict`)."""
    bound = EFFECT_BOUND_S.get(fault["scope"], 30.0) if bound_s is None else bound_s
    first_ok: dict[str, float] = {}
    while True:
        try:
            checks = backend.effect_checks(fault)
        except Exception as e:  # noqa: BLE001 - a look that fails proves nothing; looked at again
            checks = [{"check": "the effect checks", "ok": False, "seen": f"{type(e).__name__}: {e}"[:200]}]
        t = round(marker.since_inject(fault), 3)  # when the look ended: what it saw was true by then
        for c in checks:
            if c["ok"]:
                first_ok.setdefault(c["check"], t)
            c["t_s"] = first_ok.get(c["check"], t)
        verified = bool(checks) and all(c["ok"] for c in checks)
        if verified or marker.since_inject(fault) >= bound:
            break
        time.sleep(poll_s)
    fault["effect"] = _effect(verified, t, bound, checks)
    marker.log(f"effect of {fault['scope']} {fault['target']}: " + (f"in effect after {t:.2f} s" if verified else
               "NOT IN EFFECT: " + "; ".join(f"{c['check']}: {c['seen']}" for c in checks if not c["ok"])))
    return fault["effect"]


def _sleep(seconds: float | None) -> None:
    if seconds:
        time.sleep(seconds)


REPLICA_KILL_METHODS = ("sigkill", "actor", "pod")


def kill_replica(backend, marker: Marker, zone: str | None = None, method: str = "sigkill",
                 replica=None, deployment: str | None = None) -> dict:
    """Kill one RUNNING Serve replica; Serve replaces it.

    ``method``: ``sigkill`` (SIGKILL of the replica's worker process), ``actor`` (``ray.kill``
    of its actor through a Ray driver), ``pod`` (KubeRay only: delete the pod hosting it).
    By default a replica of the deployment that holds the model; ``deployment`` (a name
    prefix, e.g. ``OpenAiIngress``) picks another. The mark is taken when everything is
    ready and only the kill itself is left.
    """
    if method not in REPLICA_KILL_METHODS:
        raise UsageError(f"replica kill method must be one of {', '.join(REPLICA_KILL_METHODS)}, got {method!r}")
    r = replica or backend.pick_replica(zone=zone, deployment=deployment)
    do_kill = backend.replica_killer(r, method)
    with marker.inject("replica", r.replica_id, [r.zone] if r.zone else [],
                       {"node": r.node, "pid": r.pid, "deployment": r.deployment, "method": method}) as f:
        f["pids"] = do_kill()
        prove(backend, marker, f)
    return f


def _outage(backend, marker: Marker, fault: dict, outage_s: float | None, restore: Callable[[], None]) -> None:
    """Restore ``outage_s`` after the injection instant (its proof's time included), else leave it to the rollback."""
    if outage_s is None:
        return
    _sleep(max(0.0, outage_s - marker.since_inject(fault)))
    with marker.heal(fault):
        restore()


def kill_node(backend, marker: Marker, node: str | None = None, zone: str | None = None,
              outage_s: float | None = None) -> dict:
    """Kill every process of one worker node; restart it after ``outage_s`` (else in the rollback)."""
    if node is None:
        candidates = backend.nodes_in(zone=zone)
        node = candidates[0]
    z = backend.zone_of(node)
    with marker.inject("node", node, [z] if z else []) as f:
        f["pids"] = len(backend.kill_node(node))
        prove(backend, marker, f)
    _outage(backend, marker, f, outage_s, lambda: backend.start_node(node))
    return f


def kill_head(backend, marker: Marker, outage_s: float | None = 5.0, method: str = "node") -> dict:
    """Kill the head and restart it after ``outage_s``.

    ``method``: ``node`` (SIGKILL of every head process: GCS, dashboard, Serve controller, head
    proxy; on KubeRay, delete the head pod) or ``gcs`` (SIGKILL of ``gcs_server`` alone, in
    place; on KubeRay the head container then exits and the kubelet restarts it in the same pod).
    """
    if method not in ("node", "gcs"):
        raise UsageError(f"head kill method must be node or gcs, got {method!r}")
    with marker.inject("head", "head", [], {"method": method}) as f:
        f["pids"] = len(backend.kill_head(method=method))
        f["method"] = method  # what the proof looks for: the head's processes, or gcs_server alone
        prove(backend, marker, f)
    _outage(backend, marker, f, outage_s, backend.restart_head)
    return f


def kill_zone(backend, marker: Marker, zone: str, outage_s: float | None = None) -> dict:
    """Lose a whole zone at once; bring it back after ``outage_s`` (else in the rollback).

    Local: every node of the zone killed, restarted at the heal. KubeRay: the zone's nodes
    cordoned and its Ray pods deleted (one blast-radius check for all of them), uncordoned at
    the heal.
    """
    nodes = backend.nodes_in(zone=zone)
    with marker.inject("zone", zone, [zone], {"nodes": nodes}) as f:
        f["pids"] = len(backend.kill_zones([zone]))
        prove(backend, marker, f)
    _outage(backend, marker, f, outage_s, lambda: backend.restore_zones([zone]))
    return f


def kill_region(backend, marker: Marker, region: str, outage_s: float | None = None) -> dict:
    """Lose every zone of a region at once (as :func:`kill_zone`, one fault for all of them)."""
    zones = backend.zones_in_region(region)
    if not zones:
        raise UsageError(f"region {region!r} has no zone")
    nodes = backend.nodes_in(region=region)
    with marker.inject("region", region, zones, {"nodes": nodes}) as f:
        f["pids"] = len(backend.kill_zones(zones))
        prove(backend, marker, f)
    _outage(backend, marker, f, outage_s, lambda: backend.restore_zones(zones))
    return f


def kill_redis(backend, marker: Marker, outage_s: float | None = 5.0) -> dict:
    """SIGKILL the GCS's Redis; restart it (same port, same append-only file) after ``outage_s``.

    Ray 2.60's GCS exits a few seconds after its Redis connection breaks, even when Redis is
    back at once: the backend's ``start_redis`` then also restarts the head, as a kubelet
    restarts the head container on KubeRay. Whether the GCS exited is recorded in the fault's
    detail (``gcs_exited``).
    """
    with marker.inject("redis", "redis", []) as f:
        f["pids"] = backend.kill_redis()
        prove(backend, marker, f)

    def restore():
        f["gcs_exited"] = bool(backend.start_redis())

    _outage(backend, marker, f, outage_s, restore)
    return f


def partition_zone(backend, marker: Marker, zone: str, duration_s: float | None = None) -> dict:
    """Cut a zone off the network, heal after ``duration_s``. Local: the links of the zone's
    network namespaces down. KubeRay: a NetworkPolicy or a node-level packet filter
    (``kubernetes.partition_method``)."""
    # the cut's helpers (KubeRay) end by themselves a while after the partition should have
    deadline = duration_s + 300 if duration_s else None
    # a backend that must set the cut up first (KubeRay: helper pods Running, probes open) arms it before the
    # mark, so the mark is the cut and time to impact counts from it (as the actor kill is armed before it)
    armer = getattr(backend, "partition_armer", None)
    cut = armer(zone, deadline_s=deadline) if armer is not None else None
    with marker.inject("partition", zone, [zone]) as f:
        if cut is not None:
            f.update(cut())
        else:
            backend.partition_zone(zone, deadline_s=deadline)
        f["cut"] = True
        prove(backend, marker, f)
    _outage(backend, marker, f, duration_s, lambda: backend.heal_zone(zone))
    return f


def head_outage_second_fault(backend, marker: Marker, outage_s: float = 20.0, second: str = "replica",
                             zone: str | None = None, delay_s: float = 3.0) -> dict:
    """Kill the head, then a replica (or node) while the head is down, then restart the head."""
    victim = backend.pick_replica(zone=zone) if second == "replica" else None  # placement needs the head
    head = kill_head(backend, marker, outage_s=None)
    _sleep(delay_s)
    if second == "replica":
        other = kill_replica(backend, marker, replica=victim)
    elif second == "node":
        other = kill_node(backend, marker, zone=zone)
    else:
        raise UsageError(f"second must be 'replica' or 'node', got {second!r}")
    _sleep(max(0.0, outage_s - delay_s))
    with marker.heal(head):
        backend.restart_head()
    return {"head": head, "second": other}


def _replica_ids(backend) -> set[str]:
    return {r.replica_id for r in backend.replicas()}


def upgrade_app(backend, marker: Marker, variant: str = "code", timeout_s: float = 600.0, poll_s: float = 1.0,
                version: str | None = None) -> dict:
    """A rolling upgrade of the Serve application under load: the planned disruption users cause.

    The inject mark is the instant the new config is applied (``backend.upgrade_app``); the heal
    marks bracket the wait for its completion: every replica RUNNING before the upgrade is gone and
    as many RUNNING replicas as before are new ones (polled every ``poll_s``; the figures themselves
    come from the sampler's records, :mod:`chaos.planes`). A replica RUNNING before it that is still
    there after ``timeout_s`` ends the wait with ``complete: false``. ``variant``: which change
    (``backend.upgrade_variants()``: local ``code``; KubeRay ``serve_config``, ``cluster``).
    """
    if variant not in backend.upgrade_variants():
        raise UsageError(f"upgrade variant must be one of {', '.join(backend.upgrade_variants())}, got {variant!r}")
    before = _replica_ids(backend)
    if not before:
        raise UsageError("no RUNNING replica to upgrade: the app is not serving")
    version = version or uuid.uuid4().hex[:8]
    with marker.inject("upgrade", variant, [], {"replicas_before": sorted(before), "version": version}) as f:
        f.update(backend.upgrade_app(variant, version))
    deadline = time.monotonic() + timeout_s
    with marker.heal(f):
        now: set[str] = before
        while time.monotonic() < deadline:
            try:
                now = _replica_ids(backend)
            except PlacementUnknown:  # a read that got no answer says nothing about the upgrade
                time.sleep(poll_s)
                continue
            if not (now & before) and len(now) >= len(before) and backend.app_status() == "RUNNING":
                break
            time.sleep(poll_s)
        f["replicas_after"] = sorted(now)
        f["complete"] = not (now & before) and len(now) >= len(before)
        # the upgrade's proof is its completion: every replica of before gone, as many new ones RUNNING
        t = round(marker.since_inject(f), 3)
        f["effect"] = _effect(f["complete"], t, timeout_s, [{
            "check": "every replica RUNNING before the upgrade replaced by a new RUNNING one", "ok": f["complete"],
            "t_s": t, "seen": f"{len(now & before)} of {len(before)} old replicas left, {len(now)} RUNNING"}])
    return f


def drain_node(backend, marker: Marker, node: str | None = None, zone: str | None = None,
               deadline_s: float = 30.0, outage_s: float | None = 20.0, poll_s: float = 0.5) -> dict:
    """A graceful drain with a deadline, as a preemption notice or planned maintenance gives, on
    the node :func:`kill_node` kills hard: the node is told it will go (``backend.drain_node``;
    local: Ray's drain-node API, reason PREEMPTION; KubeRay: a pod eviction with its grace period),
    then it goes at the deadline (local: its processes killed, as the preempted machine
    disappears; KubeRay: the eviction's grace period ends), and comes back after ``outage_s``.

    The detail records whether the node's replicas had moved before it left: ``replicas_at_notice``
    (on the node when the notice was given), ``replicas_left_at_deadline`` (still on it when it went)
    and ``moved_before_deadline_s`` (when the last one left, from the notice; None if they did not).
    A placement read that got no answer (:class:`~chaos.placement.PlacementUnknown`) is skipped, never
    taken as an empty node: it neither moves nor leaves a replica, the figures stand on the reads
    that answered (the last one before the deadline's, if that one did not), and
    ``placement_reads_failed`` counts the skipped ones. Unknown at the notice, there is no drain:
    nothing would tell whether its replicas moved.
    """
    from chaos.placement import PlacementUnknown

    if node is None:
        node = backend.nodes_in(zone=zone)[0]
    z = backend.zone_of(node)

    def on_node() -> set[str] | None:
        """The replicas on the node now (any state); None when placement could not be read."""
        try:
            return {r.replica_id for r in backend.replicas(state=None) if r.node == node}
        except PlacementUnknown:
            return None

    at_notice = {r.replica_id for r in backend.replicas(state=None) if r.node == node}  # unknown: raises
    # the injection spans the notice to the node's going: its instant is the notice, and its end mark
    # (written when the node went) carries what happened by the deadline, whether or not a heal follows
    with marker.inject("drain", node, [z] if z else [], {"deadline_s": deadline_s,
                                                         "replicas_at_notice": sorted(at_notice)}) as f:
        f.update(backend.drain_node(node, deadline_s))
        t0 = time.monotonic()
        moved_at = None
        left: set[str] = at_notice
        failed = 0
        while time.monotonic() - t0 < deadline_s:
            now = on_node()
            if now is None:
                failed += 1
            else:
                left = now & at_notice
                if not left and moved_at is None:
                    moved_at = round(time.monotonic() - t0, 3)
            time.sleep(min(poll_s, max(0.0, deadline_s - (time.monotonic() - t0))))
        now = on_node()
        if now is None:
            failed += 1
        else:
            left = now & at_notice
        f["replicas_left_at_deadline"] = sorted(left)
        f["moved_before_deadline_s"] = moved_at if not left else None
        f["placement_reads_failed"] = failed
        f["pids"] = len(backend.kill_node(node))
        f["killed_at_s"] = round(time.monotonic() - t0, 3)
        prove(backend, marker, f, bound_s=deadline_s + EFFECT_BOUND_S["drain"])  # the node gone at its deadline
    marker.log(f"drain deadline: {node} goes ({len(left)} of its {len(at_notice)} replicas still on it)")
    _outage(backend, marker, f, outage_s, lambda: backend.start_node(node))
    return f


def heal(backend, marker: Marker, timeout: float = 240.0) -> dict:
    """Every experiment's rollback: heal what the faults this run injected broke, and nothing else,
    through the backend (:meth:`Backend.heal`, last fault first, idempotent): the faults not healed
    yet, and the consequences of those that healed themselves (a head restarted without GCS fault
    tolerance leaves its workers unknown to the new GCS); then wait for health. Heal marks are
    written for the faults not healed yet. Nothing injected: the cluster is not touched."""
    if not marker.attempted:
        return {"healed": [], "note": "nothing was injected: nothing to heal"}
    pending = list(reversed(marker.unhealed()))
    for f in pending:
        marker.heal_started(f)
    done = backend.heal(list(reversed(marker.attempted.values())), timeout=timeout)
    for f in pending:
        marker.heal_ended(f)
    done["healed"] = [f["fault_id"] for f in pending]
    return done
