"""The local backend's scopes: one implementation per scope it can run (:class:`chaos.backends.base.Implementation`):
what a fault of it would touch (``availproof run --plan``: every process, node and link by name; reads only:
the state file, /proc, the dashboard for a replica's placement; nothing signalled or changed), how its
effect is proven (:mod:`chaos.backends.local.effect`) and what its heal restores (:class:`Restore`). What it registers here is what it can run
(:func:`chaos.backends.base.capabilities_of`). Each function takes the backend first, as its methods do."""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.backends import base, engine_faults
from chaos.backends.base import Implementation
from chaos.backends.local import device, effect, engines, ranks, throttle, weights
from chaos.backends.local.cluster import HEAD
from chaos.base.errors import UsageError

REPLICA_KILLS = {"sigkill": "SIGKILL of replica {r.replica_id}'s worker process",
                 "actor": "ray.kill of actor {r.actor_name} (a driver connected before the injection)"}


def _node_row(b, name: str, does: str, after: str) -> dict:
    n = b.cluster.node(name)
    pids = b.cluster.node_processes(name)
    return {"kind": "node", "name": name, "where": f"zone {n.zone or '-'}, {n.ip}, session {n.sid}",
            "does": f"{does} ({len(pids)} process(es) now)", "after": after}


def _process_rows(pids, where: str, does: str, after: str) -> list[dict]:
    return [{"kind": "process", "name": str(p), "where": where, "does": does, "after": after} for p in pids]


def _replica_where(r) -> str:
    return f"node {r.node} (zone {r.zone})"


