"""device-loss on KubeRay, what it does to the Kubernetes node beside the marker (chaos/backends/kuberay/
device_helper_pod.py, device_node.py), over the in-memory API server (tests/unit/kube_fake.py) and its GPU side
(tests/unit/kube_fake_gpu.py): the marker cleared through a helper pod pinned to the node once no Ray pod of the rig
is there (only the fault's own marker; one that never runs said in one line, the marker kept; a crashed run's helper
swept by recover); the NVIDIA device plugin paused with the marker where the node carries the GPU operator's label,
held, and given back only while still the rig's pause (skipped and said on a CPU node); the optional taint, added and
removed only while still the run's."""

import pytest

from chaos.scopes import faults
from chaos.backends.kuberay import accelerators as acc, device_helper_pod as dhp, device_node as dn
from chaos.backends.kuberay.kube import marks as km
from chaos.base.errors import UsageError
from chaos.scopes.device_loss import lose_device
from tests.unit.kube_fake import ray_pod
from tests.unit.kube_fake_gpu import OPERATOR_LABEL
from tests.unit.test_accelerator_loss import alloc, clock, gpu, writes  # noqa: F401 (fixtures)
from tests.unit.test_accelerator_outage import set_label_at
from tests.unit.test_device_loss_kuberay import kube, mount_nodes_directory  # noqa: F401 (the fixture)
from tests.unit.test_kuberay_backend import replica


def injected(b, token="t1", **kw):
    write = b.device_breaker(replica(), "error", 79, **kw)
    return {"fault_id": "device-loss-1", "target": "wa-1", "device": write("device-loss-1", token)}


def created_pods(s):
    return [body for m, p, body in s.calls if m == "POST" and p.startswith("/api/v1/namespaces/availproof/pods")
            and not p.endswith("/eviction") and "dryRun" not in p]


def look_on_node(b, s, node="k-a1"):
    """The node's marker, as a Ray pod placed there now sees it."""
    s.pods["wa-9"] = mount_nodes_directory(ray_pod("wa-9", node, "10.0.1.9"))
    try:
        return b.engines.devices.run("wa-9", "look")["marker"]
    finally:
        del s.pods["wa-9"]


# ---------------------------------------------------------------- the helper pod
def test_the_heal_clears_the_marker_through_a_helper_pod_pinned_to_the_node_when_no_rig_pod_is_there(kube):
    s, b, _ = kube
    f = injected(b)
    del s.pods["wa-1"]  # evicted, its replacement elsewhere: no Ray pod of the rig on k-a1
    assert b.restore_device(f) == {"removed": True, "state": "ours", "why": None}
    (body,) = created_pods(s)
    spec = body["spec"]
    assert spec["nodeName"] == "k-a1" and body["metadata"]["labels"][dhp.NODE_KEY] == "k-a1"
    assert body["metadata"]["labels"]["availproof.io/fault"] == "device-loss-helper"
    assert body["metadata"]["labels"][km.RUN] == b.run_id and km.EXPIRES in body["metadata"]["annotations"]
    assert {(t["key"], t["effect"]) for t in spec["tolerations"]} == {(dhp.UNSCHEDULABLE, "NoSchedule"),
                                                                      (dn.TAINT, "NoSchedule")}
    assert spec["volumes"][0]["hostPath"]["path"] == dhp.HOST_DIR and spec["activeDeadlineSeconds"] >= 1
    assert spec["containers"][0]["image"] == "availproof:dev"  # the Ray pod's, recorded with the marker
    assert not [p for p in s.pods if p.startswith("availproof-device-loss-")]  # deleted once done
    assert look_on_node(b, s) is None and km.DEVICE_MARK not in km.annotations(s.nodes["k-a1"])


def test_a_marker_of_another_run_is_left_alone_by_the_helper(kube):
    s, b, _ = kube
    f = injected(b, token="mine")
    b.engines.devices.run("wa-1", "clear-any")
    b.engines.devices.run("wa-1", "set", run="other", fault="theirs", token="theirs", mode="error", xid=48)
    del s.pods["wa-1"]
    out = b.restore_device(f)
    assert not out["removed"] and out["state"] == "another" and created_pods(s)
    assert look_on_node(b, s)["token"] == "theirs"


def test_a_helper_that_never_runs_is_said_in_one_line_and_the_marker_kept(kube):
    s, b, _ = kube
    f = injected(b)
    del s.pods["wa-1"]
    s.pull_s["availproof:dev"] = 1e9  # its image never pulled: Pending
    b.engines.devices.helpers.run_s, b.engines.devices.helpers.poll_s = 0.05, 0.01
    out = b.restore_device(f)
    assert out["removed"] is False and out["state"] is None and "\n" not in out["why"]
    assert "helper pod availproof-device-loss-k-a1 on node k-a1 did not run within 0.05 s (phase Pending)" in out["why"]
    assert "the marker stays" in out["why"]
    assert km.read(km.annotations(s.nodes["k-a1"])[km.DEVICE_MARK])["token"] == "t1"  # kept for recover
    assert not [p for p in s.pods if p.startswith("availproof-device-loss-")]
    s.pull_s.clear()
    assert look_on_node(b, s)["token"] == "t1"


