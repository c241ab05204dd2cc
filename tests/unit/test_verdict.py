"""One verdict (chaos.core.verdict), decided once: every branch, and the report, the suite table, JUnit and
the exit code all saying the same."""

import copy

import pytest

from chaos.core import runner, verdict
from chaos.reports import cells, report


def _summary(results=(), stop=None, effect=None, stated=True):
    fault = {"fault_id": "node-1", "scope": "node", "target": "worker-b", "zones": ["zone-b"],
             "affected": {"basis": "fault_domain", "zones": ["zone-b"], "requests": 10, "failed_total": 1},
             "service": {"failed_total": 1}}
    if effect is not None:
        fault["effect"] = effect
    rs = list(results)
    return {"faults": [fault], "stop_reason": stop,
            "bounds": {"stated": {"max_failed_requests": 5} if stated else {}, "results": rs,
                       "all_met": not any(r["met"] is False or r.get("status") == "unmeasurable" for r in rs)}}


MET = {"bound": "max_failed_requests", "fault_id": "node-1", "value": 1, "limit": 5, "met": True, "status": "met",
       "population": "affected"}
BAD = {**MET, "value": 9, "met": False, "status": "violated"}
UNM = {**MET, "value": None, "met": None, "status": "unmeasurable", "reason": "no request in the window"}
DONE = {"status": "completed", "deviated": False, "run": []}
FAILED_ACTIVITY = {"status": "completed", "deviated": False,
                   "run": [{"status": "failed", "activity": {"name": "restart"}, "exception": ["boom"]}]}

CASES = [  # (name, summary, journal, setup error, word)
    ("set-up failed", None, None, "set $TOKEN", verdict.ERROR),
    ("nothing injected", {"faults": []}, DONE, None, verdict.ERROR),
    ("fault not in effect", _summary([MET], effect={"verified": False}), DONE, None, verdict.ERROR),
    ("interrupted", _summary([MET]), {**DONE, "status": "interrupted"}, None, verdict.ERROR),
    ("stop condition", _summary([MET], stop="failure ratio 1.00"), {**DONE, "status": "interrupted"}, None,
     verdict.VIOLATED),
    ("method activity failed", _summary([MET]), FAILED_ACTIVITY, None, verdict.ERROR),
    ("aborted", _summary([MET]), {**DONE, "status": "aborted"}, None, verdict.ERROR),
    ("bound violated", _summary([MET, BAD]), DONE, None, verdict.VIOLATED),
    ("bound unmeasured", _summary([MET, UNM]), DONE, None, verdict.UNMEASURED),
    ("hypothesis deviated", _summary([MET]), {**DONE, "deviated": True}, None, verdict.VIOLATED),
    ("no bounds", _summary([], stated=False), DONE, None, verdict.PASS),
    ("pass", _summary([MET]), DONE, None, verdict.PASS),
]


@pytest.mark.parametrize("name,summary,journal,setup,word", CASES, ids=[c[0] for c in CASES])
def test_every_branch_and_every_reader_agree(name, summary, journal, setup, word):
    v = verdict.decide(copy.deepcopy(summary), journal, setup_error=setup)
    assert v["word"] == word and v["exit_code"] == verdict.EXIT[word]
    assert word == verdict.PASS or v["reasons"]  # anything but a pass says why
    recorded = None if summary is None else {**copy.deepcopy(summary), "verdict": v}
    result = {"experiment": f"experiments/{name.replace(' ', '-')}.json", "verdict": v["exit_code"],
              "verdict_detail": v, "summary": recorded, "error": "; ".join(v["reasons"]) or None}
    # the exit code of `availproof run`
    assert result["verdict"] == {"PASS": runner.PASS, "VIOLATED": runner.VIOLATED, "UNMEASURED": runner.VIOLATED,
                                 "ERROR": runner.ERROR}[word]
    # the report (from the summary alone: it never reads the journal)
    if recorded is not None:
        assert report.run_verdict(recorded)[0] == word
        assert verdict.of(recorded) == v
    # the suite table: the verdict column of every row
    rows = [line for line in cells.table([result]).splitlines()[2:]]
    assert rows and all(line.rstrip(" |").endswith(word) or f"| {word}:" in line for line in rows), rows
    # JUnit
    xml = runner.junit_xml([result])
    if word == verdict.PASS:
        assert "<failure" not in xml and "<error" not in xml
    elif word == verdict.ERROR:
        assert "<error" in xml and 'errors="1"' in xml
    else:
        assert f'<failure type="{word}"' in xml and 'failures="1"' in xml


