"""The migration table's variants and rows (bench/migration_table.py, issue 47), on the shipped experiments and on a
synthetic run whose figures are known."""

from __future__ import annotations

import json
from pathlib import Path

from bench import migration_table as mt

ROOT = Path(__file__).resolve().parents[2]


def shipped(name: str) -> dict:
    return json.loads((ROOT / "experiments" / name).read_text())


def test_a_variant_repeats_the_fault_spaced_and_turns_migration_on_or_off_keeping_the_rest():
    doc = shipped("engine-wedge-watchdog.json")
    on = mt.variant(doc, "on", 3, 50, 10, {})
    off = mt.variant(doc, "off", 3, 50, 10, {})
    assert on["extensions"][0]["app"] == {**doc["extensions"][0]["app"], "migration": {"limit": 2}}
    assert off["extensions"][0]["app"] == doc["extensions"][0]["app"]  # its watchdog kept, no migration
    names = [a["name"] for a in on["method"]]
    assert names == [f"{doc['method'][0]['name']}-{i}" for i in (1, 2, 3)]
    assert [a.get("pauses") for a in on["method"]] == [{"after": 50}, {"after": 50}, None]
    assert {json.dumps(a["provider"]) for a in on["method"]} == {json.dumps(doc["method"][0]["provider"])}
    load = on["extensions"][0]["load"]
    assert load["rate"] == 10 and load["duration_s"] >= 3 * 50 + 300 and load["max_requests"] > 10 * load["duration_s"]
    assert doc == shipped("engine-wedge-watchdog.json")  # the shipped document untouched


def test_replica_kill_waits_for_a_serving_replica_in_both_arms_and_an_app_without_options_gets_none_off():
    doc = shipped("replica-kill.json")
    for arm in mt.ARMS:
        v = mt.variant(doc, arm, 2, 40, 10, mt.SCOPES["replica-kill"][3])
        assert all(a["provider"]["arguments"] == {"zone": "zone-a", "min_ongoing": 1} for a in v["method"])
        assert ("app" in v["extensions"][0]) is (arm == "on")


def test_a_row_from_a_synthetic_run_with_known_figures(tmp_path):
    def rec(i, **kw):
        return {"kind": "request", "phase": "measure", "id": i, "ok": True, "ttft_s": 0.1, "itl_max_s": 0.05,
                "tokens_lost": 0, "tokens_duplicated": 0, "tokens_corrupted": 0, "migrations": 0, **kw}

    lines = [{"kind": "run"}, rec(0, phase="warmup", failure="http_5xx", ok=False),
             rec(1), rec(2), rec(3, ttft_s=0.3, itl_max_s=0.2, migrations=1, migration_gaps_ms=[12.0]),
             rec(4, ttft_s=0.5, itl_max_s=0.4, migrations=2, migration_gaps_ms=[20.0, 400.0], tokens_lost=1),
             rec(5, ok=False, failure="mid_stream", migration_refused="limit", tokens_lost=None),
             {"kind": "footer"}]
    (tmp_path / "records.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = {"verdict": {"word": "FAIL"}, "faults": [
        {"fault_id": "f1", "service": {"failed_total": 1}}, {"fault_id": "f2", "service": {"failed_total": 0}}],
        "bounds": {"results": [{"fault_id": "f1", "status": "violated"}, {"fault_id": "f2", "status": "met"},
                               {"fault_id": "f2", "status": "unmeasurable"}]}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    r = dict(zip(["scope", "arm", "trials", "faults", "at_kill", "streams", "failed", "in_windows", "migrated", "lost", "dup", "corrupt",
                                "refused", "gap50", "gap99", "ttft_m", "ttft_r", "itl_m", "itl_r", "verdict", "bad"],
                 mt.row("replica-kill", "on", tmp_path)))
    assert len(r) == len(mt.HEAD) and (r["scope"], r["arm"], r["trials"], r["faults"]) == ("replica-kill", "on", "1", "2")
    assert r["at_kill"] == "-"  # not every fault said (only a kill with min_ongoing does)
    summary["faults"][0]["detail"] = {"ongoing_at_kill": 2}
    summary["faults"][1]["detail"] = {"ongoing_at_kill": 1}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert mt.row("replica-kill", "on", tmp_path)[4] == "3"
    assert (r["streams"], r["failed"], r["in_windows"], r["migrated"]) == ("5", "1", "1", "2")  # the warm-up not counted
    assert (r["lost"], r["dup"], r["corrupt"], r["refused"]) == ("1", "0", "0", "1")
    assert (r["gap50"], r["gap99"]) == ("20", "400")  # nearest rank over the three gaps
    assert (r["ttft_m"], r["ttft_r"], r["itl_m"], r["itl_r"]) == ("300", "100", "400", "50")
    assert (r["verdict"], r["bad"]) == ("FAIL", "1")


