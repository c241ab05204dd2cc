"""Each recovery definition at its edges, on synthetic record streams."""

import pytest

from chaos import analysis, bounds
from chaos import records as rec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS  # run start


def req(i, t, ok=True, ttft=0.1, e2e=0.5, zone="a", failure=None, phase="measure", itl=0.02):
    sent = T0 + int(t * NS)
    return rec.RequestRecord(id=i, target=f"w-{zone}", url="http://127.0.0.1:1", zone=zone, route="/v1/chat/completions",
                             phase=phase, planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else (failure or rec.CONNECT_REFUSED),
                             ttft_s=ttft if (ok or failure == rec.STREAM_BROKEN) else None, e2e_s=e2e,
                             itl_p95_s=itl)


def mark(event, t, fid="f1", scope="replica", zones=("a",)):
    return rec.FaultMark(event=event, fault_id=fid, scope=scope, target="x", t_ns=T0 + int(t * NS), zones=list(zones))


def run(requests, marks, end_t):
    return rec.RunRecords(header={"run_id": "r"}, requests=requests, marks=marks,
                          footer={"stopped_ns": T0 + int(end_t * NS)})


def steady(**kw):
    return analysis.SteadyState(**{"window_s": 2.0, "min_success_ratio": 1.0, "min_requests": 3, **kw})


def every(start, end, step=0.1, **kw):
    out, t = [], start
    while t < end - 1e-9:
        out.append(req(int(t * 1000), round(t, 4), **kw))
        t += step
    return out


def test_no_failure_at_all_is_undisturbed():
    s = analysis.analyse(run(every(0, 20), [mark(rec.INJECT_START, 10)], 20), steady())
    f = s["faults"][0]
    assert f["disrupted"] is False and f["recovered"] is True
    assert f["time_to_detect_s"] is None and f["time_to_first_success_s"] is None
    assert f["time_to_steady_state_s"] == 0.0
    assert f["failed"]["total"] == 0
    assert f["goodput_rps"]["before"] == pytest.approx(10, rel=0.02)
    assert f["resolution_s"] == pytest.approx(0.1, abs=1e-3)


def test_outage_detect_first_success_and_steady_state():
    rs = every(0, 10) + every(10, 13, ok=False) + every(13, 25)
    s = analysis.analyse(run(rs, [mark(rec.INJECT_START, 10)], 25), steady())
    f = s["faults"][0]
    assert f["time_to_detect_s"] == pytest.approx(0.0, abs=1e-3)
    assert f["time_to_first_success_s"] == pytest.approx(3.0, abs=1e-3)
    # the first 2 s window with every request ok starts at the first success
    assert f["time_to_steady_state_s"] == pytest.approx(3.0, abs=1e-3)
    assert f["failed"]["total"] == 30
    assert f["failed"]["by_class"] == {rec.CONNECT_REFUSED: 30}
    assert f["time_to_last_failure_s"] == pytest.approx(2.9, abs=1e-3)
    assert f["goodput_rps"]["during"] == 0.0
    assert f["goodput_rps"]["after"] == pytest.approx(10, rel=0.05)


def test_failures_that_never_recover_within_the_run():
    rs = every(0, 10) + every(10, 20, ok=False)
    f = analysis.analyse(run(rs, [mark(rec.INJECT_START, 10)], 20), steady())["faults"][0]
    assert f["disrupted"] and not f["recovered"]
    assert f["time_to_first_success_s"] is None and f["time_to_steady_state_s"] is None
    results = bounds.check({"faults": [f]}, {"max_time_to_steady_state_s": 1000, "must_recover": True})
    assert [r["met"] for r in results] == [False, False]


def test_second_fault_before_recovery_ends_the_first_window():
    rs = every(0, 10) + every(10, 15, ok=False) + every(15, 30)
    marks = [mark(rec.INJECT_START, 10, "f1"), mark(rec.INJECT_START, 12, "f2", scope="node")]
    s = analysis.analyse(run(rs, marks, 30), steady())
    f1, f2 = s["faults"]
    assert f1["window_s"] == pytest.approx(2.0)
    assert f1["recovered"] is False and f1["failed"]["total"] == 20
    assert f2["time_to_first_success_s"] == pytest.approx(3.0, abs=1e-3)
    assert f2["recovered"] is True
    assert set(s["by_scope"]) == {"replica", "node"}
    assert f1["window_cut_by"] == "f2" and f2["window_cut_by"] is None


