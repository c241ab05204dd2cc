"""device-loss on KubeRay (chaos/backends/kuberay/device.py) over the in-memory API server and its kubelet
(tests/unit/kube_fake.py: the real serve_apps.device_loss run in each pod's /tmp, the directory the shipped manifests
mount from the node shared by the node's pods): the marker written through the replica's pod into its node's
directory and recorded on the node, proven, seen by a replacement pod on the node (not by a pod on another node),
removed only by its token, through any Ray pod of the rig on the node; the remedy's cordon of the pod's node and the
pod's eviction, the heal's uncordon only while the annotation is the run's (a node someone else cordoned left as it
is); a killed run's marker found by the leftovers (no exec) and removed by recover."""

import pytest

from chaos.scopes import faults
from chaos.backends.kuberay.common import CORDON_MARK
from chaos.backends.kuberay.kube import marks as km
from chaos.base.errors import ClusterError
from chaos.scopes.device_loss import lose_device
from serve_apps import kuberay as manifests
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import ray_pod
from tests.unit.test_kuberay_backend import cluster, replica, writes
from tests.unit.test_kuberay_preflight import SERVE


@pytest.fixture
def kube(monkeypatch):
    fake_dashboard(monkeypatch, serve=SERVE)  # r1 in wa-1 (node k-a1), r2 in wb-1, r3 in wc-1
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {"device-loss": 1.0})
    s, b, stream = cluster()
    for p in s.pods.values():
        mount_nodes_directory(p)
    return s, b, stream


def mount_nodes_directory(pod):
    """A Ray worker as the shipped manifests make it: the node's device-loss directory mounted (hostPath)."""
    if (pod["metadata"].get("labels") or {}).get("ray.io/node-type") != "worker":
        return pod
    template = manifests.worker_group("zone-a")["template"]["spec"]
    pod["spec"]["volumes"] = template["volumes"]
    pod["spec"]["containers"][0]["volumeMounts"] = template["containers"][0]["volumeMounts"]
    return pod


def replace_pod(s, old, new, node_name):
    """KubeRay's replacement of pod ``old`` by ``new`` on ``node_name`` (the old one gone)."""
    del s.pods[old]
    s.pods[new] = mount_nodes_directory(ray_pod(new, node_name, "10.0.1.9"))


def node(s, name):
    return s.nodes[name]


def test_the_marker_is_written_in_the_replicas_pod_proven_and_removed_by_its_token(kube):
    s, b, stream = kube
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=0.05, poll_s=0.005)
    assert f["target"] == "wa-1" and f["device"]["pod"] == "wa-1" and f["device"]["node_key"] == ""
    assert f["effect"]["verified"] and [c["ok"] for c in f["effect"]["checks"]] == [True, True, True]
    assert f["device_restored"] == {"removed": True, "state": "ours", "why": None}
    assert b.device_look(f)["marker"] is None  # gone from the pod's /tmp
    assert km.DEVICE_MARK not in km.annotations(node(s, "k-a1"))  # and its record from the node
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
    f = lose_device(b, faults.Marker(), zone="zone-a", remedy="cordon", outage_s=1.5, poll_s=0.005)  # room for the remedy under load
    c = f["cordon"]
    assert c["cordoned"] and c["cordoned_by_rig"] and c["k8s_node"] == "k-a1" and c["evicted"] == ["wa-1"]
    assert ("POST", "/api/v1/namespaces/availproof/pods/wa-1/eviction") in writes(s)
    patches = [(m, p) for m, p in writes(s) if p.startswith("/api/v1/nodes/k-a1")]
    assert len(patches) == 4  # the marker recorded, cordoned, its record dropped, then uncordoned at the heal
    # the evicted pod was the rig's only one on the node: the marker cleared through a helper pod pinned there
    assert f["device_restored"] == {"removed": True, "state": "ours", "why": None}
    assert ("POST", "/api/v1/namespaces/availproof/pods") in writes(s)
    assert km.DEVICE_MARK not in km.annotations(node(s, "k-a1"))
    assert not node(s, "k-a1")["spec"].get("unschedulable") and CORDON_MARK not in km.annotations(node(s, "k-a1"))
    assert f["uncordon"]["uncordoned"] and f["effect"]["verified"] is not False


