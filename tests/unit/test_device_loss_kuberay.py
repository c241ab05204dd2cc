"""device-loss on KubeRay (chaos/backends/kuberay/device.py) over the in-memory API server and its kubelet
(tests/unit/kube_fake.py: the real serve_apps.device_loss run in each pod's own /tmp): the marker written in the
replica's pod and recorded on it, proven, removed only by its token; the remedy's cordon of the pod's node and the
pod's eviction, the heal's uncordon only while the annotation is the run's (a node someone else cordoned left as it
is); a killed run's marker found by the leftovers (no exec) and removed by recover."""

import pytest

from chaos.scopes import faults
from chaos.backends.kuberay.common import CORDON_MARK
from chaos.backends.kuberay.kube import marks as km
from chaos.base.errors import ClusterError
from chaos.scopes.device_loss import lose_device
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.test_kuberay_backend import cluster, replica, writes
from tests.unit.test_kuberay_preflight import SERVE


@pytest.fixture
def kube(monkeypatch):
    fake_dashboard(monkeypatch, serve=SERVE)  # r1 in wa-1 (node k-a1), r2 in wb-1, r3 in wc-1
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {"device-loss": 1.0})
    s, b, stream = cluster()
    return s, b, stream


def node(s, name):
    return s.nodes[name]


def test_the_marker_is_written_in_the_replicas_pod_proven_and_removed_by_its_token(kube):
    s, b, stream = kube
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=0.05, poll_s=0.005)
    assert f["target"] == "wa-1" and f["device"]["pod"] == "wa-1" and f["device"]["node_key"] == ""
    assert f["effect"]["verified"] and [c["ok"] for c in f["effect"]["checks"]] == [True, True, True]
    assert f["device_restored"] == {"removed": True, "state": "ours", "why": None}
    assert b.device_look(f)["marker"] is None  # gone from the pod's /tmp
    assert km.DEVICE_MARK not in km.annotations(s.pods["wa-1"])  # and its record from the pod
    assert [c[2].split(";")[0] for c in stream.calls if "device-loss" in c[2]][:1] == [": availproof-device-loss"]
    assert "cordon" not in f and not node(s, "k-a1")["spec"].get("unschedulable")


def test_the_heal_leaves_a_marker_that_is_not_the_faults(kube):
    s, b, _ = kube
    write = b.device_breaker(replica(), "error", 79)
    f = {"fault_id": "device-loss-1", "target": "wa-1", "device": write("device-loss-1", "mine")}
    b.engines.devices.run("wa-1", "clear-any")
    b.engines.devices.run("wa-1", "set", run="other", fault="theirs", token="theirs", mode="error", xid=48)
    out = b.restore_device(f)
    assert not out["removed"] and out["state"] == "another"
    assert b.device_look(f)["marker"]["token"] == "theirs"
    with pytest.raises(ClusterError, match="a marker is already there"):
        b.device_breaker(replica(), "error", 79)


def test_the_remedy_cordons_the_pods_node_evicts_the_pod_and_the_heal_uncordons_it(kube):
    s, b, _ = kube
    f = lose_device(b, faults.Marker(), zone="zone-a", remedy="cordon", outage_s=0.1, poll_s=0.005)
    c = f["cordon"]
    assert c["cordoned"] and c["cordoned_by_rig"] and c["k8s_node"] == "k-a1" and c["evicted"] == ["wa-1"]
    assert ("POST", "/api/v1/namespaces/availproof/pods/wa-1/eviction") in writes(s)
    cordons = [(m, p) for m, p in writes(s) if p.startswith("/api/v1/nodes/k-a1")]
    assert len(cordons) == 2  # cordoned, then uncordoned at the heal
    assert not node(s, "k-a1")["spec"].get("unschedulable") and CORDON_MARK not in km.annotations(node(s, "k-a1"))
    assert f["uncordon"]["uncordoned"] and f["effect"]["verified"] is not False


def test_a_node_someone_else_cordoned_is_left_cordoned(kube):
    s, b, _ = kube
    node(s, "k-a1")["spec"]["unschedulable"] = True  # an operator's cordon, before the fault
    f = lose_device(b, faults.Marker(), zone="zone-a", remedy="cordon", outage_s=0.1, poll_s=0.005)
    assert f["cordon"]["cordoned"] and not f["cordon"]["cordoned_by_rig"] and f["cordon"]["evicted"] == ["wa-1"]
    assert node(s, "k-a1")["spec"]["unschedulable"] and CORDON_MARK not in km.annotations(node(s, "k-a1"))
    assert "uncordon" not in f or not f["uncordon"]["uncordoned"]


def test_a_cordon_someone_took_over_is_not_lifted(kube):
    s, b, _ = kube
    write = b.device_breaker(replica(), "error", 79)
    f = {"fault_id": "device-loss-2", "target": "wa-1", "device": write("device-loss-2", "t")}
    f["cordon"] = b.cordon_device_node(f)
    km.annotations(node(s, "k-a1"))[CORDON_MARK] = "another-run"  # someone else's cordon since
    out = b.uncordon_device_node(f)
    assert not out["uncordoned"] and node(s, "k-a1")["spec"]["unschedulable"]


def test_a_killed_runs_marker_is_a_leftover_and_recover_removes_it(kube):
    s, b, stream = kube
    write = b.device_breaker(replica(), "hang", 94)
    f = {"fault_id": "device-loss-3", "target": "wa-1", "device": write("device-loss-3", "t")}  # the run dies here
    n = len(stream.calls)
    (row,) = [x for x in b.leftovers(in_pods=False) if x["kind"] == "DeviceLoss"]
    assert len(stream.calls) == n  # found by the pod's annotation: no exec
    assert row["name"] == "wa-1" and row["run_id"] == b.run_id
    out = b.remove_leftovers()
    assert row["name"] in [x["name"] for x in out["removed"] if x["kind"] == "DeviceLoss"] and out["failed"] == []
    assert b.device_look(f)["marker"] is None and km.DEVICE_MARK not in km.annotations(s.pods["wa-1"])
    assert [x for x in b.leftovers(in_pods=False) if x["kind"] == "DeviceLoss"] == []


def test_the_plan_names_the_marker_and_the_remedys_cordon(kube):
    _, b, _ = kube
    rows = b.plan("device-loss", {"zone": "zone-a", "remedy": "cordon"})
    assert rows[0]["where"] == "pod wa-1" and "marked lost" in rows[0]["does"]
    assert rows[1]["kind"] == "Node" and "evicted" in rows[1]["does"]
