"""The detector scorecard (chaos.scorecard, `availproof scorecard`): figures from synthetic summaries and records
with known answers, the plan's cells and reasons, the derived RunSpecs, and the command's bad input."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from chaos import analysis
from chaos.commands import cli
from chaos.recording import records as rec
from chaos.scorecard import cells, dimensions as dim, execute, figures, plan, table

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
BAD, GOOD1, GOOD2, NEW = "bad00001", "good0001", "good0002", "new00001"


def fault(detected_s=None, others_gone=(), window_s=60.0):
    gone = ([{"replica": BAD, "gone_s": detected_s}] if detected_s is not None else [])
    gone += [{"replica": r, "gone_s": 5.0} for r in others_gone]
    return {"fault_id": "engine-wedge-1", "scope": "engine-wedge", "target": BAD, "inject_ns": T0,
            "window_s": window_s, "unmeasurable": {},
            "capacity": {"time_to_lost_s": detected_s, "target_replicas": 3},
            "replacement": {"replicas_before": 3, "replaced": len(gone), "gone": gone, "new": [],
                            "time_to_complete_s": None}}


def request(i, sent_s, replica, ok=True):
    return rec.RequestRecord(id=i, target="lb", url="http://x", zone=None, route="/v1/chat/completions",
                             phase="measure", planned_ns=T0 + int(sent_s * NS), sent_ns=T0 + int(sent_s * NS),
                             sent_offset_s=sent_s, ok=ok, served_replica=replica)


def write_run(d: Path, f: dict | None, requests=(), samples=()):
    d.mkdir(parents=True)
    summary = {"format_version": analysis.FORMAT_VERSION, "requests": {"total": len(requests)},
               "faults": [f] if f else []}
    (d / "summary.json").write_text(json.dumps(summary))
    lines = [{"kind": "run", "format_version": 2, "run_id": d.name, "started_ns": T0 - 20 * NS}]
    lines += [asdict(r) for r in requests] + [asdict(s) for s in samples]
    lines.append({"kind": "end", "t_ns": T0 + 100 * NS})
    (d / "records.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))


def sample(t_s, ids):
    return rec.Sample(t_ns=T0 + int(t_s * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.01, controller_ok=True,
                      app_status="RUNNING", replicas={"StreamTarget": {"zone-a": len(ids)}}, nodes_alive={"zone-a": 1},
                      replica_ids={"StreamTarget": list(ids)})


def cell(**kw):
    return plan.Cell(**{"fault": "wedge", "detector": "v2", "load": "steady", "period": "default", "trials": 3,
                        "horizon_s": 95.0, "experiment": "engine-wedge.json", **kw})


# -- one trial's figures --------------------------------------------------------------------------------------

def test_detection_is_the_faulted_replica_taken_out():
    d = figures.detection(fault(detected_s=12.5))
    assert d["detected"] is True and d["time_to_detect_s"] == 12.5 and d["by"] == "replacement.gone"
    d = figures.detection(fault())
    assert d["detected"] is False and d["time_to_detect_s"] is None


def test_detection_falls_back_to_capacity_and_is_null_without_either():
    f = fault(detected_s=9.0)
    f["replacement"] = {"replicas_before": None, "gone": []}
    assert figures.detection(f)["by"] == "capacity.time_to_lost_s" and figures.detection(f)["time_to_detect_s"] == 9.0
    f["unmeasurable"] = {"capacity.time_to_lost_s": "no samples"}
    d = figures.detection(f)
    assert d["detected"] is None and "no samples" in d["why"]["detected"]


def test_requests_to_the_bad_replica_after_detection():
    rs = [request(0, 5.0, BAD)]  # before detection: not counted
    rs += [request(i, 11.0 + i, GOOD1) for i in range(1, 8)]  # 7 to a good replica
    rs += [request(8, 12.0, BAD), request(9, 13.0, None, ok=False), request(10, 14.0, None, ok=False)]
    rs += [request(11, 70.0, BAD)]  # after the window: not counted
    out = figures.after_detection(fault(detected_s=10.0), rs, 10.0)
    assert out == {"requests": 10, "to_bad": 1, "unnamed": 2, "share": 0.1, "share_upper": 0.3}
    assert figures.after_detection(fault(), rs, None)["share"] is None


def test_false_replacements_are_the_other_replicas_gone():
    assert figures.false_replacements(fault(detected_s=10.0, others_gone=[GOOD1])) == (1, None)
    assert figures.false_replacements(fault(detected_s=10.0)) == (0, None)


# -- a cell over its trials -----------------------------------------------------------------------------------

def trial(detected_s, sent=20, bad=0, others=0):
    f = fault(detected_s=detected_s, others_gone=[GOOD2] * others)
    t = figures.detection(f)
    t["after_detection"] = {"requests": sent if detected_s else None, "to_bad": bad if detected_s else None,
                            "unnamed": 0 if detected_s else None}
    t["false_replacements"] = others
    return t


def test_a_detected_cell_with_p50_and_p99_over_n_trials():
    row = cells.aggregate(cell(), [trial(10.0, bad=1), trial(20.0), trial(12.0)])
    assert row["detected"] == 1.0 and row["trials_judged"] == 3
    assert row["time_to_detect_p50_s"] == 12.0 and row["time_to_detect_p99_s"] == 20.0  # nearest rank of 3
    assert row["to_bad_share"] == round(1 / 60, 6) and row["false_replacements"] == 0


def test_a_never_detected_cell():
    row = cells.aggregate(cell(detector="none"), [trial(None), trial(None)])
    assert row["detected"] == 0.0
    assert row["time_to_detect_p50_s"] is None and "never detected" in row["why"]["time_to_detect_p99_s"]
    assert row["to_bad_share"] is None and row["why"]["to_bad_share"] == "not detected"


def test_a_half_detected_cell_with_a_false_replacement():
    row = cells.aggregate(cell(), [trial(10.0), trial(None, others=1)])
    assert row["detected"] == 0.5 and row["false_replacements"] == 1
    assert row["time_to_detect_p50_s"] == row["time_to_detect_p99_s"] == 10.0


# -- end to end: run directories, the fault-free run, the tables ----------------------------------------------

def test_figures_from_run_directories_and_the_tables(tmp_path):
    spec = plan.parse({"faults": ["wedge"], "detectors": ["none", "v2"], "loads": ["steady"],
                       "periods": ["default"], "trials": 2, "fault_free": {"duration_s": 600}})
    plan_cells = plan.cells(spec)
    assert [c.id for c in plan_cells] == ["wedge.none.steady.default", "wedge.v2.steady.default", "fault-free"]
    rs = [request(i, 15.0 + i, GOOD1) for i in range(9)] + [request(9, 16.5, BAD)]
    write_run(tmp_path / "wedge.v2.steady.default" / "trial-1", fault(detected_s=14.0), rs)
    write_run(tmp_path / "wedge.v2.steady.default" / "trial-2", fault(detected_s=18.0, others_gone=[GOOD2]), rs)
    write_run(tmp_path / "wedge.none.steady.default" / "trial-1", fault(), rs)
    samples = [sample(0, [BAD, GOOD1, GOOD2]), sample(30, [BAD, GOOD1, GOOD2]), sample(60, [NEW, GOOD1, GOOD2])]
    write_run(tmp_path / "fault-free" / "trial-1", None, rs, samples)
    plan.write(tmp_path, spec, plan_cells)
    paths = execute.rederive(tmp_path)
    doc = json.loads(paths["json"].read_text())
    by = {r["id"]: r for r in doc["cells"]}
    v2 = by["wedge.v2.steady.default"]
    assert v2["detected"] == 1.0 and v2["time_to_detect_p50_s"] == 14.0 and v2["time_to_detect_p99_s"] == 18.0
    assert v2["false_replacements"] == 1 and v2["to_bad_share"] == 1 / 16  # 10 requests after 14 s, 6 after 18 s
    assert by["wedge.none.steady.default"]["detected"] == 0.0 and by["wedge.none.steady.default"]["trials_found"] == 1
    ff = by["fault-free"]
    assert ff["false_replacements"] == 1 and ff["observed_s"] == 60.0
    met = {t["target"].split(" ")[0]: t["met"] for t in doc["targets"]}
    assert met == {"every": True, "<=": False, "0": False}
    md = paths["md"].read_text()
    assert "| wedge | v2 | steady | default | 2/2 | 100% | 14.0 | 18.0 | 6.25% | 1 |" in md
    assert "<svg" in paths["svg"].read_text() and "100% · 18 s" in paths["svg"].read_text()


# -- the plan -------------------------------------------------------------------------------------------------

def test_the_full_plan_is_the_product_minus_the_cells_that_do_not_apply():
    spec = plan.parse({})
    all_cells = plan.cells(spec)
    product = len(dim.FAULTS) * len(dim.DETECTORS) * len(dim.LOADS) * len(dim.PERIODS)
    assert len(all_cells) == product + 1  # and the fault-free run
    skipped = [c for c in all_cells if not c.runs]
    assert all(c.reason for c in skipped)
    # stream: long-prefill, serve (same as none) and vllm (no vLLM) are not run; rank-hang is (its app.ranks 2)
    runnable = [c for c in all_cells if c.runs and c.fault != plan.FAULT_FREE]
    assert len(runnable) == 6 * 4 * 3 * 2
    assert {c.detector for c in runnable} == {"none", "v1", "v2", "v2-exit"}
    serve = next(c for c in skipped if c.id == "wedge.serve.steady.default")
    assert serve.alias == "wedge.none.steady.default" and "same deployment as none" in serve.reason
    rank = next(c for c in runnable if c.id == "rank-hang.v2.steady.default")
    assert rank.experiment == "rank-hang.json"
    prefill = next(c for c in skipped if c.load == "long-prefill")
    assert "1.056 s" in prefill.reason and "10 s" in prefill.reason


def test_the_rank_hang_cell_keeps_its_rank_group_beside_the_detector_and_is_not_run_on_vllm():
    cell = next(c for c in plan.cells(plan.parse({"fault_free": False})) if c.id == "rank-hang.v2.steady.default")
    s = plan.derive(cell, plan.base_spec(cell, "stream"), 5.0).settings
    assert s.scope == "rank-hang" and s.app["ranks"] == 2  # the fault needs its group (refused without one)
    assert (s.app["watchdog"], s.app["stall_s"], s.app["health_check_period_s"]) == (2, 5.0, 10.0)
    llm = [c for c in plan.cells(plan.parse({"app": "llm", "fault_free": False})) if c.fault == "rank-hang"]
    assert llm and not any(c.runs for c in llm) and all("tensor_parallel_size >= 2" in c.reason for c in llm)


def test_the_vllm_plan_aliases_vllm_to_none_and_has_no_serve_alone():
    all_cells = plan.cells(plan.parse({"app": "llm", "fault_free": False}))
    by = {c.id: c for c in all_cells}
    assert by["wedge.vllm.steady.apps"].alias == "wedge.none.steady.apps"
    assert by["wedge.serve.steady.apps"].alias is None and "not applicable" in by["wedge.serve.steady.apps"].reason


def test_long_prefill_is_unreachable_on_the_stream_target_by_arithmetic():
    f = dim.long_prefill_figures(5.0)
    assert f["max_prompt_tokens"] == 503 and f["longest_prefill_s"] == pytest.approx(1.056)
    assert f["reachable"] is False and f["uncached_token_s_needed"] == pytest.approx(0.0198, abs=1e-4)


def test_each_cell_is_a_runspec_derived_from_the_shipped_experiment():
    c = cell(load="none", horizon_s=dim.detection_horizon_s("default", "v2", 5.0))
    base = plan.base_spec(c, "stream")
    d = plan.derive(c, base, 5.0)
    assert d.settings.app["health_check_period_s"] == 10.0 and d.settings.app["health_check_timeout_s"] == 10.0
    assert d.settings.app["stall_s"] == 5.0 and d.settings.app["watchdog"] == 2
    assert d.settings.load.arrival == "constant" and d.settings.load.rate * d.settings.load.duration_s == 0.5
    assert d.settings.recovery_window_s == 95.0 and d.settings.recovery_settle_s == 0.0
    assert "stall_s" not in base.settings.app  # the shipped one is unchanged
    sparse = plan.derive(cell(detector="none", load="sparse", period="apps"), base, 5.0)
    assert sparse.settings.load.rate == 0.1 and "stall_s" not in sparse.settings.app
    assert sparse.settings.app["health_check_period_s"] == 2.0
    ff = next(c for c in plan.cells(plan.parse({"fault_free": {"duration_s": 3600, "speedup": 4}}))
              if c.fault == plan.FAULT_FREE)
    dff = plan.derive(ff, base, 5.0)
    assert tuple(dff.experiment["method"]) == () and dff.settings.recovery_window_s == 900.0
    assert dff.settings.load.rate == base.settings.load.rate * 4 and dff.settings.bounds == {}


# -- the command ----------------------------------------------------------------------------------------------

def test_dry_run_prints_the_cells_and_the_time_and_runs_nothing(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("faults: [wedge, sigstop]\ndetectors: [none, v2, vllm]\nloads: [steady]\nperiods: [default]\n"
                    "trials: 1\nfault_free: false\n")
    assert cli.main(["scorecard", str(spec), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "6 cells, 4 run (4 trials), 2 not run" in text and "estimated time:" in text
    assert "skip  wedge.vllm.steady.default: not applicable on the stream target" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, says", [
    ("faults: [wedge, nope]\n", "faults: 'nope' is not one of"),
    ("trials: 0\n", "trials must be an integer >= 1"),
    ("colour: red\n", "unknown key 'colour'"),
    ("app: tpu\n", "app must be stream or llm"),
    ("fault_free: {speedup: 0.5}\n", "speedup must be a number >= 1"),
    ("faults: [wedge\n", "not valid YAML"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, text, says):
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    assert cli.main(["scorecard", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err


def test_bad_command_lines(tmp_path, capsys):
    assert cli.main(["scorecard"]) == 2
    assert "give a scorecard SPEC" in capsys.readouterr().err
    assert cli.main(["scorecard", "--from", str(tmp_path)]) == 2
    assert "no plan.json" in capsys.readouterr().err
    assert cli.main(["scorecard", "x.yaml", "--from", str(tmp_path)]) == 2
    assert "give no SPEC" in capsys.readouterr().err
    assert cli.main(["scorecard", str(tmp_path / "missing.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_targets_unmeasured_without_trials():
    rows = cells.derive(Path("/nonexistent"), plan.cells(plan.parse({"faults": ["wedge"], "trials": 1})))
    # v2's two, v2-exit's two, the hour (v2), v2-exit's hour (unmeasured: the hour's detector is v2)
    assert [t["met"] for t in table.targets(rows)] == [None, None, None, None, None, None]
    rows = [r for r in rows if r["detector"] != "v2-exit"]
    assert [t["met"] for t in table.targets(rows)] == [None, None, None]  # no v2-exit cell: no line of its own


def test_v2_exit_is_a_detector_of_its_own_with_its_own_target_lines():
    cell = next(c for c in plan.cells(plan.parse({"fault_free": False})) if c.id == "wedge.v2-exit.steady.default")
    s = plan.derive(cell, plan.base_spec(cell, "stream"), 5.0).settings
    assert (s.app["watchdog"], s.app["on_stall"], s.app["stall_s"]) == (2, "exit", 5.0)
    assert cell.horizon_s == dim.detection_horizon_s("default", "v2", 5.0)
    slow = {**_v2_row(0.0, 0.0), "id": "wedge.v2-exit.steady.default", "detector": "v2-exit",
            "time_to_detect_p99_s": 31.0}
    got = {t["target"]: t["met"] for t in table.targets([_v2_row(0.0, 0.0), slow])}
    assert got["every fault detected by v2 at p99 <= 30 s at the default periods"] is True
    assert got["every fault detected by v2-exit at p99 <= 30 s at the default periods"] is False
    assert got["<= 1% of requests to the bad replica after detection (v2-exit)"] is True
    ff = {"id": "fault-free", "fault": plan.FAULT_FREE, "detector": "v2", "load": "steady", "period": "default",
          "status": "run", "false_replacements": 0, "trials_found": 1, "trials_planned": 1}
    got = {t["target"]: t for t in table.targets([_v2_row(0.0, 0.0), slow, ff])}
    assert got["0 false replacements in the fault-free run"]["met"] is True
    assert got["0 false replacements in the fault-free run (v2-exit)"]["met"] is None  # v2's hour does not stand for it
    assert "one failed check ends a v2-exit replica" in got["0 false replacements in the fault-free run (v2-exit)"]["why"]
    got = {t["target"]: t for t in table.targets([slow, {**ff, "detector": "v2-exit"}])}
    assert "0 false replacements in the fault-free run (v2-exit)" not in got  # its own hour: the line above is it


def test_a_false_replacement_count_over_some_trials_only_is_null_with_why():
    """Review (2026-12-06): a sum over the trials that could count was shown as the whole cell's."""
    t = trial(10.0)
    t["false_replacements"] = None  # its samples carried no replica ids
    row = cells.aggregate(cell(), [trial(10.0), t])
    assert row["false_replacements"] is None and row["false_replacements_trials"] == 1
    assert "1 of 2" in row["why"]["false_replacements"]


