"""The local cluster for real: up, status, head SIGKILL and restart on the same Redis, down. (A Redis kill and restart
keeping the GCS state is checked on the redis-loss experiment's run: tests/integration/test_experiments.py.)"""

import io
import time
from pathlib import Path

import ray

from chaos.commands import cli
from chaos.system import topology
from chaos.commands.cluster import print_status
from chaos.system.frontdoor import FrontSettings
from chaos.backends.local import LocalCluster, procs

from .conftest import all_pids, assert_nothing_left


def test_head_restart_keeps_workers_and_detached_actor(test_root):
    cluster_dir = test_root / "lifecycle"
    topo = topology.load()
    cluster = LocalCluster.up(topo, cluster_dir, log=print)
    seen: set[int] = set()
    try:
        cluster.wait_healthy(timeout=120)
        seen |= all_pids(cluster)

        # status shows every domain, from the CLI too
        statuses = {s.name: s for s in cluster.status()}
        assert {s.zone for s in statuses.values() if s.role == "worker"} == set(topo.zones)
        assert all(s.gcs_state == "ALIVE" and s.processes > 0 for s in statuses.values())
        out = io.StringIO()
        print_status(cluster, replicas=False, out=out)
        for n in topo.nodes:
            assert f"{n.name}" in out.getvalue() and n.zone in out.getvalue()
        assert "redis state=UP" in out.getvalue() and "aof=on" in out.getvalue()

        # a detached actor pinned to zone-b, created before the kill
        ray.init(address=cluster.state.gcs_address, log_to_driver=False)

        @ray.remote(num_cpus=0.1, label_selector={"zone": "zone-b"})
        class Counter:
            def __init__(self):
                self.n = 0

            def inc(self):
                self.n += 1
                return self.n

            def pid(self):
                import os
                return os.getpid()

        c = Counter.options(name="counter", namespace="lifecycle", lifetime="detached").remote()
        assert ray.get(c.inc.remote(), timeout=60) == 1
        actor_pid = ray.get(c.pid.remote(), timeout=30)
        assert actor_pid in cluster.node_processes("worker-b")
        worker_sessions = {n.name: n.sid for n in cluster.state.workers()}
        ray.shutdown()

        # SIGKILL the head: every process of its session goes
        head_pids = cluster.kill_head()
        assert head_pids and not any(procs.alive(p) for p in head_pids)
        assert cluster.gcs_nodes(timeout=1) is None
        t0 = time.monotonic()
        cluster.restart_head()
        cluster.wait_healthy(timeout=120)
        print(f"head back and all nodes ALIVE {time.monotonic() - t0:.1f} s after restart began")
        seen |= all_pids(cluster)

        # the workers are the same processes, still registered; the actor kept its state
        assert {n.name: n.sid for n in cluster.state.workers()} == worker_sessions
        assert all(s.gcs_state == "ALIVE" for s in cluster.status())
        ray.init(address=cluster.state.gcs_address, log_to_driver=False)
        again = ray.get_actor("counter", namespace="lifecycle")
        assert ray.get(again.inc.remote(), timeout=60) == 2
        assert ray.get(again.pid.remote(), timeout=30) == actor_pid
        ray.shutdown()

        # `up` on a running cluster is a no-op
        same = LocalCluster.up(topo, cluster_dir)
        assert same.state.cluster_id == cluster.state.cluster_id

        # the rig's front door is part of the cluster's state: `down` removes it by its PID
        front = cluster.start_front("lb", FrontSettings())
        assert procs.alive(front.pid) and LocalCluster.attach(cluster_dir).front.pid == front.pid
        front_dir = Path(front.dir)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        seen |= all_pids(cluster)
        cluster.down()
    assert_nothing_left(cluster, seen)
    assert not procs.alive(front.pid) and not front_dir.exists()
    cluster.down()  # idempotent
    assert cli.main(["cluster", "down", "--cluster-dir", str(cluster_dir)]) == 0


def gcs_cluster_id(cluster) -> str:
    """The cluster id the running GCS reports through the dashboard (one per GCS FT namespace)."""
    import json
    import urllib.request
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{cluster.state.dashboard_url}/api/version", timeout=5) as resp:
                return json.loads(resp.read())["session_name"]
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
