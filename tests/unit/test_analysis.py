"""Each recovery definition at its edges, on synthetic record streams (chaos/analysis.py's docstring)."""

import pytest

from chaos import analysis
from chaos.core import bounds
from chaos.recording import records as rec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS  # run start


def req(i, t, ok=True, ttft=0.1, e2e=0.5, zone="a", failure=None, phase="measure", itl=0.02, stream=True):
    sent = T0 + int(t * NS)
    return rec.RequestRecord(id=i, target=f"w-{zone}", url="http://127.0.0.1:1", zone=zone, route="/v1/chat/completions",
                             phase=phase, planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else (failure or rec.CONNECT_REFUSED),
                             ttft_s=(ttft if (ok or failure == rec.STREAM_BROKEN) else None) if stream else None,
                             e2e_s=e2e, itl_p95_s=itl, stream=stream)


def mark(event, t, fid="f1", scope="replica", zones=("a",)):
    return rec.FaultMark(event=event, fault_id=fid, scope=scope, target="x", t_ns=T0 + int(t * NS), zones=list(zones))


def run(requests, marks, end_t):
    return rec.RunRecords(header={"run_id": "r"}, requests=sorted(requests, key=lambda r: r.sent_ns), marks=marks,
                          footer={"stopped_ns": T0 + int(end_t * NS)})


def steady(**kw):
    return analysis.SteadyState(**{"window_s": 2.0, "min_success_ratio": 1.0, "min_requests": 3, **kw})


def every(start, end, step=0.1, **kw):
    out, t = [], start
    while t < end - 1e-9:
        out.append(req(int(t * 1000) + hash(kw.get("zone", "a")) % 1000 * 1_000_000, round(t, 4), **kw))
        t += step
    return out


def zones(start, end, down=None, down_from=None, down_to=None, **kw):
    """Three zones' targets, 10 req/s each; zone ``down`` fails (connect refused) in [down_from, down_to)."""
    out = []
    for z in ("a", "b", "c"):
        for r in every(start, end, zone=z, **kw):
            t = (r.sent_ns - T0) / NS
            if z == down and down_from <= t < down_to:
                r.ok, r.failure, r.ttft_s, r.e2e_s = False, rec.CONNECT_REFUSED, None, 0.001
            out.append(r)
    return out


def analyse(rs, marks, end_t, **kw):
    return analysis.analyse(run(rs, marks, end_t), kw.pop("steady", steady()), **kw)


# ---------------------------------------------------------------- the undisturbed, the outage


