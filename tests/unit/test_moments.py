"""Chaos Toolkit as a thin edge (chaos.ctk.control, chaos.core.moments): plain `chaos run` (Chaos Toolkit's own
CLI, in this process) and `availproof run` give the same records, verdict and exit code; the exit code is
the verdict's without the journal's status rewritten; a step that fails at the run's end is an ERROR with
its reason in the summary and the journal; the control keeps no state of its own."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.recording import records as rec
from chaos.core import run as core, runner
from chaos.ctk import control

from .test_run import _experiment as _stop_experiment, fake_system  # noqa: F401 - the fixture
from .test_baseline_gate import _experiment as _gate_experiment


def chaos_cli(tmp_path: Path, path: Path, journal: Path) -> tuple[int, dict]:
    """`chaos run --journal-path JOURNAL PATH` (Chaos Toolkit's CLI); its exit code and the journal it left."""
    from chaostoolkit.cli import cli

    result = CliRunner().invoke(cli, ["--no-version-check", "--no-log-file", "--settings", str(tmp_path / "none.yaml"),
                                      "run", "--journal-path", str(journal), str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(journal.read_text())


def _edit(path: Path, out: Path, **ext) -> Path:
    """The experiment with the extension's ``ext`` (None: removed) and its records into ``out`` under `chaos run`."""
    doc = json.loads(path.read_text())
    for k, v in ext.items():
        if v is None:
            doc["extensions"][0].pop(k, None)
        else:
            doc["extensions"][0][k] = v
    doc["configuration"] = {**doc.get("configuration", {}), "availproof_out": str(out)}
    path.write_text(json.dumps(doc))
    return path


def _violated(tmp_path: Path, out: Path) -> Path:
    """Every request fails, no stop condition, a bound nothing can meet: the method completes, the journal
    completes and does not deviate, and the verdict is VIOLATED."""
    path = _stop_experiment(tmp_path, baseline_s=0.3, method_s=0.1, recovery_window_s=0.3)
    return _edit(path, out, stop_when=None, bounds={"max_failed_requests": 0})


def _both(tmp_path: Path, path: Path) -> tuple[tuple[int, dict], tuple[int, dict]]:
    """The experiment under plain `chaos run` and under `availproof run`: (exit code, journal) of each."""
    plain = chaos_cli(tmp_path, path, tmp_path / "plain" / "journal.json")
    code, _ = runner.run_experiment(path, tmp_path / "availproof")
    return plain, (code, json.loads((tmp_path / "availproof" / "journal.json").read_text()))


def _same_outputs(plain: dict, ours: dict) -> None:
    a, b = plain["availproof"], ours["availproof"]
    digits = re.compile(r"[0-9.]+")  # the figures of two runs on a shared machine differ by a request or two
    assert [(v["word"], v["exit_code"], [digits.sub("N", r) for r in v["reasons"]]) for v in (a["verdict"], b["verdict"])] \
        == [(a["verdict"]["word"], a["verdict"]["exit_code"], [digits.sub("N", r) for r in a["verdict"]["reasons"]])] * 2
    for j in (a, b):  # the run's own journal.json is the one Chaos Toolkit's CLI was given
        assert json.loads((Path(j["out_dir"]) / "journal.json").read_text())["availproof"]["verdict"] == j["verdict"]
        assert json.loads((Path(j["out_dir"]) / "summary.json").read_text())["verdict"] == j["verdict"]
    ra, rb = (rec.read(Path(j["out_dir"]) / "records.ndjson") for j in (a, b))
    assert [m.event for m in ra.marks] == [m.event for m in rb.marks]
    assert ra.header["experiment"] == rb.header["experiment"]


def test_a_violated_bound_exits_1_under_plain_chaos_run_with_the_journal_as_chaos_toolkit_left_it(tmp_path,
                                                                                                   fake_system):
    (code, journal), (ours, their_journal) = _both(tmp_path, _violated(tmp_path, tmp_path / "plain"))
    assert journal["status"] == "completed" and journal["deviated"] is False  # not rewritten to steer the CLI...
    assert control.chaos_toolkit_exit_code(journal) == 0  # ...which alone would have exited 0
    assert journal["availproof"]["verdict"]["word"] == "VIOLATED"
    assert code == ours == runner.VIOLATED == 1
    _same_outputs(journal, their_journal)


def test_a_baseline_out_of_steady_state_exits_2_under_both(tmp_path, fake_system):
    path = _edit(_gate_experiment(tmp_path), tmp_path / "plain")
    (code, journal), (ours, their_journal) = _both(tmp_path, path)
    assert journal["status"] == "interrupted"  # what Chaos Toolkit did, not "failed" to steer the CLI
    assert journal["availproof"]["verdict"]["word"] == "ERROR"
    assert code == ours == runner.ERROR == 2
    assert not (tmp_path / "victim").exists()
    _same_outputs(journal, their_journal)


@pytest.mark.parametrize("step", ["heal_quietly", "close", "write_json"])
def test_a_step_of_the_runs_end_that_fails_is_an_error_with_its_reason(tmp_path, fake_system, monkeypatch, step):
    """The run's end (chaos.core.run.end) is guarded step by step: a step that fails (a defect in the heal, the
    records that cannot be closed, summary.json that cannot be written) is the verdict ERROR with its reason
    in the journal and the summary, under both drivers, and the rest of the end still runs."""
    real = getattr(core, step)

    def broken(*args, **kwargs):
        if step == "write_json" and not (Path(args[0]).name == "summary.json" and "verdict" in args[1]):
            return real(*args, **kwargs)  # the analysis' summary.json and journal.json: written
        if step == "close":
            real(*args, **kwargs)  # closed all the same (no run left open in the process)
        raise RuntimeError(f"{step} broke")

    monkeypatch.setattr(core, step, broken)
    path = _violated(tmp_path, tmp_path / "plain")
    (code, journal), (ours, their_journal) = _both(tmp_path, path)
    what = {"heal_quietly": "healing the run's faults", "close": "closing the run",
            "write_json": "writing summary.json"}[step]
    for j in (journal, their_journal):
        v = j["availproof"]["verdict"]
        assert v["word"] == "ERROR" and v["reasons"] == [f"the run failed: {what}: RuntimeError: {step} broke"], v
        if step != "write_json":
            assert json.loads((Path(j["availproof"]["out_dir"]) / "summary.json").read_text())["verdict"] == v
    assert code == ours == runner.ERROR  # and every run opened was closed (the fixture checks)


def test_a_set_up_error_under_plain_chaos_run_exits_2_with_the_reason_in_the_journal(tmp_path, fake_system,
                                                                                     monkeypatch):
    monkeypatch.delenv("AP_UNSET_TOKEN_VAR", raising=False)
    path = _violated(tmp_path, tmp_path / "plain")
    _edit(path, tmp_path / "plain", front="lb", front_door={"token_env": "AP_UNSET_TOKEN_VAR"})
    # the journal's directory (the run's) is not made yet: the set-up failed before it
    code, journal = chaos_cli(tmp_path, path, tmp_path / "not-yet" / "journal.json")
    assert code == 2 and journal["status"] == "interrupted"
    assert journal["availproof"]["verdict"]["reasons"][0].startswith("set-up failed, nothing injected: ")
    assert "$AP_UNSET_TOKEN_VAR" in journal["availproof"]["error"]
    assert fake_system == [] and not (tmp_path / "started").exists()


def test_the_control_keeps_no_state_of_its_own():
    """Every name of the control is a function, a class, a module or a constant string: a run's state is
    its session's (chaos.core.moments.Session, kept in Chaos Toolkit's configuration) and its run's."""
    kinds = (types.FunctionType, types.ModuleType, type, str)
    state = {k: v for k, v in vars(control).items() if not k.startswith("__") and not isinstance(v, kinds)
             and getattr(v, "__module__", None) not in ("typing", "__future__")}
    assert state == {}


def test_the_journal_written_for_the_verdicts_exit_takes_a_dry_runs_enum():
    """Under `chaos run --dry` the journal still holds Chaos Toolkit's Dry enum when the hook writes it (its CLI
    makes it a string only later): written as its value, so the exit is the verdict's, not Chaos Toolkit's."""
    from chaostoolkit import encoder
    from chaoslib.types import Dry

    journal = {"experiment": {"dry": Dry.ACTIONS}, "status": "completed"}
    assert json.loads(json.dumps(journal, default=lambda o: control._plain(o, encoder)))["experiment"]["dry"] == \
        Dry.ACTIONS.value
    with pytest.raises(TypeError):
        json.dumps({"x": object()}, default=lambda o: control._plain(o, encoder))
