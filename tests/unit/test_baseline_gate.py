"""The baseline gate (chaos.core.baseline_gate): the experiment's steady state judged on the baseline's
measured requests before the method. Out of steady state: the run stops before any fault (ERROR, no
inject mark, the victim untouched) unless ``inject_anyway``; the judgement is always in summary.json."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import pytest

from chaos.core import baseline_gate as gate, runner, summary as summary_mod
from chaos.commands import cli
from chaos.recording import records as rec
from chaos.analysis import SteadyState
from chaos.commands.common import run_options
from chaos.base.errors import UsageError
from chaos.core.options import Options
from chaos.schemas import __file__ as schemas_init

from .test_run import fake_system  # noqa: F401 - the fixture

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
STEADY = SteadyState(window_s=5.0, min_success_ratio=0.99, max_p95_ttft_s=2.0, min_requests=3)


def _req(i: int, t: float, ok: bool = True, failure: str | None = None, ttft: float = 0.1, e2e: float = 0.3,
         phase: str = rec.MEASURE) -> rec.RequestRecord:
    return rec.RequestRecord(id=i, target="w", url="http://127.0.0.1:1", zone="zone-a", route="/v1/chat/completions",
                             phase=phase, planned_ns=T0 + int(t * NS), sent_ns=T0 + int(t * NS), sent_offset_s=t,
                             ok=ok, failure=None if ok else failure, ttft_s=ttft if ok else None, e2e_s=e2e)


def _every(rate: float, start: float, end: float, **kw) -> list[rec.RequestRecord]:
    n = int(round((end - start) * rate))
    return [_req(i, start + i / rate, **kw) for i in range(n)]


def _end(t: float) -> int:
    return T0 + int(t * NS)


def _schema_validator() -> jsonschema.Draft202012Validator:
    doc = json.loads((Path(schemas_init).parent / "summary.schema.json").read_text())
    return jsonschema.Draft202012Validator(doc["properties"]["baseline_gate"])


# ---------------------------------------------------------------- the judgement, on synthetic records
def test_a_steady_baseline_is_judged_steady_with_its_figures():
    g = gate.judge(_every(6, 0, 10), STEADY, end_ns=_end(10.5))
    assert g == {"judged": True, "steady": True, "requests": 60, "failed": 0, "failures": {}, "reason": None,
                 "injected_anyway": False}
    assert not gate.blocks(g)
    _schema_validator().validate(g)


def test_a_failing_baseline_is_out_of_steady_state_and_says_its_figures():
    rs = _every(6.1, 0, 10)  # 61 requests
    for r in rs[::4][:16]:  # 16 of them hit the client's deadline, spread over the baseline
        r.ok, r.failure, r.ttft_s, r.e2e_s = False, rec.DEADLINE, None, 10.0
    g = gate.judge(rs, STEADY, end_ns=_end(10) + 60 * NS)  # every one ended by then
    assert (g["judged"], g["steady"], g["requests"], g["failed"], g["failures"]) == (True, False, 61, 16,
                                                                                    {"deadline": 16})
    assert g["reason"].startswith("baseline: 16 of 61 requests failed (deadline 16); ")
    assert "windows out of steady state (success ratio below 0.99)" in g["reason"]
    assert gate.blocks(g) and not gate.blocks({**g, "injected_anyway": True})
    _schema_validator().validate(g)


def test_a_slow_baseline_is_out_of_steady_state_on_latency_alone():
    g = gate.judge(_every(6, 0, 10, ttft=3.0), STEADY, end_ns=_end(11))
    assert (g["judged"], g["steady"], g["failed"]) == (True, False, 0)
    assert g["reason"].startswith("baseline: 0 of 60 requests failed; ")
    assert "p95 latency up to 3.00 s, above 2 s" in g["reason"]
    # no latency in the experiment's steady state: the same requests are steady
    assert gate.judge(_every(6, 0, 10, ttft=3.0), SteadyState(window_s=5.0), end_ns=_end(11))["steady"] is True


def test_the_experiments_own_definition_decides():
    rs = _every(6, 0, 10)
    for r in rs[::4]:  # a quarter fail, spread out
        r.ok, r.failure = False, rec.HTTP_5XX
    assert gate.judge(rs, STEADY, end_ns=_end(11))["steady"] is False
    lenient = SteadyState(window_s=5.0, min_success_ratio=0.5, min_requests=3)
    assert gate.judge(rs, lenient, end_ns=_end(11))["steady"] is True


def test_an_empty_baseline_is_not_judged_and_says_why():
    g = gate.judge([], STEADY, end_ns=_end(1))
    assert (g["judged"], g["steady"], g["requests"], g["failed"], g["failures"]) == (False, None, 0, 0, {})
    assert "no measured request" in g["reason"] and not gate.blocks(g)
    _schema_validator().validate(g)
    # warm-up requests are not the baseline, failed or not
    warm = _every(10, 0, 5, ok=False, failure=rec.CONNECT_REFUSED, phase=rec.WARMUP)
    assert gate.judge(warm, STEADY, end_ns=_end(6))["judged"] is False


def test_a_baseline_shorter_than_a_window_is_insufficient_evidence_not_a_verdict():
    rs = _every(10, 0, 2, ok=False, failure=rec.CONNECT_REFUSED)
    g = gate.judge(rs, STEADY, end_ns=_end(2.5))
    assert (g["judged"], g["steady"], g["requests"], g["failed"]) == (False, None, 20, 20)
    assert "insufficient evidence" in g["reason"] and "not judged" in g["reason"]


def test_only_measured_requests_that_ended_before_the_gate_and_after_the_start_count():
    rs = _every(6, 0, 10)
    hang = _req(999, 9.0, ok=False, failure=rec.DEADLINE, e2e=10.0)  # still in flight at the gate
    early = _req(998, -1.0, ok=False, failure=rec.HTTP_5XX)  # before the span a soak asks about
    g = gate.judge(rs + [hang, early], STEADY, end_ns=_end(10.5), start_ns=T0)
    assert (g["requests"], g["failed"], g["steady"]) == (60, 0, True)


def test_the_summary_always_has_the_gate():
    g = gate.summary_field(None)
    assert (g["judged"], g["steady"], g["injected_anyway"]) == (False, None, False) and g["reason"]
    _schema_validator().validate(g)


# ---------------------------------------------------------------- the option
def test_inject_anyway_from_the_flag_and_the_configuration_is_parsed():
    assert Options.from_configuration({"availproof_inject_anyway": "false"}).inject_anyway is False
    assert Options.from_configuration({"availproof_inject_anyway": "true"}).inject_anyway is True
    assert Options.from_configuration({}).inject_anyway is False
    with pytest.raises(UsageError, match="availproof_inject_anyway must be true or false"):
        Options.from_configuration({"availproof_inject_anyway": "maybe"})
    args = cli.build_parser().parse_args(["run", "x.json", "--inject-anyway"])
    assert run_options(args, Path("out")).inject_anyway is True
    args = cli.build_parser().parse_args(["run", "x.json"])
    assert run_options(args, Path("out")).inject_anyway is False


# ---------------------------------------------------------------- the lifecycle, on the fake backend
def hit_victim(victim: str, configuration: dict | None = None) -> dict:
    """The method's fault: refuses outside a measuring run (as every action does), else a mark and the hit."""
    from chaos.ctk.session import measuring_run

    with measuring_run(configuration).marker.inject("replica", "fake-replica", ["zone-a"]) as f:
        Path(victim).write_text("hit")
    return f


