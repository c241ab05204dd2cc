"""One implementation object per scope: what the plan of a fault of that scope lists (:mod:`.plan`) and how
its effect is proven (:mod:`.proofs`). ``plan`` and ``effect_checks`` look the scope up here, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from chaos.backends.kuberay import plan, proofs
from chaos.backends.kuberay.common import check
from chaos.errors import UsageError


@dataclass(frozen=True)
class Scope:
    """A scope on KubeRay: ``plan(backend, scope, arguments)`` (rows; reads only) and
    ``effect(backend, fault)`` (one look: ``{"check", "ok", "seen"}`` per check)."""

    name: str
    plan: Callable[..., list[dict]]
    effect: Callable[..., list[dict]]


SCOPES: dict[str, Scope] = {s.name: s for s in (
    Scope("replica", plan.replica, proofs.replica),
    Scope("engine", plan.engine, proofs.engine),
    Scope("engine-crash", plan.engine_crash, proofs.engine_crash),
    Scope("node", plan.node, proofs.pods_crashed),
    Scope("head", plan.head, proofs.head),
    Scope("zone", plan.zone_loss, proofs.zone_loss),
    Scope("region", plan.zone_loss, proofs.zone_loss),
    Scope("partition", plan.partition, proofs.partition),
    Scope("redis", plan.redis, proofs.pods_crashed),
    Scope("upgrade", plan.upgrade, proofs.upgrade),
    Scope("drain", plan.drain, proofs.drain),
)}


class ByScope:
    """``plan`` and ``effect_checks``: the scope's own implementation (:data:`SCOPES`)."""

    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]:
        """Every object a fault of ``scope`` with these action ``arguments`` would touch now, and what the
        heal (or the cluster) then does: ``{"kind", "name", "where", "does", "after"}`` per object. Only
        reads (GETs of pods, nodes, the RayService and RayCluster, a ConfigMap; the dashboard for a
        replica's pod): nothing is created, patched, deleted or reviewed. The fault's guards run as they
        would (the blast radius, max_nodes, an autoscaled zone, an upgrade KubeRay would not roll out);
        what they refuse raises, one line."""
        self._follow_active()
        impl = SCOPES.get(scope)
        if impl is None:
            raise UsageError(f"scope {scope}: the KubeRay backend has no fault of it")
        return impl.plan(self, scope, dict(arguments or {}))

    def effect_checks(self, fault: dict) -> list[dict]:
        """One look at whether ``fault`` (as :mod:`chaos.faults` builds it: ``scope``, ``target``,
        ``zones``, and what the backend's call returned) is in effect: a list of
        ``{"check", "ok", "seen"}``. One or two API reads (and an exec where only the inside of a pod
        tells), so that :func:`chaos.faults.prove` can call it until every check is ok:

        - replica: its process gone from its pod (``/proc/PID``; a zombie counts as gone), or, killed
          with its pod, that pod gone, replaced or restarted;
        - node, redis: each pod the kill named gone, replaced (a new uid) or its container restarted;
        - zone, region: no Ready Ray pod of this cluster left in the zones, the nodes the loss took
          out all unschedulable, and none Ready there since the loss began (its watch, which keeps
          looking until the heal and writes what it saw into the fault then: :meth:`restore_zones`);
        - head: the head pod gone, replaced or restarted, or else its GCS not answering;
        - engine: each stopped process in state T (``/proc/PID/stat``);
        - partition: the connection opened across the cut before it carries no more bytes and a new
          one is refused or times out (from the Ray pod inside the zone), and per method the cut in
          place (node-filter: the table, with every zone address, in each helper's node;
          networkpolicy: the policy and the labels on the zone's pods);
        - upgrade: ``serve_config``: every application's deployed config carries the new version and
          is RUNNING; ``cluster``: the RayService's active cluster is a new one, nothing pending;
        - drain: the evicted pod terminating or gone.
        """
        impl = SCOPES.get(fault.get("scope"))
        if impl is None:
            return [check(f"an effect check for scope {fault.get('scope')}", False, "the KubeRay backend has none")]
        return impl.effect(self, fault)
