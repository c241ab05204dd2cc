"""device-loss's fault (chaos.scopes.device_loss) on the local backend's functions (chaos.backends.local.device): the
node's marker written, proven by an engine's own record, held to the heal (an admin removing it mid-outage makes the
fault not verified, said with when), removed only while it holds the fault's token; the watch of the replicas; the
remedy's cordon (Ray's drain) and its undoing only while the node is still the drained one; recover."""

import os
import types

import pytest

from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.backends import device_loss as shared
from chaos.backends.local import device
from chaos.base.errors import ClusterError, UsageError
from chaos.scopes.device_loss import lose_device
from chaos.system.placement import Replica
from serve_apps import device_loss as app


def replica(rid, node, state="RUNNING", zone=None):
    return Replica("llm", "StreamTarget", rid, state, None, None, 4242, None, node,
                   zone or f"zone-{node[-1]}", "region-1")


class Node:
    def __init__(self, name, sid=100, starts=1):
        self.name, self.sid, self.starts = name, sid, starts


class Cluster:
    def __init__(self):
        self.nodes = {n: Node(n) for n in ("worker-a", "worker-b", "worker-c")}
        self.calls = []
        self.state = types.SimpleNamespace(gcs_address="127.0.0.1:1")

    def node(self, name):
        return self.nodes[name]

    def kill_node(self, name):
        self.calls.append(("kill", name))

    def start_node(self, name):
        self.calls.append(("start", name))
        self.nodes[name].starts += 1


class Gcs:
    def __init__(self, accept=True):
        self.drained, self.accept = [], accept

    def drain_node(self, node_id, reason, message, deadline_ms):
        self.drained.append((node_id, reason, message))
        return self.accept, "" if self.accept else "refused"


class Backend(device.Methods):
    """The local backend's device-loss methods over a fake cluster; its engine on worker-a hooked (it writes its own
    record at its first look once the marker is there, as the app's hook does: tests/unit/test_device_loss_hook.py)."""

    run_id = "run-1"

    def __init__(self, script=None):
        self.cluster = Cluster()
        self.looks = 0
        self.script = script or (lambda n: [replica("r1", "worker-a"), replica("r2", "worker-b"),
                                            replica("r3", "worker-c")])

    def pick_replica(self, zone=None, deployment=None):
        return replica("r1", "worker-a")

    def replicas(self, state="RUNNING"):
        self.looks += 1
        return self.script(self.looks)

    def node_id(self, n):
        return f"nid-{n.name}"

    def device_look(self, fault):
        m = app.read_marker(fault["target"])
        if m is not None and not app.look(fault["target"])["failures"]:
            app.record("failed", "step", m, fault["target"], pid=9999)  # the engine's hook, at its next step
        return device.look(self, fault)

    def effect_checks(self, fault):
        return shared.checks(fault, self.device_look(fault))  # what device.checks is, over this fake's look


@pytest.fixture(autouse=True)
def tmp_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(app, "DIR", str(tmp_path / "tmp"))
    os.makedirs(app.DIR)
    monkeypatch.setenv("AVAILPROOF_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(device, "process_env", lambda pid: {app.NODE_ENV: "worker-a"})
    monkeypatch.setattr(device.engines, "hooked", lambda b, r, what, to: [9999])
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {"device-loss": 2.0})  # a proof not seen at once fails fast
    gcs = Gcs()
    monkeypatch.setattr(device, "gcs_client", lambda b: gcs)
    return gcs


