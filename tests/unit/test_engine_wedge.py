"""engine-wedge (issue 44): the engine's step stuck for good, its process alive and not stopped, until a detector
replaces the replica or the run's end releases it. The hook's request and wedge (pure), vLLM's step wrapper, the
stream target's real engine child wedged by the signal (its steps stop, its state is not T, the mark names the
run), the local backend's wedge, proof and release over that child (another run's mark left alone), and the
KubeRay scripts through a real shell."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.scopes import faults
from chaos import scopes
from chaos.backends import base, engine_faults
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.kuberay import KubeRayBackend, wedge as kw
from chaos.backends.local import engines, procs
from chaos.backends.local.backend import LocalBackend
from chaos.scopes.engine_wedge import wedge_engine
from serve_apps import engine_faults as app

from .stream_engine_helpers import engine, one_engine_backend, until  # noqa: F401 - engine: the fixture

NAME = "engine-wedge"


def test_the_scope_says_what_it_is_and_both_backends_run_it():
    s = scopes.get(NAME)
    assert (s.fault, s.backend_methods, s.label) == (wedge_engine, ("wedge_engine",), "engine wedge")
    assert s.zoned and s.every_target_affected and not s.heal_args and s.conflict_class == "replica-level"
    assert set(s.accesses(kube_access.Asked())) == set(kube_access.EXEC)
    for backend in (LocalBackend, KubeRayBackend):
        assert base.scope_capability(NAME) in base.capabilities_of(backend)
        assert not s.missing_on(backend)


# ---------------------------------------------------------------- the hook (pure)
@pytest.fixture
def tmpdir_hook(tmp_path, monkeypatch):
    monkeypatch.setattr(app, "TOMBSTONE_DIR", str(tmp_path))
    return tmp_path


def test_no_request_or_an_unreadable_one_is_an_error_and_a_wedge_request_is_taken_once(tmpdir_hook):
    assert app.take_request(57) == {"fault": "error"}
    Path(app.request_path(57)).write_text("not json")
    assert app.take_request(57) == {"fault": "error"}
    Path(app.request_path(57)).write_text(engine_faults.wedge_request("run-1", spin=True))
    assert app.take_request(57) == {"fault": "wedge", "run": "run-1", "spin": True}
    assert not Path(app.request_path(57)).exists()  # taken: the next signal is an error again
    assert app.take_request(57) == {"fault": "error"}


def test_a_wedge_blocks_for_as_long_as_its_mark_exists(tmpdir_hook):
    looks = []

    def exists(path):
        looks.append(path)
        if len(looks) == 4:
            Path(path).unlink()  # the run's end removes it
        return Path(path).exists()

    app.wedge({"fault": "wedge", "run": "run-1"}, pid=57, exists=exists, sleep=lambda s: None)
    assert len(looks) == 4 and looks[0] == app.wedge_path(57)


def test_the_mark_names_the_run(tmpdir_hook):
    seen = {}

    def exists(path):
        seen["mark"] = Path(path).read_text()
        return False

    app.wedge({"fault": "wedge", "run": "run-1"}, pid=57, exists=exists, sleep=lambda s: None)
    assert engine_faults.mark_run(seen["mark"]) == "run-1" and json.loads(seen["mark"])["t"] > 0


def test_vllm_s_step_wrapper_wedges_then_steps_and_without_a_request_still_errs(tmpdir_hook, monkeypatch):
    class Core:
        def step(self):
            return "stepped"

    trigger = app.Trigger()
    app.install(Core, [], trigger)
    wedged = []
    monkeypatch.setattr(app, "wedge", lambda request, **kw: wedged.append(request))
    monkeypatch.setattr(app.os, "getpid", lambda: 57)
    Path(app.request_path(57)).write_text(engine_faults.wedge_request("run-1"))
    trigger.arm()
    assert Core().step() == "stepped" and wedged == [{"fault": "wedge", "run": "run-1", "spin": False}]
    trigger.arm()
    with pytest.raises(app.InjectedEngineError):
        Core().step()


def test_a_signal_an_idle_engine_never_took_is_made_void_at_the_run_s_end(tmpdir_hook, monkeypatch):
    """The signal armed an idle engine (it takes the request at its next step) and the run ended first: the rig
    makes the request void, so the next run's first step neither wedges nor raises an error nobody injected."""
    class Core:
        def step(self):
            return "stepped"

    trigger = app.Trigger()
    app.install(Core, [], trigger)
    monkeypatch.setattr(app.os, "getpid", lambda: 57)
    monkeypatch.setattr(app, "wedge", lambda request, **kw: pytest.fail("wedged after the run's end"))
    Path(app.request_path(57)).write_text(engine_faults.wedge_request("run-1"))
    trigger.arm()  # the signal, the engine idle: nothing stepped
    (outcome,) = engines.release("run-1", [57])
    assert outcome["released"] is False and outcome["found"] == "no wedge mark"
    assert engine_faults.mark_run(Path(app.request_path(57)).read_text()) == "run-1"
    assert Core().step() == "stepped" and not trigger.armed  # taken, void: nothing fired
    assert not Path(app.request_path(57)).exists()