def _experiment(tmp_path: Path, baseline_s: float = 1.5, configuration: dict | None = None,
                recovery_window_s: float = 0.3) -> Path:
    """Every request fails (the fake backend's proxy refuses connections); no stop condition, so only
    the gate can stop the run before its method."""
    exp = {
        "version": "1.0.0", "title": "baseline gate test", "description": "a baseline that fails",
        "extensions": [{
            "name": "availproof", "scope": "replica",
            "load": {"mode": "open", "arrival": "constant", "rate": 40, "duration_s": 120, "warmup_s": 0.2,
                     "timeout_s": 2, "connect_timeout_s": 0.5},
            "baseline_s": baseline_s, "recovery_window_s": recovery_window_s,
            "steady_state": {"window_s": 0.5, "min_success_ratio": 0.99, "min_requests": 3},
            "bounds": {"max_failed_requests": 100000},
        }],
        "controls": [{"name": "availproof", "provider": {"type": "python", "module": "chaos.ctk.control"}}],
        "method": [{"type": "action", "name": "hit-victim", "provider": {
            "type": "python", "module": __name__, "func": "hit_victim",
            "arguments": {"victim": str(tmp_path / "victim")}}}],
        "rollbacks": [{"type": "action", "name": "heal-all", "provider": {
            "type": "python", "module": "chaos.ctk.actions", "func": "heal_all"}}],
    }
    if configuration:
        exp["configuration"] = configuration
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(exp))
    return path


