"""engine-error (issue 35): the engine made to fail from inside its step loop by SIGUSR1 to the app's fault hook,
the replica's process alive. Its scope, its fault through the real Marker and proof (fake backend), the local
backend over tiny real processes (an engine that exits on SIGUSR1, one that does not, one without the hook), and
the KubeRay commands (the fake kubelet, and the same scripts through a real shell)."""

import signal
import subprocess
import time
from pathlib import Path

import pytest

from chaos.scopes import faults
from chaos.core import plan, provision
from chaos.recording import records as rec
from chaos import scopes
from chaos.backends import base, engine_faults
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.base import Implementation
from chaos.backends.kuberay import KubeRayBackend, engines as ke
from chaos.backends.local import procs
from chaos.backends.local.backend import LocalBackend
from chaos.base.errors import ClusterError, UsageError
from chaos.system.placement import Replica
from chaos.scopes.engine_error import error_engine
from serve_apps import engine_faults as app_engine_faults
from tests.unit.fake_backend import FakeBackend, TinyReplica
from tests.unit.test_kuberay_backend import cluster, replica as kube_replica

NAME = "engine-error"


@pytest.fixture
def fast_proof(monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 3.0, "engine-slow": 3.0, "engine": 3.0}, raising=False)


# ---------------------------------------------------------------- the scope
def test_the_scope_says_what_it_is_and_the_backends_run_it():
    s = scopes.get(NAME)
    assert (s.fault, s.backend_methods, s.label) == (error_engine, ("error_engine",), "engine error")
    assert s.zoned and s.every_target_affected and not s.replacing and s.effect_bound_s == 15.0
    assert set(s.accesses(kube_access.Asked())) == set(kube_access.EXEC)  # nothing to heal: exec alone
    for backend in (LocalBackend, KubeRayBackend):
        assert base.scope_capability(NAME) in base.capabilities_of(backend)
    assert base.scope_capability(NAME) not in base.capabilities_of(FakeBackend)  # no implementation, no method


def test_a_backend_without_it_is_refused_before_anything_starts(monkeypatch):
    """The capability check refuses a backend that did not register the scope (or lacks its method), in one
    line, before anything starts; the shipped experiment asks for it."""
    from chaos.core import experiment
    from tests.unit.test_adding_a_scope import ROOT

    settings = experiment.settings(experiment.load(ROOT / "experiments" / "engine-error.json"))
    assert settings.scope == NAME and base.scope_capability(NAME) in base.required(settings)
    provision.check_capabilities("local", settings)  # the local backend runs it

    class Without(LocalBackend):
        implementations = base.implementations(*(i for n, i in LocalBackend.implementations.items() if n != NAME))

    monkeypatch.setattr(provision, "backend_class", lambda kind: Without)
    with pytest.raises(UsageError, match=f"cannot run this experiment: scope:{NAME}"):
        provision.check_capabilities("local", settings)

    class NoMethod(LocalBackend):
        error_engine = None

    monkeypatch.setattr(provision, "backend_class", lambda kind: NoMethod)
    with pytest.raises(UsageError, match=f"scope:{NAME}"):
        provision.check_capabilities("local", settings)


@pytest.mark.parametrize("status, takes", [
    ("SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\nSigCgt:\t0000000180004a02\n", True),  # a handler
    ("SigBlk:\t0000000000000200\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n", True),  # blocked, waited for
    ("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000200\nSigCgt:\t0000000000000200\n", False),  # ignored
    ("SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\nSigCgt:\t0000000180004802\n", False),  # default: death
    ("", False),  # gone
])
def test_whether_a_process_takes_sigusr1_is_read_from_its_signal_masks(status, takes):
    assert engine_faults.handles(status)[0] is takes


# ---------------------------------------------------------------- the fault, through the real marks and proof
class ErrBackend(FakeBackend):
    """An engine that exits ``looks_to_exit`` looks after the signal (None: never); the replica lives."""

    def __init__(self, looks_to_exit=1, refuse=None):
        self.looks_to_exit, self.refuse, self.sent, self.looks = looks_to_exit, refuse, [], 0

    def pick_replica(self, zone=None, **kw):
        return Replica(app="llm", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name=None,
                       actor_id=None, pid=41, node_ip=None, node="w", zone=zone, region=None)

    def error_engine(self, r):
        if self.refuse:
            raise ClusterError(self.refuse)
        return lambda: self.sent.append(("SIGUSR1", r.pid)) or [57]

    def _effect(self, fault):
        self.looks += 1
        gone = self.looks_to_exit is not None and self.looks >= self.looks_to_exit
        return [{"check": "the engine process 57 gone", "ok": gone, "seen": "gone" if gone else "S"},
                {"check": "the replica's process 41 alive without its engine", "ok": True, "seen": "state S"}]

    implementations = base.implementations(
        Implementation(NAME, lambda b, s, a: [{"kind": "process", "name": "57"}], lambda b, f: b._effect(f)))