def test_recovery_bounds_apply_to_the_last_fault_when_a_second_fault_cuts_the_window():
    rs = every(0, 10) + every(10, 15, ok=False) + every(15, 30)
    marks = [mark(rec.INJECT_START, 10, "f1"), mark(rec.INJECT_START, 12, "f2", scope="node")]
    s = analysis.analyse(run(rs, marks, 30), steady())
    spec = {"max_failed_requests": 40, "max_time_to_steady_state_s": 5, "must_recover": True,
            "max_time_to_first_success_s": 5}
    results = {(r["fault_id"], r["bound"]): r for r in bounds.check(s, spec)}
    # f1: its failures count (20 in its 2 s window), its recovery is not judged; f2 has 30
    assert results[("f1", "max_failed_requests")]["met"] is True
    assert results[("f1", "max_failed_requests")]["value"] == 20
    for name in ("max_time_to_steady_state_s", "must_recover", "max_time_to_first_success_s"):
        assert results[("f1", name)]["met"] is None and "f2" in results[("f1", name)]["reason"]
    # f2 carries the incident's recovery: steady 3 s after its injection
    assert results[("f2", "max_time_to_steady_state_s")]["met"] is True
    assert results[("f2", "must_recover")]["met"] is True
    assert bounds.all_met(list(results.values())) is True
    assert bounds.fault_met(list(results.values()), "f1") == "yes, recovery n/a (window cut)"
    # a last fault that never recovers still fails the run
    rs = every(0, 10) + every(10, 30, ok=False)
    s = analysis.analyse(run(rs, marks, 30), steady())
    out = bounds.check(s, spec)
    assert {(r["fault_id"], r["bound"]) for r in bounds.violated(out)} == {
        ("f2", "max_failed_requests"), ("f2", "max_time_to_first_success_s"),
        ("f2", "max_time_to_steady_state_s"), ("f2", "must_recover")}
    assert bounds.fault_met(out, "f2") == "no" and bounds.all_met(out) is False


def test_warmup_is_excluded():
    rs = every(0, 5, ok=False, phase="warmup") + every(5, 20)
    s = analysis.analyse(run(rs, [mark(rec.INJECT_START, 10)], 20), steady())
    assert s["requests"]["warmup"] == 50
    assert s["requests"]["failed"] == 0
    assert s["faults"][0]["failed"]["total"] == 0
    assert s["faults"][0]["goodput_rps"]["before"] == pytest.approx(10, rel=0.05)


def test_in_flight_failure_mid_stream_and_zones():
    rs = every(0, 10, zone="b")
    # in flight at the injection (sent at 9.8, ends at 10.3), broken after its first token, zone a
    rs.append(req(9999, 9.8, ok=False, failure=rec.STREAM_BROKEN, e2e=0.5, zone="a"))
    rs += every(10, 20, zone="b")
    rs.append(req(8888, 11.0, ok=False, failure=rec.HTTP_5XX, zone="b"))
    f = analysis.analyse(run(sorted(rs, key=lambda r: r.sent_ns), [mark(rec.INJECT_START, 10)], 20), steady())["faults"][0]
    assert f["failed"]["total"] == 2
    assert f["failed"]["in_flight_at_injection"] == 1
    assert f["failed"]["mid_stream"] == 1 and f["failed"]["before_first_token"] == 1
    assert f["failed"]["unaffected_zones"] == 1  # the zone-b failure
    assert f["time_to_detect_s"] == pytest.approx(0.3, abs=1e-3)  # when the in-flight failure was seen
    assert bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]["met"] is False


def test_slow_not_failing_is_a_disruption_via_ttft():
    rs = every(0, 10) + every(10, 14, ttft=3.0) + every(14, 25)
    f = analysis.analyse(run(rs, [mark(rec.INJECT_START, 10)], 25), steady(max_p95_ttft_s=1.0))["faults"][0]
    assert f["disrupted"] and f["failed"]["total"] == 0
    # p95 of a 2 s window (20 requests) tolerates one slow request: the window starting at the
    # last slow one (13.9 s) is already within bound
    assert f["time_to_steady_state_s"] == pytest.approx(3.9, abs=1e-3)


def test_slo_goodput_counts_only_requests_meeting_it():
    rs = every(0, 10, ttft=0.1) + every(10, 20, ttft=5.0)
    slo = analysis.SLO(ttft_s=1.0, itl_s=None)
    f = analysis.analyse(run(rs, [mark(rec.INJECT_START, 10)], 20), steady(), slo)["faults"][0]
    assert f["goodput_rps"]["before"] == pytest.approx(10, rel=0.05)
    # slow but within the steady-state bound (none set on TTFT): no disruption, but no goodput
    assert f["disrupted"] is False and f["goodput_rps"]["during"] is None
    assert f["goodput_rps"]["after"] == 0.0


def test_percentile_nearest_rank():
    assert analysis.percentile([], 0.95) is None
    assert analysis.percentile([3, 1, 2], 0.5) == 2
    assert analysis.percentile(list(range(1, 101)), 0.95) == 95
    assert analysis.percentile([7], 0.99) == 7


def test_no_fault_in_run_fails_the_bounds():
    s = analysis.analyse(run(every(0, 5), [], 5))
    assert s["faults"] == []
    assert bounds.all_met(bounds.check(s, {"max_failed_requests": 0})) is False


def test_bounds_validation():
    from chaos.errors import UsageError

    with pytest.raises(UsageError, match="unknown bound"):
        bounds.validate({"max_failures": 1})
    with pytest.raises(UsageError, match="must be a number"):
        bounds.validate({"max_failed_requests": -1})
    with pytest.raises(UsageError, match="true or false"):
        bounds.validate({"must_recover": "yes"})