# ---------------------------------------------------------------- the stream target's real engine child
def test_the_stream_engine_wedged_by_the_local_backend_steps_no_more_is_not_stopped_and_is_proven(engine):
    b = one_engine_backend(engine.pid)
    fire = engines.wedge(b, SimpleNamespace(replica_id="r1"))
    assert fire() == [engine.pid]
    assert until(lambda: Path(app.wedge_path(engine.pid)).exists())
    count = engine.steps.count
    time.sleep(1.3)
    assert engine.steps.count <= count + 1  # at most a step already in the pipe
    assert engine.state() == "hung" and engine.reason() is None  # the health check passes: a gray failure
    assert procs.state(engine.pid) == "S"  # blocked in its step, not stopped (T)
    checks = engines.wedge_checks({"pids": [engine.pid]}, "run-1")
    assert [c["ok"] for c in checks] == [True, True], checks
    assert [c["ok"] for c in engines.wedge_checks({"pids": [engine.pid]}, "another-run")] == [False, True]


def test_the_run_s_end_releases_only_its_own_wedge_and_the_engine_steps_again(engine):
    engines.wedge(one_engine_backend(engine.pid), SimpleNamespace(replica_id="r1"))()
    assert until(lambda: Path(app.wedge_path(engine.pid)).exists())
    (kept,) = engines.release("another-run", [engine.pid])
    assert (kept["released"], kept["found"]) == (False, "another run's mark")
    assert Path(app.wedge_path(engine.pid)).exists() and until(lambda: engine.state() == "hung")
    (done,) = engines.release("run-1", [engine.pid])
    assert (done["released"], done["engine"]) == (True, "alive")
    count = engine.steps.count
    assert until(lambda: engine.steps.count > count + 10)  # it steps again
    assert engine.state() == "ok"


def test_a_failed_wedge_is_unproven_not_claimed(monkeypatch, engine):
    """The signal's request never reaching the engine (it errs instead) leaves no mark: the proof fails."""
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 0.5}, raising=False)
    procs.signal_pids([engine.pid], signal.SIGUSR1)  # no request: an engine error, not a wedge
    assert until(lambda: engine.state() == "errored")
    # the tombstone is written before the engine exits: its exit (gone or a zombie) is waited for, not raced
    assert until(lambda: procs.state(engine.pid) in engine_faults.GONE)
    assert [c["ok"] for c in engines.wedge_checks({"pids": [engine.pid]}, "run-1")] == [False, False]


