"""The run owns its lifecycle (chaos.core.run, chaos.ctk.control, chaos.core.runner): no fault without a
measuring run, a set-up that fails injects nothing (under `availproof run` and plain `chaos run`),
the rollback heals exactly what the run injected, and what no rollback healed the run heals itself."""

import dataclasses
import json
import threading
from pathlib import Path

import pytest
from chaoslib.exceptions import ActivityFailed, InterruptExecution

from chaos.scopes import faults
from chaos.core import provision, run as core, runner
from chaos.backends import base
from chaos.ctk import actions, session as ctk_session
from chaos.base.errors import UsageError
from chaos.core.experiment import settings as make_settings
from chaos.core.options import Options

from .test_run import _experiment, fake_system  # noqa: F401 - the fixture


def _with_token_env(path: Path, name: str = "AP_UNSET_TOKEN_VAR") -> Path:
    doc = json.loads(path.read_text())
    doc["extensions"][0]["front"] = "lb"
    doc["extensions"][0]["front_door"] = {"token_env": name}
    path.write_text(json.dumps(doc))
    return path


def _ctk(path: Path, strategy: str | None = None) -> dict:
    """Plain `chaos run`: Chaos Toolkit's own API with the experiment's control, its configuration from
    the environment (no availproof runner around it)."""
    from chaoslib.experiment import run_experiment as ctk_run

    from chaos.core import experiment as exp_mod

    settings = {"runtime": {"rollbacks": {"strategy": strategy}}} if strategy else {}
    return ctk_run(exp_mod.load(path), settings=settings)


def test_a_set_up_error_under_availproof_run_raises_before_chaos_toolkit_and_injects_nothing(tmp_path, fake_system,
                                                                                             monkeypatch):
    monkeypatch.delenv("AP_UNSET_TOKEN_VAR", raising=False)
    path = _with_token_env(_experiment(tmp_path, baseline_s=0.2, method_s=0.1))
    with pytest.raises(UsageError, match=r"\$AP_UNSET_TOKEN_VAR"):
        runner.run_experiment(path, tmp_path / "out")
    assert not (tmp_path / "started").exists()  # the method's action never ran
    assert not (tmp_path / "rolled-back").exists() and not (tmp_path / "out" / "journal.json").exists()
    assert fake_system == []  # nothing was provisioned either: the token is checked first


def test_a_set_up_error_under_plain_chaos_run_interrupts_with_nothing_injected(tmp_path, fake_system, monkeypatch,
                                                                               capsys):
    """Through chaoslib's API (no CLI: nothing exits) the journal carries the verdict, exit code 2; under
    `chaos run` the process exits 2 (tests/unit/test_moments.py)."""
    monkeypatch.delenv("AP_UNSET_TOKEN_VAR", raising=False)
    path = _with_token_env(_experiment(tmp_path, baseline_s=0.2, method_s=0.1))
    journal = _ctk(path)  # Chaos Toolkit's default rollback strategy
    assert journal["availproof"]["verdict"]["exit_code"] == 2
    assert not (tmp_path / "started").exists() and not (tmp_path / "rolled-back").exists()
    assert fake_system == []
    assert "set $AP_UNSET_TOKEN_VAR" in capsys.readouterr().out  # the one line, said by the run core


def test_an_action_outside_a_measuring_run_refuses_and_touches_nothing():
    with pytest.raises(InterruptExecution, match="no run is open"):
        actions.kill_node(zone="zone-b")  # no backend is attached: nothing could be touched
    assert actions.heal_all() == {"healed": [], "note": "no run is open: nothing was injected, nothing to heal"}


class HealRecorder:
    def __init__(self):
        self.calls: list[list[dict]] = []

    def heal(self, faults_: list[dict], timeout: float) -> dict:
        self.calls.append(list(faults_))
        return {}


def test_the_rollback_heals_exactly_the_faults_injected_and_not_healed_last_first():
    b, m = HealRecorder(), faults.Marker()
    assert faults.heal(b, m)["healed"] == [] and b.calls == []  # nothing injected: the cluster is not touched
    with m.inject("node", "worker-b", ["zone-b"]) as first:
        pass
    with m.inject("engine", "r1", ["zone-a"]) as second:
        second["pids"] = [7]
    with m.heal(second):  # healed by the fault itself (its duration_s)
        pass
    with m.inject("partition", "zone-c", ["zone-c"]) as third:
        pass
    done = faults.heal(b, m)
    # the backend is given every fault of the run, last first (a fault that healed itself may have left
    # consequences: its heal is idempotent); the heal marks are for those not healed yet
    assert [f["fault_id"] for f in b.calls[0]] == [third["fault_id"], second["fault_id"], first["fault_id"]]
    assert done["healed"] == [third["fault_id"], first["fault_id"]] and m.unhealed() == []
    heal_marks = [(x.event, x.fault_id) for x in m.marks if x.event.startswith("heal")]
    assert heal_marks.count(("heal_start", second["fault_id"])) == 1  # its own heal only
    assert faults.heal(b, m)["healed"] == []  # nothing left to mark healed


