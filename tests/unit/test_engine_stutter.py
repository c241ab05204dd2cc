"""engine-stutter (issue 35): a straggler, its engine throttled by a SIGSTOP/SIGCONT duty cycle for a stated time.
The throttle's arithmetic and its proof (pure), the fault through the real Marker and proof (fake backend), the
local duty cycle over tiny real processes (seen stopped and running; a cycle that never stopped the engine, or a
hang, unproven; the heal and the cycle's own bound leave the engine running), and the KubeRay commands (the fake
kubelet, its marks for recover, and the same scripts through a real shell)."""

import secrets
import subprocess
import time

import pytest

from chaos.scopes import faults
from chaos.core import plan
from chaos.recording import records as rec
from chaos import scopes
from chaos.backends import base, engine_faults
from chaos.backends.kuberay.kube import access as kube_access, marks as km
from chaos.backends.base import Implementation
from chaos.backends.engine_faults import Throttle
from chaos.backends.kuberay import KubeRayBackend, engines as ke
from chaos.backends.local import procs, throttle
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.scopes import Restore
from chaos.base.errors import ClusterError, UsageError
from chaos.system.placement import Replica
from chaos.scopes.engine_stutter import stutter_engine
from tests.unit.fake_backend import FakeBackend, TinyReplica
from tests.unit.test_kuberay_backend import cluster, replica as kube_replica

NAME = "engine-stutter"
FAST = Throttle(factor=3, period_s=0.1, duration_s=1.0)  # stopped 0.2 s, running 0.1 s


# ---------------------------------------------------------------- the scope and the throttle
def test_the_scope_says_what_it_is_and_the_backends_run_it():
    s = scopes.get(NAME)
    assert (s.fault, s.backend_methods) == (stutter_engine, ("stutter_engine", "resume_engine")) and s.straggler
    assert s.zoned and s.every_target_affected and not s.replacing
    assert ("patch", "pods") in {(a.verb, a.resource) for a in s.accesses(kube_access.Asked())}  # its mark, for recover
    for backend in (LocalBackend, KubeRayBackend):
        assert base.scope_capability(NAME) in base.capabilities_of(backend)


def test_the_throttle_runs_one_period_of_every_factor():
    t = Throttle(factor=4, period_s=0.2, duration_s=20)
    assert (t.run_s, t.stop_s, t.cycle_s) == (0.2, 0.6, 0.8)
    assert t.bound_s == 20 + engine_faults.SELF_STOP_MARGIN_S and t.cycles == 32  # 25 s / 0.8 s, rounded up
    assert engine_faults.sampling(t) == (17, 0.1)  # two per part of a cycle, over two cycles
    assert engine_faults.sampling(Throttle(factor=100, period_s=0.1)) == (60, round(20 / 59, 4))  # at most 60
    assert Throttle.of({"factor": 2, "period_s": 0.5}) == Throttle(2, 0.5, 20.0)
    assert "stopped 0.6 s, running 0.2 s, every 0.8 s (factor 4) for 20 s" == t.text()


@pytest.mark.parametrize("kw, why", [({"factor": 1}, "factor must be a number above 1"),
                                     ({"factor": True}, "factor"), ({"factor": "4"}, "factor"),
                                     ({"period_s": 0}, "period_s must be"), ({"period_s": 0.01}, "at least 0.02"),
                                     ({"duration_s": -1}, "duration_s must be"),
                                     ({"factor": 50, "period_s": 0.5}, "one cycle .* at most 20 s")])
def test_a_throttle_out_of_range_is_refused_in_one_line(kw, why):
    with pytest.raises(UsageError, match=why):
        Throttle(**kw)


