"""The KubeRay backend's scopes: one implementation per scope it can run (:class:`chaos.backends.base.Implementation`):
what the plan of a fault of that scope lists (:mod:`.plan`), how its effect is proven (:mod:`.proofs`),
what its heal restores (:class:`Restore`) and what a planned one reaches, checked before any fault (:class:`Reach`). What it registers here is what it can run
(:func:`chaos.backends.base.capabilities_of`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.backends import base
from chaos.backends.base import Implementation
from chaos.backends.kuberay import accelerators, device, plan, proofs, ranks, wedge, weights
from chaos.base.errors import UsageError
from chaos.scopes.faults_accelerator import outage_refusal

@dataclass
class Restore(base.Joinable):
    """What healing faults restores on KubeRay (:meth:`KubeRayBackend.heal` joins one per fault); the pods
    the other faults deleted are KubeRay's (or the kubelet's) to bring back."""

    resume: list = field(default_factory=list)  # engines this backend stopped ("pod/pid"), resumed
    release: list = field(default_factory=list)  # wedge, garbage, stall: their engines released where this run's
    cuts: set[str] = field(default_factory=set)  # zones whose partition is healed
    lost: set[str] = field(default_factory=set)  # zones whose nodes the loss cordoned, uncordoned
    watched: list[dict] = field(default_factory=list)  # zone and region losses: their watch's finding written in
    upgrades: list[dict] = field(default_factory=list)  # upgrades with a record: rolled back unless complete
    accelerators: list[dict] = field(default_factory=list)  # accelerator losses: the device plugin let back
    weights: list[dict] = field(default_factory=list)  # restart-fails: the weights put back where still the fault's
    devices: list[dict] = field(default_factory=list)  # device-loss: the marker removed, the cordon lifted, where ours


def heal_engine(self, fault: dict) -> Restore:
    return Restore(resume=list(fault.get("pids") or []))


def heal_engine_wedge(self, fault: dict) -> Restore:
    return Restore(release=[fault])  # at the run's end only


def heal_partition(self, fault: dict) -> Restore:
    return Restore(cuts={fault["target"]})


def heal_zone_loss(self, fault: dict) -> Restore:
    return Restore(lost=set(fault["zones"]), watched=[fault])


def heal_upgrade(self, fault: dict) -> Restore:
    return Restore(upgrades=[fault] if fault.get("record") else [])


def heal_restart_fails(self, fault: dict) -> Restore:
    return Restore(weights=[fault] if (fault.get("weights") or {}).get("pods") else [])


def heal_device_loss(self, fault: dict) -> Restore:
    return Restore(devices=[fault] if (fault.get("device") or {}).get("token") else [])


def heal_accelerator(self, fault: dict) -> Restore:
    return Restore(accelerators=[fault])


def reach_accelerator(self, planned: dict) -> Reach:
    """A planned device-plugin outage: its ``outage_s`` given and within the device manager's grace (refused in
    one line before any fault: :func:`chaos.scopes.faults_accelerator.outage_refusal`)."""
    refusal = outage_refusal((planned.get("arguments") or {}).get("outage_s"), required=bool(planned.get("action")))
    if refusal:
        raise UsageError(refusal)
    return Reach()


@dataclass
class Reach(base.Joinable):
    """What planned faults reach on KubeRay, checked before any fault (:meth:`KubeRayBackend.prepare` joins one
    per planned fault): the zones lost (a zone or region loss; ``every_zone_lost``: one names none) and cut
    off (a partition; none named: every zone), and whether a ``cluster`` upgrade is planned."""

    loses: bool = False
    lost: set[str] = field(default_factory=set)
    every_zone_lost: bool = False
    cuts: bool = False
    cut: set[str] = field(default_factory=set)
    cluster_upgrade: bool = False


def reach_zone_loss(self, planned: dict) -> Reach:
    a = planned.get("arguments") or {}
    named = ([a["zone"]] if planned["scope"] == "zone" and a.get("zone") else
             self.zones_in_region(a["region"]) if planned["scope"] == "region" and a.get("region") else None)
    return Reach(loses=True, lost=set(named or ()), every_zone_lost=not named)


def reach_partition(self, planned: dict) -> Reach:
    zone = (planned.get("arguments") or {}).get("zone")
    return Reach(cuts=True, cut={zone} if zone else set())


def reach_upgrade(self, planned: dict) -> Reach:
    return Reach(cluster_upgrade=(planned.get("arguments") or {}).get("variant") == "cluster")


def plan_overload(self, scope: str, a: dict) -> list[dict]:
    return [{"kind": "load", "name": "the run's own load", "where": "the rig's load harness (or its Job)",
             "does": f"steps above the measured capacity {a.get('at_s', 0)} s after the load's start (load.stages)",
             "after": f"steps back down after {a.get('step_s', 30)} s; nothing in the cluster is touched"}]


IMPLEMENTATIONS = base.implementations(
    Implementation("replica", plan.replica, proofs.replica),
    Implementation("engine", plan.engine, proofs.engine, heal_engine),
    Implementation("engine-crash", plan.engine_crash, proofs.engine_crash),
    Implementation("engine-error", plan.engine_error, proofs.engine_error),  # its tombstone, the replica alive
    # the loop killed, SIGCONT
    Implementation("engine-stutter", plan.engine_stutter, proofs.engine_stutter, heal_engine),
    # its mark (this run's) and the engine alive, not stopped; released at the run's end where still wedged
    Implementation("engine-wedge", wedge.plan_rows, wedge.proof, heal_engine_wedge),
    # their mark (this run's), the engine alive (a stall: stepping on); released at the run's end as a wedge is
    Implementation("engine-garbage", wedge.plan_rows, wedge.proof, heal_engine_wedge),
    Implementation("engine-stall", wedge.plan_rows, wedge.proof, heal_engine_wedge),
    Implementation("engine-slow", wedge.plan_rows, wedge.proof, heal_engine_wedge),  # the fault's heal: its duration
    # a rank's hang mark (this run's), the rank alive, not stopped; released at the run's end as a wedge is
    Implementation("rank-hang", ranks.plan_hang, ranks.proof_hang, heal_engine_wedge),
    Implementation("rank-death", ranks.plan_death, ranks.proof_death),  # the rank gone; Serve replaces the replica
    # the stream target's weights swapped in the zone's pods, the replica killed; put back (outage_s, or the heal)
    Implementation("restart-fails", weights.plan, weights.effect, heal_restart_fails),
    # the pod's device marker (exec), an engine's record of the loss; removed (and the cordon lifted) where still ours
    Implementation("device-loss", device.plan, device.effect, heal_device_loss),
    Implementation("node", plan.node, proofs.pods_crashed),
    Implementation("head", plan.head, proofs.head),
    Implementation("zone", plan.zone_loss, proofs.zone_loss, heal_zone_loss, reach_zone_loss),
    Implementation("region", plan.zone_loss, proofs.zone_loss, heal_zone_loss, reach_zone_loss),
    Implementation("partition", plan.partition, proofs.partition, heal_partition, reach_partition),
    Implementation("redis", plan.redis, proofs.pods_crashed),
    Implementation("upgrade", plan.upgrade, proofs.upgrade, heal_upgrade, reach_upgrade),
    Implementation("drain", plan.drain, proofs.drain),
    # the load's own step above capacity: nothing in the cluster touched, proves itself by the rate sent
    Implementation("overload", plan_overload),
    Implementation("accelerator", accelerators.plan, accelerators.effect, heal_accelerator,  # the plugin paused
                   reach_accelerator),
)