def _outputs(out: Path) -> tuple[dict, rec.RunRecords]:
    summary = json.loads((out / "summary.json").read_text())
    _schema_validator().validate(summary["baseline_gate"])
    return summary, rec.read(out / "records.ndjson")


def test_a_failing_baseline_stops_the_run_before_the_fault_with_verdict_error(tmp_path, fake_system):
    t0 = time.monotonic()
    code, result = runner.run_experiment(_experiment(tmp_path, recovery_window_s=60), tmp_path / "out")
    assert time.monotonic() - t0 < 30  # no recovery window after a run the gate stopped
    assert not (tmp_path / "victim").exists()  # the method never ran: the victim untouched
    summary, records = _outputs(tmp_path / "out")
    assert records.marks == [] and summary["faults"] == []  # no inject mark
    assert summary["recovery_window"] is None
    assert fake_system[-1].healed == []  # the rollback found nothing to heal: the cluster not touched
    g = summary["baseline_gate"]
    assert (g["judged"], g["steady"], g["injected_anyway"]) == (True, False, False)
    assert g["requests"] > 0 and g["failed"] == g["requests"] and g["failures"] == {"connect_refused": g["failed"]}
    v = result["verdict_detail"]
    assert code == runner.ERROR and v["word"] == "ERROR"
    assert v["reasons"] == [g["reason"]]
    assert g["reason"].startswith(f"baseline: {g['failed']} of {g['requests']} requests failed "
                                  f"(connect_refused {g['failed']}); ")
    assert g["reason"].endswith("; nothing injected")
    assert summary["verdict"] == v
    again, _ = summary_mod.reanalyse(tmp_path / "out")  # availproof analyse keeps the gate and its verdict
    assert again["baseline_gate"] == g and again["verdict"]["reasons"] == [g["reason"]]


def test_inject_anyway_injects_and_marks_the_run(tmp_path, fake_system):
    options = Options(out_dir=tmp_path / "out", inject_anyway=True)
    code, result = runner.run_experiment(_experiment(tmp_path), tmp_path / "out", options=options)
    assert (tmp_path / "victim").read_text() == "hit"
    summary, records = _outputs(tmp_path / "out")
    assert [m.event for m in records.marks][:1] == [rec.INJECT_START]
    g = summary["baseline_gate"]
    assert (g["judged"], g["steady"], g["injected_anyway"]) == (True, False, True)
    assert g["reason"].endswith("; injected anyway (inject_anyway)")
    assert not any(r.startswith("baseline:") for r in result["verdict_detail"]["reasons"])


