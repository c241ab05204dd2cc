"""The orphan check (chaos.system.orphan_watch, issue 44): the engines of a replica a fault killed or replaced followed until
gone, the fault's ``orphans`` in the summary, and its bound ``max_orphan_s``."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pathlib import Path

from chaos.core import bounds, experiment as exp_mod
from chaos.scopes import faults
from chaos.analysis import figures
from chaos.system import orphan_watch as ow
from chaos.recording import records as rec
import chaos.analysis.orphans as analysis_orphans
from chaos.backends.kuberay import orphans as kube_orphans
from chaos.backends.local import procs
from chaos.backends.local.backend import LocalBackend
from chaos.system.placement import Replica
from tests.unit.fake_backend import TinyReplica

REPLICA, ENGINE = 100, 101


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Lingering:
    """A backend whose replica (pid 100) is gone at ``replica_gone`` s and its engine (101) at ``engine_gone`` (None:
    never); each look costs nothing; ``fails``: every look raises."""

    def __init__(self, clock, replica_gone=0.0, engine_gone=5.0, fails=False):
        self.clock, self.replica_gone, self.engine_gone, self.fails = clock, replica_gone, engine_gone, fails
        self.looks = []

    def processes_left(self, node, pids):
        if self.fails:
            raise RuntimeError("exec refused")
        self.looks.append((self.clock(), list(pids)))
        t = self.clock()
        alive = {REPLICA: self.replica_gone is None or t < self.replica_gone,
                 ENGINE: self.engine_gone is None or t < self.engine_gone}
        return {p: 512.0 for p in pids if alive.get(p)}


def _replica(pid=REPLICA):
    return Replica(app="llm", deployment="LLMServer", replica_id="r1", state="RUNNING", actor_name=None, actor_id=None,
                   pid=pid, node_ip="10.0.0.1", node="pod-a", zone="zone-a", region=None)


def _watched(backend, clock, scope="replica", engines=(ENGINE,)):
    marker = faults.Marker()
    fault = {"fault_id": f"{scope}-1", "scope": scope, "target": "r1", "zones": ["zone-a"]}
    marker.attempted[fault["fault_id"]] = fault
    marker.started[fault["fault_id"]] = 0.0
    ow.record_victim(fault, _replica(), None if engines is None else list(engines))
    return marker, fault, ow.OrphanWatch(backend, marker, poll_s=0.5, clock=clock)


def _run_for(watch, clock, seconds):
    """The watch's ticks for ``seconds`` (its thread's loop, on the fake clock)."""
    end = clock.t + seconds
    while clock.t < end:
        watch.tick()
        clock.sleep(watch.poll_s)


def _summary_fault(fault, scope="replica"):
    unmeasurable = {}
    f = {"fault_id": fault["fault_id"], "scope": scope, "zones": ["zone-a"], "affected": {"failed_total": 0},
         "unmeasurable": unmeasurable}
    f["orphans"] = analysis_orphans.orphans_of(scope, faults.detail_of(fault), unmeasurable)
    return f


def _bound(f, limit=30.0):
    [row] = bounds.check({"faults": [f]}, {"max_orphan_s": limit})
    return row


def test_an_engine_that_lingers_5_s_after_its_replica_reads_5_s_and_meets_the_bound():
    clock = Clock()
    marker, fault, watch = _watched(Lingering(clock, replica_gone=0.2, engine_gone=5.2), clock)
    _run_for(watch, clock, 3.0)
    [o] = watch.conclude(30.0, sleep=clock.sleep)  # the engine still there at the end: looked on until gone
    assert o["status"] == ow.FREED and o["left"] == [] and o["rss_mb_left"] == 0.0
    assert o["replica_gone_s"] == 0.5 and o["seconds_until_freed"] == pytest.approx(5.0, abs=0.5)
    assert [m.event for m in marker.marks] == [rec.LOOKED_AFTER] and marker.marks[0].detail["orphans"] == o
    f = _summary_fault(fault)
    assert f["orphans"]["seconds_until_freed"] == o["seconds_until_freed"]
    assert _bound(f)["status"] == bounds.MET and _bound(f, 2.0)["status"] == bounds.VIOLATED


def test_an_engine_that_never_goes_is_left_at_the_bound_and_violates_it_waiting_no_longer():
    clock = Clock()
    marker, fault, watch = _watched(Lingering(clock, replica_gone=0.2, engine_gone=None), clock)
    _run_for(watch, clock, 2.0)
    [o] = watch.conclude(30.0, sleep=clock.sleep)
    assert o["status"] == ow.LEFT and o["left"] == [ENGINE] and o["seconds_until_freed"] is None
    assert o["rss_mb_left"] == 512.0 and "still alive" in o["why"]
    assert clock.t <= 2.0 + 30.0 + 1.0  # at most the bound after the replica went
    f = _summary_fault(fault)
    assert "orphans.seconds_until_freed" not in f["unmeasurable"]  # never freed: a violation, not unmeasured
    row = _bound(f)
    assert row["met"] is False and row["status"] == bounds.VIOLATED and row["value"] is None


def test_a_replica_never_replaced_is_not_applicable_and_its_wedged_engine_is_not_an_orphan():
    clock = Clock()
    marker, fault, watch = _watched(Lingering(clock, replica_gone=None, engine_gone=None), clock, scope="engine-wedge")
    _run_for(watch, clock, 2.0)
    [o] = watch.conclude(30.0, sleep=clock.sleep)
    assert o["status"] == ow.NOT_REPLACED and o["seconds_until_freed"] is None and clock.t < 3.0  # no waiting
    f = _summary_fault(fault, "engine-wedge")
    assert "not killed or replaced" in f["unmeasurable"]["orphans.seconds_until_freed"]
    row = _bound(f)
    assert row["met"] is None and row["status"] == bounds.NOT_APPLICABLE


def test_nothing_measured_is_null_with_the_reason_and_the_bound_unmeasurable():
    clock = Clock()
    marker, fault, watch = _watched(Lingering(clock, fails=True), clock)
    _run_for(watch, clock, 1.0)
    [o] = watch.conclude(30.0, sleep=clock.sleep)
    assert o["status"] == ow.UNMEASURED and o["seconds_until_freed"] is None and "exec refused" in o["why"]
    f = _summary_fault(fault)
    assert "exec refused" in f["unmeasurable"]["orphans.seconds_until_freed"]
    assert _bound(f)["status"] == bounds.UNMEASURABLE
    # engines not found before the kill: followed not at all, said why
    marker2, fault2, watch2 = _watched(Lingering(clock), clock, engines=None)
    fault2["victim"]["why"] = "the replica's engine processes could not be found before the kill (ExecError)"
    [o2] = watch2.conclude(30.0, sleep=clock.sleep)
    assert o2["status"] == ow.UNMEASURED and "could not be found" in o2["why"]
    # no orphan check recorded at all (a run that ended before it): null with the reason
    f3 = _summary_fault({"fault_id": "replica-3", "scope": "replica", "target": "r", "zones": []})
    assert f3["orphans"]["seconds_until_freed"] is None and "no orphan check" in f3["unmeasurable"][
        "orphans.seconds_until_freed"] and _bound(f3)["status"] == bounds.UNMEASURABLE


def test_a_scope_that_replaces_nothing_has_no_orphans_plane_and_the_bound_does_not_apply():
    f = _summary_fault({"fault_id": "engine-slow-1", "scope": "engine-slow", "target": "r", "zones": []}, "engine-slow")
    assert f["orphans"] is None and "kills or replaces no replica" in f["unmeasurable"]["orphans.seconds_until_freed"]
    assert _bound(f)["status"] == bounds.NOT_APPLICABLE


def test_the_bound_is_applied_by_default_to_the_scopes_that_kill_or_replace_a_replica():
    assert exp_mod.default_bounds("replica", {"max_failed_requests": 3}) == {"max_failed_requests": 3,
                                                                              "max_orphan_s": ow.DEFAULT_BOUND_S}
    assert exp_mod.default_bounds("engine-error", {"max_orphan_s": 10})["max_orphan_s"] == 10  # stated: kept
    assert "max_orphan_s" not in exp_mod.default_bounds("engine-slow", {}) and "max_orphan_s" not in \
        exp_mod.default_bounds("partition", {})
    assert bounds.BOUNDS["max_orphan_s"] is figures.ORPHANS_FREED


def test_the_default_orphan_bound_is_said_in_the_bounds_source():
    doc = json.loads((Path(__file__).resolve().parents[2] / "experiments" / "replica-kill.json").read_text())
    settings = exp_mod.settings(doc)
    assert settings.bounds["max_orphan_s"] == 30.0
    assert settings.bounds_source.endswith("max_orphan_s 30 by default: the fault kills or replaces a replica, "
                                           "whose engines must go (chaos.system.orphan_watch).")


def test_the_watch_thread_stops_by_itself():
    clock = Clock()
    _, _, watch = _watched(Lingering(clock, replica_gone=None, engine_gone=None), clock)
    watch.max_s, watch.poll_s = 0.0, 0.01
    watch.start()
    watch.join(2.0)
    assert not watch.is_alive()


def test_the_local_look_over_a_real_engine_child_left_by_its_killed_replica():
    """A tiny real replica and its engine child: the replica SIGKILLed (its engine found before), the engine left
    alive, then killed: gone (a zombie counts as gone), the seconds measured from the replica's end."""
    with TinyReplica(mode="stay") as t:
        backend, r = t.backend(), t.replica()
        engines, why = ow.engines_before_kill(backend, r)
        assert engines == t.engine_pids and why is None
        marker = faults.Marker()
        fault = {"fault_id": "replica-1", "scope": "replica", "target": "r1", "zones": []}
        marker.attempted["replica-1"], marker.started["replica-1"] = fault, time.monotonic()
        ow.record_victim(fault, r, engines)
        watch = ow.OrphanWatch(backend, marker, poll_s=0.05)
        watch.tick()
        assert set(backend.processes_left("w", engines)) == set(engines) and all(
            x and x > 0 for x in backend.processes_left("w", engines).values())  # alive, with its RSS in MB
        os.kill(t.pid, signal.SIGKILL)
        t.proc.wait(5)
        for _ in range(20):  # the replica seen gone, its engine (reparented) alive
            watch.tick()
            time.sleep(0.05)
        f = watch.followed["replica-1"]
        assert f.replica_gone_s is not None and not f.gone_s
        for p in engines:
            os.kill(p, signal.SIGKILL)
        [o] = watch.conclude(5.0)
        assert o["status"] == ow.FREED and o["left"] == [] and 0.5 <= o["seconds_until_freed"] < 5.0