def test_the_fault_marks_proves_watches_and_removes_its_marker_at_its_outage():
    b, marker = Backend(), faults.Marker()
    f = lose_device(b, marker, zone="zone-a", outage_s=0.3, poll_s=0.02)
    assert f["effect"]["verified"] and [c["ok"] for c in f["effect"]["checks"]] == [True, True, True]
    assert f["device"]["mode"] == "error" and f["device"]["run"] == "run-1" and f["device"]["node_key"] == "worker-a"
    assert f["device_restored"] == {"removed": True, "state": "ours", "why": None}
    assert app.read_marker("worker-a") is None and list(device.registry_dir().iterdir()) == []
    assert [(x["pid"], x["kind"], x["at"]) for x in f["engine_failures"]] == [(9999, "failed", "step")]
    assert f["watch"]["looks"] >= 3 and f["watch"]["events"] == []  # nothing moved in this fake
    assert [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
    assert "cordon" not in f and "uncordon" not in f


def test_an_admin_removing_the_marker_mid_outage_makes_the_fault_not_verified_with_when():
    b, marker = Backend(), faults.Marker()
    real = b.device_look

    def look(fault):
        if marker.since_inject(fault) > 0.1:
            app.clear("worker-a", None)  # an admin's rm, mid-outage
        return real(fault)

    b.device_look = look
    f = lose_device(b, marker, zone="zone-a", outage_s=0.3, poll_s=0.02)
    e = f["effect"]
    assert e["verified"] is False and 0.1 <= e["lost_until_s"] < 0.3
    assert e["came_back"] == {"t_s": e["lost_until_s"], "how": "no marker (someone removed it)"}
    assert f["device_restored"]["state"] == "gone" and not f["device_restored"]["removed"]
    # the inject end mark kept the proof of its instant; the heal's carries the hold that did not hold
    inject_end = [m for m in marker.marks if m.event == rec.INJECT_END][0]
    assert inject_end.detail["effect"]["verified"] is True
    heal_end = [m for m in marker.marks if m.event == rec.HEAL_END][0]
    assert heal_end.detail["effect"]["verified"] is False


def test_the_heal_removes_only_the_marker_that_holds_its_token():
    b = Backend()
    write = b.device_breaker(b.pick_replica(), "error", 79)
    f = {"fault_id": "device-loss-1", "scope": "device-loss", "target": "worker-a", "device": write("device-loss-1", "tok")}
    app.clear("worker-a", "tok")
    app.set_marker("worker-a", "run-2", "theirs", "their-token", "error", 48)  # someone else's since
    out = b.restore_device(f)
    assert not out["removed"] and out["state"] == "another" and app.read_marker("worker-a")["token"] == "their-token"
    f["device_restored"] = out
    assert b.restore_device(f) is out  # the rollback's second call keeps the outcome


def test_the_fault_is_refused_before_anything_is_written():
    b = Backend()
    for bad, match in (({"mode": "melt"}, "mode must be"), ({"xid": 13}, "xid must be"),
                       ({"remedy": "reboot"}, "remedy must be"), ({"outage_s": None}, "outage_s must be")):
        with pytest.raises(UsageError, match=match):
            lose_device(b, faults.Marker(), zone="zone-a", **bad)
    app.set_marker("worker-a", "run-0", "old", "left", "error", 79)
    with pytest.raises(ClusterError, match="already has a marker"):
        lose_device(b, faults.Marker(), zone="zone-a", outage_s=0.1)
    assert device.left_markers() == ["device-loss marker on node worker-a (run 'run-0')"]


def test_a_replica_whose_process_does_not_carry_its_nodes_name_is_refused(monkeypatch):
    monkeypatch.setattr(device, "process_env", lambda pid: {})
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="carries AVAILPROOF_NODE=None"):
        lose_device(Backend(), marker, zone="zone-a", outage_s=0.1)
    assert marker.marks == [] and app.read_marker("worker-a") is None


def test_the_watch_records_each_replacement_where_it_landed():
    def script(n):
        rows = [replica("r2", "worker-b"), replica("r3", "worker-c")]
        if n == 2:
            return rows + [replica("r1", "worker-a", "STOPPING")]
        if n in (3, 4):
            return rows + [replica("r4", "worker-a", "STARTING")]
        if n >= 6:
            return rows + [replica("r5", "worker-b", "RUNNING")]
        return rows + [replica("r1", "worker-a")] if n == 1 else rows

    f = lose_device(Backend(script), faults.Marker(), zone="zone-a", outage_s=0.5, poll_s=0.02)
    events = [(e["replica"], e["state"], e["node"]) for e in f["watch"]["events"]]
    # the first look was the injection's (the replicas then); one look's changes before its replicas gone
    assert events[:5] == [("r1", "STOPPING", "worker-a"), ("r4", "STARTING", "worker-a"), ("r1", "GONE", None),
                          ("r4", "GONE", None), ("r5", "RUNNING", "worker-b")]
    assert sorted(x["replica"] for x in f["replicas_at_injection"]) == ["r1", "r2", "r3"]


def test_the_remedy_cordons_the_bad_node_at_the_first_device_error_and_the_heal_restarts_only_the_drained_raylet(
        tmp_dirs):
    b = Backend()
    f = lose_device(b, faults.Marker(), zone="zone-a", remedy="cordon", outage_s=0.3, poll_s=0.02)
    c = f["cordon"]
    assert c["cordoned"] and c["node_id"] == "nid-worker-a" and c["sid"] == 100 and c["t_s"] < 0.3
    assert c["after"].startswith("engine 9999 failed at its step")
    (node_id, reason, _), = tmp_dirs.drained
    assert node_id == "nid-worker-a" and reason == 2  # DRAIN_NODE_REASON_PREEMPTION
    assert f["uncordon"]["uncordoned"] and b.cluster.calls == [("kill", "worker-a"), ("start", "worker-a")]
    assert list(device.registry_dir().iterdir()) == []
    # the rollback's heal keeps it: nothing restarted twice
    device.heal(b, [f], {})
    assert b.cluster.calls == [("kill", "worker-a"), ("start", "worker-a")]