def test_the_fault_marks_the_scope_once_the_signal_is_sent_and_proves_the_engine_dead(fast_proof):
    b, marker = ErrBackend(looks_to_exit=2), faults.Marker()
    f = error_engine(b, marker, zone="zone-a")
    assert b.sent == [("SIGUSR1", 41)] and f["pid"] == 41 and f["pids"] == [57]
    assert [(m.event, m.scope, m.zones) for m in marker.marks] == [(rec.INJECT_START, NAME, ["zone-a"]),
                                                                  (rec.INJECT_END, NAME, ["zone-a"])]
    assert f["effect"]["verified"] and b.looks == 2 and marker.marks[1].detail["effect"] == f["effect"]
    assert marker.unhealed() == [f]  # nothing of its own to heal: Serve replaces the replica (the rollback's no-op)


def test_an_engine_that_did_not_exit_is_not_in_effect(fast_proof, monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.3}, raising=False)
    f = error_engine(ErrBackend(looks_to_exit=None), faults.Marker())
    assert f["effect"]["verified"] is False and f["effect"]["checks"][0]["seen"] == "S"


def test_a_refusal_records_nothing(fast_proof):
    b, marker = ErrBackend(refuse="no engine child process to make fail"), faults.Marker()
    with pytest.raises(ClusterError, match="no engine child"):
        error_engine(b, marker)
    assert marker.marks == [] and marker.attempted == {} and b.sent == []


def test_the_plan_row_comes_from_the_backend():
    (row,) = plan.objects(ErrBackend(), [{"activity": "err", "scope": NAME, "arguments": {"zone": "zone-a"}}])
    assert (row["scope"], row["kind"], row["name"]) == (NAME, "process", "57")


# ---------------------------------------------------------------- the local backend over tiny real processes
def _fault(b, t: TinyReplica, pids):
    return {"fault_id": "e-1", "scope": NAME, "target": "r1", "zones": ["zone-a"], "pid": t.pid, "pids": pids}


def _until(look, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        checks = look()
        if all(c["ok"] for c in checks) or time.monotonic() > deadline:
            return checks
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["exit", "record"])
def test_local_the_hooked_engine_records_its_error_and_the_proof_sees_it_and_the_replica_alive(mode):
    """``exit``: the stream target's engine (records, then exits); ``record``: vLLM's (records, lives on until
    Serve replaces the replica): either way the engine's tombstone and the replica alive are the proof."""
    with TinyReplica(mode) as t:
        b = t.backend()
        (engine,) = b.engine_children(t.replica())
        fire = b.error_engine(t.replica())
        assert procs.alive(engine)  # checked, nothing sent yet
        assert fire() == [engine]
        checks = _until(lambda: b.effect_checks(_fault(b, t, [engine])))
        assert [c["ok"] for c in checks] == [True, True], checks
        assert checks[0]["seen"] == f"{engine} raised it" and checks[1]["seen"].startswith("state")
        if mode == "exit":  # it records, then exits: the proof may see the record first (at load 9: 2 runs of 3)
            deadline = time.monotonic() + 10
            while procs.alive(engine) and time.monotonic() < deadline:
                time.sleep(0.05)
        assert procs.alive(engine) is (mode == "record")


def test_local_a_stale_tombstone_is_removed_before_the_signal(tmp_path):
    with TinyReplica("stay") as t:
        b = t.backend()
        (engine,) = b.engine_children(t.replica())
        stale = Path(app_engine_faults.tombstone_path(engine))
        stale.write_text("1.0\n")  # an earlier process's with the same pid
        try:
            b.error_engine(t.replica())()
            assert not stale.exists()
            assert [c["ok"] for c in b.effect_checks(_fault(b, t, [engine]))] == [False, True]
        finally:
            stale.unlink(missing_ok=True)


def test_local_a_request_left_for_the_engine_is_removed_before_the_error_signal():
    """A fault request left for the engine (a void one that recover wrote for an engine never signalled) would make
    the engine's hook arm it at the error's SIGUSR1 instead of raising: the error's fire removes it first."""
    with TinyReplica("record") as t:
        b = t.backend()
        (engine,) = b.engine_children(t.replica())
        left = Path(app_engine_faults.request_path(engine))
        left.write_text(engine_faults.void_request(None))
        try:
            assert b.error_engine(t.replica())() == [engine]
            assert not left.exists()
            checks = _until(lambda: b.effect_checks(_fault(b, t, [engine])))
            assert [c["ok"] for c in checks] == [True, True], checks
        finally:
            left.unlink(missing_ok=True)


