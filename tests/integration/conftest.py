"""Integration fixtures: real Ray clusters, real Redis. Every cluster started here is taken
down by PID at the end, even when a test fails."""

from pathlib import Path

import pytest

from chaos.system import topology
from chaos.backends.local import LocalCluster, procs


HERE = Path(__file__).resolve().parent


LAST = "test_serve_apps.py"  # the vLLM app's tests: deployed once, after every test of the stream target


def pytest_collection_modifyitems(items):
    # the hook sees every collected item of the session (unit tests too): mark only ours
    for item in items:
        if Path(item.path).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
    # the tests that time the harness's own send instants go first, while no cluster runs (an idle Ray
    # cluster and the last test's teardown held a 2-core machine at load 4: p99 1.0-1.3 ms against 1 ms);
    # the shared cluster runs the stream target until the vLLM app's tests deploy vLLM: they go last, so
    # that no test of the stream target after them pays its redeploy (stable: file order otherwise)
    # the stream target's tests with app options of their own (each redeploys it, and the next test redeploys it
    # back) go after the others, just before the vLLM app's: one redeploy each instead of two (~14 s each)
    items.sort(key=lambda item: (item.get_closest_marker("timing") is None, Path(item.path).name == LAST,
                                 item.get_closest_marker("app_options") is not None))


def assert_nothing_left(cluster: LocalCluster, pids_seen: set[int]) -> None:
    """After down: no process of any node session or Redis, no state file, no temp dir."""
    import os
    from pathlib import Path

    from chaos.backends.local import ports

    left = [p for p in pids_seen if procs.alive(p)]
    assert left == [], f"processes still running after down: {[(p, procs.cmdline(p)[:80]) for p in left]}"
    assert not (cluster.cluster_dir / "state.json").exists()
    assert not Path(cluster.state.temp_root).exists()
    busy = [n.ports["gcs"] for n in cluster.state.nodes.values() if n.role == "head" and not ports.port_free(n.ports["gcs"])]
    assert busy == [], f"GCS port still bound: {busy}"
    del os


def all_pids(cluster: LocalCluster) -> set[int]:
    pids = set()
    for n in cluster.state.nodes.values():
        pids |= set(cluster.node_processes(n.name))
    if cluster.state.redis and cluster.state.redis.pid:
        pids.add(cluster.state.redis.pid)
    if cluster.front is not None and cluster.front.pid:
        pids.add(cluster.front.pid)  # the rig's HAProxy
    return pids


@pytest.fixture(scope="session")
def shared_cluster(test_root):
    """One default three-zone cluster for the tests that only read or that restore what they break."""
    cluster = LocalCluster.up(topology.load(), test_root / "shared-cluster", log=print)
    try:
        cluster.wait_healthy(timeout=120)
        yield cluster
    finally:
        cluster.down()