# ---------------------------------------------------------------- plans
def plan_replica(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"), deployment=a.get("deployment"))
    method = a.get("method", "sigkill")
    if method not in REPLICA_KILLS:
        raise UsageError(f"replica kill method {a.get('method')!r} is not available on the local backend "
                         f"(sigkill, actor)")
    return _process_rows([r.pid], _replica_where(r), REPLICA_KILLS[method].format(r=r), "Serve replaces the replica")


def plan_engine(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    return _process_rows(b.engine_pids(r), _replica_where(r), f"SIGSTOP (the replica's process {r.pid} runs on)",
                         "SIGCONT at the heal")


def plan_engine_crash(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    return _process_rows(b.engine_pids(r, "crash"), _replica_where(r), "SIGKILL (the replica lives)",
                         "Serve's health check replaces the replica")


def plan_engine_error(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    b.error_engine(r)  # everything but the signal: the engine found, its hook checked (reads /proc only)
    return _process_rows(b.engine_pids(r), _replica_where(r), "SIGUSR1 to the app's engine-fault hook: the engine "
                         f"fails from inside its step loop (the replica's process {r.pid} lives)",
                         "Serve's health check replaces the replica")


def plan_engine_wedge(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    pids = engines.hooked(b, r, "wedge", "wedge")  # everything but the signal: the engine found, its hook checked
    how = "spinning at 100 % of a core" if a.get("spin") else "blocked"
    return _process_rows(pids, _replica_where(r), f"a request to wedge, then SIGUSR1 to the app's engine-fault hook: "
                         f"the engine's step stays {how}, its process and threads alive (the replica's process "
                         f"{r.pid} too)", "nothing but a detector ends it; the run's end releases it if still wedged")


def plan_held(b, scope: str, a: dict) -> list[dict]:
    """engine-garbage, engine-stall, engine-slow: the engine found and its hook checked, as the fault would (reads
    /proc only)."""
    kind = engine_faults.marked_fault(scope)
    r = b.pick_replica(zone=a.get("zone"))
    pids = engines.hooked(b, r, f"hold {kind}", f"hold {kind}")
    does = {"garbage": "its tokens wrong from its next step on, at full speed",
            "stall": "it admits no new request from its next step on, its running ones go on",
            "slow": f"every step {a.get('factor', 4.0):g} times as long from its next step on, evenly"}[kind]
    heal = (f"the rig removes the slow mark after {a.get('duration_s', 20.0):g} s if still this run's" if kind == "slow"
            else "nothing but a detector ends it; the run's end releases it if still this run's")
    return _process_rows(pids, _replica_where(r), f"a request to hold {kind}, then SIGUSR1 to the app's engine-fault "
                         f"hook: {does} (the replica's process {r.pid} lives)", heal)


def plan_rank_hang(b, scope: str, a: dict) -> list[dict]:
    """rank-hang: the rank found and its hook checked, as the fault would (reads /proc only)."""
    r = b.pick_replica(zone=a.get("zone"))
    b.hang_rank(r, int(a.get("rank", 1)), bool(a.get("spin")))  # everything but the signal: nothing sent
    pids = ranks.rank_pids(b, r, int(a.get("rank", 1)), "hang")
    return _process_rows(pids, _replica_where(r), f"a request to wedge, then SIGUSR1 to rank {a.get('rank', 1)}'s "
                         "engine-fault hook: its step stays blocked and the engine's collective with it, the processes "
                         f"alive (the replica's {r.pid} too)", "nothing but a detector ends it; the run's end releases "
                         "it if still this run's")


def plan_rank_death(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    return _process_rows(ranks.rank_pids(b, r, int(a.get("rank", 1)), "kill"), _replica_where(r),
                         f"SIGKILL of rank {a.get('rank', 1)} (the engine and the replica's process {r.pid} live)",
                         "the engine notices the dead rank and exits; Serve's health check replaces the replica")


def plan_engine_stutter(b, scope: str, a: dict) -> list[dict]:
    t = engine_faults.Throttle(**{k: a[k] for k in ("factor", "period_s", "duration_s") if k in a})
    r = b.pick_replica(zone=a.get("zone"))
    return _process_rows(b.engine_pids(r, "slow down"), _replica_where(r), f"a SIGSTOP/SIGCONT duty cycle, {t.text()} "
                         f"(a thread of the rig's, ending by itself {engine_faults.SELF_STOP_MARGIN_S:g} s later)",
                         "the duty cycle stopped and SIGCONT at the heal")


def plan_node(b, scope: str, a: dict) -> list[dict]:
    node = a.get("node") or b.nodes_in(zone=a.get("zone"))[0]
    return [_node_row(b, node, "SIGKILL of every process of its session", "restarted (ray start)")]


def plan_drain(b, scope: str, a: dict) -> list[dict]:
    node = a.get("node") or b.nodes_in(zone=a.get("zone"))[0]
    return [_node_row(b, node, f"Ray's drain notice (PREEMPTION, deadline {a.get('deadline_s', 30.0)} s), then "
                               f"SIGKILL of every process of its session", "restarted (ray start)")]


def plan_zone_loss(b, scope: str, a: dict) -> list[dict]:
    zones = [a["zone"]] if scope == "zone" else b.zones_in_region(a.get("region", ""))
    return [_node_row(b, n, "SIGKILL of every process of its session", "restarted at the heal")
            for z in zones for n in b.nodes_in(zone=z)]


def plan_head(b, scope: str, a: dict) -> list[dict]:
    gcs = a.get("method", "node") == "gcs"
    return [_node_row(b, HEAD, "SIGKILL of gcs_server" if gcs else "SIGKILL of every process of its session",
                      "restarted")]


def plan_redis(b, scope: str, a: dict) -> list[dict]:
    r = b.cluster.state.redis
    return [{"kind": "process", "name": str(r.pid if r else "-"),
             "where": f"redis-server {r.host}:{r.port}" if r else "no Redis", "does": "SIGKILL",
             "after": "restarted on the same port and append-only file"}]


def plan_partition(b, scope: str, a: dict) -> list[dict]:
    zone, s = a["zone"], b.cluster.state
    if not s.netns_mode:
        raise UsageError("a zone partition needs per-zone network namespaces; this cluster runs in "
                         "loopback-only mode (bring it up with `availproof cluster up --netns`, as root)")
    return [{"kind": "link", "name": s.links.get(zone, "?"), "where": f"zone {zone} -> bridge {s.bridge}",
             "does": "set down (packets across the cut dropped)", "after": "set up at the heal"},
            *[_node_row(b, n, "cut off with its zone", "reachable again") for n in b.nodes_in(zone=zone)]]


def plan_upgrade(b, scope: str, a: dict) -> list[dict]:
    return [{"kind": "Serve app", "name": "the deployed application", "where": b.dashboard_url,
             "does": "config applied again with a new AVAILPROOF_APP_VERSION (a new code version)",
             "after": "Serve replaces every replica"}]


def plan_overload(b, scope: str, a: dict) -> list[dict]:
    return [{"kind": "load", "name": "the run's own load", "where": "the rig's load harness",
             "does": f"steps above the measured capacity {a.get('at_s', 0)} s after the load's start (load.stages)",
             "after": f"steps back down after {a.get('step_s', 30)} s; nothing on the cluster is touched"}]


# ---------------------------------------------------------------- proofs
def _pids(fault: dict) -> list:
    return list(fault.get("pids") or [])


def effect_replica(b, fault: dict) -> list[dict]:
    return [effect.pids_gone(_pids(fault), "the replica's worker process")]


def effect_engine(b, fault: dict) -> list[dict]:
    return [effect.pids_stopped(_pids(fault)), effect.replica_runs(fault.get("pid"))]


def effect_engine_crash(b, fault: dict) -> list[dict]:
    return [effect.pids_gone(_pids(fault), "the engine process"), effect.replica_lives(fault.get("pid"))]


def effect_engine_error(b, fault: dict) -> list[dict]:
    return [effect.tombstones(_pids(fault)), effect.replica_lives(fault.get("pid"))]


def effect_engine_wedge(b, fault: dict) -> list[dict]:
    return engines.wedge_checks(fault, b.run_id) + [effect.replica_runs(fault.get("pid"))]


def effect_held(b, fault: dict) -> list[dict]:
    """engine-garbage, engine-stall, engine-slow: each engine's mark (this run's), alive and not stopped (a stall,
    slow: stepping on; slow: its steps slower by at least half the factor)."""
    return (engines.held_checks(fault, engine_faults.marked_fault(fault.get("scope")), b.run_id)
            + [effect.replica_runs(fault.get("pid"))])


def effect_rank_hang(b, fault: dict) -> list[dict]:
    """The rank's hang mark (its wedge mark, this run's), the rank alive and not stopped; its engine stopped stepping (a
    step under way that does not end: :mod:`chaos.backends.rank_hang`); the replica's process alive."""
    return (engines.wedge_checks(fault, b.run_id) + [ranks.stopped_check(fault)]
            + [effect.replica_runs(fault.get("pid"))])


def effect_rank_death(b, fault: dict) -> list[dict]:
    return [effect.pids_gone(_pids(fault), "the rank process"), effect.replica_lives(fault.get("pid"))]


def effect_engine_stutter(b, fault: dict) -> list[dict]:
    return throttle.sample(_pids(fault), fault.get("pid"), engine_faults.Throttle.of(fault))


# a kill that signalled nothing (its victim already down) proves nothing, whatever the state says
def effect_node(b, fault: dict) -> list[dict]:
    return [effect.signalled(fault)] + effect.nodes_down(b.cluster, [fault["target"]])


def effect_zone_loss(b, fault: dict) -> list[dict]:
    nodes = [n for z in fault["zones"] for n in b.nodes_in(zone=z)]
    return [effect.signalled(fault)] + effect.nodes_down(b.cluster, nodes)


def effect_head(b, fault: dict) -> list[dict]:
    return [effect.signalled(fault)] + effect.head_down(b.cluster, HEAD, gcs_only=fault.get("method") == "gcs")


def effect_redis(b, fault: dict) -> list[dict]:
    return [effect.signalled(fault)] + effect.redis_down(b.cluster)


def effect_partition(b, fault: dict) -> list[dict]:
    probe = b.cut_probes.get(fault["target"])
    if probe is None:
        return [effect.check(f"a connection across the cut of {fault['target']}", False,
                             "none was opened before the cut")]
    return probe.checks()


# ---------------------------------------------------------------- heals
@dataclass
class Restore(base.Joinable):
    """What healing faults restores on the local backend (:meth:`LocalBackend.heal` joins one per fault)."""

    nodes: set[str] = field(default_factory=set)  # restarted where down
    resume: list = field(default_factory=list)  # stopped processes resumed (SIGCONT)
    partitions: set[str] = field(default_factory=set)  # zones whose cut is healed
    redis: bool = False  # Redis restarted where down
    head: bool = False  # the head restarted where down, and every worker checked after (the control plane went)
    tombstones: list = field(default_factory=list)  # engines whose engine-error tombstone is removed (left in /tmp)
    release: list = field(default_factory=list)  # wedge, garbage, stall: their engines released where this run's
    weights: list = field(default_factory=list)  # restart-fails: the weights put back where still the fault's
    devices: list = field(default_factory=list)  # device-loss: the marker removed, the cordon undone, where still ours


def heal_engine(b, fault: dict) -> Restore:
    return Restore(resume=_pids(fault))


def heal_engine_error(b, fault: dict) -> Restore:
    return Restore(tombstones=_pids(fault))  # Serve replaced the replica: only the engine's record is left


def heal_engine_wedge(b, fault: dict) -> Restore:
    return Restore(release=[fault])  # at the run's end only: a detector (or nothing) ended it before


def heal_restart_fails(b, fault: dict) -> Restore:
    return Restore(weights=[fault] if (fault.get("weights") or {}).get("path") else [])


def heal_device_loss(b, fault: dict) -> Restore:
    return Restore(devices=[fault] if (fault.get("device") or {}).get("token") else [])


def heal_node(b, fault: dict) -> Restore:
    return Restore(nodes={fault["target"]})


def heal_zone_loss(b, fault: dict) -> Restore:
    return Restore(nodes={n for z in fault["zones"] for n in b.nodes_in(zone=z)})


def heal_head(b, fault: dict) -> Restore:
    return Restore(head=True)


def heal_redis(b, fault: dict) -> Restore:
    return Restore(redis=True, head=True)  # the GCS may have exited with its Redis


def heal_partition(b, fault: dict) -> Restore:
    # the zone's nodes restarted where down: the GCS may declare them dead after the cut healed (supervisor.py)
    return Restore(partitions={fault["target"]}, nodes=set(b.nodes_in(zone=fault["target"])))


IMPLEMENTATIONS = base.implementations(
    Implementation("replica", plan_replica, effect_replica),  # Serve replaces the replica: nothing to restore
    Implementation("engine", plan_engine, effect_engine, heal_engine),
    Implementation("engine-crash", plan_engine_crash, effect_engine_crash),  # Serve replaces the replica
    # the engine's tombstone, the replica alive; Serve replaces the replica; the heal removes the tombstone
    Implementation("engine-error", plan_engine_error, effect_engine_error, heal_engine_error),
    # the cycle stopped, SIGCONT
    Implementation("engine-stutter", plan_engine_stutter, effect_engine_stutter, heal_engine),
    # its mark (this run's) and the engine alive, not stopped; released at the run's end where still wedged
    Implementation("engine-wedge", plan_engine_wedge, effect_engine_wedge, heal_engine_wedge),
    # their mark (this run's), the engine alive (a stall: stepping on); released at the run's end as a wedge is
    Implementation("engine-garbage", plan_held, effect_held, heal_engine_wedge),
    Implementation("engine-stall", plan_held, effect_held, heal_engine_wedge),
    # its mark (this run's), stepping slower; the fault's own heal removes the mark at its duration (run's end: too)
    Implementation("engine-slow", plan_held, effect_held, heal_engine_wedge),
    # a rank's hang mark (this run's), the rank alive, not stopped, its engine's step under way for good; released at
    # the run's end as a wedge is, once its mark and the engine's steps were looked at again (ranks.hold_to_heal)
    Implementation("rank-hang", plan_rank_hang, effect_rank_hang, heal_engine_wedge),
    Implementation("rank-death", plan_rank_death, effect_rank_death),  # the rank gone; Serve replaces the replica
    # the weights swapped for a truncated copy, the replica killed; the original put back (outage_s, or the heal)
    Implementation("restart-fails", weights.plan_rows, weights.checks, heal_restart_fails),
    # the node's device marker written (keyed by its name), an engine's record of the loss; removed where still ours
    Implementation("device-loss", device.plan_rows, device.checks, heal_device_loss),
    Implementation("node", plan_node, effect_node, heal_node),
    Implementation("head", plan_head, effect_head, heal_head),
    Implementation("zone", plan_zone_loss, effect_zone_loss, heal_zone_loss),
    Implementation("region", plan_zone_loss, effect_zone_loss, heal_zone_loss),
    Implementation("partition", plan_partition, effect_partition, heal_partition),
    Implementation("redis", plan_redis, effect_redis, heal_redis),
    Implementation("overload", plan_overload),  # the load's step: proves itself by the rate sent (chaos.scopes.overload)
    Implementation("upgrade", plan_upgrade),  # proves itself at its end (chaos.scopes.upgrade.upgrade_app); Serve replaces
    Implementation("drain", plan_drain, effect_node, heal_node),  # at its deadline the node is gone, as a node loss
)