def test_the_local_look_counts_a_zombie_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert set(LocalBackend.processes_left(None, None, [child.pid])) == {child.pid}
        child.kill()
        for _ in range(100):  # not reaped yet: a zombie, holding no memory
            if procs.state(child.pid) == "Z":
                break
            time.sleep(0.02)
        assert procs.state(child.pid) == "Z" and LocalBackend.processes_left(None, None, [child.pid]) == {}
    finally:
        child.kill()
        child.wait()


def test_the_kuberay_scripts_through_a_real_shell():
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "availproof::EngineCore"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        out = subprocess.run(["sh", "-c", kube_orphans.children_script(os.getpid())], capture_output=True,
                             text=True, check=True).stdout
        assert [int(x) for x in out.split()] == [engine.pid]  # the EngineCore child, not the other one
        other.kill()
        other.wait()
        gone = other.pid
        out = subprocess.run(["sh", "-c", kube_orphans.left_script([engine.pid, gone])], capture_output=True,
                             text=True, check=True).stdout
        left = kube_orphans.parse_left(out)
        assert set(left) == {engine.pid} and left[engine.pid] > 0
        engine.kill()  # a zombie until waited for: gone
        time.sleep(0.2)
        out = subprocess.run(["sh", "-c", kube_orphans.left_script([engine.pid])], capture_output=True,
                             text=True, check=True).stdout
        assert kube_orphans.parse_left(out) == {}
    finally:
        for p in (engine, other):
            p.kill()
            p.wait()


