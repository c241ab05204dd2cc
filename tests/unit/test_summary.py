"""`availproof analyse`: the summary derived again from records alone, and the published formats."""

import json
from dataclasses import asdict

import jsonschema
import pytest

from chaos import analysis
from chaos.commands import cli
from chaos.recording import records as rec
from chaos.core import summary as summary_mod
from chaos.schemas import __file__ as schemas_init
from pathlib import Path

from tests.unit.test_analysis import NS, T0, every, mark, zones

SCHEMAS = Path(schemas_init).parent
DEFS = analysis.Definitions(analysis.SteadyState(window_s=2.0, min_success_ratio=1.0), analysis.SLO(), "affected")
BOUNDS = {"max_failed_requests": 500, "max_time_to_first_success_s": 5, "must_recover": True}


def schema(name):
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def write_run(d: Path, header_extra: dict, requests, marks, end_t) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    w = rec.RecordWriter(d / "records.ndjson")
    w.write({"kind": "run", "run_id": "r1", "started_ns": T0, "load": {"rate": 30}, "routing": "round_robin",
             "targets": [{"name": f"w-{z}", "url": "http://127.0.0.1:1", "zone": z, "region": None} for z in "abc"],
             **header_extra})
    for r in sorted(requests, key=lambda r: getattr(r, "sent_ns", None) or r.t_ns):
        w.write(r)
    for m in marks:
        w.write(m)
    w.write({"kind": "end", "stopped_ns": T0 + int(end_t * NS)})
    w.close()
    return d


def zone_loss_run(d: Path, header_extra: dict) -> Path:
    from tests.unit.test_planes import samples

    rs = zones(0, 50, down="b", down_from=10.05, down_to=30.0)
    return write_run(d, header_extra, rs + samples(0, 50, period=2.0),
                     [mark(rec.INJECT_START, 10, scope="zone", zones=("b",))], 50)


def test_records_lines_and_the_summary_match_their_published_schemas(tmp_path):
    d = zone_loss_run(tmp_path / "run", summary_mod.header_block("t", "zone", DEFS, BOUNDS, "src", "stream"))
    v = schema("records-line")
    for _, obj in rec.iter_lines(d / "records.ndjson"):
        v.validate(obj)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, BOUNDS)
    schema("summary").validate(json.loads(json.dumps(s)))
    # the schemas are not vacuous: a request without its send instant, a fault without populations
    with pytest.raises(jsonschema.ValidationError):
        v.validate({"kind": "request", "id": 1, "target": "w", "url": "u", "zone": None, "route": "/", "phase": "measure",
                    "planned_ns": 1, "sent_offset_s": 0, "ok": True, "failure": None, "e2e_s": 0.1})
    broken = json.loads(json.dumps(s))
    del broken["faults"][0]["affected"]
    with pytest.raises(jsonschema.ValidationError):
        schema("summary").validate(broken)


def test_analyse_reproduces_the_run_summary_from_the_records_alone(tmp_path, capsys):
    d = zone_loss_run(tmp_path / "run", summary_mod.header_block("zone-loss", "zone", DEFS, BOUNDS, "src", "stream"))
    at_run_end = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, BOUNDS, "src")
    (d / "summary.json").write_text(json.dumps({**at_run_end, "experiment": "zone-loss", "app": "stream"}))
    assert cli.main(["analyse", str(d)]) == 0
    again = json.loads((d / "summary.json").read_text())
    assert again["faults"] == json.loads(json.dumps(at_run_end["faults"]))
    assert again["bounds"]["results"] == json.loads(json.dumps(at_run_end["bounds"]["results"]))
    assert again["experiment"] == "zone-loss" and "run header" in again["derived_from"]["definitions"]
    assert (d / "summary.previous.json").exists()
    a = again["faults"][0]["affected"]
    assert a["time_to_first_success_s"] == pytest.approx(20.0, abs=0.05)  # zone b's outage, not another zone's success