def test_the_duty_cycle_proof_needs_the_engine_seen_stopped_and_running():
    ok = engine_faults.duty_cycle_checks([57], [{57: "T"}, {57: "S"}, {57: "R"}])
    assert [c["ok"] for c in ok] == [True, True] and "57: stopped in 1, running in 2 of 3 samples" in ok[0]["seen"]
    never_stopped = engine_faults.duty_cycle_checks([57], [{57: "S"}] * 5)
    assert [c["ok"] for c in never_stopped] == [False, True]
    hung = engine_faults.duty_cycle_checks([57], [{57: "T"}] * 5)
    assert [c["ok"] for c in hung] == [True, False] and "not a hang" in hung[1]["check"]
    gone = engine_faults.duty_cycle_checks([57], [{57: None}, {57: "gone"}])
    assert [c["ok"] for c in gone] == [False, False] and "gone in 2" in gone[0]["seen"]
    both = engine_faults.duty_cycle_checks([57, 58], [{57: "T", 58: "S"}, {57: "S", 58: "S"}])
    assert [c["ok"] for c in both] == [False, True]  # every engine must be seen stopped
    assert [c["ok"] for c in engine_faults.duty_cycle_checks([], [])] == [False, False]
    assert engine_faults.replica_runs(41, "S")["ok"] and not engine_faults.replica_runs(41, "T")["ok"]
    assert not engine_faults.replica_runs(41, None)["ok"] and not engine_faults.replica_runs(41, "Z")["ok"]


# ---------------------------------------------------------------- the fault, through the real marks and proof
class SlowBackend(FakeBackend):
    def __init__(self, seen=("T", "S")):
        self.seen, self.calls = seen, []

    def pick_replica(self, zone=None, **kw):
        return Replica(app="llm", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name=None,
                       actor_id=None, pid=41, node_ip=None, node="w", zone=zone, region=None)

    def stutter_engine(self, r, factor, period_s, duration_s):
        self.calls.append(("slow", r.pid, factor, period_s, duration_s))
        return [57]

    def resume_engine(self, pids):
        self.calls.append(("resume", list(pids)))
        return list(pids)

    def _effect(self, fault):
        self.calls.append(("look", Throttle.of(fault)))
        return (engine_faults.duty_cycle_checks(fault["pids"], [{57: s} for s in self.seen])
                + [engine_faults.replica_runs(fault["pid"], "S")])

    implementations = base.implementations(
        Implementation(NAME, lambda b, s, a: [], lambda b, f: b._effect(f), lambda b, f: Restore(resume=f["pids"])))


def test_the_fault_marks_proves_and_heals_after_its_duration():
    b, marker = SlowBackend(), faults.Marker()
    f = stutter_engine(b, marker, zone="zone-a", factor=2, period_s=0.02, duration_s=0.2)
    assert b.calls == [("slow", 41, 2, 0.02, 0.2), ("look", Throttle(2, 0.02, 0.2)), ("resume", [57])]
    assert [(m.event, m.scope, m.zones) for m in marker.marks] == [(e, NAME, ["zone-a"]) for e in rec.MARK_EVENTS]
    assert marker.marks[0].detail == {"node": "w", "deployment": "StreamTarget", "factor": 2, "period_s": 0.02,
                                      "duration_s": 0.2, "run_s": 0.02, "stop_s": 0.02}
    assert f["effect"]["verified"] and f["pid"] == 41 and f["pids"] == [57] and marker.unhealed() == []
    assert (marker.marks[2].t_ns - marker.marks[0].t_ns) / 1e9 == pytest.approx(0.2, abs=0.15)  # healed at duration_s


@pytest.mark.parametrize("seen", [("S", "S", "S"), ("T", "T", "T")])  # a cycle that never stopped it; a hang
def test_a_duty_cycle_not_seen_is_unproven_and_still_healed(seen, monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.0}, raising=False)  # bound: 3 cycles (0.12 s)
    b, marker = SlowBackend(seen=seen), faults.Marker()
    f = stutter_engine(b, marker, factor=2, period_s=0.02, duration_s=0.05)
    assert f["effect"]["verified"] is False and f["effect"]["bound_s"] == pytest.approx(0.12)
    assert b.calls[-1] == ("resume", [57]) and [m.event for m in marker.marks][-1] == rec.HEAL_END


def test_a_throttle_out_of_range_is_refused_before_anything():
    b, marker = SlowBackend(), faults.Marker()
    with pytest.raises(UsageError, match="factor"):
        stutter_engine(b, marker, factor=0.5)
    assert b.calls == [] and marker.marks == []


# ---------------------------------------------------------------- local: the duty cycle over tiny real processes
def _state_until(pid, want, timeout=3.0):
    deadline = time.monotonic() + timeout
    while procs.state(pid) not in want and time.monotonic() < deadline:
        time.sleep(0.01)
    return procs.state(pid)