def test_no_failure_at_all_is_undisturbed():
    f = analyse(every(0, 20), [mark(rec.INJECT_START, 10)], 20)["faults"][0]
    for p in (f["service"], f["affected"]):
        assert p["disrupted"] is False and p["recovered"] is True
        assert p["time_to_impact_s"] is None and p["time_to_detect_s"] is None
        assert p["time_to_first_success_s"] is None
        assert p["time_to_steady_state_s"] == 0.0 and p["relapses"] == 0
        assert p["failed_total"] == 0 and p["requests"] == 100 + 4  # 100 sent after, 4 in flight (sent 9.6-9.9 s, 0.5 s each; 9.5 s ended at 10.0)
    # the one reason of a population's: the run had no retry policy, so it has no retries' figures (chaos.analysis.retries)
    assert [k for k in f["unmeasurable"] if k.split(".")[0] in ("affected", "service")] == ["service.retries",
                                                                                           "affected.retries"]
    assert f["service"]["retries"] is None and f["affected"]["retries"] is None  # both, not the loop's last
    # this run has no samples, no zones served, no prefix sharing: exactly these are unmeasurable, and why
    um = f["unmeasurable"]
    planes = {"control_plane": ["time_to_loss_s", "time_to_restored_s", "outage_s"],
              "capacity": ["nodes_min_alive", "target_replicas", "min_replicas", "min_ratio", "time_to_lost_s",
                           "time_to_restored_s"]}
    sampled = [f"{plane}.{k}" for plane, keys in planes.items() for k in keys] + ["replacement"]
    # records of a harness that did not measure token continuity (these synthetic ones carry no header flag)
    continuity = [f"continuity.{k}" for k in ("migration_gap_p50_ms", "migration_gap_p99_ms", "migrations", "refused",
                                              "streams_checked", "streams_checked_corrupted", "streams_migrated",
                                              "tokens_corrupted", "tokens_duplicated", "tokens_lost",
                                              "tokens_out_of_order")]
    assert um["orphans.seconds_until_freed"].startswith("no orphan check was recorded for this fault")
    assert sorted(um) == sorted(["failed.unaffected_zones", *sampled, *continuity, "service.retries", "affected.retries",
                                 "orphans.seconds_until_freed", "locality.cross_zone_share",
                                 "locality.cross_region_share", "warmup.baseline_p95_ttft_s", "warmup.time_to_warm_s"])
    assert all(um[k] == "the records carry no token continuity (recorded before the harness measured it)"
               for k in continuity)
    assert um["failed.unaffected_zones"].startswith("a replica fault affects every target")
    # no sample taken: the planes say so (the not-sampled branch, not a gap's, a missing baseline's or a silent
    # controller's, whose reasons speak of samples too), never 0
    not_sampled = {"control_plane": "not sampled: no control-plane sample in the analysis window",
                   "capacity": "not sampled: no sample in the analysis window"}
    assert {k: um[k] for k in sampled} == {
        **{k: not_sampled[k.partition(".")[0]] for k in sampled if k.partition(".")[0] in not_sampled},
        "capacity.nodes_min_alive": "no sample in the window knew the nodes alive",
        "replacement": "no sample before the injection knew the replicas' ids (runs recorded before they were sampled)"}
    assert all(f[plane][name] is None for plane, name in (k.split(".") for k in sampled if "." in k))
    assert f["goodput_rps"]["before"] == pytest.approx(10, rel=0.02)
    assert f["resolution_s"] == pytest.approx(0.1, abs=1e-3)


def test_outage_impact_detect_first_success_and_steady_state():
    rs = every(0, 10) + every(10, 13, ok=False) + every(13, 25)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 25)["faults"][0]
    p = f["service"]
    assert p["time_to_impact_s"] == pytest.approx(0.0, abs=1e-3)
    assert p["time_to_detect_s"] == pytest.approx(0.5, abs=1e-3)  # the failure took its e2e (0.5 s) to show
    assert p["time_to_first_success_s"] == pytest.approx(3.0, abs=1e-3)
    assert p["time_to_first_recovery_s"] == pytest.approx(3.0, abs=1e-3)
    assert p["time_to_steady_state_s"] == pytest.approx(3.0, abs=1e-3)
    assert p["relapses"] == 0 and p["recovered"] is True
    assert p["failed_total"] == 30 == f["failed"]["total"]
    assert p["failed_by_class"] == {rec.CONNECT_REFUSED: 30}
    assert p["time_to_last_failure_s"] == pytest.approx(2.9 + 0.5, abs=1e-3)  # observed
    assert f["goodput_rps"]["during"] == 0.0
    assert f["goodput_rps"]["after"] == pytest.approx(10, rel=0.05)


def test_failures_that_never_recover_within_the_run():
    rs = every(0, 10) + every(10, 20, ok=False)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 20)["faults"][0]
    p = f["affected"]
    assert p["disrupted"] and p["recovered"] is False
    assert p["time_to_first_success_s"] is None and p["time_to_steady_state_s"] is None
    assert "affected.time_to_steady_state_s" not in f["unmeasurable"]  # never, not unmeasurable
    results = bounds.check({"faults": [f]}, {"max_time_to_steady_state_s": 1000, "must_recover": True,
                                             "max_time_to_first_success_s": 1000})
    assert [r["met"] for r in results] == [False, False, False]


