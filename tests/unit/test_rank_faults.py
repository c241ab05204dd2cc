"""rank-hang and rank-death (issue 44): the stream target's rank group with real processes (no Ray): every step a
collective of the engine and its rank, which blocks for good when the rank hangs and ends the engine when the rank
dies, the ranks gone with their engine; the app option's validation and the refusal of an app without a rank group;
each fault's proof failing when it does not take effect; vLLM's worker hook on stand-in classes; KubeRay through the
fake kubelet."""

import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos import scopes
from chaos.backends import base, engine_faults
from chaos.backends.kuberay import KubeRayBackend
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.local import engines, procs, ranks as local_ranks, scopes as local_scopes
from chaos.backends.local.backend import LocalBackend
from chaos.base.errors import ClusterError, UsageError
from chaos.core import experiment
from chaos.scopes import faults
from chaos.scopes.rank_death import kill_rank
from chaos.scopes.rank_hang import hang_rank
from serve_apps import config, engine_faults as app, rank_faults, stream_ranks
from serve_apps.stream_engine import EngineProcess

from .stream_engine_helpers import until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def group():
    """The stream target's real engine child with a rank group of two (the engine and rank 1), the fault hook on; every
    file a fault left for either process removed at the end."""
    e = EngineProcess(faults=True, ranks=2)
    assert e.wait_started(10)
    (rank,) = local_ranks.ranks_of([e.pid], 1)
    yield SimpleNamespace(engine=e, rank=rank)
    for pid in (e.pid, rank):
        for path in (app.wedge_path(pid), app.request_path(pid)):
            Path(path).unlink(missing_ok=True)
    e.close()
    procs.wait_gone([rank], 5)


def backend_of(engine_pid, run_id="run-1"):
    """What the local backend's rank faults read of the backend: its run and the replica's one engine."""
    b = SimpleNamespace(run_id=run_id, engine_pids=lambda r, to: [engine_pid],
                        engine_children=lambda r: [engine_pid])
    for name in ("hang_rank", "kill_rank", "rank_children"):
        setattr(b, name, getattr(local_ranks.Methods, name).__get__(b))
    return b


REPLICA = SimpleNamespace(replica_id="r1", pid=os.getpid(), zone="zone-a", node="n1", deployment="StreamTarget")


# ---------------------------------------------------------------- the scopes
@pytest.mark.parametrize("name, fault, method", [("rank-hang", hang_rank, "hang_rank"),
                                                 ("rank-death", kill_rank, "kill_rank")])
def test_the_scopes_say_what_they_are_and_both_backends_run_them(name, fault, method):
    s = scopes.get(name)
    assert (s.fault, s.backend_methods, s.min_ranks) == (fault, (method,), 2)
    assert s.zoned and s.every_target_affected and s.orphan_check and not s.heal_args
    assert s.conflict_class == "replica-level" and set(s.accesses(kube_access.Asked())) == set(kube_access.EXEC)
    for backend in (LocalBackend, KubeRayBackend):
        assert base.scope_capability(name) in base.capabilities_of(backend) and not s.missing_on(backend)


# ---------------------------------------------------------------- the option and the refusal
@pytest.mark.parametrize("bad", [0, 9, 1.5, True, "2", None])
def test_a_bad_ranks_value_is_refused_in_one_line(bad):
    with pytest.raises(ValueError, match=r"^app\.ranks must be a whole number from 1 to 8 .*, got ") as e:
        config.serve_config(config.AppSpec(ranks=bad))
    assert "\n" not in str(e.value)