def test_a_failed_heal_or_step_of_the_run_is_an_error_whatever_the_bounds_say():
    s = _summary([MET])
    assert verdict.decide(s, DONE)["word"] == verdict.PASS
    assert verdict.decide(s, DONE, heal_error="nodes not healthy")["word"] == verdict.ERROR
    assert verdict.decide(s, DONE, run_error="the analysis: KeyError")["word"] == verdict.ERROR


def test_a_summary_without_a_recorded_verdict_is_decided_from_its_own_facts():
    s = _summary([MET, BAD])
    assert "verdict" not in s and verdict.of(s)["word"] == verdict.VIOLATED


def test_analyse_decides_the_verdict_again_from_the_new_summary_and_the_journal(tmp_path):
    """`availproof analyse` re-derives the verdict: an interrupted journal keeps it an ERROR."""
    import json

    from chaos.core import summary as summary_mod
    from .test_summary import zone_loss_run  # a run directory of synthetic records

    run_dir = zone_loss_run(tmp_path / "run", {})
    again, _ = summary_mod.reanalyse(run_dir)
    assert again["verdict"] == verdict.decide(again, None)
    (run_dir / "journal.json").write_text(json.dumps({"status": "interrupted", "run": []}))
    again, _ = summary_mod.reanalyse(run_dir)
    assert again["verdict"]["word"] == verdict.ERROR


@pytest.mark.parametrize("error", [{"run_error": "the analysis: KeyError: 'faults'"},
                                   {"heal_error": "TimeoutError: nodes not healthy after 240 s"}])
def test_analyse_keeps_the_error_a_run_ended_with(tmp_path, error):
    """A run that ended ERROR (a step failed, its faults not healed: known only after its records were
    closed) stays ERROR when its summary is derived again from the records (issue 36)."""
    import json

    from chaos.commands import cli
    from chaos.recording import records as rec
    from chaos.core import summary as summary_mod
    from .test_summary import DEFS, zone_loss_run

    met = {"max_failed_requests": 100_000}  # a bound the zone loss meets
    run_dir = zone_loss_run(tmp_path / "run", summary_mod.header_block("zone-loss", "zone", DEFS, met, "src", "stream"))
    at_end = summary_mod.derive(rec.read(run_dir / "records.ndjson"), DEFS, met, "src")
    assert verdict.decide(at_end, DONE)["word"] == verdict.PASS  # the figures alone pass
    ended = verdict.decide(at_end, DONE, **error)
    assert ended["word"] == verdict.ERROR
    (run_dir / "summary.json").write_text(json.dumps({**at_end, "verdict": ended}))
    (run_dir / "journal.json").write_text(json.dumps({**DONE, "availproof": {"verdict": ended}}))
    again, _ = summary_mod.reanalyse(run_dir)
    assert again["verdict"] == ended
    # what `availproof analyse` writes keeps it too, analysed once more
    assert cli.main(["analyse", str(run_dir)]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["verdict"] == ended
    assert summary_mod.reanalyse(run_dir)[0]["verdict"] == ended
    # a summary.json rewritten without it (derived again before this fix): the journal still says it
    (run_dir / "summary.json").write_text(json.dumps({**at_end, "verdict": verdict.decide(at_end, DONE)}))
    assert summary_mod.reanalyse(run_dir)[0]["verdict"] == ended
    # the journal alone (no summary.json: the analysis failed before writing it)
    (run_dir / "summary.json").unlink()
    assert summary_mod.reanalyse(run_dir)[0]["verdict"] == ended


def test_recorded_errors_reads_back_what_decide_wrote():
    s = _summary([MET])
    for kw in ({"run_error": "start_load: OSError: x"}, {"heal_error": "boom (twice)"}, {}):
        want = {"run_error": None, "heal_error": None, **kw}
        assert verdict.recorded_errors(verdict.decide(s, DONE, **kw)) == want
    assert verdict.recorded_errors(None, {"word": "PASS", "exit_code": 0, "reasons": ["the run failed: x"]}) == {
        "run_error": None, "heal_error": None}  # only an ERROR verdict says the run's errors