# ---------------------------------------------------------------- two populations


def test_zone_loss_affected_population_sees_the_outage_the_service_does_not():
    # zone b's proxy refuses from the injection (10 s) to 38.7 s; zones a and c never fail
    rs = zones(0, 60, down="b", down_from=10.05, down_to=38.7)
    f = analyse(rs, [mark(rec.INJECT_START, 10, scope="node", zones=("b",))], 60)["faults"][0]
    aff, svc = f["affected"], f["service"]
    assert aff["basis"] == "fault_domain" and aff["zones"] == ["b"]
    assert aff["time_to_impact_s"] == pytest.approx(0.1, abs=1e-3)
    assert aff["time_to_first_success_s"] == pytest.approx(28.7, abs=0.05)  # the lost zone's users: ~29 s
    assert aff["time_to_steady_state_s"] == pytest.approx(28.7, abs=0.05)
    assert svc["time_to_first_success_s"] == pytest.approx(0.1, abs=1e-3)  # a success from another zone: not the lost zone's recovery
    assert aff["failed_total"] == svc["failed_total"] == f["failed"]["total"] == 286
    assert aff["requests"] < svc["requests"]
    assert aff["failed_ratio"] == pytest.approx(286 / aff["requests"])
    assert f["failed"]["unaffected_zones"] == 0
    # bounds are checked on the affected population by default
    spec = {"max_time_to_first_success_s": 5}
    assert bounds.check({"faults": [f]}, spec)[0]["met"] is False
    assert bounds.check({"faults": [f]}, spec, population="service")[0]["met"] is True


def test_replica_and_engine_faults_affect_every_target():
    rs = zones(0, 20)
    for scope in ("replica", "engine"):
        f = analyse(rs, [mark(rec.INJECT_START, 10, scope=scope, zones=("a",))], 20)["faults"][0]
        assert f["affected"]["basis"] == "service" and "every target" in f["affected"]["why"]
        assert f["affected"]["requests"] == f["service"]["requests"]
        # every target is affected: no zone is unaffected, and the bound on it does not apply
        assert f["failed"]["unaffected_zones"] is None and "every target" in f["unmeasurable"]["failed.unaffected_zones"]
        r = bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]
        assert r["status"] == bounds.NOT_APPLICABLE


def test_zone_less_targets_and_zone_less_faults_are_null_not_zero():
    # one front door for every zone (front lb): the client's requests carry no zone
    rs = every(0, 10, zone=None) + every(10, 12, ok=False, zone=None) + every(12, 20, zone=None)
    f = analyse(rs, [mark(rec.INJECT_START, 10, scope="zone", zones=("b",))], 20)["faults"][0]
    assert f["failed"]["unaffected_zones"] is None
    assert "no zone" in f["unmeasurable"]["failed.unaffected_zones"]
    assert f["affected"]["basis"] == "service" and "carry no zone" in f["affected"]["why"]
    assert f["affected"]["failed_total"] == f["service"]["failed_total"] > 0  # everyone is affected: counted
    r = bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]
    # no population of an unaffected zone exists: the bound does not apply (never "met", never 0)
    assert r["met"] is None and r["status"] == bounds.NOT_APPLICABLE and "one front door" in r["reason"]
    assert r["value"] is None
    # with zones (zonal-lb, direct) the same failures in another zone violate it
    f = analyse(zones(0, 20, down="a", down_from=10, down_to=12), [mark(rec.INJECT_START, 10, scope="zone",
                                                                        zones=("b",))], 20)["faults"][0]
    r = bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]
    assert r["status"] == bounds.VIOLATED and r["value"] == f["failed"]["unaffected_zones"] > 0
    # a head kill has no zone: unaffected zones do not apply (and do not fail the run)
    f = analyse(zones(0, 20), [mark(rec.INJECT_START, 10, scope="head", zones=())], 20)["faults"][0]
    assert f["failed"]["unaffected_zones"] is None and "failed.unaffected_zones" in f["unmeasurable"]
    r = bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]
    assert r["status"] == bounds.NOT_APPLICABLE and bounds.all_met([r]) is True
    assert f["affected"]["basis"] == "service" and "no failure domain" in f["affected"]["why"]