def test_local_the_duty_cycle_is_seen_stopped_and_running_and_its_stop_leaves_the_engine_running():
    with TinyReplica("none") as t:
        (engine,) = t.backend().engine_children(t.replica())
        cycle = throttle.DutyCycle([engine], FAST)
        cycle.start()
        try:
            checks = throttle.sample([engine], t.pid, FAST)
            assert [c["ok"] for c in checks] == [True, True, True], checks
        finally:
            assert engine in cycle.stop()
        assert not cycle.is_alive() and cycle.ended == "stopped" and cycle.cycles >= 1
        for _ in range(10):  # stays running: nothing stops it again
            assert procs.state(engine) not in ("T", "t")
            time.sleep(0.02)


def test_local_a_duty_cycle_ends_by_itself_at_its_bound_and_when_its_engine_is_gone(monkeypatch):
    monkeypatch.setattr(engine_faults, "SELF_STOP_MARGIN_S", 0.1)
    with TinyReplica("none", engines=2) as t:
        a, b = t.backend().engine_children(t.replica())
        cycle = throttle.DutyCycle([a], Throttle(4, 0.05, 0.2))
        cycle.start()
        cycle.join(3.0)
        assert not cycle.is_alive() and cycle.ended == "bound"
        assert _state_until(a, ("S", "R")) in ("S", "R")  # left continued
        gone = throttle.DutyCycle([b], Throttle(4, 0.05, 5.0))
        gone.start()
        time.sleep(0.1)
        procs.signal_pids([b], 9)
        gone.join(3.0)
        assert not gone.is_alive() and gone.ended == "gone"


def test_local_a_look_at_an_engine_never_stopped_or_hung_is_unproven():
    with TinyReplica("none") as t:
        (engine,) = t.backend().engine_children(t.replica())
        never = throttle.sample([engine], t.pid, FAST)
        assert [c["ok"] for c in never] == [False, True, True]
        procs.signal_pids([engine], 19)  # SIGSTOP: a hang, not a duty cycle
        try:
            assert _state_until(engine, ("T",)) == "T"  # a signal is taken when the process next runs
            hung = throttle.sample([engine], t.pid, FAST)
        finally:
            procs.signal_pids([engine], 18)
        assert [c["ok"] for c in hung] == [True, False, True]