def test_the_kuberay_look_counts_a_pod_gone_as_every_process_gone(monkeypatch):
    from types import SimpleNamespace

    from chaos.backends.kuberay.engines import Engines
    from chaos.backends.kuberay.kube import pod_exec as kube_exec

    class Pods:
        """The pods part as the engines part uses it (exec, pods)."""

        cores = []

        def __init__(self, names):
            self.names = names

        def exec(self, pod, script, core=None):
            self.cores.append(core)
            raise kube_exec.ExecError(f"pods {pod} not found")

        def pods(self):
            return [{"metadata": {"name": n}} for n in self.names]

    def engines(names):
        return Engines(SimpleNamespace(exec_core=None), None, Pods(names))

    monkeypatch.setattr(kube_exec, "own_core", lambda core: ("own", core))
    assert engines([]).processes_left("pod-a", [1, 2]) == {}
    assert Pods.cores == [("own", None)]  # the watch's thread execs over an ApiClient of its own
    with pytest.raises(kube_exec.ExecError):  # the pod there: a look that failed, not a process gone
        engines(["pod-a"]).processes_left("pod-a", [1, 2])


def test_a_replica_kill_on_the_fake_kuberay_leaves_its_engine_until_it_goes_then_its_pod_takes_all():
    """Through the fake kubelet (tests/unit/kube_fake.py), whose killed replica's engine child is not reaped: the
    engine found before the kill, followed by exec, left; once it ends, freed; a pod deleted counts as gone."""
    from chaos.scopes.replica import kill_replica
    from tests.unit.test_kuberay_backend import cluster, replica

    s, b, _ = cluster()
    clock = Clock()
    marker = faults.Marker()
    f = kill_replica(b, marker, replica=replica())
    marker.started[f["fault_id"]] = 0.0
    watch = ow.OrphanWatch(b, marker, poll_s=0.5, clock=clock)
    _run_for(watch, clock, 2.0)
    followed = watch.followed[f["fault_id"]]
    assert followed.replica_gone_s == 0.0 and followed.rss_mb == {57: 2.0}  # the engine alive, 2048 kB resident
    s.kubelet._end(s.pods["wa-1"], 57, "SIGKILL")  # the orphan ends 2 s after its replica
    [o] = watch.conclude(30.0, sleep=clock.sleep)
    assert o["status"] == ow.FREED and o["seconds_until_freed"] == 2.0 and o["engines"] == [57]
    assert b.processes_left("wa-1", [41, 57]) == {}
    s.pods.pop("wa-1")  # the pod gone: every process of it gone, not a failed look
    assert b.processes_left("wa-1", [57]) == {}
