"""load.utilization (chaos.load.utilization): the rate as a share of a measured capacity; every refusal is one
line naming the file and the field, exit 2, before anything runs; the run records what its rate came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from chaos.load import capacity, utilization
from chaos.commands import cli
from chaos.core import experiment as exp_mod, run as core, runner, suite, validate as validate_mod
from chaos import schemas
from chaos.analysis import SLO
from chaos.load.capacity import Step, SweepPlan
from chaos.base.errors import UsageError
from chaos.load.workload import LoadShape
from chaos.core.options import Options

from .test_run import _experiment, fake_system  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
GOOD = json.loads((ROOT / "experiments" / "replica-kill.json").read_text())
FIELD = "extensions[availproof].load.utilization"


def capacity_file(path: Path, app: str = "stream", sustained: bool = True) -> Path:
    """A capacity.json as `availproof capacity` writes it: 3, 6, 12 req/s sustained, 24 broke the SLO
    (or, with ``sustained`` False, the first step broke it)."""
    plan = SweepPlan(start_rps=3, factor=2, max_rps=48, step_s=10)
    rates = [3, 6, 12, 24] if sustained else [3]
    steps = [Step(i, r, 10.0, r * 10, r * 10 if r < 24 and sustained else 0, 0, 0.1) for i, r in enumerate(rates, 1)]
    doc = capacity.document(steps, capacity.decide(steps, plan), plan, SLO(), LoadShape(),
                            {"app": app, "front": "lb", "topology": "three-zones"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def experiment_file(path: Path, **load) -> Path:
    doc = json.loads(json.dumps(GOOD))
    ext = next(e for e in doc["extensions"] if e["name"] == "availproof")
    ext["load"].update(load)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def validate(capsys, *args) -> tuple[int, list[str]]:
    code = cli.main(["validate", *map(str, args)])
    return code, capsys.readouterr().out.splitlines()


# ---------------------------------------------------------------- the derived rate
def test_the_rate_is_the_utilization_of_the_sustained_rate_of_the_capacity_file_next_to_the_experiment(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # load.capacity is relative to the experiment file, not the working directory
    cap = capacity_file(tmp_path / "exps" / "measured" / "capacity.json")
    path = experiment_file(tmp_path / "exps" / "x.json", utilization=0.7, capacity="measured/capacity.json")
    path = path.relative_to(tmp_path)
    rate_from = validate_mod.run_inputs(path, "stream")
    assert rate_from["rate_rps"] == pytest.approx(8.4) and rate_from["sustained_rps"] == 12
    assert rate_from["utilization"] == 0.7 and rate_from["capacity"] == str(cap.relative_to(tmp_path))
    assert rate_from["measured_at"].endswith("Z") and rate_from["app"] == "stream"
    described = utilization.describe(rate_from)
    assert described.startswith("8.4 req/s = 0.7 x 12 req/s sustained (exps/measured/capacity.json")
    s = exp_mod.settings(exp_mod.load(path), source=str(path))
    assert s.load.rate == 8 and s.load.utilization == 0.7  # the file's rate until the run derives its own
    shape = utilization.applied(s.load, rate_from)  # a new shape: the file's is unchanged
    assert shape.rate == pytest.approx(8.4) and shape.capacity == rate_from["capacity"] and s.load.rate == 8


def test_the_capacity_option_wins_over_load_capacity(tmp_path):
    other = capacity_file(tmp_path / "other.json")
    path = experiment_file(tmp_path / "x.json", utilization=0.5, capacity="missing.json")
    assert validate_mod.run_inputs(path, "stream", capacity=other)["rate_rps"] == 6
    assert validate_mod.run_inputs(experiment_file(tmp_path / "y.json", rate=3), "stream", capacity=other) is None


def test_utilization_is_recorded_in_the_run_header_summary_and_report(tmp_path, fake_system):
    from chaos.recording import records as rec
    from chaos.reports import report

    cap = capacity_file(tmp_path / "capacity.json")
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    doc = json.loads(path.read_text())
    doc["extensions"][0]["load"].update(utilization=0.25, capacity="capacity.json")  # 0.25 x 12 = 3 req/s
    path.write_text(json.dumps(doc))
    code, result = runner.run_experiment(path, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    rate_from = summary["rate_from"]
    assert rate_from == {"utilization": 0.25, "capacity": str(cap), "sustained_rps": 12, "rate_rps": 3.0,
                         "measured_at": rate_from["measured_at"], "app": "stream", "front": "lb",
                         "topology": "three-zones", "capacity_is_lower_bound": False}
    Draft202012Validator(json.loads((ROOT / "chaos" / "schemas" / "summary.schema.json").read_text())).validate(summary)
    header = rec.read(tmp_path / "out" / "records.ndjson").header
    assert header["rate_from"] == rate_from
    load = header["load"]
    assert load["rate"] == 3.0 and load["utilization"] == 0.25 and load["capacity"] == str(cap)
    lines = report.env_lines(report.environment(summary, tmp_path / "out"))
    said = "rate from a measured capacity (load.utilization): 3 req/s = 0.25 x 12 req/s"
    assert any(line.startswith(said) for line in lines)


# ---------------------------------------------------------------- the refusals
def test_utilization_without_a_capacity_file_is_refused_naming_the_field(tmp_path, capsys):
    path = experiment_file(tmp_path / "x.json", utilization=0.7)
    code, out = validate(capsys, path)
    assert code == 2 and out == [f"{path}: {FIELD}: needs a capacity file to take its share of: load.capacity "
                                 "(a capacity.json of `availproof capacity`, relative to the experiment file) or "
                                 "--capacity FILE"]
    cap = capacity_file(tmp_path / "c.json")
    assert validate(capsys, path, "--capacity", cap) == (0, [f"ok {path}"])


@pytest.mark.parametrize("content, needle", [
    (None, "cannot read capacity file"),
    ("{not json", "not valid JSON"),
    ('{"kind": "capacity"}', "not a capacity file of `availproof capacity`: app: is required"),
    ("[1, 2]", "not a capacity file of `availproof capacity`: <document>:"),
])
def test_an_unreadable_or_invalid_capacity_file_is_refused_naming_it(tmp_path, capsys, content, needle):
    cap = tmp_path / "capacity.json"
    if content is not None:
        cap.write_text(content)
    path = experiment_file(tmp_path / "x.json", utilization=0.7, capacity="capacity.json")
    code, out = validate(capsys, path)
    assert code == 2 and len(out) == 1 and out[0].startswith(f"{cap}: {needle}"), out


def test_a_capacity_file_off_its_schema_is_refused_naming_its_field(tmp_path, capsys):
    cap = capacity_file(tmp_path / "capacity.json")
    doc = json.loads(cap.read_text())
    cap.write_text(json.dumps({**doc, "sustained_rps": 0}))  # never 0
    code, out = validate(capsys, experiment_file(tmp_path / "x.json", utilization=0.7, capacity="capacity.json"))
    assert code == 2 and out[0].startswith(f"{cap}: not a capacity file of `availproof capacity`: sustained_rps: ")


def test_a_capacity_file_that_sustained_nothing_is_refused(tmp_path, capsys):
    cap = capacity_file(tmp_path / "capacity.json", sustained=False)
    code, out = validate(capsys, experiment_file(tmp_path / "x.json", utilization=0.7, capacity="capacity.json"))
    assert code == 2 and out == [
        f"{cap}: sustained_rps: null, nothing was sustained (the first step (3 req/s) already broke the SLO: "
        "attainment 0.0000 below 0.99 (0 of 30 met the SLO); start lower (--start-rate)); no rate to take a share "
        "of: measure again or state load.rate"]


@pytest.mark.parametrize("load, needle", [
    ({"mode": "closed", "concurrency": 4}, "mode closed"),
    ({"trace": "experiments/traces/example.jsonl"}, "trace"),
    ({"stages": [{"rate": 1, "duration_s": 10}]}, "stages"),
])
def test_utilization_with_a_closed_loop_a_trace_or_stages_is_refused(tmp_path, capsys, load, needle):
    capacity_file(tmp_path / "capacity.json")
    path = experiment_file(tmp_path / "x.json", utilization=0.7, capacity="capacity.json", **load)
    code, out = validate(capsys, path)
    assert code == 2 and out  # a second line when the llm overrides break it too
    assert out[0].startswith(f"{path}: extensions[availproof].load: utilization: sets an open loop's rate")
    assert needle in out[0]


@pytest.mark.parametrize("value", [0, 1.5, -0.2, "0.7"])
def test_utilization_out_of_range_is_refused_by_the_schema(tmp_path, capsys, value):
    path = experiment_file(tmp_path / "x.json", utilization=value, capacity="capacity.json")
    code, out = validate(capsys, path)
    assert code == 2 and out[0].startswith(f"{path}: {FIELD}: ")


def test_a_capacity_measured_for_another_app_is_refused_before_anything_runs(tmp_path, fake_system, capsys):
    cap = capacity_file(tmp_path / "capacity.json", app="stream")
    path = experiment_file(tmp_path / "x.json", utilization=0.7, capacity="capacity.json")
    assert validate(capsys, path) == (0, [f"ok {path}"])  # validate knows no app
    code = cli.main(["run", str(path), "--app", "llm", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and fake_system == [] and not (tmp_path / "out").exists()
    assert (f"{cap}: app: measured for the stream app, this run's app is llm: measure it with "
            "`availproof capacity EXPERIMENT --app llm` or run with --app stream") in err
    # under plain `chaos run` the run's opening refuses it the same way, before provisioning
    with pytest.raises(UsageError, match="app: measured for the stream app"):
        core.open_run(exp_mod.load(path), Options(app="llm", capacity=cap, out_dir=tmp_path / "o"))
    assert fake_system == []  # nothing provisioned, no run opened


def test_suite_refuses_a_bad_utilization_before_its_first_experiment(tmp_path, fake_system, capsys, monkeypatch):
    capacity_file(tmp_path / "capacity.json", app="stream")
    ok = experiment_file(tmp_path / "ok.json", rate=2)
    bad = experiment_file(tmp_path / "bad.json", utilization=0.7, capacity="capacity.json")
    monkeypatch.setattr(suite, "experiment_path", lambda name: {"ok": ok, "bad": bad}[name])
    code = cli.main(["suite", "--only", "ok", "bad", "--app", "llm", "--out", str(tmp_path / "s"), "--keep-cluster"])
    assert code == 2 and fake_system == [] and "app: measured for the stream app" in capsys.readouterr().err


def test_the_capacity_file_comes_from_chaos_toolkits_configuration_too():
    o = Options.from_configuration({"availproof_capacity": "runs/x/capacity.json"})
    assert o.capacity == Path("runs/x/capacity.json") and Options().capacity is None


def test_validate_reads_a_capacity_file_against_its_schema(tmp_path, capsys):
    cap = capacity_file(tmp_path / "capacity.json")
    assert validate(capsys, cap) == (0, [f"ok {cap}"])
    cap.write_text(json.dumps({**json.loads(cap.read_text()), "measured_at": "yesterday"}))
    code, out = validate(capsys, cap)
    assert code == 2 and out[0].startswith(f"{cap}: measured_at: ")
    assert validate_mod.check_file(cap) == out
