"""The engine hang (scope ``engine``) stops the engine process(es) alone, on both apps and both backends (issue 35):
never the replica's own process (the stream target's hang used to stop its whole replica). A replica without
an engine child is refused; the proof is the engine stopped (T) and the replica's process alive and not
stopped. Local: tiny real processes; KubeRay: the fake kubelet."""

import time

import pytest

from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.backends.local import procs
from chaos.base.errors import ClusterError
from chaos.scopes.engine import hang_engine
from tests.unit.fake_backend import TinyReplica
from tests.unit.test_kuberay_backend import cluster, replica as kube_replica


def _fault(t, pids):
    return {"fault_id": "e-1", "scope": "engine", "target": "r1", "zones": ["zone-a"], "pid": t.pid, "pids": pids}


def _until_stopped(pid, timeout=3.0):
    deadline = time.monotonic() + timeout
    while procs.state(pid) not in ("T", "t") and time.monotonic() < deadline:
        time.sleep(0.01)


def test_local_the_hang_stops_the_engine_alone_and_the_proof_sees_the_replica_running():
    with TinyReplica("none") as t:
        b = t.backend()
        (engine,) = b.engine_children(t.replica())
        assert b.pause_engine(t.replica()) == [engine]
        try:
            _until_stopped(engine)
            checks = b.effect_checks(_fault(t, [engine]))
            assert [c["ok"] for c in checks] == [True, True], checks
            assert checks[1]["check"] == f"the replica's process {t.pid} alive and not stopped"
            assert procs.state(t.pid) not in ("T", "t")
            procs.signal_pids([t.pid], 19)  # the whole replica stopped (the old stream-target hang): not this fault
            _until_stopped(t.pid)
            assert [c["ok"] for c in b.effect_checks(_fault(t, [engine]))] == [True, False]
        finally:
            procs.signal_pids([t.pid], 18)
            b.resume_engine([engine])
        assert procs.state(engine) not in ("T", "t")


def test_local_a_replica_without_an_engine_child_is_refused_never_stopped_itself(monkeypatch):
    with TinyReplica("none", engines=0) as t:
        b = t.backend()
        with pytest.raises(ClusterError, match="no engine child process to stop"):
            b.pause_engine(t.replica())
        assert procs.state(t.pid) not in ("T", "t")
        monkeypatch.setattr(b, "pick_replica", lambda zone=None, **kw: t.replica())
        marker = faults.Marker()
        with pytest.raises(ClusterError):
            hang_engine(b, marker, duration_s=1)
        assert marker.marks == []
        with pytest.raises(ClusterError, match="no engine child process to stop"):
            b.plan("engine", {})


def test_local_the_hang_through_the_fault_is_proven_and_healed(monkeypatch):
    with TinyReplica("none") as t:
        b, marker = t.backend(), faults.Marker()
        monkeypatch.setattr(b, "pick_replica", lambda zone=None, **kw: t.replica())
        (engine,) = b.engine_children(t.replica())
        (row,) = b.plan("engine", {})
        assert row["name"] == str(engine) and f"the replica's process {t.pid} runs on" in row["does"]
        f = hang_engine(b, marker, zone="zone-a", duration_s=0.5)
        assert f["pids"] == [engine] and f["pid"] == t.pid
        assert f["effect"]["verified"], f["effect"]
        assert [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
        assert procs.state(engine) not in ("T", "t")


def test_kuberay_the_hang_stops_the_engine_children_only_and_refuses_without_one():
    s, b, stream = cluster()
    pids = b.pause_engine(kube_replica(node="wb-1"))
    assert pids == ["wb-1/57"] and "pgrep -P 41 -f EngineCore" in stream.calls[0][2]
    procs_ = s.kubelet.processes(s.pods["wb-1"])
    assert procs_[57]["state"] == "T" and procs_[41]["state"] == "S"  # the replica's process runs on
    f = {"scope": "engine", "target": "r1", "zones": ["zone-b"], "pid": 41, "pids": pids}
    checks = b.effect_checks(f)
    assert [c["ok"] for c in checks] == [True, True] and checks[1]["seen"] == "state S"
    procs_[41]["state"] = "T"
    assert [c["ok"] for c in b.effect_checks(f)] == [True, False]
    procs_[41]["state"] = "S"
    b.resume_engine(pids)
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")
    with pytest.raises(ClusterError, match="no engine child process to stop"):
        b.pause_engine(kube_replica(node="wb-1"))
    assert procs_[41]["state"] == "S" and b.paused == []


def test_kuberay_the_plan_says_the_replica_runs_on():
    s, b, stream = cluster()
    b.pick_replica = lambda zone=None, **kw: kube_replica(node="wb-1")
    (row,) = b.plan("engine", {"zone": "zone-b"})
    assert "EngineCore children of 41" in row["does"] and "runs on" in row["does"] and stream.calls == []
