"""The other ways to break a replica and the head, on the real shared cluster.

- replica kill through Ray (``ray.kill`` of the replica's actor from a driver in a child
  process): the replica's process ends, Serve starts a replacement in the same zone;
- the head's ``gcs_server`` killed alone: only that process ends (the head's raylet stays up
  until the restart); the restart brings the GCS back from Redis with every worker registered.
"""

import time

from chaos.scopes import faults
from chaos.system import placement
from chaos.backends.local import procs
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.cluster import HEAD
from chaos.core.provision import redeploy_if_gone
from chaos.scopes.faults import Marker
from chaos.scopes.head import kill_head
from chaos.scopes.replica import kill_replica


def _wait(fn, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.5)
    return fn()


def test_replica_kill_through_ray_actor(shared_cluster):
    backend = LocalBackend(shared_cluster)
    redeploy_if_gone(backend, app="stream")
    victim = backend.pick_replica(zone="zone-a")
    marker = Marker()
    f = kill_replica(backend, marker, method="actor", replica=victim)
    assert [m.event for m in marker.marks] == ["inject_start", "inject_end"]
    assert f["pids"] == [victim.pid]
    assert _wait(lambda: not procs.alive(victim.pid), 20), "ray.kill did not end the replica's process"

    def replaced():
        rows = [r for r in backend.replicas() if r.deployment == victim.deployment and r.zone == "zone-a"]
        return rows and all(r.replica_id != victim.replica_id for r in rows)

    assert _wait(replaced, 90), [(r.replica_id, r.state, r.zone) for r in backend.replicas(state=None)]


def test_gcs_kill_in_place_then_restart(shared_cluster):
    backend = LocalBackend(shared_cluster)
    redeploy_if_gone(backend, app="stream")
    head_before = set(shared_cluster.node_processes(HEAD))
    raylet = next(p for p in head_before if "raylet/raylet" in procs.cmdline(p))
    marker = Marker()
    f = kill_head(backend, marker, outage_s=None, method="gcs")
    assert f["pids"] == 1
    assert marker.marks[0].detail == {"method": "gcs"}
    assert procs.alive(raylet), "only gcs_server was to be killed"
    assert not shared_cluster.core_alive(HEAD)
    backend.restart_head()
    backend.wait_healthy(timeout=180)
    assert all(s.healthy for s in shared_cluster.status())
    assert _wait(lambda: placement.zones_of(backend.replicas()).keys() >= set(shared_cluster.topology.zones), 120)