def test_a_node_someone_else_cordoned_is_left_cordoned(kube):
    s, b, _ = kube
    node(s, "k-a1")["spec"]["unschedulable"] = True  # an operator's cordon, before the fault
    f = lose_device(b, faults.Marker(), zone="zone-a", remedy="cordon", outage_s=1.5, poll_s=0.005)  # room for the remedy under load
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
    assert len(stream.calls) == n  # found by the node's annotation: no exec
    assert row["name"] == "k-a1" and row["run_id"] == b.run_id
    out = b.remove_leftovers()
    assert row["name"] in [x["name"] for x in out["removed"] if x["kind"] == "DeviceLoss"] and out["failed"] == []
    assert b.device_look(f)["marker"] is None and km.DEVICE_MARK not in km.annotations(node(s, "k-a1"))
    assert [x for x in b.leftovers(in_pods=False) if x["kind"] == "DeviceLoss"] == []


def test_the_plan_names_the_marker_and_the_remedys_cordon(kube):
    _, b, _ = kube
    rows = b.plan("device-loss", {"zone": "zone-a", "remedy": "cordon"})
    assert rows[0]["where"] == "pod wa-1's node k-a1" and "marked lost" in rows[0]["does"]
    assert [r["kind"] for r in rows if "evicted" in r["does"]] == ["Node"]


def test_a_replacement_pod_on_the_bad_node_sees_the_marker_and_a_pod_on_another_node_does_not(kube):
    s, b, _ = kube
    write = b.device_breaker(replica(), "error", 79)
    f = {"fault_id": "device-loss-4", "target": "wa-1", "device": write("device-loss-4", "t4")}
    assert f["device"]["k8s_node"] == "k-a1"
    replace_pod(s, "wa-1", "wa-3", "k-a1")  # KubeRay's replacement, on the same bad node
    assert b.engines.devices.run("wa-3", "look")["marker"]["token"] == "t4"
    assert b.engines.devices.run("wa-2", "look")["marker"] is None  # zone-a's other node (k-a2)
    assert b.device_look(f)["marker"]["token"] == "t4"  # the proof's look, through the replacement


def test_the_heal_clears_the_marker_through_another_pod_of_the_node_once_the_original_is_gone(kube):
    s, b, stream = kube
    write = b.device_breaker(replica(), "error", 79)
    f = {"fault_id": "device-loss-5", "target": "wa-1", "device": write("device-loss-5", "t5")}
    replace_pod(s, "wa-1", "wa-3", "k-a1")
    assert b.restore_device(f) == {"removed": True, "state": "ours", "why": None}
    assert ("wa-3", "ray-worker") == stream.calls[-1][:2]  # through the replacement, never the stranger's pod
    assert b.engines.devices.run("wa-3", "look")["marker"] is None
    assert km.DEVICE_MARK not in km.annotations(node(s, "k-a1"))


def test_recover_clears_the_marker_through_another_pod_of_the_node_and_says_when_none_is_left(kube):
    s, b, _ = kube
    write = b.device_breaker(replica(), "hang", 94)
    write("device-loss-6", "t6")  # the run dies here
    replace_pod(s, "wa-1", "wa-3", "k-a1")
    del s.pods["wa-3"]  # no Ray pod of the rig on the node (the stranger's is another cluster's)
    s.pull_s["availproof:dev"] = 1e9  # and its helper pod never runs there (its image not pullable)
    b.engines.devices.helpers.run_s, b.engines.devices.helpers.poll_s = 0.05, 0.01
    out = b.remove_leftovers(keep_going=True)
    (line,) = out["failed"]
    assert "node k-a1" in line and "no Ray pod of the rig runs there" in line and "hostPath" in line
    assert "did not run within 0.05 s (phase Pending)" in line
    assert [x for x in b.leftovers(in_pods=False) if x["kind"] == "DeviceLoss"][0]["name"] == "k-a1"  # still there
    assert not [p for p in s.pods if p.startswith("availproof-device-loss-")]  # the helper deleted all the same
    s.pods["wa-4"] = mount_nodes_directory(ray_pod("wa-4", "k-a1", "10.0.1.8"))  # a Ray pod on the node again
    out = b.remove_leftovers()
    assert [x["name"] for x in out["removed"] if x["kind"] == "DeviceLoss"] == ["k-a1"] and out["failed"] == []
    assert b.engines.devices.run("wa-4", "look")["marker"] is None
    assert [x for x in b.leftovers(in_pods=False) if x["kind"] == "DeviceLoss"] == []