def test_the_tables_print_as_markdown():
    from bench.common import markdown_table

    assert markdown_table(["a", "b"], [["1", "2"], ["3"]]) == "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 |"


def test_the_vllm_rows_set_the_llm_blocks_rate_and_keep_their_own_run_directories(tmp_path, capsys):
    doc = shipped("engine-crash.json")
    v = mt.variant(doc, "on", *mt.LLM_SCOPES["engine-crash"][1:3], mt.RATES["llm"], {})
    ext = v["extensions"][0]
    assert ext["llm"]["load"] == {**doc["extensions"][0]["llm"]["load"], "rate": 2.0}  # --app llm reads this one
    assert ext["load"]["duration_s"] >= 2 * 150 + 300 and len(v["method"]) == 2 and ext["app"]["migration"] == {"limit": 2}
    (tmp_path / "llm-engine-crash-on").mkdir()
    (tmp_path / "engine-crash-on").mkdir()  # the stream target's row of the same scope: not read as vLLM's
    assert mt.main(["--out", str(tmp_path), "--app", "llm", "--only", "engine-crash", "--arms", "on",
                    "--table-only"]) == 0
    out = capsys.readouterr().out
    assert "| engine-crash (vLLM) | on | no summary.json |" in out and "| engine-crash |" not in out