def test_local_the_fault_through_the_backend_proves_heals_and_leaves_the_engine_running():
    with TinyReplica("none") as t:
        b, marker = t.backend(), faults.Marker()
        b.pick_replica = lambda zone=None, **kw: t.replica()
        (engine,) = b.engine_children(t.replica())
        f = stutter_engine(b, marker, zone="zone-a", factor=4, period_s=0.05, duration_s=0.8)
        assert f["pids"] == [engine] and f["pid"] == t.pid
        assert f["effect"]["verified"], f["effect"]
        assert [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
        assert b.duty_cycles == [] and _state_until(engine, ("S", "R")) in ("S", "R")
        time.sleep(0.3)
        assert procs.state(engine) not in ("T", "t")  # the cycle stopped for good
        assert b.restores([f]) == [Restore(resume=[engine])]  # what the rollback's heal restores: SIGCONT


def test_local_the_rollback_heal_ends_a_cycle_the_fault_did_not():
    with TinyReplica("none") as t:
        b = t.backend()
        pids = b.stutter_engine(t.replica(), 4, 0.05, 30)
        assert len(b.duty_cycles) == 1 and _state_until(pids[0], ("T",)) == "T"
        assert b.resume_engine(pids) == pids  # what heal() does with Restore(resume=...)
        assert b.duty_cycles == [] and procs.state(pids[0]) not in ("T", "t")


def test_local_a_replica_without_an_engine_is_refused_and_the_plan_names_the_engine(monkeypatch):
    with TinyReplica("none", engines=0) as t:
        with pytest.raises(ClusterError, match="no engine child process to slow down"):
            t.backend().stutter_engine(t.replica(), 4, 0.2, 20)
    with TinyReplica("none") as t:
        b = t.backend()
        monkeypatch.setattr(b, "pick_replica", lambda zone=None, **kw: t.replica())
        (engine,) = b.engine_children(t.replica())
        (row,) = b.plan(NAME, {"zone": "zone-a", "factor": 4, "period_s": 0.2, "duration_s": 20})
        assert (row["kind"], row["name"]) == ("process", str(engine))
        assert "stopped 0.6 s, running 0.2 s, every 0.8 s (factor 4) for 20 s" in row["does"]
        assert b.duty_cycles == [] and procs.state(engine) not in ("T", "t")  # a plan changes nothing
        (refused,) = plan.objects(b, [{"activity": "slow", "scope": NAME, "arguments": {"factor": 1}}])
        assert refused["kind"] == plan.REFUSED and "factor" in refused["does"]


# ---------------------------------------------------------------- KubeRay: the fake kubelet
def test_kuberay_one_exec_starts_the_loop_recorded_on_the_pod_proven_by_samples_and_ended_at_the_heal():
    s, b, stream = cluster()
    pids = b.stutter_engine(kube_replica(node="wb-1"), 4, 0.2, 20)
    assert pids == ["wb-1/57"] and len(stream.calls) == 1
    script = stream.calls[0][2]
    tid = script.split(";")[0].split()[-1]
    assert tid.startswith("run1-") and f"availproof-throttle-{tid}" in script and "pgrep -P 41 -f EngineCore" in script
    assert "nohup sh -c" in script and ">/dev/null 2>&1 &" in script  # in the background: the exec returns at once
    assert f"while [ $i -lt {Throttle(4, 0.2, 20).cycles} ]" in script and "sleep 0.600" in script
    assert 'trap "kill -CONT $p 2>/dev/null" EXIT' in script
    mark = km.read(s.pods["wb-1"]["metadata"]["annotations"][km.PAUSED_MARK])
    assert mark["pids"] == [57] and mark["throttles"] == [tid] and mark["run"] == "run1" and mark["expires"]
    f = {"scope": NAME, "target": "r1", "zones": ["zone-b"], "pid": 41, "pids": pids, "factor": 4, "period_s": 0.2,
         "duration_s": 20}
    checks = b.effect_checks(f)
    assert [c["ok"] for c in checks] == [True, True, True], checks
    assert stream.calls[-1][2].startswith(ke.SAMPLE) and "while [ $i -lt 17 ]" in stream.calls[-1][2]
    assert b.resume_engine(pids) == pids
    heal = stream.calls[-1][2]
    assert heal.startswith(f"pkill -KILL -f '[a]vailproof-throttle-{tid}'")
    assert heal.endswith("kill -CONT 57; else echo gone; fi")
    assert s.kubelet.unthrottled == [("wb-1", tid)] and b.throttles == {} and b.paused == []
    assert s.pods["wb-1"]["metadata"]["annotations"].get(km.PAUSED_MARK) is None
    assert [c["ok"] for c in b.effect_checks(f)][:2] == [False, True]  # no cycle any more: never seen stopped


def test_kuberay_the_fault_and_its_heal_and_a_refusal(monkeypatch):
    s, b, stream = cluster()
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.0}, raising=False)
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    b.pick_replica = lambda zone=None, **kw: kube_replica(node="wb-1")
    marker = faults.Marker()
    f = stutter_engine(b, marker, zone="zone-b", factor=2, period_s=0.02, duration_s=0.05)
    assert f["effect"]["verified"] and [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
    assert len(s.kubelet.unthrottled) == 1 and b.paused == []
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="no engine child process to slow down"):
        stutter_engine(b, marker, zone="zone-b")
    assert marker.marks == [] and b.paused == [] and b.throttles == {}


def test_kuberay_recover_ends_a_crashed_run_s_duty_cycle_then_continues_its_engine():
    s, b, stream = cluster()
    b.stutter_engine(kube_replica(node="wc-1"), 4, 0.2, 20)  # the run dies here, before any heal
    tid = b.throttles["wc-1"][0]
    _, fresh, _ = cluster()
    fresh.core, fresh.stream_fn, fresh.exec_core = b.core, b.stream_fn, b.exec_core
    fresh.run_id = "run2"
    (found,) = [x for x in fresh.leftovers() if x["kind"] == "Paused"]
    assert (found["name"], found["pids"], found["throttles"], found["run_id"]) == ("wc-1", [57], [tid], "run1")
    assert f"duty cycle(s) {tid} (engine-stutter)" in found["what"]
    fresh.remove_leftovers([found])
    assert s.kubelet.unthrottled == [("wc-1", tid)] and fresh.throttles == {}
    assert s.pods["wc-1"]["metadata"]["annotations"].get(km.PAUSED_MARK) is None