# ---------------------------------------------------------------- observed detection, hangs


def test_engine_hang_detect_is_when_the_timeout_was_observed():
    # from 10.4 s a third of requests hang to their 10 s timeout; the rest are fine
    rs = []
    for r in every(0, 40):
        t = (r.sent_ns - T0) / NS
        if 10.4 <= t < 22 and r.id % 3 == 0:
            r.ok, r.failure, r.ttft_s, r.e2e_s = False, rec.READ_TIMEOUT, None, 10.0
        rs.append(r)
    f = analyse(rs, [mark(rec.INJECT_START, 10, scope="engine")], 40)["faults"][0]
    p = f["affected"]
    first_hung = min(r.sent_ns for r in rs if not r.ok)
    assert p["time_to_impact_s"] == pytest.approx((first_hung - T0) / NS - 10, abs=1e-3)
    assert p["time_to_detect_s"] >= 10.0  # nobody saw a failure before the client's timeout
    assert p["time_to_detect_s"] == pytest.approx(p["time_to_impact_s"] + 10.0, abs=1e-3)
    assert p["time_to_first_success_s"] < 1.0  # the other replicas kept answering


# ---------------------------------------------------------------- relapse


def test_relapse_moves_steady_state_to_the_last_good_stretch():
    rs = (every(0, 10) + every(10, 12, ok=False) + every(12, 20) + every(20, 21, ok=False) + every(21, 30))
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 30)["faults"][0]
    p = f["service"]
    assert p["time_to_first_recovery_s"] == pytest.approx(2.0, abs=1e-3)
    assert p["time_to_steady_state_s"] == pytest.approx(11.0, abs=1e-3)  # after the relapse at 20-21 s
    assert p["relapses"] == 1
    assert p["time_to_last_failure_s"] == pytest.approx(10.9 + 0.5, abs=1e-3)
    r = {x["bound"]: x for x in bounds.check({"faults": [f]}, {"max_time_to_steady_state_s": 5, "max_relapses": 0})}
    assert r["max_time_to_steady_state_s"]["met"] is False and r["max_relapses"]["met"] is False


def test_relapse_that_lasts_to_the_end_is_not_recovered():
    rs = every(0, 10) + every(10, 12, ok=False) + every(12, 20) + every(20, 30, ok=False)
    p = analyse(rs, [mark(rec.INJECT_START, 10)], 30)["faults"][0]["service"]
    assert p["time_to_first_recovery_s"] == pytest.approx(2.0, abs=1e-3)
    assert p["time_to_steady_state_s"] is None and p["recovered"] is False and p["relapses"] == 1


# ---------------------------------------------------------------- too little evidence


def test_run_that_ends_before_one_window_is_insufficient_evidence_not_undisturbed():
    f = analyse(every(0, 11), [mark(rec.INJECT_START, 10)], 11.5, steady=steady(window_s=5))["faults"][0]
    for name in ("affected", "service"):
        p = f[name]
        assert p["time_to_steady_state_s"] is None and p["recovered"] is None
        assert analysis.INSUFFICIENT in f["unmeasurable"][f"{name}.time_to_steady_state_s"]
    results = bounds.check({"faults": [f]}, {"max_time_to_steady_state_s": 60, "must_recover": True})
    assert [r["status"] for r in results] == [bounds.UNMEASURABLE, bounds.UNMEASURABLE]
    assert bounds.all_met(results) is False
    assert bounds.fault_met(results, "f1") == "unmeasured"