def test_a_fault_whose_call_raised_half_way_is_healed_too():
    b, m = HealRecorder(), faults.Marker()
    with pytest.raises(RuntimeError):
        with m.inject("zone", "zone-a", ["zone-a"]):
            raise RuntimeError("the second node's kill failed")
    assert [x.event for x in m.marks] == []  # no injection recorded...
    faults.heal(b, m)
    assert [f["target"] for f in b.calls[0]] == ["zone-a"]  # ...but what it may have done is undone


def test_plain_chaos_run_stopped_by_a_stop_condition_heals_what_no_rollback_healed(tmp_path, fake_system):
    """Chaos Toolkit's default strategy plays no rollback for an interrupted run: the run's end heals
    the fault it injected all the same (the rollback here is a note that heals nothing)."""
    path = _experiment(tmp_path, baseline_s=0.5, method_s=60)
    journal = _ctk(path)  # default strategy
    assert journal["status"] == "interrupted" and journal["rollbacks"] == []
    assert not (tmp_path / "rolled-back").exists()  # no rollback played...
    backend = fake_system[-1]
    assert len(backend.healed) == 1 and backend.healed[0][0].startswith("replica-")  # ...the run healed its fault
    assert journal["availproof"]["verdict"]["word"] == "VIOLATED"  # the stop condition
    summary = json.loads(Path(journal["availproof"]["out_dir"], "summary.json").read_text())
    assert summary["verdict"] == journal["availproof"]["verdict"]


# ---------------------------------------------------------------- the run reaches the actions through configuration
def _recording_fault(backend, marker, label: str = "", meet: threading.Barrier | None = None) -> dict:
    """A fault function as a scope's: what it was called with (after waiting for the other, when asked)."""
    if meet is not None:
        meet.wait(timeout=10)
    return {"backend": backend, "marker": marker, "label": label}


recording_action = actions.action(_recording_fault)  # made as chaos.ctk.actions makes every scope's action


def _python_activity(func: str, configuration: dict, **arguments) -> object:
    """One Python activity run as Chaos Toolkit runs it (chaoslib.provider.python.run_python_activity: the
    configuration passed to a function that declares it)."""
    from chaoslib.provider.python import run_python_activity

    activity = {"type": "action", "name": func, "provider": {"type": "python", "module": __name__, "func": func,
                                                             "arguments": arguments}}
    return run_python_activity(activity, configuration, {})


def test_the_run_reaches_an_action_through_chaos_toolkits_configuration(tmp_path):
    from tests.unit.test_run import _run

    run = _run(tmp_path, {})
    run.backend = object()
    configuration = ctk_session.configuration_for(run, {"availproof_app": "stream"})
    assert configuration["availproof_app"] == "stream" and ctk_session.run_of(configuration) is run
    got = _python_activity("recording_action", configuration, label="x")
    assert got == {"backend": run.backend, "marker": run.marker, "label": "x"}
    with pytest.raises(ActivityFailed, match="no run is open"):  # no run in the configuration: refused
        _python_activity("recording_action", {"availproof_app": "stream"}, label="x")
    run.begin_finishing()
    with pytest.raises(ActivityFailed, match="not measuring"):
        _python_activity("recording_action", configuration, label="x")
    run.writer.close()