def test_kuberay_the_error_script_removes_a_request_left_for_the_engine_too():
    script = ke.error_script([4242])
    assert app_engine_faults.request_path(4242) in script.split("kill -USR1")[0]


def test_local_an_engine_that_records_nothing_is_unproven_and_the_real_proof_says_so(monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.5}, raising=False)
    with TinyReplica("stay") as t:
        b, marker = t.backend(), faults.Marker()
        b.pick_replica = lambda zone=None, **kw: t.replica()
        f = error_engine(b, marker, zone="zone-a")  # the real fault and proof (bound: fast_proof's)
        assert f["effect"]["verified"] is False and f["effect"]["bound_s"] == 0.5
        assert [c["ok"] for c in f["effect"]["checks"]] == [False, True]
        assert f["effect"]["checks"][0]["seen"] == f"{f['pids'][0]} no record" and procs.alive(f["pids"][0])
        assert [m.event for m in marker.marks] == [rec.INJECT_START, rec.INJECT_END]  # injected, not in effect


def test_local_an_engine_without_the_hook_is_refused_and_nothing_is_sent():
    with TinyReplica("none") as t:
        b = t.backend()
        (engine,) = b.engine_children(t.replica())
        with pytest.raises(ClusterError, match="engine-fault hook is off .*nothing sent"):
            b.error_engine(t.replica())
        time.sleep(0.1)
        assert procs.alive(engine)  # SIGUSR1 would have killed it: it was not sent


def test_local_a_replica_without_an_engine_child_is_refused():
    with TinyReplica("exit", engines=0) as t:
        with pytest.raises(ClusterError, match="no engine child process to make fail"):
            t.backend().error_engine(t.replica())


def test_local_the_replica_gone_too_is_not_the_engine_s_error():
    with TinyReplica("exit") as t:
        b = t.backend()
        (engine,) = b.error_engine(t.replica())()
        _until(lambda: b.effect_checks(_fault(b, t, [engine]))[:1])
        procs.signal_pids([t.pid], signal.SIGKILL)
        t.proc.wait(timeout=5)
        assert [c["ok"] for c in b.effect_checks(_fault(b, t, [engine]))] == [True, False]


def test_local_plan_names_the_engine_and_checks_the_hook_without_signalling(monkeypatch):
    with TinyReplica("exit") as t:
        b = t.backend()
        monkeypatch.setattr(b, "pick_replica", lambda zone=None, **kw: t.replica())
        (engine,) = b.engine_children(t.replica())
        (row,) = b.plan(NAME, {"zone": "zone-a"})
        assert (row["kind"], row["name"]) == ("process", str(engine)) and "SIGUSR1" in row["does"]
        assert procs.alive(engine)
    with TinyReplica("none") as t:
        b = t.backend()
        monkeypatch.setattr(b, "pick_replica", lambda zone=None, **kw: t.replica())
        (row,) = plan.objects(b, [{"activity": "err", "scope": NAME, "arguments": {}}])
        assert row["kind"] == plan.REFUSED and "hook is off" in row["does"]


# ---------------------------------------------------------------- KubeRay: the fake kubelet
def test_kuberay_the_look_then_the_signal_to_the_engine_children_only_and_the_proof():
    s, b, stream = cluster()
    r = kube_replica(node="wb-1")
    fire = b.error_engine(r)
    (look,) = stream.calls
    assert look[:2] == ("wb-1", "ray-worker") and look[2] == ke.masks_script(41)
    assert "pgrep -P 41 -f EngineCore" in look[2] and "Sig(Blk|Ign|Cgt)" in look[2]
    assert s.kubelet.fates.get("wb-1") is None  # looked at, nothing sent yet
    f = {"scope": NAME, "target": "r1", "zones": ["zone-b"], "pid": 41, "pids": ["wb-1/57"]}
    s.kubelet.tombstones[("wb-1", 57)] = "1.000"  # a stale one, of an earlier process with the same pid
    assert fire() == ["wb-1/57"]
    assert stream.calls[-1][2] == ("rm -f /tmp/availproof-engine-error-57 /tmp/availproof-engine-fault-57.request; "
                                   "kill -USR1 57 && echo 57")
    assert s.kubelet.erred["wb-1"] == ["VLLM::EngineCor"] and s.kubelet.fates.get("wb-1") is None  # it lives on
    checks = b.effect_checks(f)
    assert [c["ok"] for c in checks] == [True, True] and checks[0]["seen"] == "57 raised it"
    assert s.kubelet.tombstones[("wb-1", 57)] != "1.000"  # the stale one was removed, this one written by the hook