# ---------------------------------------------------------------- the KubeRay scripts, through a real shell
def test_kuberay_s_scripts_wedge_prove_and_release_through_a_shell(engine):
    request = engine_faults.wedge_request("run-9").strip()
    out = subprocess.run(["sh", "-c", kw.wedge_script([engine.pid], request)], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == [str(engine.pid)]
    assert until(lambda: Path(app.wedge_path(engine.pid)).exists())
    said = subprocess.run(["sh", "-c", kw.marks_script([engine.pid])], capture_output=True, text=True).stdout
    marks, states = kw.parse_marks(said), kw.parse_states(said)
    assert [c["ok"] for c in engine_faults.wedge_checks([engine.pid], marks, states, "run-9")] == [True, True]
    other = subprocess.run(["sh", "-c", kw.release_script([engine.pid], "run-8")], capture_output=True, text=True)
    assert other.stdout.split() == ["kept", str(engine.pid)] and Path(app.wedge_path(engine.pid)).exists()
    ours = subprocess.run(["sh", "-c", kw.release_script([engine.pid], "run-9")], capture_output=True, text=True)
    assert ours.stdout.split() == ["released", str(engine.pid)] and not Path(app.wedge_path(engine.pid)).exists()
    count = engine.steps.count
    assert until(lambda: engine.steps.count > count + 10)


# ---------------------------------------------------------------- recover on KubeRay: any run's marks, in every pod
def test_kuberay_recover_scripts_release_any_run_s_marks_and_void_pending_requests_through_a_shell(tmp_path):
    """The look lists every mark of any fault and run and each request not void; the recover removes every mark,
    voids a request whose engine lives (its armed next step then does nothing) and removes one whose engine is gone."""
    from chaos.backends.kuberay import engine_marks as em

    live, dead = os.getpid(), 2 ** 22 + 7  # above any pid_max default: no such process
    for fault, pid, run in (("wedge", 11, "run-1"), ("garbage", 12, "run-2"), ("stall", 13, "run-3"),
                            ("slow", 14, "run-4")):
        (tmp_path / f"availproof-engine-{fault}-{pid}").write_text(json.dumps({"run": run, "t": 1.0}) + "\n")
    (tmp_path / "availproof-engine-slow-14.99.tmp").write_text("half written")  # not a mark
    (tmp_path / "availproof-engine-error-15").write_text("1.0\n")  # a tombstone, not a held fault
    (tmp_path / f"availproof-engine-fault-{live}.request").write_text(engine_faults.held_request("stall", "run-5"))
    (tmp_path / f"availproof-engine-fault-{dead}.request").write_text(engine_faults.wedge_request("run-6"))
    (tmp_path / "availproof-engine-fault-16.request").write_text(engine_faults.void_request("run-7"))  # already void
    look = subprocess.run(["sh", "-c", em.look_script(str(tmp_path))], capture_output=True, text=True, check=True)
    found = em.parse(look.stdout)
    assert sorted((x["what"], x["fault"], x["pid"], engine_faults.mark_run(x["text"])) for x in found) == [
        ("mark", "garbage", 12, "run-2"), ("mark", "slow", 14, "run-4"), ("mark", "stall", 13, "run-3"),
        ("mark", "wedge", 11, "run-1"), ("request", "stall", live, "run-5"), ("request", "wedge", dead, "run-6")]
    said = subprocess.run(["sh", "-c", em.recover_script(str(tmp_path))], capture_output=True, text=True, check=True)
    assert sorted(said.stdout.splitlines()) == sorted(
        ["released wedge 11", "released garbage 12", "released stall 13", "released slow 14", f"voided {live}",
         f"removed {dead}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["availproof-engine-slow-14.99.tmp", "availproof-engine-error-15", f"availproof-engine-fault-{live}.request",
         "availproof-engine-fault-16.request"])
    taken = json.loads((tmp_path / f"availproof-engine-fault-{live}.request").read_text())
    assert taken["fault"] == app.VOID
    assert em.parse(subprocess.run(["sh", "-c", em.look_script(str(tmp_path))], capture_output=True, text=True,
                                   check=True).stdout) == []


def test_kuberay_recover_releases_any_run_s_held_faults_and_the_next_preparation_refuses_until_then(monkeypatch):
    """A run killed while its engines held a wedge and garbage: the next preparation refuses (the marks are
    leftovers, listed per pod and pid with their run), ``availproof recover`` (heal_all) removes them in every pod
    whatever run wrote them, and a preparation then goes on."""
    from chaos.backends.kuberay import engine_marks as em
    from chaos.base.errors import SetupError
    from chaos.scopes.engine_garbage import garble_engine
    from tests.unit.test_kuberay_backend import cluster
    from tests.unit.test_kuberay_leftovers import fresh
    from tests.unit.test_kuberay_preflight import SERVE, fake_dashboard

    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve=SERVE)
    marker = faults.Marker()
    wedge_engine(b, marker, zone="zone-b")
    garble_engine(b, marker, zone="zone-c")  # the run dies before its end: no release
    held = sorted(k for k in s.kubelet.wedges)
    assert len(held) >= 2
    nxt = fresh(b, "run2")
    left = [x for x in nxt.leftovers() if x["kind"] == "EngineMark"]
    assert sorted((x["pod"], x["pid"], x["fault"]) for x in left) == sorted(
        (k[0], k[1], "wedge" if len(k) == 2 else k[2]) for k in held)
    assert {x["run_id"] for x in left} == {"run1"}
    with pytest.raises(SetupError, match=r"EngineMark .*run1.*availproof recover"):
        nxt.prepare("run2", "replica")
    done = fresh(b, "run3").heal_all(timeout=1)
    assert not done["failed"] and sorted(done["released"]) == sorted(f"{k[0]}/{k[1]}" for k in held)
    assert not s.kubelet.wedges
    assert [x for x in fresh(b, "run4").leftovers() if x["kind"] == "EngineMark"] == []
    fresh(b, "run4").prepare("run4", "replica")
    assert em.FAULTS == ("wedge", "garbage", "stall", "slow")


