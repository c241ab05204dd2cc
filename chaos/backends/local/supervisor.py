"""A node's supervisor after a partition heals: what restarts a Ray node on a real platform, on the local cluster.

When a zone's cut heals, the GCS may still declare its nodes dead: a health check that had failed during the
cut, then one more on the connection the cut left broken (``Connection reset by peer``), reaches Ray's failure
threshold seconds *after* the heal, and each raylet, told so when it reconnects, exits ("GCS consider this node to
be dead"). Seen on this machine on 2026-12-05 (zone-partition: the cut healed at +20.0 s, the third failed check
at +27.9 s, the raylet gone at +44.3 s); other runs of the same experiment kept their nodes. On KubeRay the
raylet's exit ends the Ray container and the kubelet restarts it, so the node registers again; the local cluster
has no kubelet, and without one the zone would stay empty for good, a failure of the rig's, not of Ray's.

:class:`NodeSupervisor` is that kubelet for the zone's nodes, for a while after the heal (``for_s``): a node whose
raylet is gone while the GCS holds it DEAD (or no longer lists it) is restarted (its leftover processes killed,
then ``ray start`` again), and said in the log. It never touches a node that runs, nor one the GCS still holds
ALIVE, and it stops at its deadline, at :meth:`stop` (the backend's heal, before any other restart), or once the
head is down (the cluster is going away)."""

from __future__ import annotations

import threading
import time
from typing import Callable

DEAD = ("DEAD", "ABSENT")


class NodeSupervisor(threading.Thread):
    """Restarts ``nodes`` of ``cluster`` that died after a partition healed, for ``for_s`` seconds."""

    def __init__(self, cluster, nodes: list[str], for_s: float = 60.0, poll_s: float = 1.0,
                 log: Callable[[str], None] | None = None):
        super().__init__(name=f"node-supervisor-{'-'.join(nodes)}", daemon=True)
        self.cluster, self.nodes, self.poll_s = cluster, list(nodes), poll_s
        self.deadline = time.monotonic() + for_s
        self.log = log or cluster.log
        self.restarted: list[str] = []
        self._stop_event = threading.Event()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    def run(self) -> None:
        while not self._stop_event.is_set() and time.monotonic() < self.deadline:
            try:
                if not self.step():
                    return
            except Exception as e:  # noqa: BLE001 - a look that fails is tried again at the next poll
                self.log(f"node supervisor: {type(e).__name__}: {e}"[:200])
            self._stop_event.wait(self.poll_s)

    def step(self) -> bool:
        """One look: restart each node that died (raylet gone, the GCS holding it dead). False once the head is down
        (stop supervising: the cluster is going away or its own fault is being handled)."""
        if not self.cluster.running():
            return False
        down = [n for n in self.nodes if not self.cluster.core_alive(n)]
        if not down:
            return True
        states = {s.name: s.gcs_state for s in self.cluster.status()}
        dead = [n for n in down if states.get(n) in DEAD]
        for name in dead:
            if self._stop_event.is_set():
                break
            self.log(f"{name}: its raylet exited after the partition healed (the GCS holds it "
                     f"{states.get(name)}); restarted, as KubeRay's kubelet restarts the Ray container")
            self.cluster.kill_node(name)
            self.cluster.start_nodes([name])
            self.restarted.append(name)
        return True
