"""The KubeRay backend's scopes: one implementation per scope it can run (:class:`chaos.backends.base.Implementation`):
what the plan of a fault of that scope lists (:mod:`.plan`) and how its effect is proven (:mod:`.proofs`).
What it registers here is what it can run (:func:`chaos.backends.base.capabilities_of`)."""

from __future__ import annotations

from chaos.backends import base
from chaos.backends.base import Implementation
from chaos.backends.kuberay import plan, proofs

IMPLEMENTATIONS = base.implementations(
    Implementation("replica", plan.replica, proofs.replica),
    Implementation("engine", plan.engine, proofs.engine),
    Implementation("engine-crash", plan.engine_crash, proofs.engine_crash),
    Implementation("node", plan.node, proofs.pods_crashed),
    Implementation("head", plan.head, proofs.head),
    Implementation("zone", plan.zone_loss, proofs.zone_loss),
    Implementation("region", plan.zone_loss, proofs.zone_loss),
    Implementation("partition", plan.partition, proofs.partition),
    Implementation("redis", plan.redis, proofs.pods_crashed),
    Implementation("upgrade", plan.upgrade, proofs.upgrade),
    Implementation("drain", plan.drain, proofs.drain),
)


class ByScope(base.ByScope):
    """``plan`` and ``effect_checks``: the scope's own implementation (:data:`IMPLEMENTATIONS`)."""

    implementations = IMPLEMENTATIONS

    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]:
        """Every object a fault of ``scope`` with these action ``arguments`` would touch now, and what the
        heal (or the cluster) then does: ``{"kind", "name", "where", "does", "after"}`` per object. Only
        reads (GETs of pods, nodes, the RayService and RayCluster, a ConfigMap; the dashboard for a
        replica's pod): nothing is created, patched, deleted or reviewed. The fault's guards run as they
        would (the blast radius, max_nodes, an autoscaled zone, an upgrade KubeRay would not roll out);
        what they refuse raises, one line."""
        self._follow_active()
        return super().plan(scope, arguments)

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
        return super().effect_checks(fault)