def test_local_recover_voids_a_request_never_taken_and_the_next_preparation_refuses_until_then(tmpdir_hook,
                                                                                                monkeypatch):
    """A run killed after it left its engine a request and sent the signal, before the engine stepped (or before
    its own end voided it): the engine is armed, its next step would take the fault. As on KubeRay
    (``IN_POD_LEFTOVERS``' engine marks), the next preparation refuses while the request is pending, and
    ``availproof recover`` (heal_all) makes it void, whatever run left it; a void one is no leftover."""
    from chaos.backends.local import weights
    from chaos.base.errors import SetupError
    from tests.unit.fake_backend import TinyReplica

    with TinyReplica("stay") as t:
        b = t.backend()
        b.cluster.partitioned_zones = b.cluster.state.workers = lambda: []  # no partition, no worker node
        (pid,) = t.engine_pids
        Path(app.request_path(pid)).write_text(engine_faults.held_request("garbage", "run-1"))
        assert engines.pending(b.cluster_processes()) == [pid]
        with pytest.raises(SetupError, match=f"engine {pid}'s fault request never taken.*availproof recover"):
            b.prepare("run-2", "replica")
        monkeypatch.setattr(weights, "recover", lambda backend: None)  # no restart-fails file to look at here
        monkeypatch.setattr(b, "_restore", lambda done, **kw: done)  # no cluster to restart here
        done = b.heal_all(timeout=1)
        assert done["voided"] == [pid] and done["released"] == []
        assert app.take_request(pid)["fault"] == app.VOID  # the armed engine's next step: nothing fires
        Path(app.request_path(pid)).write_text(engine_faults.void_request("run-1"))  # a void one left: none
        assert engines.pending(b.cluster_processes()) == [] and b.heal_all(timeout=1)["voided"] == []
        b.prepare("run-2", "replica")