def test_a_scope_the_vllm_rows_do_not_have_is_refused_in_one_line_before_anything_runs(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        mt.main(["--out", str(tmp_path), "--app", "llm", "--only", "zone-loss"])
    assert e.value.code == 2 and "zone-loss: not a scope of the llm rows" in capsys.readouterr().err
    assert not (tmp_path / "experiments").exists()


def test_the_unsaved_streams_by_class_tokens_before_the_break_and_the_service_right_after(tmp_path):
    s = 1_000_000_000

    def rec(i, sent, **kw):
        return {"kind": "request", "phase": "measure", "id": i, "ok": True, "sent_ns": sent * s, "e2e_s": 0.5, **kw}

    lines = [rec(1, 10, ok=False, failure="stream_broken", output_tokens=7, e2e_s=1.0),  # ends at 11
             rec(2, 10, ok=False, failure="connection_closed", output_tokens=None, chunks=0),  # ends at 10.5
             rec(3, 11), rec(4, 12, ok=False, failure="http_5xx"), rec(5, 20), rec(0, 11, phase="warmup")]
    (tmp_path / "records.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = dict(zip(mt.UNSAVED_HEAD, mt.unsaved("zone-loss", "on", tmp_path)))
    assert (r["failed"], r["tokens received before the break"], r["none received"]) == ("3", "1", "2")
    assert r["by failure class"] == "connection_closed 1, http_5xx 1, stream_broken 1"
    # #1 ends at 11.0: [11, 13) holds #3 (ok) and #4 (failed); #2 ends at 10.5: [10.5, 12.5) the same two; #4 ends
    # at 12.5: nothing in [12.5, 14.5). 2 of 4 answered (the warm-up request is not counted)
    assert r["answered of those sent in the 2 s after each failure"] == "2 of 4"


def synthetic_trial(d: Path, failed_ids: list[int], gaps: list[float], violated: bool) -> None:
    """A run of four streams, those in ``failed_ids`` failed (each 1 s after the previous stream started), its one
    fault ``f1`` violated or not, one migrated stream with ``gaps``."""
    s = 1_000_000_000
    recs = [{"kind": "request", "phase": "measure", "id": i, "ok": i not in failed_ids, "sent_ns": i * s,
             "e2e_s": 0.5, "tokens_lost": 0, **({"failure": "stream_broken"} if i in failed_ids else {}),
             **({"migrations": 1, "migration_gaps_ms": gaps} if i == 0 else {})} for i in range(4)]
    d.mkdir()
    (d / "records.ndjson").write_text("".join(json.dumps(x) + "\n" for x in recs))
    (d / "summary.json").write_text(json.dumps({
        "verdict": {"word": "FAIL" if violated else "PASS"}, "faults": [{"fault_id": "f1", "service": {"failed_total": len(failed_ids)}}],
        "bounds": {"results": [{"fault_id": "f1", "status": "violated" if violated else "met"}]}}))


def test_a_second_trial_runs_beside_the_first_and_the_table_pools_them_in_one_row(tmp_path, capsys):
    assert mt.trial_dir(tmp_path, "engine-crash-on", 1) == tmp_path / "engine-crash-on"
    assert mt.trial_dir(tmp_path, "engine-crash-on", 2) == tmp_path / "engine-crash-on-t2"
    synthetic_trial(tmp_path / "engine-crash-on", [1], [10.0], violated=False)
    synthetic_trial(tmp_path / "engine-crash-on-t2", [2, 3], [30.0], violated=True)
    (tmp_path / "engine-crash-on-t3").mkdir()  # unfinished: no summary.json, not pooled
    (tmp_path / "engine-crash-off-t2").mkdir()
    assert [d.name for d in mt.trials(tmp_path, "engine-crash-on")] == ["engine-crash-on", "engine-crash-on-t2"]
    r = dict(zip(mt.HEAD, mt.row("engine-crash", "on", *mt.trials(tmp_path, "engine-crash-on"))))
    assert (r["trials"], r["faults"], r["streams"], r["failed"], r["failed in fault windows"]) == ("2", "2", "8", "3", "3")
    assert (r["migrated"], r["gap p50 ms"], r["gap p99 ms"]) == ("2", "10", "30")
    # the same fault id in two runs is two faults; one of them violated
    assert (r["verdict"], r["faults with a bound violated"]) == ("FAIL/PASS", "1")
    u = dict(zip(mt.UNSAVED_HEAD, mt.unsaved("engine-crash", "on", *mt.trials(tmp_path, "engine-crash-on"))))
    # each failure matched in its own run: t1's #1 ends at 1.5 -> its #2, #3 (both ok) in [1.5, 3.5); t2's #2 ends
    # at 2.5 -> its #3 (failed); its #3 ends at 3.5 -> nothing: 2 of 3. Pooled across runs, t1's failure would have
    # met t2's #2 and #3 too (4 of 7)
    assert (u["failed"], u["answered of those sent in the 2 s after each failure"]) == ("3", "2 of 3")
    assert mt.main(["--out", str(tmp_path), "--only", "engine-crash", "--table-only"]) == 0
    out = capsys.readouterr().out
    assert "| engine-crash | off | no summary.json |" in out and "| engine-crash | on | 2 | 2 | - | 8 | 3 |" in out


def test_a_trial_below_one_is_refused_in_one_line_before_anything_runs(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        mt.main(["--out", str(tmp_path), "--trial", "0", "--only", "engine-crash"])
    assert e.value.code == 2 and "--trial 0: trials count from 1" in capsys.readouterr().err
    assert not (tmp_path / "experiments").exists()