def test_an_old_format_run_analyses_with_the_definitions_of_its_old_summary(tmp_path):
    # format 1: no format_version, no definitions in the header; summary.json of the old shape
    d = zone_loss_run(tmp_path / "old", {})
    old = {"run_id": "r1", "definitions": {"steady_state": asdict(DEFS.steady_state), "slo": asdict(DEFS.slo)},
           "faults": [{"fault_id": "f1", "scope": "zone", "time_to_first_success_s": 0.1}],
           "bounds": {"stated": {"max_failed_requests": 10}, "source": "old", "results": [], "all_met": True},
           "experiment": "zone-loss: old", "app": "stream"}
    (d / "summary.json").write_text(json.dumps(old))
    s, origin = summary_mod.reanalyse(d)
    assert "old summary.json" in origin
    assert s["format_version"] == analysis.FORMAT_VERSION
    assert s["definitions"]["steady_state"]["window_s"] == 2.0
    assert s["faults"][0]["affected"]["failed_total"] == 199  # zone b, 10.1-29.9 s at 10 req/s
    assert s["bounds"]["all_met"] is False  # 199 > 10, the bound the old run stated
    assert s["experiment"] == "zone-loss: old"


def test_no_definitions_anywhere_uses_the_defaults_and_no_bounds_are_claimed(tmp_path):
    d = zone_loss_run(tmp_path / "bare", {})
    s, origin = summary_mod.reanalyse(d)
    assert "defaults" in origin
    assert s["definitions"]["steady_state"] == asdict(analysis.SteadyState())
    assert s["bounds"] == {"stated": {}, "source": "", "population": "affected", "results": [], "all_met": None}


def test_an_experiment_file_given_overrides_the_recorded_definitions(tmp_path):
    exp = json.loads((Path(__file__).parents[2] / "experiments" / "zone-loss.json").read_text())
    d = zone_loss_run(tmp_path / "run", summary_mod.header_block("t", "zone", DEFS, BOUNDS, "src", "stream"))
    path = tmp_path / "zl.json"
    path.write_text(json.dumps(exp))
    s, origin = summary_mod.reanalyse(d, path)
    assert str(path) in origin
    ext = next(e for e in exp["extensions"] if e["name"] == "availproof")
    assert s["definitions"]["steady_state"]["window_s"] == ext["steady_state"]["window_s"]
    assert s["bounds"]["stated"] == ext["bounds"]


def test_analyse_refuses_a_directory_without_records_in_one_line(tmp_path, capsys):
    assert cli.main(["analyse", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no records.ndjson" in err[0]


def test_definitions_in_the_header_come_from_the_harness(tmp_path):
    from chaos.load.harness import LoadRun
    from chaos.load.workload import LoadShape, Target

    block = summary_mod.header_block("t", "zone", DEFS, BOUNDS, "src", "stream")
    lr = LoadRun([Target("w", "http://127.0.0.1:9", "a", None)], LoadShape(), rec.Events(), header_extra=block)
    h = lr.header()
    assert h["format_version"] == rec.FORMAT_VERSION and h["definitions"] == DEFS.to_dict()
    assert h["experiment"]["bounds"] == BOUNDS
    schema("records-line").validate({"kind": "run", **json.loads(json.dumps(h, default=str)), "started_ns": T0})


def test_a_stopped_run_re_derived_from_its_records_alone_still_does_not_pass(tmp_path):
    d = zone_loss_run(tmp_path / "stopped", summary_mod.header_block("t", "zone", DEFS, BOUNDS, "src", "stream"))
    with open(d / "records.ndjson", "a") as f:
        f.write(json.dumps({"kind": "stop", "t_ns": T0 + 12 * NS, "reason": "failure ratio 1.00 above 0.5 for 1 s"}) + "\n")
    for _, obj in rec.iter_lines(d / "records.ndjson"):
        schema("records-line").validate(obj)
    s, _ = summary_mod.reanalyse(d)  # no summary.json beside the records
    assert s["stop_reason"].startswith("failure ratio") and s["bounds"]["all_met"] is False


def test_a_cut_window_too_short_to_judge_validates_against_the_summary_schema(tmp_path):
    """relapses and steady state null (nothing judged in a 2 s window cut by a second fault)."""
    rs = zones(0, 40)
    marks = [mark(rec.INJECT_START, 10, "f1", scope="head", zones=()), mark(rec.INJECT_START, 11, "f2")]
    d = write_run(tmp_path / "cut", summary_mod.header_block("t", "head", DEFS, BOUNDS, "", "stream"), rs, marks, 40)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, BOUNDS)
    assert s["faults"][0]["service"]["relapses"] is None
    schema("summary").validate(json.loads(json.dumps(s)))
