"""The engine-error hook (serve_apps/engine_faults.py) on vLLM's real classes: without
AVAILPROOF_ENGINE_FAULTS nothing is installed; with it, vLLM's own busy loop
(``EngineCoreProc.run_busy_loop``, its fault-tolerance wrapper, ``_process_engine_step``) running
``EngineCore.step`` as wrapped arms SIGUSR1 and raises the injected error out of the loop at the next step,
where vLLM's ``run_engine_core`` turns any exception into its engine-dead path. The engine object is vLLM's
class without its constructor (no model, no scheduler: a stand-in scheduler with no requests, so vLLM's own
``step`` returns at once)."""

import os
import signal
import threading
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from serve_apps import engine_faults

core = pytest.importorskip("vllm.v1.engine.core")

WRAPPED = [(core.EngineCore, "step"), (core.EngineCore, "step_with_batch_queue"),
           (core.EngineCoreProc, "run_busy_loop"), (core.DPEngineCoreProc, "run_busy_loop")]


@pytest.fixture
def pristine(monkeypatch, tmp_path):
    """vLLM's classes and SIGUSR1 as they were, whatever the test installs; tombstones written under tmp_path."""
    monkeypatch.setattr(engine_faults, "TOMBSTONE_DIR", str(tmp_path))
    for cls, name in WRAPPED:
        monkeypatch.setattr(cls, name, cls.__dict__[name])
    previous = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(engine_faults, "TRIGGER", engine_faults.Trigger())
    yield
    signal.signal(signal.SIGUSR1, previous)


def engine(stop_after=200, on_iteration=None):
    """vLLM's EngineCoreProc without its constructor: what its busy loop and step read, and nothing else."""
    e = core.EngineCoreProc.__new__(core.EngineCoreProc)
    e.enable_fault_tolerance = False
    e.scheduler = SimpleNamespace(has_requests=lambda: False)
    e.check_for_draft_tokens = False
    e.publish_dp_lb_stats = False
    e._process_input_queue = lambda: None
    e.iterations = 0

    def handle_shutdown():
        e.iterations += 1
        if on_iteration:
            on_iteration(e.iterations)
        return e.iterations <= stop_after  # then vLLM's loop raises SystemExit: the hook never fired

    e._handle_shutdown = handle_shutdown
    e.step_fn = e.step  # as EngineCore.__init__ binds it, after loading the plugins
    return e


def test_without_the_variable_nothing_is_installed(pristine, monkeypatch):
    monkeypatch.delenv(engine_faults.ENV, raising=False)
    before = {(cls, name): cls.__dict__[name] for cls, name in WRAPPED}
    assert engine_faults.register() is False
    assert all(cls.__dict__[name] is fn for (cls, name), fn in before.items())
    e = engine(stop_after=3)
    with pytest.raises(SystemExit):
        e.run_busy_loop()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL  # SIGUSR1 keeps its default meaning


def test_with_the_variable_sigusr1_makes_the_next_step_raise_inside_vllms_busy_loop(pristine, monkeypatch, tmp_path):
    monkeypatch.setenv(engine_faults.ENV, "1")
    assert engine_faults.register() is True
    assert getattr(core.EngineCore.__dict__["step"], "__availproof_engine_fault__", False)
    assert engine_faults.register() is True  # idempotent: loaded again, wrapped once
    assert core.EngineCore.__dict__["step"].__wrapped__ is not core.EngineCore.__dict__["step"]
    assert not getattr(core.EngineCore.__dict__["step"].__wrapped__, "__availproof_engine_fault__", False)

    e = engine(on_iteration=lambda n: n == 5 and os.kill(os.getpid(), signal.SIGUSR1))
    with pytest.raises(engine_faults.InjectedEngineError, match=r"^engine error \(injected\)$"):
        e.run_busy_loop()
    assert 5 <= e.iterations < 200  # it stepped normally until armed, then failed at the next step
    tomb = Path(engine_faults.tombstone_path(os.getpid()))  # the engine's own record, written as it raised
    assert tomb.parent == tmp_path and abs(float(tomb.read_text()) - time.time()) < 30
    beat = Path(engine_faults.heartbeat_path(os.getpid()))  # the steps' heartbeat (watchdog v2), beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([tomb.name, beat.name])  # no temporary left
    assert signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL  # installed on entering the loop
    assert e.step() == ({}, False)  # one error per arming: vLLM's own step again


def test_the_step_before_arming_is_vllms_own(pristine, monkeypatch):
    monkeypatch.setenv(engine_faults.ENV, "1")
    engine_faults.register()
    e = engine()
    assert e.step() == ({}, False)  # the real EngineCore.step: no requests, nothing scheduled
    engine_faults.TRIGGER.arm()
    with pytest.raises(engine_faults.InjectedEngineError):
        e.step_fn()


def test_a_tombstone_that_cannot_be_written_does_not_stop_the_error(pristine, monkeypatch, tmp_path):
    monkeypatch.setenv(engine_faults.ENV, "1")
    monkeypatch.setattr(engine_faults, "TOMBSTONE_DIR", str(tmp_path / "missing"))  # no such directory
    engine_faults.register()
    engine_faults.TRIGGER.arm()
    with pytest.raises(engine_faults.InjectedEngineError):
        engine().step_fn()
    assert not (tmp_path / "missing").exists()


def test_the_tombstone_is_named_by_the_engine_s_pid_in_tmp():
    assert engine_faults.tombstone_path(57) == "/tmp/availproof-engine-error-57"


def test_the_handler_is_installed_from_the_main_thread_only(pristine):
    result = []
    t = threading.Thread(target=lambda: result.append(engine_faults.install_handler()))
    t.start()
    t.join()
    assert result == [False] and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


def test_a_failing_install_does_not_stop_the_engine(pristine, monkeypatch):
    monkeypatch.setenv(engine_faults.ENV, "1")

    def broken(*a, **k):
        raise RuntimeError("vLLM changed")

    monkeypatch.setattr(engine_faults, "install", broken)
    assert engine_faults.register() is False


def test_the_plugin_is_registered_with_vllm():
    root = Path(__file__).parents[2]
    eps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["vllm.general_plugins"] == {"availproof_engine_faults": "serve_apps.engine_faults:register"}
    from importlib.metadata import entry_points  # what vLLM's load_plugins_by_group reads (after pip install -e)

    assert "serve_apps.engine_faults:register" in {ep.value for ep in entry_points(group="vllm.general_plugins")}


def test_the_llm_apps_engine_gets_the_variable():
    from serve_apps import llm_app

    assert llm_app.ENV[engine_faults.ENV] == "1"