def test_a_node_restarted_since_the_cordon_is_left_as_it_is():
    b = Backend()
    fault = {"fault_id": "device-loss-2", "target": "worker-a",
             "cordon": {"cordoned": True, "node": "worker-a", "node_id": "nid-worker-a", "sid": 100, "starts": 1}}
    b.cluster.nodes["worker-a"].sid = 555  # restarted by someone (a supervisor, a person) meanwhile
    out = b.uncordon_device_node(fault)
    assert not out["uncordoned"] and "restarted since" in out["why"] and b.cluster.calls == []


def test_a_refused_cordon_is_recorded_and_the_outage_goes_on(monkeypatch):
    monkeypatch.setattr(device, "gcs_client", lambda b: Gcs(accept=False))
    f = lose_device(Backend(), faults.Marker(), zone="zone-a", remedy="cordon", outage_s=0.2, poll_s=0.02)
    assert not f["cordon"]["cordoned"] and "refused to drain" in f["cordon"]["error"]
    assert f["device_restored"]["removed"] and "uncordon" not in f
    assert list(device.registry_dir().iterdir()) == []  # nothing of the rig's left to recover


def test_recover_removes_a_killed_runs_marker_and_undoes_its_cordon(monkeypatch):
    b = Backend()
    write = b.device_breaker(b.pick_replica(), "hang", 95)
    f = {"fault_id": "device-loss-3", "scope": "device-loss", "target": "worker-a", "device": write("device-loss-3", "t")}
    f["cordon"] = b.cordon_device_node(f)  # the run is killed here
    assert device.left_markers()
    out = device.recover(b)
    assert out["markers"]["worker-a"]["removed"] and out["cordons"]["worker-a"]["uncordoned"]
    assert device.left_markers() == [] and list(device.registry_dir().iterdir()) == []
    assert device.recover(b) is None


def test_the_plan_names_the_marker_and_the_remedys_drain():
    rows = device.plan_rows(Backend(), "device-loss", {"zone": "zone-a", "remedy": "cordon", "mode": "hang"})
    assert rows[0]["name"].endswith("availproof-device-loss-worker-a/marker.json") and "hangs" in rows[0]["does"]
    assert rows[1]["kind"] == "node" and "drain" in rows[1]["does"]


def test_the_shared_proof_reads_another_marker_and_an_old_record_as_no_proof():
    fault = {"target": "worker-a", "device": {"token": "mine", "t": 100.0}}
    look = {"marker": {"token": "theirs", "run": "r9"}, "failures": [{"kind": "failed", "at": "init", "pid": 1, "t": 50.0}]}
    checks = shared.checks(fault, look)
    assert [c["ok"] for c in checks] == [False, False] and "another marker" in checks[0]["seen"]


def test_the_local_backend_refuses_to_prepare_over_a_marker_and_its_heal_undoes_this_runs(monkeypatch):
    from chaos.backends.local.backend import LocalBackend
    from chaos.base.errors import SetupError

    cluster = Cluster()
    cluster.state.nodes = {}
    cluster.partitioned_zones = lambda: []
    b = LocalBackend(cluster, run_id="run-1")
    monkeypatch.setattr(b, "node_id", lambda n: f"nid-{n.name}")
    monkeypatch.setattr(b, "_restore", lambda done, **kw: done)
    write = b.device_breaker(replica("r1", "worker-a"), "error", 79)
    f = {"fault_id": "device-loss-9", "scope": "device-loss", "target": "worker-a", "zones": ["zone-a"],
         "device": write("device-loss-9", "tok")}
    f["cordon"] = b.cordon_device_node(f)  # the run stops here: its rollback heals
    with pytest.raises(SetupError, match="device-loss marker on node worker-a"):
        LocalBackend(cluster).prepare("run-2", "replica")
    (done,) = b.heal([f])["devices"]
    assert done["device_restored"]["removed"] and done["uncordon"]["uncordoned"]
    assert app.read_marker("worker-a") is None and list(device.registry_dir().iterdir()) == []
    LocalBackend(cluster).prepare("run-2", "replica")  # nothing left: no refusal


def test_the_fault_records_its_replicas_engines_for_the_orphan_check():
    """A replica whose engine failed on the lost device is replaced: its engines must go with it (``orphans``)."""
    from chaos import scopes

    b, marker = Backend(), faults.Marker()
    b.engine_children = lambda r: [4242]
    f = lose_device(b, marker, zone="zone-a", outage_s=0.05, poll_s=0.02)
    assert scopes.get("device-loss").orphan_check
    assert f["victim"]["engines"] == [4242] and f["victim"]["node"] == "worker-a", f["victim"]