def test_thin_windows_are_not_judged():
    # 1 request every 2 s: a 2 s window never holds the 3 requests it needs
    f = analyse(every(0, 30, step=2.0), [mark(rec.INJECT_START, 10)], 30)["faults"][0]
    assert f["service"]["time_to_steady_state_s"] is None
    assert "service.time_to_steady_state_s" in f["unmeasurable"]


# ---------------------------------------------------------------- slow, non-streaming


def test_slow_not_failing_is_a_disruption_via_latency_and_first_success_does_not_apply():
    rs = every(0, 10) + every(10, 14, ttft=3.0) + every(14, 25)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 25, steady=steady(max_p95_ttft_s=1.0))["faults"][0]
    p = f["service"]
    assert p["disrupted"] and p["failed_total"] == 0
    # the window starting at the last slow request (13.9 s) holds 1 slow of 20: p95 within bound
    assert p["time_to_steady_state_s"] == pytest.approx(3.9, abs=1e-3)
    r = bounds.check({"faults": [f]}, {"max_time_to_first_success_s": 1})[0]
    assert r["met"] is None and r["status"] == bounds.NOT_APPLICABLE and "nothing to recover" in r["reason"]


def test_non_streaming_requests_are_judged_on_end_to_end_latency():
    rs = every(0, 30, stream=False, e2e=0.3)
    assert all(r.ttft_s is None for r in rs)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 30, steady=steady(max_p95_ttft_s=1.0))["faults"][0]
    assert f["service"]["disrupted"] is False and f["service"]["time_to_steady_state_s"] == 0.0
    slow = every(0, 10, stream=False, e2e=0.3) + every(10, 15, stream=False, e2e=2.0) + every(15, 30, stream=False, e2e=0.3)
    p = analyse(slow, [mark(rec.INJECT_START, 10)], 30, steady=steady(max_p95_ttft_s=1.0))["faults"][0]["service"]
    assert p["disrupted"] and p["time_to_steady_state_s"] == pytest.approx(4.9, abs=1e-3)


# ---------------------------------------------------------------- two faults, in flight, warm-up


def test_second_fault_before_recovery_ends_the_first_window():
    rs = every(0, 10) + every(10, 15, ok=False) + every(15, 30)
    marks = [mark(rec.INJECT_START, 10, "f1"), mark(rec.INJECT_START, 12, "f2", scope="node")]
    s = analyse(rs, marks, 30)
    f1, f2 = s["faults"]
    assert f1["window_s"] == pytest.approx(2.0)
    # f1 owns what was sent in its window and ended before f2; the 4 still in flight at f2 are f2's
    assert f1["service"]["recovered"] is False and f1["failed"]["total"] == 16
    assert f2["failed"]["in_flight_at_injection"] == 4 and f2["failed"]["total"] == 30 + 4
    assert f2["service"]["time_to_first_success_s"] == pytest.approx(3.0, abs=1e-3)
    assert f2["service"]["recovered"] is True
    assert set(s["by_scope"]) == {"replica", "node"}
    assert f1["window_cut_by"] == "f2" and f2["window_cut_by"] is None


def test_recovery_bounds_apply_to_the_last_fault_when_a_second_fault_cuts_the_window():
    rs = every(0, 10) + every(10, 15, ok=False) + every(15, 30)
    marks = [mark(rec.INJECT_START, 10, "f1"), mark(rec.INJECT_START, 12, "f2", scope="node")]
    s = analyse(rs, marks, 30)
    spec = {"max_failed_requests": 40, "max_time_to_steady_state_s": 5, "must_recover": True,
            "max_time_to_first_success_s": 5}
    results = {(r["fault_id"], r["bound"]): r for r in bounds.check(s, spec)}
    assert results[("f1", "max_failed_requests")]["met"] is True
    assert results[("f1", "max_failed_requests")]["value"] == 16
    for name in ("max_time_to_steady_state_s", "must_recover", "max_time_to_first_success_s"):
        assert results[("f1", name)]["met"] is None and "f2" in results[("f1", name)]["reason"]
    assert results[("f2", "max_time_to_steady_state_s")]["met"] is True
    assert results[("f2", "must_recover")]["met"] is True
    assert bounds.all_met(list(results.values())) is True
    assert bounds.fault_met(list(results.values()), "f1") == "yes, recovery n/a (window cut)"
    rs = every(0, 10) + every(10, 30, ok=False)
    out = bounds.check(analyse(rs, marks, 30), spec)
    assert {(r["fault_id"], r["bound"]) for r in bounds.violated(out)} == {
        ("f2", "max_failed_requests"), ("f2", "max_time_to_first_success_s"),
        ("f2", "max_time_to_steady_state_s"), ("f2", "must_recover")}
    assert bounds.fault_met(out, "f2") == "no" and bounds.all_met(out) is False