def test_plain_chaos_run_is_gated_too_and_reads_the_option_from_the_configuration(tmp_path, fake_system):
    from chaoslib.experiment import run_experiment as ctk_run

    from chaos.core import experiment as exp_mod

    out = tmp_path / "out"
    path = _experiment(tmp_path, configuration={"availproof_out": str(out), "availproof_inject_anyway": "false"})
    journal = ctk_run(exp_mod.load(path), settings={})
    assert journal["status"] == "interrupted"  # as Chaos Toolkit left it (the exit code: tests/unit/test_moments.py)
    assert not (tmp_path / "victim").exists()
    summary, records = _outputs(out)
    assert records.marks == []
    assert journal["availproof"]["verdict"]["word"] == "ERROR" and journal["availproof"]["verdict"]["exit_code"] == 2
    assert journal["availproof"]["verdict"]["reasons"][0].endswith("; nothing injected")


def test_a_baseline_with_no_judged_window_does_not_stop_the_run(tmp_path, fake_system):
    code, result = runner.run_experiment(_experiment(tmp_path, baseline_s=0), tmp_path / "out")
    assert (tmp_path / "victim").read_text() == "hit"  # the method ran
    summary, _ = _outputs(tmp_path / "out")
    g = summary["baseline_gate"]
    assert (g["judged"], g["steady"], g["injected_anyway"]) == (False, None, False) and g["reason"]


def test_actions_refuse_once_the_gate_has_stopped_the_run(tmp_path):
    from tests.unit.test_run import _run

    run = _run(tmp_path, {})
    assert run.measuring()
    run.baseline_gate = {"judged": True, "steady": False, "injected_anyway": False}
    assert not run.measuring()
    run.baseline_gate["injected_anyway"] = True
    assert run.measuring()
    run.writer.close()


# ---------------------------------------------------------------- the timeout, right after the warm-up
def _warm_run(monkeypatch, longest: int, inject_anyway: bool = False):
    """A run just past its warm-up: 20 answered requests of 10 tokens (0.1 s first token, 22 ms a token
    after it), a plan whose longest output is ``longest`` tokens, a 5 s timeout."""
    import dataclasses
    from types import SimpleNamespace

    answered = [dataclasses.replace(r, output_tokens=10, phase=rec.WARMUP if i < 10 else rec.MEASURE)
                for i, r in enumerate(_every(4, 0.0, 5.0))]
    monkeypatch.setattr(gate.rec, "read", lambda path: SimpleNamespace(requests=answered))
    monkeypatch.setattr(gate.timeout_fit, "longest_output", lambda load: longest)
    return SimpleNamespace(options=SimpleNamespace(inject_anyway=inject_anyway), records_path="records.ndjson",
                           settings=SimpleNamespace(load=SimpleNamespace(timeout_s=5.0)), baseline_gate=None)


def test_a_timeout_the_warm_up_shows_too_short_refuses_the_run_before_the_baseline(monkeypatch):
    run, said = _warm_run(monkeypatch, longest=400), []
    with pytest.raises(gate.Unsteady) as e:
        gate.check_timeout(run, log=said.append)
    g = run.baseline_gate
    assert (g["judged"], g["steady"], g["injected_anyway"]) == (True, False, False)
    assert g["timeout"]["fits"] is False and g["timeout"]["longest_output_tokens"] == 400
    assert g["reason"].startswith("baseline: load.timeout_s 5 s is too short for the longest planned output (400")
    assert g["reason"].endswith("(measured in the warm-up); nothing injected") and str(e.value) == g["reason"]
    assert g["requests"] == 10  # the measured ones (after the warm-up) that ended
    assert said and said[-1].startswith("BASELINE OUT OF STEADY STATE")
    _schema_validator().validate(g)


def test_a_timeout_that_fits_or_a_run_that_injects_anyway_waits_for_the_baseline(monkeypatch):
    run = _warm_run(monkeypatch, longest=40)  # 0.1 + 39 x 22 ms: fits
    assert gate.check_timeout(run) is None and run.baseline_gate is None
    run = _warm_run(monkeypatch, longest=400, inject_anyway=True)  # judged on the whole baseline instead
    assert gate.check_timeout(run) is None and run.baseline_gate is None
