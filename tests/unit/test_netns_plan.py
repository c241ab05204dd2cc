"""Per-zone network namespace planning (no namespaces are made here)."""

import ipaddress
import random

import pytest

from chaos.system import topology
from chaos.backends.local import cluster as cl
from chaos.backends.local import netns, partition, ports
from chaos.backends.local import state as st
from chaos.base.errors import UsageError


def test_link_names_fit_linux_limit_and_namespaces_are_per_domain():
    bridge, names = netns.names("apffffff", ["head", "zone-a", "zone-b", "zone-c"] + [f"z{i}" for i in range(20)])
    assert len(bridge) <= 15
    assert all(len(link) <= 15 for _, link in names.values())
    assert len({ns for ns, _ in names.values()}) == len(names)
    assert len({link for _, link in names.values()}) == len(names)
    assert names["zone-a"][0] == "apffffff-zone-a"


def test_subnet_avoids_every_network_in_use(monkeypatch):
    taken = [ipaddress.ip_network(f"10.{a}.{b}.0/24") for a in range(200, 255) for b in range(256) if b != 7]
    monkeypatch.setattr(netns, "used_networks", lambda: taken)
    assert netns.pick_subnet(random.Random(1), attempts=100000).endswith(".7")
    monkeypatch.setattr(netns, "used_networks", lambda: [ipaddress.ip_network("10.0.0.0/8")])
    with pytest.raises(Exception, match="no free"):
        netns.pick_subnet(random.Random(1))


def test_plan_puts_each_zone_in_one_namespace_and_head_with_redis(tmp_path):
    topo = topology.load()
    s = st.ClusterState(cluster_id="ap0000aa", topology=topo.to_doc(), topology_source="x", gcs_fault_tolerance=True,
                        temp_root="/tmp/x", base_port=20000)
    s.nodes["head"] = st.NodeState(name="head", role="head", ip="10.250.1.2", ports=ports.node_ports(20000, 1),
                                   temp_dir="/tmp/x/head", labels={})
    for i, n in enumerate(topo.nodes):
        s.nodes[n.name] = st.NodeState(name=n.name, role="worker", ip=f"10.250.1.{3 + i}",
                                       ports=ports.node_ports(20000, 2 + i), temp_dir="/tmp/x", labels={},
                                       zone=n.zone, region=n.region)
    partition.plan_netns(s, "10.250.1")
    assert s.netns_mode and s.bridge == "ap0000aabr"
    assert set(s.links) == {"head"} | set(topo.zones)
    by_zone = {}
    for n in s.workers():
        by_zone.setdefault(n.zone, set()).add(n.netns)
    assert all(len(v) == 1 for v in by_zone.values()) and len({next(iter(v)) for v in by_zone.values()}) == len(by_zone)
    assert s.head.netns == "ap0000aa-head"
    # the state file keeps the plan
    back = st.ClusterState.from_json(s.to_json())
    assert back.links == s.links and back.partitioned == []
    c = cl.LocalCluster(tmp_path, back)
    with pytest.raises(UsageError, match="no zone 'zone-q'"):
        c._zone_link("zone-q")


def test_partition_needs_netns_mode(tmp_path):
    c = cl.LocalCluster(tmp_path, st.ClusterState(cluster_id="ap1", topology={}, topology_source="x",
                                                  gcs_fault_tolerance=True, temp_root="/tmp/x", base_port=20000))
    with pytest.raises(UsageError, match="--netns"):
        c.partition_zone("zone-a")