def test_kuberay_the_plan_names_the_pod_and_the_cycle_without_exec():
    s, b, stream = cluster()
    b.pick_replica = lambda zone=None, **kw: kube_replica(node="wb-1")
    (row,) = b.plan(NAME, {"zone": "zone-b", "factor": 4, "period_s": 0.2, "duration_s": 20})
    assert (row["kind"], row["name"]) == ("Pod", "wb-1") and "stopped 0.6 s, running 0.2 s" in row["does"]
    assert km.PAUSED_MARK in row["does"] and stream.calls == []


# ---------------------------------------------------------------- KubeRay: the same scripts through a real shell
def _sh(script: str) -> str:
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (script, r.stderr)
    return r.stdout


def _loop_running(tid: str) -> bool:
    """Whether the loop of ``tid`` (started by this test: the id is its own, random) still runs."""
    return subprocess.run(["pgrep", "-f", f"[a]vailproof-throttle-{tid}"], capture_output=True).returncode == 0


def _wait(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def test_kuberay_scripts_through_a_real_shell_cycle_the_engine_and_the_heal_leaves_it_running():
    tid = f"test-{secrets.token_hex(4)}"
    with TinyReplica("none") as t:
        (engine,) = t.backend().engine_children(t.replica())
        try:
            assert _sh(ke.slow_script(t.pid, FAST, tid)).split() == [str(engine)]
            assert _wait(lambda: _loop_running(tid))
            n, interval = engine_faults.sampling(FAST)
            samples = ke.parse_samples(_sh(ke.sample_script([engine, t.pid], n, interval)))
            assert len(samples) == n
            checks = engine_faults.duty_cycle_checks([engine], samples)
            assert [c["ok"] for c in checks] == [True, True], checks
            assert engine_faults.replica_runs(t.pid, samples[-1][t.pid])["ok"]
            assert _sh(ke.unthrottle_script(tid) + f"if kill -0 {engine} 2>/dev/null; then kill -CONT {engine}; "
                                                   "else echo gone; fi") == ""
            assert not _loop_running(tid)
            for _ in range(10):  # nothing stops it again
                assert procs.state(engine) not in ("T", "t")
                time.sleep(0.03)
        finally:
            if _loop_running(tid):
                _sh(ke.unthrottle_script(tid) + "true")


def test_kuberay_the_loop_ends_by_itself_and_its_trap_continues_the_engine(monkeypatch):
    monkeypatch.setattr(engine_faults, "SELF_STOP_MARGIN_S", 0.1)
    tid = f"test-{secrets.token_hex(4)}"
    with TinyReplica("none") as t:
        (engine,) = t.backend().engine_children(t.replica())
        t_short = Throttle(4, 0.05, 0.3)  # 0.4 s: 2 cycles of 0.2 s
        assert t_short.cycles == 2
        try:
            _sh(ke.slow_script(t.pid, t_short, tid))
            assert _wait(lambda: not _loop_running(tid), 5.0)
            assert procs.state(engine) not in ("T", "t")  # the EXIT trap continued it
        finally:
            if _loop_running(tid):
                _sh(ke.unthrottle_script(tid) + "true")
        # a TERM ends it too, continued
        tid2 = f"test-{secrets.token_hex(4)}"
        _sh(ke.slow_script(t.pid, Throttle(4, 0.05, 30), tid2))
        assert _wait(lambda: _loop_running(tid2))
        subprocess.run(["pkill", "-TERM", "-f", f"[a]vailproof-throttle-{tid2}"], check=True)
        assert _wait(lambda: not _loop_running(tid2), 5.0)
        assert _state_until(engine, ("S", "R")) in ("S", "R")
    with TinyReplica("none", engines=0) as t:  # no engine: nothing started, nothing printed
        assert _sh(ke.slow_script(t.pid, FAST, f"test-{secrets.token_hex(4)}")) == ""