def test_one_rank_leaves_the_config_as_before_and_two_reach_either_app():
    plain = config.serve_config(config.AppSpec())
    assert "ranks" not in plain["applications"][0]["args"]
    two = config.serve_config(config.AppSpec(ranks=2))
    assert two["applications"][0]["args"]["ranks"] == 2
    del two["applications"][0]["args"]["ranks"]
    assert two == plain
    llm = config.serve_config(config.AppSpec(app="llm", ranks=2, llm=config.LLMOptions(model_path="/m")))
    kwargs = llm["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]
    assert (kwargs["tensor_parallel_size"], kwargs["distributed_executor_backend"]) == (2, "mp")
    one = config.serve_config(config.AppSpec(app="llm", llm=config.LLMOptions(model_path="/m")))
    assert "tensor_parallel_size" not in one["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]


@pytest.mark.parametrize("name", ["rank-hang", "rank-hang-watchdog", "rank-death"])
@pytest.mark.parametrize("app_name, says", [("stream", "set app.ranks: 2"),
                                            ("llm", "tensor_parallel_size >= 2")])
def test_a_rank_fault_on_an_app_of_one_rank_is_refused_before_anything_runs(name, app_name, says):
    doc = json.loads((ROOT / "experiments" / f"{name}.json").read_text())
    assert experiment.settings(doc, name, app_name).app["ranks"] == 2  # as shipped: a group of two
    del doc["extensions"][0]["app"]["ranks"]
    with pytest.raises(UsageError, match=rf"app\.ranks: scope rank-(hang|death) needs a rank group of at least 2 "
                                         rf"ranks, and the {app_name} app has 1: .*{says}") as e:
        experiment.settings(doc, name, app_name)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("app_name", ["stream", "llm"])
def test_on_kuberay_app_ranks_is_not_demanded_before_the_run_the_rayservice_decides(app_name):
    """On KubeRay the RayService's manifests make the app: an experiment's ``app.ranks`` reaches nothing there, so the
    run's spec is built without it (the injection refuses a replica with no rank); locally it is still demanded."""
    from chaos.core import run_spec
    from chaos.core.options import Options

    doc = json.loads((ROOT / "experiments" / "rank-death.json").read_text())
    del doc["extensions"][0]["app"]["ranks"]
    kube = {"context": "k", "namespace": "availproof", "serve_url": "http://s", "dashboard_url": "http://d"}
    spec = run_spec.of_document(doc, Options(app=app_name, backend="kuberay", kubernetes=kube))
    assert spec.settings.scope == "rank-death"
    with pytest.raises(UsageError, match=r"app\.ranks: scope rank-death needs a rank group"):
        run_spec.of_document(doc, Options(app=app_name))


def test_a_replica_whose_engine_has_no_rank_is_refused_at_injection_nothing_sent():
    e = EngineProcess(faults=True)  # one rank: no group
    try:
        assert e.wait_started(10)
        b = backend_of(e.pid)
        for call in (lambda: b.hang_rank(REPLICA), lambda: b.kill_rank(REPLICA)):
            with pytest.raises(ClusterError, match=r"no rank 1 process to (hang|kill): a rank group needs app.ranks "
                                                   r">= 2 .*tensor_parallel_size >= 2.*nothing sent"):
                call()
        assert e.state() == "ok" and b.rank_children(REPLICA) == []
    finally:
        e.close()


# ---------------------------------------------------------------- the rank group, real processes
def test_every_step_is_a_collective_of_the_engine_and_its_rank(group):
    assert procs.cmdline(group.rank).startswith(stream_ranks.rank_argv0(1) + " ")
    assert procs.parent(group.rank) == group.engine.pid
    count = group.engine.steps.count
    assert until(lambda: group.engine.steps.count > count + 20) and group.engine.state() == "ok"
    procs.signal_pids([group.rank], signal.SIGSTOP)  # the rank stops answering: the engine's step waits for it
    try:
        time.sleep(0.3)
        count = group.engine.steps.count
        time.sleep(1.2)
        assert group.engine.steps.count <= count + 1 and group.engine.state() == "hung"
    finally:
        procs.signal_pids([group.rank], signal.SIGCONT)
    assert until(lambda: group.engine.state() == "ok")


def test_a_hung_rank_hangs_the_group_for_good_not_stopped_its_mark_naming_the_run_until_released(group):
    b = backend_of(group.engine.pid)
    fire = b.hang_rank(REPLICA)
    assert fire() == [group.rank]
    assert until(lambda: Path(app.wedge_path(group.rank)).exists())
    time.sleep(0.3)
    count = group.engine.steps.count
    time.sleep(1.3)
    assert group.engine.steps.count <= count + 1  # the collective waits for the hung rank, no timeout
    assert group.engine.state() == "hung" and group.engine.reason() is None  # its health check would pass
    assert procs.state(group.rank) == "S" and procs.state(group.engine.pid) == "S"  # blocked, not stopped (T)
    fault = {"scope": "rank-hang", "pids": [group.rank], "pid": os.getpid()}
    checks = local_scopes.effect_rank_hang(SimpleNamespace(run_id="run-1"), fault)  # the engine: one look, not yet
    assert [c["ok"] for c in checks] == [True, True, False, True], checks
    # the engine's step still under way, its count unchanged, past the time asked (0.5 s; more on a loaded machine)
    assert until(lambda: all(c["ok"] for c in local_scopes.effect_rank_hang(SimpleNamespace(run_id="run-1"), fault)),
                 timeout=12), fault
    assert fault["engine_pids"] == [group.engine.pid]
    assert [c["ok"] for c in local_scopes.effect_rank_hang(SimpleNamespace(run_id="other"), fault)][0] is False
    (kept,) = engines.release("another-run", [group.rank])
    assert kept["released"] is False and Path(app.wedge_path(group.rank)).exists()
    (done,) = engines.release("run-1", [group.rank])
    assert (done["released"], done["engine"]) == (True, "alive")
    count = group.engine.steps.count
    assert until(lambda: group.engine.steps.count > count + 10) and group.engine.state() == "ok"


def test_a_dead_rank_is_noticed_by_the_engine_which_dies_as_vllm_s_executor_does(group):
    b = backend_of(group.engine.pid)
    assert b.rank_children(REPLICA) == [group.rank]
    assert b.kill_rank(REPLICA) == [group.rank]
    assert until(lambda: group.engine.state() == "errored")
    assert group.engine.reason() == stream_ranks.MESSAGE  # requests fail with it, the health check fails
    assert until(lambda: group.engine.proc.poll() is not None) and group.engine.proc.returncode == stream_ranks.RANK_DEAD_EXIT
    fault = {"scope": "rank-death", "pids": [group.rank], "pid": os.getpid()}
    assert [c["ok"] for c in local_scopes.effect_rank_death(None, fault)] == [True, True]


def test_the_ranks_go_when_their_engine_goes_even_a_hung_one(group):
    backend_of(group.engine.pid).hang_rank(REPLICA)()
    assert until(lambda: Path(app.wedge_path(group.rank)).exists())
    procs.signal_pids([group.engine.pid], signal.SIGKILL)  # the replica replaced: its engine killed
    assert procs.wait_gone([group.rank], 5)  # the death pipe's end: no orphan, though hung


STAND_IN_REPLICA = """
import sys, time
from serve_apps.stream_engine import EngineProcess
e = EngineProcess(faults=True, ranks=int(sys.argv[1]))
assert e.wait_started(10)
print(e.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("ranks", [2, 1], ids=["rank-hang", "engine-wedge"])
def test_a_hung_group_goes_when_its_replica_is_sigkilled(ranks):
    """The replica (a stand-in process holding the engine's pipe) SIGKILLed while the group hangs: rank 1 wedged (the
    engine blocked in its collective's read), or the engine itself wedged (no ranks: its step blocked in the hook).
    The engine notices its replica's end apart from its step loop and exits; the ranks follow it."""
    import subprocess
    import sys

    replica = subprocess.Popen([sys.executable, "-c", STAND_IN_REPLICA, str(ranks)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    group: list[int] = []
    try:
        engine = int(replica.stdout.readline())
        group = [engine, *local_ranks.ranks_of([engine], 1)]
        assert len(group) == ranks
        victim = group[-1]  # rank 1, or the engine itself
        Path(app.request_path(victim)).write_text(engine_faults.wedge_request("run-1"))
        procs.signal_pids([victim], engine_faults.ERROR_SIGNAL)
        assert until(lambda: Path(app.wedge_path(victim)).exists())
        time.sleep(0.3)
        assert all(procs.alive(p) for p in group)  # hung, not gone
        replica.kill()  # no __del__, no close(): only the pipe's end tells the engine
        replica.wait(5)
        assert procs.wait_gone(group, 5), {p: procs.state(p) for p in group}
    finally:
        replica.kill()
        replica.wait(5)
        procs.signal_pids([p for p in group if procs.alive(p)], signal.SIGKILL)
        for p in group:
            for path in (app.wedge_path(p), app.request_path(p)):
                Path(path).unlink(missing_ok=True)


def test_an_engine_that_ends_before_its_first_step_is_reported_at_once_with_its_exit_and_last_words(monkeypatch):
    """The engine child dies before its first step without a word on its pipe (here its rank count unreadable, as a
    rank's start that raised): its replica knows at once, not after the 30 s start wait, and says how it ended."""
    monkeypatch.setattr(stream_ranks, "check_ranks", lambda value: "two")  # the child's int() of it raises
    t0 = time.monotonic()
    e = EngineProcess(faults=True, ranks=2)
    try:
        assert e.wait_started(20) and time.monotonic() - t0 < 10  # its end is its first word
        why = e.start_failure(20)
        assert why.startswith(f"engine process {e.pid} ended before its first step (exit 1): ValueError: "), why
        assert "invalid literal for int()" in why and "\n" not in why and time.monotonic() - t0 < 10
    finally:
        e.close()


def test_a_started_engine_has_no_start_failure(group):
    assert group.engine.start_failure(1) is None


# ---------------------------------------------------------------- the whole group: vLLM's rank 0 worker, the rank argument
def test_the_whole_group_look_takes_vllm_s_rank_0_worker_and_never_the_stream_target_s_engine():
    for cmd in ("VLLM::Worker_TP0", "VLLM::Worker_TP1", "VLLM::Worker_PP1_TP0", "VLLM::Worker_TP0_EP0",
                "availproof::EngineRank1 -c x", "availproof::EngineRank12"):
        assert stream_ranks.is_any_rank(cmd), cmd
    for cmd in ("availproof::EngineCore -c x", "VLLM::EngineCore", "availproof::EngineRank0 -c x", "ray::ServeReplica"):
        assert not stream_ranks.is_any_rank(cmd), cmd


VLLM_LIKE_ENGINE = """
import os, subprocess, time
python = os.readlink('/proc/self/exe')
kids = [subprocess.Popen([f'VLLM::Worker_TP{i}', '-c', 'import time; time.sleep(60)'], executable=python)
        for i in (0, 1)]
print(' '.join(str(k.pid) for k in kids), flush=True)
time.sleep(60)
"""


def test_both_backends_whole_group_looks_find_vllm_s_rank_0_worker_through_real_processes():
    """A vLLM-like engine (``VLLM::EngineCore``, this test's child) with its workers ``VLLM::Worker_TP0`` and ``_TP1``:
    the local look and KubeRay's pgrep (through a shell) find both as the group's ranks; rank 1's look only TP1."""
    import subprocess
    import sys

    from chaos.backends.kuberay import ranks as kr
    from chaos.backends.kuberay.common import parse_masks

    engine = subprocess.Popen(["VLLM::EngineCore", "-c", VLLM_LIKE_ENGINE], executable=sys.executable,
                              stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        workers = [int(x) for x in engine.stdout.readline().split()]
        assert until(lambda: all(procs.cmdline(p).startswith("VLLM::Worker_TP") for p in workers))
        assert sorted(local_ranks.ranks_of([engine.pid])) == sorted(workers)
        assert local_ranks.ranks_of([engine.pid], 1) == [workers[1]]

        def sh(script):
            return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
        assert sorted(parse_masks(sh(kr.ranks_script(os.getpid(), None)))) == sorted(workers)
        assert list(parse_masks(sh(kr.ranks_script(os.getpid(), 1)))) == [workers[1]]
    finally:
        procs.signal_pids([p for p in workers if procs.alive(p)], signal.SIGKILL)
        engine.kill()
        engine.wait(5)


def test_kuberay_s_orphan_check_follows_vllm_s_rank_0_worker(monkeypatch):
    s, b = kuberay(monkeypatch)
    s.kubelet.add_rank(s.pods["wb-1"], rank=0, pid=59)
    f = kill_rank(b, faults.Marker(), zone="zone-b")
    assert f["pids"] == ["wb-1/58"] and f["victim"]["engines"] == [57, 58, 59]


@pytest.mark.parametrize("fault", [hang_rank, kill_rank])
@pytest.mark.parametrize("rank", [0, -1, 1.5, True, "1", None])
def test_a_bad_rank_argument_is_refused_in_one_line_before_anything(fault, rank):
    def untouched(**kw):
        raise AssertionError("the backend was asked")
    b = SimpleNamespace(pick_replica=untouched)
    marker = faults.Marker()
    with pytest.raises(UsageError, match=r"^rank-(hang|death): rank must be a whole number >= 1 \(rank 0 of the stream "
                                         r"target is its engine: use engine-wedge or engine-crash\), got ") as e:
        fault(b, marker, zone="zone-a", rank=rank)
    assert "\n" not in str(e.value) and marker.marks == []


# ---------------------------------------------------------------- a fault that did not take effect is not proven
def test_a_hang_whose_rank_never_writes_its_mark_fails_its_proof(group, monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {"rank-hang": 0.5}, raising=False)
    b = backend_of(group.engine.pid)
    fire = b.hang_rank(REPLICA)
    monkeypatch.setattr(local_ranks.procs, "signal_pids", lambda pids, sig: list(pids))  # the signal never arrives
    b.pick_replica = lambda zone=None: REPLICA
    b.effect_checks = lambda f: local_scopes.effect_rank_hang(b, f)
    b.hang_rank = lambda r, rank=1, spin=False: fire
    f = hang_rank(b, faults.Marker(), zone="zone-a")
    assert f["effect"]["verified"] is False
    assert [c["ok"] for c in f["effect"]["checks"]] == [False, True, False, True]  # no mark; the engine steps on
    assert f["victim"]["engines"] == [group.engine.pid, group.rank]  # the whole group followed by the orphan check
    assert group.engine.state() == "ok"


def test_a_rank_that_survives_its_kill_fails_the_death_s_proof(group, monkeypatch):
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {"rank-death": 0.5}, raising=False)
    b = backend_of(group.engine.pid)
    monkeypatch.setattr(local_ranks.procs, "signal_pids", lambda pids, sig: list(pids))  # the SIGKILL lost
    b.pick_replica = lambda zone=None: REPLICA
    b.effect_checks = lambda f: local_scopes.effect_rank_death(b, f)
    f = kill_rank(b, faults.Marker(), zone="zone-a")
    assert f["effect"]["verified"] is False and f["effect"]["checks"][0]["ok"] is False
    assert group.engine.state() == "ok"


# ---------------------------------------------------------------- vLLM's workers (stand-in classes)
def test_vllm_s_worker_hook_hangs_the_next_step_on_a_wedge_request_and_ignores_anything_else(tmp_path, monkeypatch):
    monkeypatch.setattr(app, "TOMBSTONE_DIR", str(tmp_path))

    class Wrapper:
        def execute_model(self, scheduler_output):
            return ("ran", scheduler_output)

    class WorkerProc:
        def worker_busy_loop(self):
            return "looped"

    trigger = app.Trigger()
    assert rank_faults.install(Wrapper, [WorkerProc], trigger) == ["Wrapper.execute_model",
                                                                   "WorkerProc.worker_busy_loop"]
    assert rank_faults.install(Wrapper, [WorkerProc], trigger) == []  # idempotent
    installed = []
    monkeypatch.setattr(app, "install_handler", lambda t: installed.append(t) or True)
    assert WorkerProc().worker_busy_loop() == "looped" and installed == [trigger]
    wedged = []
    monkeypatch.setattr(app, "wedge", lambda request, **kw: wedged.append(request))
    monkeypatch.setattr(app.os, "getpid", lambda: 58)
    Path(app.request_path(58)).write_text(engine_faults.wedge_request("run-1"))
    assert Wrapper().execute_model("s") == ("ran", "s") and wedged == []  # not armed: nothing
    trigger.arm()
    assert Wrapper().execute_model("s") == ("ran", "s") and wedged == [{"fault": "wedge", "run": "run-1", "spin": False}]
    trigger.arm()  # no request (or another fault's): a rank neither wedges nor raises
    assert Wrapper().execute_model("t") == ("ran", "t") and len(wedged) == 1


def test_vllm_s_worker_hook_ignores_a_void_request_silently_and_warns_of_anything_else(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(app, "TOMBSTONE_DIR", str(tmp_path))

    class Wrapper:
        def execute_model(self, scheduler_output):
            return "ran"

    trigger = app.Trigger()
    rank_faults.install(Wrapper, [], trigger)
    monkeypatch.setattr(app.os, "getpid", lambda: 59)
    caplog.set_level("DEBUG", logger=rank_faults.logger.name)
    Path(app.request_path(59)).write_text(engine_faults.void_request("run-1"))  # the release's leftover
    trigger.arm()
    assert Wrapper().execute_model("s") == "ran" and caplog.records == []
    trigger.arm()  # a signal with no request
    assert Wrapper().execute_model("s") == "ran"
    assert [(r.levelname, "'error' ignored" in r.getMessage()) for r in caplog.records] == [("WARNING", True)]


def test_vllm_s_real_worker_classes_are_wrapped():
    pytest.importorskip("vllm.v1.executor.multiproc_executor")
    from vllm.v1.executor import multiproc_executor
    from vllm.v1.worker import worker_base

    before = (worker_base.WorkerWrapperBase.__dict__["execute_model"],
              multiproc_executor.WorkerProc.__dict__["worker_busy_loop"])
    try:
        rank_faults.register_vllm()
        for fn in (worker_base.WorkerWrapperBase.__dict__["execute_model"],
                   multiproc_executor.WorkerProc.__dict__["worker_busy_loop"]):
            assert getattr(fn, "__availproof_rank_fault__", False)
        assert stream_ranks.is_rank("VLLM::Worker_TP1", 1) and not stream_ranks.is_rank("VLLM::Worker_TP10", 1)
        assert not stream_ranks.is_rank("VLLM::Worker_TP0", 1) and stream_ranks.is_rank("VLLM::Worker_PP0_TP1", 1)
        assert stream_ranks.is_rank("VLLM::Worker_TP1_EP1", 1) and not stream_ranks.is_rank("VLLM::Worker_TP10_EP1", 1)
    finally:
        worker_base.WorkerWrapperBase.execute_model, multiproc_executor.WorkerProc.worker_busy_loop = before


# ---------------------------------------------------------------- KubeRay, through the fake kubelet
def kuberay(monkeypatch, with_rank=True):
    from tests.unit.test_kuberay_backend import cluster
    from tests.unit.test_kuberay_preflight import SERVE, fake_dashboard

    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve=SERVE)
    b.prepare("run1", "rank-hang")
    if with_rank:
        s.kubelet.add_rank(s.pods["wb-1"])
    return s, b


def test_kuberay_hangs_a_rank_proves_it_and_releases_it_at_the_end(monkeypatch):
    s, b = kuberay(monkeypatch)
    f = hang_rank(b, faults.Marker(), zone="zone-b")
    assert f["pids"] == ["wb-1/58"] and f["effect"]["verified"], f["effect"]
    assert f["victim"]["engines"] == [57, 58]  # the engine and its rank followed by the orphan check
    assert json.loads(s.kubelet.wedges[("wb-1", 58)])["run"] == "run1"
    (out,) = b.release_engine(f["pids"], "wedge")
    assert out["released"] is True and ("wb-1", 58) not in s.kubelet.wedges


def test_kuberay_kills_a_rank_and_its_engine_is_left_to_notice(monkeypatch):
    s, b = kuberay(monkeypatch)
    f = kill_rank(b, faults.Marker(), zone="zone-b")
    assert f["pids"] == ["wb-1/58"] and f["effect"]["verified"], f["effect"]
    assert ("VLLM::Worker_TP", "SIGKILL") in s.kubelet.fates["wb-1"]
    assert s.kubelet.alive(s.pods["wb-1"])[57]["state"] == "S"  # the engine's end is its own (vLLM's monitor)


def test_kuberay_refuses_a_replica_whose_engine_has_no_rank(monkeypatch):
    s, b = kuberay(monkeypatch, with_rank=False)
    marker = faults.Marker()
    for fault in (hang_rank, kill_rank):
        with pytest.raises(ClusterError, match=r"no rank 1 process to (hang|kill): a rank group needs "
                                               r"tensor_parallel_size >= 2"):
            fault(b, marker, zone="zone-b")
    assert marker.marks == [] and s.kubelet.fates.get("wb-1") is None  # nothing in the records, nothing killed


def test_kuberay_a_rank_goes_with_its_engine(monkeypatch):
    s, b = kuberay(monkeypatch)
    b.crash_engine(b.pick_replica(zone="zone-b"))
    assert ("VLLM::Worker_TP", "engine gone") in s.kubelet.fates["wb-1"]


def test_kuberay_s_rank_look_finds_the_real_rank_through_a_shell(group):
    """The look's pgrep patterns over the real rank group (this test's process the replica: the engine its child)."""
    import subprocess

    from chaos.backends.kuberay import ranks as kr
    from chaos.backends.kuberay.common import parse_masks

    def sh(script):
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout

    found = parse_masks(sh(kr.ranks_script(os.getpid(), 1)))
    assert list(found) == [group.rank] and engine_faults.handles(found[group.rank])[0]  # its hook takes SIGUSR1
    assert list(parse_masks(sh(kr.ranks_script(os.getpid(), None)))) == [group.rank]
    assert parse_masks(sh(kr.ranks_script(os.getpid(), 2))) == {}  # no rank 2 in a group of two
    assert sh(kr.kill_script([group.rank])).split() == [str(group.rank)]
    assert until(lambda: group.engine.state() == "errored")
