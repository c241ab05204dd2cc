"""The capacity sweep's decision (chaos.load.capacity) at its edges, on synthetic steps and records, and
`availproof capacity` on a fake backend (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from chaos.load import capacity
from chaos.commands import cli
from chaos.recording import records as rec
from chaos import schemas
from chaos.core import validate
from chaos.analysis import SLO
from chaos.load.capacity import Step, SweepPlan, decide
from chaos.base.errors import UsageError
from chaos.load.workload import LoadShape

from .test_run import _experiment, fake_system  # noqa: F401 - the fixture

CAPACITY = Draft202012Validator(schemas.schema(schemas.CAPACITY))
PLAN = SweepPlan(start_rps=1, factor=2, max_rps=64, max_steps=7, step_s=10, warmup_s=2)  # 1, 2, 4, ... 64


def step(index: int, rate: float, met: int | None = None, sent: int | None = None, failed: int = 0) -> Step:
    """A step of 10 s that sent ``sent`` (default rate x 10) measured requests, ``met`` of them within the SLO."""
    sent = round(rate * 10) if sent is None else sent
    return Step(index=index, rate_offered=rate, duration_s=10.0, sent=sent, met_slo=sent if met is None else met,
                failed=failed, p95_ttft_s=0.1)


def good(*rates: float) -> list[Step]:
    return [step(i, r) for i, r in enumerate(rates, 1)]


# ---------------------------------------------------------------- the decision
def test_the_first_step_breaking_the_slo_means_no_sustained_rate_with_its_reason_never_zero():
    d = decide([step(1, 1, met=9)], PLAN)  # 9 of 10: 0.9 < 0.99
    assert d.stop == capacity.SLO_BROKE and d.sustained_rps is None
    assert "first step (1 req/s) already broke the SLO: attainment 0.9000 below 0.99" in d.sustained_reason
    assert "--start-rate" in d.sustained_reason and not d.judged[0].within_slo


def test_the_slo_breaking_at_step_k_makes_step_k_minus_1_the_sustained_rate():
    steps = good(1, 2, 4) + [step(4, 8, met=70)]
    d = decide(steps, PLAN)
    assert d.stop == capacity.SLO_BROKE and d.sustained_rps == 4 and d.sustained_reason is None
    assert d.reason.startswith("the SLO broke at step 4 (8 req/s): attainment 0.8750 below 0.99 (70 of 80")
    assert [j.sustained for j in d.judged] == [True, True, True, False]


def test_attainment_exactly_at_the_target_is_within_the_slo():
    d = decide(good(1) + [step(2, 2, met=99, sent=100)], SweepPlan(**{**PLAN.__dict__, "max_failed_share": 0.01}))
    assert d.stop is None and d.judged[1].within_slo and d.sustained_rps == 2


def test_failures_beyond_the_stated_share_break_the_slo_whatever_the_attainment():
    plan = SweepPlan(start_rps=1, factor=2, max_rps=64, step_s=10, target_attainment=0.5, max_failed_share=0.02)
    steps = good(1) + [step(2, 2, met=15, failed=1)]  # 1 of 20 failed: 5 % > 2 %, attainment 0.75 >= 0.5
    d = decide(steps, plan)
    assert d.stop == capacity.SLO_BROKE and d.sustained_rps == 1
    assert "1 of 20 failed (5.0 %, more than 2 %)" in d.reason and "attainment" not in d.reason
    assert decide(good(1) + [step(2, 2, met=15, failed=0)], plan).stop is None  # the same step without the failure


LENIENT = SweepPlan(**{**PLAN.__dict__, "target_attainment": 0.5})  # a plateau within the SLO is possible


def test_goodput_that_stops_rising_although_more_was_sent_stops_the_sweep_and_the_step_is_not_sustained():
    # rate 8 offered and sent (80 requests), 4.1 req/s served within the SLO: +2.5 % over the best step before
    steps = good(1, 2, 4) + [step(4, 8, met=41, sent=80)]
    d = decide(steps, LENIENT)
    assert d.stop == capacity.GOODPUT_PLATEAU and d.sustained_rps == 4
    assert d.judged[3].within_slo and not d.judged[3].sustained and d.judged[3].gain == pytest.approx(0.025)
    assert "+2.5 % over the best step before (at least 5 % needed)" in d.reason


def test_a_gain_of_min_gain_is_still_rising_and_nothing_after_a_stop_is_judged():
    d = decide(good(1, 2, 4) + [step(4, 8, met=42, sent=80)], LENIENT)  # +5 %: the least that counts
    assert d.stop is None and d.sustained_rps == 8
    steps = good(1, 2, 4) + [step(4, 8, met=41, sent=80), step(5, 16)]
    d = decide(steps, LENIENT)
    assert d.stop == capacity.GOODPUT_PLATEAU and len(d.judged) == 4 and d.sustained_rps == 4


def test_a_step_whose_arrivals_sent_no_more_than_the_best_before_is_no_plateau():
    """Bursty arrivals over a short step: 2.25 req/s offered sent 3.8 req/s, then 3.375 offered sent 3.3, all
    within the SLO (2026-12-05, gamma of burstiness 0.5 over 15 s steps). The second step's goodput fell
    because fewer requests were sent, not because the deployment stopped serving them: sustained, and the
    sweep goes on; once a step sends more and its goodput does not follow, that is the plateau."""
    steps = [step(1, 1.5, sent=35), step(2, 2.25, sent=38), step(3, 3.375, sent=33)]
    d = decide(steps, PLAN)
    assert d.stop is None and [j.sustained for j in d.judged] == [True, True, True] and d.sustained_rps == 3.375
    assert d.judged[2].gain == pytest.approx(33 / 38 - 1) and d.judged[2].sent_no_more
    assert [j.sent_no_more for j in d.judged[:2]] == [False, False]
    assert capacity.row(steps[2], d.judged[2]).endswith("sustained (sent no more)")
    d = decide(steps + [step(4, 5.0625, sent=50, met=39)], LENIENT)  # 5.0 sent over 3.8 (+32 %), goodput +2.6 %
    assert d.stop == capacity.GOODPUT_PLATEAU and d.sustained_rps == 3.375


def test_max_steps_and_max_rate_stop_the_sweep_with_the_last_step_sustained():
    plan = SweepPlan(start_rps=1, factor=2, max_rps=64, max_steps=3)
    d = decide(good(1, 2, 4), plan)
    assert d.stop == capacity.MAX_STEPS_RULE and d.sustained_rps == 4 and "3 steps" in d.reason
    d = decide(good(1, 2, 4, 8, 16, 32, 64), PLAN)  # 128 > 64
    assert d.stop == capacity.MAX_STEPS_RULE and d.sustained_rps == 64  # both: max_steps 7 reached too
    d = decide(good(1, 2, 4), SweepPlan(start_rps=1, factor=2, max_rps=5, max_steps=10))
    assert d.stop == capacity.MAX_RATE and d.sustained_rps == 4 and "max rate of 5" in d.reason


def test_the_sweep_goes_on_while_every_step_is_sustained():
    d = decide(good(1, 2, 4), PLAN)
    assert d.stop is None and d.reason is None and d.sustained_rps == 4
    assert decide([], PLAN).stop is None


def test_a_step_that_sent_nothing_stops_the_sweep_and_says_so():
    d = decide([step(1, 1, sent=0)], PLAN)
    assert d.stop == capacity.NO_REQUESTS and d.sustained_rps is None
    assert "sent no measured request" in d.sustained_reason and "--step-s" in d.sustained_reason
    d = decide(good(1, 2) + [step(3, 4, sent=0)], PLAN)
    assert d.stop == capacity.NO_REQUESTS and d.sustained_rps == 2


def test_an_interrupted_sweep_keeps_what_it_measured():
    d = decide(good(1, 2), PLAN, ended=(capacity.INTERRUPTED, "interrupted during step 3 (4 req/s)"))
    assert d.stop == capacity.INTERRUPTED and d.sustained_rps == 2
    d = decide([], PLAN, ended=(capacity.INTERRUPTED, "interrupted during step 1 (1 req/s)"))
    assert d.sustained_rps is None and d.sustained_reason.startswith("no step was measured")


# ---------------------------------------------------------------- a step's figures from its records
def _record(i: int, phase: str = rec.MEASURE, ok: bool = True, ttft: float | None = 0.1,
            lag_s: float = 0.0) -> rec.RequestRecord:
    return rec.RequestRecord(id=i, target="t", url="http://127.0.0.1:1", zone=None, route="/v1/chat/completions",
                             phase=phase, planned_ns=i, sent_ns=i + int(lag_s * 1e9), sent_offset_s=i / 10, ok=ok,
                             failure=None if ok else rec.CONNECT_REFUSED, ttft_s=ttft if ok else None, e2e_s=0.2)


def test_a_steps_figures_leave_the_warm_up_out_and_count_goodput_attainment_failures_and_p95_ttft():
    records = ([_record(i, phase=rec.WARMUP, ok=False) for i in range(5)]  # not counted
               + [_record(10 + i, ttft=0.1 + i / 100) for i in range(16)]  # within the 0.5 s TTFT
               + [_record(30 + i, ttft=0.9) for i in range(2)]  # slow: succeeded, not within the SLO
               + [_record(40 + i, ok=False) for i in range(2)])
    s = capacity.measure(3, 4.0, records, SLO(ttft_s=0.5, itl_s=None), duration_s=5.0)
    assert (s.sent, s.met_slo, s.failed) == (20, 16, 2)
    assert s.rate_achieved == 4.0 and s.goodput_rps == 3.2 and s.attainment == 0.8 and s.failed_share == 0.1
    assert s.p95_ttft_s == 0.9  # nearest rank over the 18 successful: the 18th
    empty = capacity.measure(1, 1.0, [_record(0, phase=rec.WARMUP)], SLO(), 5.0)
    assert empty.sent == 0 and empty.attainment is None and empty.p95_ttft_s is None


# ---------------------------------------------------------------- the plan and the sweep's bounds
def test_rates_step_geometrically_bounded_by_max_rate_and_max_steps():
    assert SweepPlan(start_rps=2, factor=2, max_rps=20).rates() == [2, 4, 8, 16]
    assert SweepPlan(start_rps=1, factor=1.5, max_rps=5000, max_steps=4).rates() == [1, 1.5, 2.25, 3.375]
    assert SweepPlan(start_rps=3, factor=2, max_rps=3).rates() == [3]


@pytest.mark.parametrize("kw, needle", [
    ({"start_rps": 0}, "start rate"), ({"factor": 1.0}, "factor"), ({"start_rps": 10, "max_rps": 5}, "max rate"),
    ({"max_rps": 6000}, "max rate"), ({"max_steps": 0}, "max steps"), ({"step_s": 0}, "step duration"),
    ({"target_attainment": 1.5}, "target attainment"), ({"max_failed_share": -0.1}, "max failed share"),
    ({"warmup_s": float("nan")}, "warm-up"),
])
def test_a_bad_plan_is_refused_in_one_line(kw, needle):
    with pytest.raises(UsageError, match=needle) as e:
        SweepPlan(**kw)
    assert str(e.value).startswith("capacity: ") and "\n" not in str(e.value)


def test_each_steps_shape_is_the_experiments_at_the_steps_rate():
    shape = LoadShape(arrival="gamma", burstiness=0.5, rate=3, duration_s=600, warmup_s=5, seed=11, max_tokens=(8, 16),
                      stages=({"rate": 1, "duration_s": 10},))
    s = capacity.step_shape(shape, PLAN, 4.0, 3)
    assert (s.rate, s.duration_s, s.warmup_s, s.stages, s.seed) == (4.0, 12, 2, (), 13)
    assert (s.arrival, s.burstiness, s.max_tokens) == ("gamma", 0.5, (8, 16))  # the shape kept
    assert s.max_requests >= 4 * 12 and capacity.step_bound_s(s) == 12 + 11 + capacity.STEP_MARGIN_S


@pytest.mark.parametrize("kw, needle", [({"mode": "closed"}, "closed loop"),
                                        ({"trace": "experiments/traces/example.jsonl"}, "trace")])
def test_a_load_without_one_rate_to_step_is_refused(kw, needle):
    with pytest.raises(UsageError, match=needle):
        capacity.check_shape(LoadShape(**kw))


class FakeSteps:
    """A deployment that sustains ``knee`` req/s: every request within the SLO below it, a third above it."""

    def __init__(self, knee: float, interrupt_at: int | None = None, fail_at: int | None = None):
        self.knee, self.interrupt_at, self.fail_at, self.calls = knee, interrupt_at, fail_at, []

    def __call__(self, shape: LoadShape, index: int) -> list[rec.RequestRecord]:
        self.calls.append((index, shape.rate))
        if index == self.interrupt_at:
            raise KeyboardInterrupt
        if index == self.fail_at:
            raise RuntimeError("a worker died")
        n = round(shape.rate * (shape.duration_s - shape.warmup_s))
        return [_record(i, ttft=0.1 if shape.rate <= self.knee or i % 3 == 0 else 5.0) for i in range(n)]


def test_the_sweep_stops_at_the_first_step_beyond_the_knee_and_writes_a_valid_capacity_document():
    run_step = FakeSteps(knee=10)
    steps, d = capacity.sweep(LoadShape(), SLO(), PLAN, run_step, log=lambda m: None)
    assert run_step.calls == [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16)]
    assert d.stop == capacity.SLO_BROKE and d.sustained_rps == 8
    doc = capacity.document(steps, d, PLAN, SLO(), LoadShape(), {"app": "stream", "front": "lb", "topology": "default"})
    CAPACITY.validate(doc)
    assert doc["sustained_rps"] == 8 and doc["stopped"]["rule"] == "slo_broke" and len(doc["steps"]) == 5
    assert doc["machine"]["cpus"] >= 1 and doc["measured_at"].endswith("Z") and doc["sweep"]["rates"][-1] == 64
    table = capacity.table(steps, d)
    assert table.splitlines()[-1] == "sustained: 8 req/s" and "SLO broke" in table
    assert doc["sustained_is_lower_bound"] is False  # the knee was found


def test_a_sweep_that_stops_at_its_own_limit_says_its_rate_is_a_lower_bound():
    """Every step sustained up to max_steps: the deployment may carry more; the document, the table and
    a rate stated as a share of it say so."""
    plan = SweepPlan(start_rps=1, factor=2, max_rps=64, max_steps=3, step_s=10, warmup_s=2)
    steps, d = capacity.sweep(LoadShape(), SLO(), plan, FakeSteps(knee=100), log=lambda m: None)
    doc = capacity.document(steps, d, plan, SLO(), LoadShape(), {"app": "stream", "front": "lb", "topology": "default"})
    CAPACITY.validate(doc)
    assert d.stop == capacity.MAX_STEPS_RULE and doc["sustained_rps"] == 4 and doc["sustained_is_lower_bound"] is True
    assert capacity.table(steps, d).splitlines()[-1] == ("sustained: 4 req/s at least (the sweep ended before the SLO "
                                                         "broke or goodput stopped rising: max_steps)")


def test_a_sweep_cut_short_by_ctrl_c_or_a_failing_step_keeps_its_steps_and_says_lower_bound():
    for run_step, rule in ((FakeSteps(knee=100, interrupt_at=3), capacity.INTERRUPTED),
                           (FakeSteps(knee=100, fail_at=3), capacity.STEP_ERROR)):
        steps, d = capacity.sweep(LoadShape(), SLO(), PLAN, run_step, log=lambda m: None)
        doc = capacity.document(steps, d, PLAN, SLO(), LoadShape(), {"app": "stream", "front": "lb", "topology": None})
        CAPACITY.validate(doc)
        assert d.stop == rule and len(steps) == 2 and doc["sustained_rps"] == 2 and doc["sustained_is_lower_bound"]
    assert "step 3 (4 req/s) failed: RuntimeError: a worker died" in d.reason


def test_a_step_whose_client_fell_behind_its_schedule_stops_the_sweep_and_judges_nothing():
    """An open loop sends every request however late: a step sent 80 ms late at p99 measured the rig's
    process, not the deployment; the rate before it is a lower bound."""
    late = capacity.measure(3, 4, [_record(i, lag_s=0.08 if i % 10 == 0 else 0.0) for i in range(40)], SLO(), 10)
    assert late.send_lag_p99_s == pytest.approx(0.08)
    d = decide(good(1, 2) + [late], PLAN)
    assert d.stop == capacity.CLIENT_BEHIND and d.sustained_rps == 2 and not d.judged[2].sustained
    assert "p99 of sent - planned 0.080 s, over 0.05 s" in d.reason and "load.workers" in d.reason
    on_time = capacity.measure(3, 4, [_record(i, lag_s=0.001) for i in range(40)], SLO(), 10)
    assert decide(good(1, 2) + [on_time], PLAN).stop is None


def test_a_sweep_whose_first_step_breaks_writes_null_with_its_reason_and_the_schema_holds_it_to_that():
    steps, d = capacity.sweep(LoadShape(), SLO(), PLAN, FakeSteps(knee=0.5), log=lambda m: None)
    doc = capacity.document(steps, d, PLAN, SLO(), LoadShape(), {"app": "llm", "front": "direct", "topology": None})
    CAPACITY.validate(doc)
    assert doc["sustained_rps"] is None and "first step" in doc["sustained_reason"]
    assert list(CAPACITY.iter_errors({**doc, "sustained_reason": None}))  # null needs its reason
    assert list(CAPACITY.iter_errors({**doc, "sustained_rps": 0}))  # never 0
    assert list(CAPACITY.iter_errors({**doc, "sustained_rps": 3.0}))  # a rate has no "reason"


def test_ctrl_c_during_a_step_ends_the_sweep_with_what_was_measured():
    steps, d = capacity.sweep(LoadShape(), SLO(), PLAN, FakeSteps(knee=100, interrupt_at=3), log=lambda m: None)
    assert len(steps) == 2 and d.stop == capacity.INTERRUPTED and d.sustained_rps == 2


# ---------------------------------------------------------------- `availproof capacity`, no Ray
def test_availproof_capacity_brings_the_system_up_as_run_does_injects_nothing_and_writes_its_files(
        tmp_path, fake_system, capsys):
    """The fake backend's one proxy refuses connections: the first step breaks the SLO, exit 1, null with
    its reason; the method (which would create a file) never runs."""
    path = _experiment(tmp_path, baseline_s=0.2, method_s=0.1)
    doc = json.loads(path.read_text())
    doc["extensions"][0]["load"].update(utilization=0.5, capacity="not-measured-yet.json")  # not used here
    path.write_text(json.dumps(doc))
    out = tmp_path / "cap"
    code = cli.main(["capacity", str(path), "--out", str(out), "--start-rate", "10", "--step-s", "0.6",
                     "--warmup-s", "0.2", "--keep-cluster"])
    assert code == 1
    assert len(fake_system) == 1 and not (tmp_path / "started").exists()  # provisioned once, no method run
    cap = json.loads((out / "capacity.json").read_text())
    CAPACITY.validate(cap)
    assert validate.check_file(out / "capacity.json") == []  # `availproof validate` reads it too
    assert cap["sustained_rps"] is None and "first step (10 req/s) already broke the SLO" in cap["sustained_reason"]
    assert cap["app"] == "stream" and cap["front"] == "direct" and cap["topology"] == "three-zones"
    assert cap["experiment"]["file"] == str(path) and cap["slo"] == {"ttft_s": 2.0, "itl_s": 0.5, "e2e_s": None}
    assert cap["load"]["arrival"] == "constant" and cap["steps"][0]["failed"] == cap["steps"][0]["sent"] > 0
    headers = [o for _, o in rec.iter_lines(out / "records.ndjson") if o and o.get("kind") == "run"]
    assert [h["capacity_step"] for h in headers] == [{"index": 1, "rate_rps": 10}]
    assert headers[0]["load"]["rate"] == 10 and headers[0]["definitions"]["slo"]["ttft_s"] == 2.0
    printed = capsys.readouterr().out
    assert "sustained: none (the first step (10 req/s) already broke the SLO" in printed


def test_availproof_capacity_refuses_a_closed_loop_before_anything_starts(tmp_path, fake_system, capsys):
    path = _experiment(tmp_path, baseline_s=0.2, method_s=0.1)
    doc = json.loads(path.read_text())
    doc["extensions"][0]["load"] = {"mode": "closed", "concurrency": 2, "duration_s": 30, "warmup_s": 1}
    path.write_text(json.dumps(doc))
    assert cli.main(["capacity", str(path), "--out", str(tmp_path / "cap"), "--keep-cluster"]) == 2
    assert fake_system == [] and not (tmp_path / "cap").exists()
    assert "closed loop" in capsys.readouterr().err
    doc["extensions"][0]["load"] = {"rate": 5, "duration_s": 30, "warmup_s": 1}
    path.write_text(json.dumps(doc))
    assert cli.main(["capacity", str(path), "--factor", "1", "--keep-cluster"]) == 2  # a bad plan too
    assert fake_system == [] and "capacity: factor must be in [1.01, 10], got 1.0" in capsys.readouterr().err