def test_warmup_is_excluded():
    rs = every(0, 5, ok=False, phase="warmup") + every(5, 20)
    s = analyse(rs, [mark(rec.INJECT_START, 10)], 20)
    assert s["requests"]["warmup"] == 50 and s["requests"]["failed"] == 0
    assert s["faults"][0]["failed"]["total"] == 0
    assert s["faults"][0]["goodput_rps"]["before"] == pytest.approx(10, rel=0.05)


def test_in_flight_failure_mid_stream_and_zones():
    rs = every(0, 10, zone="b")
    # in flight at the injection (sent at 9.8, ends at 10.3), broken after its first token, zone a
    rs.append(req(9999, 9.8, ok=False, failure=rec.STREAM_BROKEN, e2e=0.5, zone="a"))
    rs += every(10, 20, zone="b")
    rs.append(req(8888, 11.0, ok=False, failure=rec.HTTP_5XX, zone="b"))
    f = analyse(rs, [mark(rec.INJECT_START, 10, scope="zone")], 20)["faults"][0]
    assert f["failed"]["total"] == 2 and f["failed"]["in_flight_at_injection"] == 1
    assert f["failed"]["mid_stream"] == 1 and f["failed"]["before_first_token"] == 1
    assert f["failed"]["unaffected_zones"] == 1  # the zone-b failure
    aff = f["affected"]  # zone a's requests: only the in-flight one
    assert aff["requests"] == 1 and aff["failed_total"] == 1 and aff["failed_mid_stream"] == 1
    assert aff["time_to_impact_s"] == 0.0  # in flight: hit at the injection at the latest
    assert aff["time_to_detect_s"] == pytest.approx(0.3, abs=1e-3)
    assert f["service"]["time_to_detect_s"] == pytest.approx(0.3, abs=1e-3)
    assert bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})[0]["met"] is False


def test_slo_goodput_counts_only_requests_meeting_it():
    rs = every(0, 10, ttft=0.1) + every(10, 20, ttft=5.0)
    slo = analysis.SLO(ttft_s=1.0, itl_s=None)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 20, slo=slo)["faults"][0]
    assert f["goodput_rps"]["before"] == pytest.approx(10, rel=0.05)
    assert f["service"]["disrupted"] is False and f["goodput_rps"]["during"] is None
    assert f["goodput_rps"]["after"] == 0.0


def test_percentile_nearest_rank():
    assert analysis.percentile([], 0.95) is None
    assert analysis.percentile([3, 1, 2], 0.5) == 2
    assert analysis.percentile(list(range(1, 101)), 0.95) == 95
    assert analysis.percentile([7], 0.99) == 7


def test_no_fault_in_run_fails_the_bounds():
    s = analyse(every(0, 5), [], 5)
    assert s["faults"] == []
    assert bounds.all_met(bounds.check(s, {"max_failed_requests": 0})) is False


def test_definitions_round_trip_and_are_in_the_summary():
    d = analysis.Definitions(steady(window_s=3.0), analysis.SLO(ttft_s=1.5), "service")
    again = analysis.Definitions.from_dict(d.to_dict())
    assert again == d and d.to_dict()["format_version"] == analysis.FORMAT_VERSION
    s = analysis.analyse(run(every(0, 5), [], 5), d.steady_state, d.slo, population="service")
    assert s["definitions"] == d.to_dict() and s["format_version"] == analysis.FORMAT_VERSION