def test_kuberay_no_tombstone_is_no_proof_whatever_the_engine_s_state():
    s, b, stream = cluster()
    f = {"scope": NAME, "target": "r1", "zones": ["zone-b"], "pid": 41, "pids": ["wb-1/57"]}
    checks = b.effect_checks(f)  # nothing sent: the engine runs, no record
    assert [c["ok"] for c in checks] == [False, True] and checks[0]["seen"] == "57 no record"
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")  # gone without raising the error: a crash, not an error
    assert [c["ok"] for c in b.effect_checks(f)] == [False, True]


def test_kuberay_an_engine_without_the_hook_or_no_engine_is_refused_before_any_signal():
    s, b, stream = cluster()
    s.kubelet.processes(s.pods["wb-1"])[57]["hook"] = False
    with pytest.raises(ClusterError, match="no handler of SIGUSR1: its default action would kill it"):
        b.error_engine(kube_replica(node="wb-1"))
    assert not any("kill -USR1" in c[2] for c in stream.calls) and s.kubelet.fates.get("wb-1") is None
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")
    with pytest.raises(ClusterError, match="no engine child process to make fail"):
        b.error_engine(kube_replica(node="wb-1"))


def test_kuberay_the_fault_records_nothing_when_refused_and_the_plan_does_not_exec(monkeypatch):
    s, b, stream = cluster()
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.0}, raising=False)
    b.pick_replica = lambda zone=None, **kw: kube_replica(node="wb-1")
    f = error_engine(b, faults.Marker(), zone="zone-b")
    assert f["effect"]["verified"] and f["pids"] == ["wb-1/57"]
    s2, b2, stream2 = cluster()
    b2.pick_replica = b.pick_replica
    s2.kubelet.processes(s2.pods["wb-1"])[57]["hook"] = False
    marker = faults.Marker()
    with pytest.raises(ClusterError):
        error_engine(b2, marker)
    assert marker.marks == []
    stream2.calls.clear()
    rows = b2.plan(NAME, {"zone": "zone-b"})
    assert [r["kind"] for r in rows] == ["Pod", "Process"] and stream2.calls == []
    assert "kill -USR1" in rows[0]["does"] and "SIGUSR1" in rows[1]["does"]


# ---------------------------------------------------------------- KubeRay: the same scripts through a real shell
def _sh(script: str) -> str:
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (script, r.stderr)
    return r.stdout


def test_kuberay_scripts_through_a_real_shell_read_the_hook_and_signal_the_engine():
    with TinyReplica("record") as t:
        (engine,) = t.backend().engine_children(t.replica())
        masks = ke.parse_masks(_sh(ke.masks_script(t.pid)))
        assert list(masks) == [engine] and engine_faults.handles(masks[engine])[0]
        assert ke.parse_tombstones(_sh(ke.tombstones_script([engine]))) == {engine: None}
        assert _sh(ke.error_script([engine])).split() == [str(engine)]
        deadline = time.monotonic() + 5
        while not ke.parse_tombstones(_sh(ke.tombstones_script([engine])))[engine] and time.monotonic() < deadline:
            time.sleep(0.05)
        (written,) = ke.parse_tombstones(_sh(ke.tombstones_script([engine]))).values()
        assert abs(float(written) - time.time()) < 30 and procs.alive(engine) and procs.alive(t.pid)
    with TinyReplica("none") as t:
        masks = ke.parse_masks(_sh(ke.masks_script(t.pid)))
        assert len(masks) == 1 and not engine_faults.handles(next(iter(masks.values())))[0]
    with TinyReplica("exit", engines=0) as t:
        assert ke.parse_masks(_sh(ke.masks_script(t.pid))) == {}


def test_local_the_heal_removes_the_engine_s_tombstone_and_restores_nothing_else(monkeypatch):
    with TinyReplica("record") as t:
        b = t.backend()
        (engine,) = b.error_engine(t.replica())()
        tomb = Path(app_engine_faults.tombstone_path(engine))
        _until(lambda: b.effect_checks(_fault(b, t, [engine])))
        assert tomb.exists()
        monkeypatch.setattr(b, "_restore", lambda done, **kw: {**done, **kw})  # no cluster to wait for here
        b.cluster.partitioned_zones = lambda: []
        done = b.heal([_fault(b, t, [engine])])
        assert not tomb.exists() and done["resumed"] == [] and done["nodes"] == [] and not done["head"]