def test_two_runs_in_one_process_never_see_each_others_run(tmp_path):
    """Two runs at once (their actions in flight together, in two threads): each action acts on its own run."""
    from tests.unit.test_run import _run

    runs = [_run(tmp_path / name, {}) for name in ("a", "b")]
    for run in runs:
        run.backend = object()
    meet, got = threading.Barrier(2), {}

    def act(i: int) -> None:
        got[i] = recording_action(label=str(i), meet=meet, configuration=ctk_session.configuration_for(runs[i]))

    threads = [threading.Thread(target=act, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert [(got[i]["backend"], got[i]["marker"]) for i in range(2)] == [(r.backend, r.marker) for r in runs]
    assert runs[0].backend is not runs[1].backend
    # the rollback heals its own run only
    assert actions.heal_all(configuration=ctk_session.configuration_for(runs[0]))["healed"] == []
    assert runs[0].rolled_back and not runs[1].rolled_back
    for run in runs:
        run.writer.close()


def test_two_runs_opened_in_one_process_are_each_the_openers(tmp_path, fake_system):
    """No run is "the one in progress": two open at once, each closed by its opener, neither closing the other."""
    from chaos.core import experiment as exp_mod

    path = _experiment(tmp_path, baseline_s=0.2, method_s=0.1)
    a = core.open_run(exp_mod.load(path), Options(out_dir=tmp_path / "a"))
    b = core.open_run(exp_mod.load(path), Options(out_dir=tmp_path / "b"))
    assert a.backend is not b.backend and a.records_path != b.records_path
    core.close(a)
    assert a.closed and not b.closed
    core.close(b)


def test_availproof_run_hands_its_run_to_the_control_which_opens_none(tmp_path, fake_system):
    """The runner's run reaches the control and the method's action in Chaos Toolkit's configuration
    (chaos.ctk.session.HandOver): one run opened, the runner's, and the action injected into it."""
    path = _experiment(tmp_path, baseline_s=0.2, method_s=0.1)
    code, result = runner.run_experiment(path, tmp_path / "out")
    assert len(fake_system) == 1  # one system provisioned: the control opened no run of its own
    assert [f["scope"] for f in result["summary"]["faults"]] == ["replica"]  # slow_fault's mark, on that run
    assert json.loads((tmp_path / "out" / "journal.json").read_text())["availproof"]["out_dir"] == str(tmp_path / "out")


# ---------------------------------------------------------------- capabilities
def _settings(**ext) -> object:
    doc = {"title": "t", "extensions": [{"name": "availproof", "scope": "node", "bounds": {"max_failed_requests": 5}, **ext}]}
    return make_settings(doc, source="t")


def test_an_experiment_asking_for_what_the_backend_cannot_do_is_refused_in_one_line():
    provision.check_capabilities("local", _settings(front="lb"))  # the local backend has it all
    with pytest.raises(UsageError) as e:
        provision.check_capabilities("kuberay", _settings(front="lb"))
    assert "--front direct" in str(e.value) and "\n" not in str(e.value)
    provision.check_capabilities("kuberay", _settings(front="direct"))
    with pytest.raises(UsageError, match="GCS fault tolerance"):
        provision.check_capabilities("kuberay", _settings(front="direct", gcs_fault_tolerance=False))


def test_a_scope_no_backend_declares_is_refused():
    s = dataclasses.replace(_settings(front="direct"), scope="disk-full")  # Settings are frozen: a new one
    assert base.scope_capability("disk-full") in base.required(s)
    with pytest.raises(UsageError, match="scope:disk-full"):
        provision.check_capabilities("local", s)


def test_a_backend_without_the_whole_interface_is_refused_when_the_run_opens(tmp_path, monkeypatch):
    from chaos.core import experiment as exp_mod
    from chaos.base.errors import SetupError

    class Partial:  # 6 of the interface's members
        name, capabilities = "partial", frozenset()

        def targets(self): ...
        def head_target(self): ...
        def own_hosts(self): ...
        def observe(self, timeout): ...

    monkeypatch.setattr(provision, "ensure_system", lambda settings, options, log=None, run_id="", faults=None: Partial())
    path = _experiment(tmp_path, baseline_s=0.2, method_s=0.1)
    with pytest.raises(SetupError, match="lacks .*heal.*kill_node"):
        core.open_run(exp_mod.load(path), Options(out_dir=tmp_path / "out"))


def test_a_heal_that_fails_makes_the_run_an_error_not_a_pass(tmp_path, fake_system, monkeypatch):
    from tests.unit.test_run import RefusingBackend

    def broken_heal(self, faults_, timeout):
        raise RuntimeError("nodes not healthy after 240 s")

    monkeypatch.setattr(RefusingBackend, "heal", broken_heal)
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1, recovery_window_s=0.3)
    doc = json.loads(path.read_text())
    doc["extensions"][0].pop("stop_when")  # no stop: the method ends, the rollback heals
    doc["rollbacks"] = [{"type": "action", "name": "heal-all", "provider": {
        "type": "python", "module": "chaos.ctk.actions", "func": "heal_all"}}]
    path.write_text(json.dumps(doc))
    code, result = runner.run_experiment(path, tmp_path / "out")
    v = result["verdict_detail"]
    assert code == runner.ERROR and v["word"] == "ERROR", v
    assert v["reasons"][0].startswith("the run's faults were not healed: RuntimeError: nodes not healthy")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["verdict"] == v


def test_a_load_that_cannot_start_interrupts_before_the_method_and_is_an_error(tmp_path, fake_system, monkeypatch):
    def no_front(run):
        raise RuntimeError("no front door is running")

    monkeypatch.setattr(core, "start_load", no_front)
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    code, result = runner.run_experiment(path, tmp_path / "out")
    assert not (tmp_path / "started").exists()  # the method never ran
    assert code == runner.ERROR
    assert result["verdict_detail"]["reasons"] == ["the run failed: starting the load: RuntimeError: no front door is running"]


def test_a_fault_interrupted_after_its_backend_acted_is_in_the_records():
    m = faults.Marker()
    with pytest.raises(SystemExit):  # a stop condition's exit during the proof or a drain's deadline
        with m.inject("drain", "worker-b", ["zone-b"]) as f:
            f["method"] = "gcs-drain"  # the notice was given
            raise SystemExit(20)
    assert [x.event for x in m.marks] == ["inject_start", "inject_end"]
    assert m.marks[1].detail == {"method": "gcs-drain"}


def test_a_kill_that_signalled_nothing_proves_nothing():
    from chaos.backends.local import effect

    assert effect.signalled({"pids": 0})["ok"] is False and effect.signalled({"pids": []})["ok"] is False
    assert effect.signalled({"pids": 3})["ok"] is True and effect.signalled({"pids": [7]})["ok"] is True
