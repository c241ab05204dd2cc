import json
import subprocess
import time

import pytest

from chaos.system import topology
from chaos.backends.local import ports, procs
from chaos.backends.local import state as st
from chaos.base.errors import UsageError


def sample_state():
    s = st.ClusterState(cluster_id="ap123456", topology=topology.load().to_doc(), topology_source="default.yaml",
                        gcs_fault_tolerance=True, temp_root="/tmp/ap123456", base_port=20000)
    s.nodes["head"] = st.NodeState(name="head", role="head", ip="127.9.9.2", ports=ports.node_ports(20000, 1),
                                   temp_dir="/tmp/ap123456/head", labels={"node": "head"}, sid=4242)
    s.nodes["w"] = st.NodeState(name="w", role="worker", ip="127.9.9.3", ports=ports.node_ports(20000, 2),
                                temp_dir="/tmp/ap123456/w", labels={"zone": "z"}, zone="z", region="r")
    s.redis = st.RedisState(host="127.9.9.1", port=20010, dir="/tmp/x", pid=99)
    return s


def test_state_round_trip(tmp_path):
    s = sample_state()
    st.save(s, tmp_path)
    back = st.load(tmp_path)
    assert back == s
    assert back.gcs_address == "127.9.9.2:20110"
    assert [n.name for n in back.workers()] == ["w"]
    assert not list(tmp_path.glob(".state-*")), "no temp file left behind"


def test_state_missing_damaged_and_wrong_version(tmp_path):
    assert st.load(tmp_path) is None
    (tmp_path / st.FILENAME).write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        st.load(tmp_path)
    data = sample_state().to_json()
    data["version"] = 99
    (tmp_path / st.FILENAME).write_text(json.dumps(data))
    with pytest.raises(UsageError, match="version 99"):
        st.load(tmp_path)
    data["version"] = st.VERSION
    del data["nodes"]["head"]["ip"]
    (tmp_path / st.FILENAME).write_text(json.dumps(data))
    with pytest.raises(UsageError, match="damaged"):
        st.load(tmp_path)
    st.remove(tmp_path)
    st.remove(tmp_path)  # idempotent
    assert st.load(tmp_path) is None


def test_port_blocks_do_not_overlap():
    a, b = ports.node_ports(20000, 1), ports.node_ports(20000, 2)
    assert not set(a.values()) & set(range(b["node_manager"], b["max_worker"] + 1))
    assert a["min_worker"] < a["max_worker"] < b["node_manager"]
    base = ports.find_blocks(3)
    assert ports.LOW <= base and base + 300 <= ports.HIGH
    assert all(ports.port_free(p) for p in range(base, base + 300))


def test_kill_session_kills_whole_session_and_nothing_else():
    # A session leader with two children, like `ray start` and its daemons.
    leader = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while len(procs.session_members(leader.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        members = procs.session_members(leader.pid)
        assert len(members) == 3
        killed = procs.kill_session(leader.pid)
        assert set(members) <= set(killed)
        assert procs.session_members(leader.pid) == []
        assert procs.alive(bystander.pid)
        assert not procs.alive(leader.pid)
    finally:
        bystander.kill()
        bystander.wait()
        leader.wait(timeout=5)


def test_two_handles_see_each_others_changes(tmp_path):
    from chaos.backends.local.cluster import LocalCluster

    st.save(sample_state(), tmp_path)
    a = LocalCluster.attach(tmp_path)
    b = LocalCluster.attach(tmp_path)
    b.state.redis.pid = 12345
    b.state.nodes["w"].sid = 777
    b._save()
    # `a` acts on what the state file says now (e.g. a node restarted by an experiment run)
    assert a.state.redis.pid == 12345 and a.node("w").sid == 777