def _v2_row(share, upper, detected=1.0, period="default", trials_found=1):
    return {"id": f"wedge.v2.steady.{period}", "fault": "wedge", "detector": "v2", "load": "steady", "period": period,
            "status": "run", "detected": detected, "time_to_detect_p99_s": 10.0 if detected else None,
            "to_bad_share": share, "to_bad_share_upper": upper, "trials_found": trials_found, "trials_planned": 1}


def test_the_share_target_reads_the_upper_bound_on_the_targets_own_cells():
    share = {t["target"][:4]: t["met"] for t in table.targets([_v2_row(0.0, 0.02)])}
    assert share["<= 1"] is False  # unnamed failures may have gone to the bad replica: the upper bound decides
    share = {t["target"][:4]: t["met"] for t in table.targets([_v2_row(0.0, 0.0), _v2_row(0.5, 0.5, period="2s")])}
    assert share["<= 1"] is True  # a cell at other periods is not the target's
    share = {t["target"][:4]: t["met"] for t in table.targets([_v2_row(0.0, 0.0), _v2_row(None, None, period="default")])}
    assert share["<= 1"] is None  # a detected target cell that cannot tell leaves it unmeasured


def test_the_fault_free_target_needs_every_planned_trial():
    ff = {"id": "fault-free", "fault": plan.FAULT_FREE, "detector": "v2", "load": "steady", "period": "default",
          "status": "run", "false_replacements": 0, "trials_found": 1, "trials_planned": 3}
    (got,) = [t for t in table.targets([ff]) if "fault-free" in t["target"]]
    assert got["met"] is None and "1 of 3" in got["why"]
    (got,) = [t for t in table.targets([{**ff, "trials_found": 3}]) if "fault-free" in t["target"]]
    assert got["met"] is True