def test_unknown_population_is_refused():
    from chaos.base.errors import UsageError

    with pytest.raises(UsageError, match="population"):
        bounds.check({"faults": [{}]}, {"max_failed_requests": 1}, population="everyone")


# ---------------------------------------------------------------- review edges


def test_in_flight_failures_are_judged_at_the_injection_not_left_out():
    # four streams in flight at the kill break 0.6-0.9 s after it; everything sent after the kill is fine
    rs = every(0, 20)
    for i, t in enumerate((9.5, 9.6, 9.7, 9.8)):
        rs.append(req(90_000 + i, t, ok=False, failure=rec.STREAM_BROKEN, e2e=1.1))
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 20)["faults"][0]
    p = f["service"]
    assert p["failed_total"] == 4 and p["time_to_impact_s"] == 0.0
    assert p["time_to_detect_s"] == pytest.approx(0.6, abs=1e-3)
    # the window at the injection holds them: steady state is the first send after it, not 0
    assert p["disrupted"] and p["time_to_steady_state_s"] == pytest.approx(0.1, abs=1e-3)


def test_a_population_without_requests_is_unmeasurable_not_zero_failed():
    # a zone fault on zone "d", where no target is: the affected population is empty
    f = analyse(zones(0, 20), [mark(rec.INJECT_START, 10, scope="zone", zones=("d",))], 20)["faults"][0]
    a = f["affected"]
    assert a["requests"] == 0 and a["relapses"] is None and a["failed_ratio"] is None
    assert "no request" in f["unmeasurable"]["affected.requests"]
    results = bounds.check({"faults": [f]}, {"max_failed_requests": 5, "max_relapses": 0, "max_failed_ratio": 0.1})
    assert [r["status"] for r in results] == [bounds.UNMEASURABLE] * 3 and bounds.all_met(results) is False


def test_relapses_are_null_when_no_window_could_be_judged():
    f = analyse(every(0, 11), [mark(rec.INJECT_START, 10)], 11.5, steady=steady(window_s=5))["faults"][0]
    assert f["service"]["relapses"] is None and "service.relapses" in f["unmeasurable"]
    r = bounds.check({"faults": [f]}, {"max_relapses": 0})[0]
    assert r["status"] == bounds.UNMEASURABLE


def test_a_request_ending_exactly_at_the_injection_was_not_in_flight():
    rs = [req(1, 9.5, e2e=0.5), req(2, 9.6, e2e=0.5)] + every(10, 20)
    f = analyse(rs, [mark(rec.INJECT_START, 10)], 20)["faults"][0]
    assert f["service"]["in_flight_at_injection"] == 1


def test_a_reason_names_the_scope_with_its_article():
    assert [analysis.a_or_an(s) for s in ("engine-crash", "upgrade", "zone", "head")] == \
        ["an engine-crash", "an upgrade", "a zone", "a head"]


def test_the_arrivals_report_the_clients_send_lag():
    """Sent minus planned, per open-loop request: a burst of 4 planned at one instant, sent 0, 1, 2 and 20 ms
    late; a closed loop (planned = sent) has no schedule and no lag."""
    rs = [req(i, 1.0) for i in range(4)]
    for r, lag_ms in zip(rs, (0.0, 1.0, 2.0, 20.0)):
        r.planned_ns = r.sent_ns
        r.sent_ns += int(lag_ms * 1e6)
    rs[0].planned_ns -= 1  # 1 ns late: still the open loop's
    lag = analysis.arrivals(rs)["send_lag_ms"]
    assert lag == {"p50": 1.0, "p99": 20.0, "max": 20.0, "requests": 4}
    assert analysis.arrivals([req(0, 1.0), req(1, 2.0)])["send_lag_ms"] is None