def test_a_crashed_runs_helper_pod_is_a_leftover_recover_deletes_and_the_plan_lists_the_helper(kube):
    s, b, _ = kube
    s.pods[dhp.helper_name("k-a1")] = s.created("Pod", dhp.helper_pod("k-a1", "availproof:dev", "/x", "dead-run", 60))
    (row,) = [x for x in b.leftovers(in_pods=False) if x["what"].startswith("device-loss helper")]
    assert row["name"] == "availproof-device-loss-k-a1" and row["run_id"] == "dead-run"
    out = b.remove_leftovers()
    assert row["name"] in [x["name"] for x in out["removed"]] and out["failed"] == []
    assert dhp.helper_name("k-a1") not in s.pods
    rows = b.plan("device-loss", {"zone": "zone-a"})
    assert [r["name"] for r in rows if r["kind"] == "Pod"] == ["availproof-device-loss-k-a1"]


# ---------------------------------------------------------------- the device plugin's pause
def test_a_node_without_the_operators_label_is_skipped_and_said(kube):
    s, b, _ = kube
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=0.05, poll_s=0.005)
    assert f["device"]["plugin"] is None and f"carries no {acc.OPERATOR_LABEL} label" in f["device"]["plugin_why"]
    assert f["effect"]["verified"] and km.ACCELERATOR_MARK not in km.annotations(s.nodes["k-a1"])
    assert "device_plugin_restored" not in f
    rows = b.plan("device-loss", {"zone": "zone-a"})
    assert any(r["does"].startswith("skipped: node k-a1 carries no") for r in rows)


def test_the_device_plugin_is_paused_with_the_marker_held_and_given_back(gpu, clock):
    s, b, _ = gpu
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=60, poll_s=5)
    plugin = f["device"]["plugin"]
    assert plugin["label"] == OPERATOR_LABEL and plugin["set"] == acc.PAUSED and plugin["allocatable_dropped"]
    assert f["effect"]["verified"] is True, f["effect"]
    held = [c for c in f["effect"]["checks"] if acc.HELD in c["check"]]
    assert held and held[-1]["ok"] and "allocatable nvidia.com/gpu 0" in held[-1]["check"]
    assert f["device_plugin_restored"]["note"] == f"label {OPERATOR_LABEL}=true put back"
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "true"
    assert km.ACCELERATOR_MARK not in km.annotations(s.nodes["k-a"]) and alloc(s, "k-a")[0] == "2"


def test_an_admins_value_set_mid_outage_is_kept_and_the_proof_did_not_hold(gpu, clock, monkeypatch):
    s, b, _ = gpu
    set_label_at(s, monkeypatch, clock, clock[0] + 30, "false")  # an admin's "false", 30 s into the outage
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=60, poll_s=5)
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "false"  # not overwritten by the heal
    assert "left as 'false'" in f["device_plugin_restored"]["note"]
    assert f["effect"]["verified"] is False and f["effect"]["came_back"]
    assert km.ACCELERATOR_MARK not in km.annotations(s.nodes["k-a"])


def test_the_pause_keeps_the_accelerators_rules_outage_cap(gpu):
    s, b, _ = gpu
    s.calls.clear()
    with pytest.raises(UsageError, match="device-loss .*outage_s 300 refused"):
        lose_device(b, faults.Marker(), zone="zone-a", outage_s=300, poll_s=5)
    assert not [w for w in writes(s) if "/nodes" in w[1]]  # nothing written


# ---------------------------------------------------------------- the taint
def test_the_taint_is_added_proven_and_removed_at_the_heal(kube):
    s, b, _ = kube
    f = lose_device(b, faults.Marker(), zone="zone-a", outage_s=0.05, poll_s=0.005, taint=True)
    assert f["device"]["taint"]["taint"] == f"{dn.TAINT}={b.run_id}:NoSchedule"
    assert [c["ok"] for c in f["effect"]["checks"] if dn.TAINT in c["check"]] == [True]
    assert f["device_taint_removed"] == {"removed": True, "why": None}
    assert not s.nodes["k-a1"]["spec"].get("taints")


def test_a_taint_that_is_no_longer_the_runs_is_left_and_recover_removes_a_crashed_runs(kube):
    s, b, _ = kube
    f = injected(b, taint=True)
    (t,) = s.nodes["k-a1"]["spec"]["taints"]
    t["value"] = "nvsentinel"  # a health monitor's taint of that key since
    b.restore_device(f)
    assert f["device_taint_removed"]["removed"] is False and "'nvsentinel'" in f["device_taint_removed"]["why"]
    assert s.nodes["k-a1"]["spec"]["taints"] == [{"key": dn.TAINT, "value": "nvsentinel", "effect": "NoSchedule"}]
    s.nodes["k-a1"]["spec"]["taints"] = []
    injected(b, token="t2", taint=True)  # the run dies here
    out = b.remove_leftovers()
    assert [x["name"] for x in out["removed"] if x["kind"] == "DeviceLoss"] == ["k-a1"] and out["failed"] == []
    assert s.nodes["k-a1"]["spec"]["taints"] == []
