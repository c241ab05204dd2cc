"""drain: a graceful drain with a deadline on one worker node (:func:`drain_node`), as a preemption notice
gives; the node goes at its deadline and comes back after the outage."""

from __future__ import annotations

import time

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import DRAIN
from chaos.system.placement import PlacementUnknown
from chaos.base.scope_registry import Scope


def drain_node(backend, marker: faults.Marker, node: str | None = None, zone: str | None = None,
               deadline_s: float = 30.0, outage_s: float | None = 20.0, poll_s: float = 0.5) -> dict:
    """A graceful drain with a deadline, as a preemption notice or planned maintenance gives, on
    the node :func:`chaos.scopes.node.kill_node` kills hard: the node is told it will go (``backend.drain_node``;
    local: Ray's drain-node API, reason PREEMPTION; KubeRay: a pod eviction with its grace period),
    then it goes at the deadline (local: its processes killed, as the preempted machine
    disappears; KubeRay: the eviction's grace period ends), and comes back after ``outage_s``.

    The detail records whether the node's replicas had moved before it left: ``replicas_at_notice``
    (on the node when the notice was given), ``replicas_left_at_deadline`` (still on it when it went)
    and ``moved_before_deadline_s`` (when the last one left, from the notice; None if they did not).
    A placement read that got no answer (:class:`~chaos.system.placement.PlacementUnknown`) is skipped, never
    taken as an empty node: it neither moves nor leaves a replica, the figures stand on the reads
    that answered (the last one before the deadline's, if that one did not), and
    ``placement_reads_failed`` counts the skipped ones. Unknown at the notice, there is no drain:
    nothing would tell whether its replicas moved.
    """
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
    with marker.inject(SCOPE.name, node, [z] if z else [], {"deadline_s": deadline_s,
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
        # the node gone at its deadline
        faults.prove(backend, marker, f, bound_s=deadline_s + faults.EFFECT_BOUND_S[SCOPE.name])
    marker.log(f"drain deadline: {node} goes ({len(left)} of its {len(at_notice)} replicas still on it)")
    faults.outage(backend, marker, f, outage_s, lambda: backend.start_node(node))
    return f




SCOPE = Scope(
    "drain", "node drain", fault=drain_node, backend_methods=("drain_node", "kill_node", "start_node"),
    action_omits=("poll_s",),  # a test's polling
    zoned=True, routed=True, replacing=True,
    effect_bound_s=30.0,  # after its deadline: the node gone, as a node loss
    kube_access=DRAIN,
    # the node goes at its deadline and comes back outage_s after the notice, not before it went
    heal_args=("outage_s", "deadline_s"), conflict_class="node-drain",
)
