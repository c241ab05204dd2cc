"""The figures read from who served each request (chaos/analysis.py: warmup, locality; the bound
max_cross_region_share), at their edges, on synthetic records."""

import pytest

from chaos import analysis
from chaos.core import bounds
from chaos.recording import records as rec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
INJECT = 10.0


def req(i, t, replica, ttft=0.1, ok=True, session=0, zone="a", region="east", served_zone=None, served_region=None,
        phase="measure"):
    sent = T0 + int(round(t, 4) * NS)
    return rec.RequestRecord(id=i, target=f"w-{zone}", url="http://127.0.0.1:1", zone=zone, route="/v1/chat/completions",
                             phase=phase, planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else rec.CONNECT_REFUSED, ttft_s=ttft if ok else None, e2e_s=0.05,
                             itl_p95_s=0.02, region=region, served_replica=replica,
                             served_zone=served_zone or zone, served_region=served_region or region, session=session,
                             turn=1, prefix_group=0 if session is not None else None)


def mark(t, scope="replica"):
    return rec.FaultMark(event=rec.INJECT_START, fault_id="f1", scope=scope, target="x", t_ns=T0 + int(t * NS),
                         zones=["a"])


def analyse(rs, end_t=30.0, **steady):
    run = rec.RunRecords(header={"run_id": "r"}, requests=sorted(rs, key=lambda r: r.sent_ns), marks=[mark(INJECT)],
                         footer={"stopped_ns": T0 + int(end_t * NS)})
    s = analysis.SteadyState(**{"window_s": 2.0, "min_success_ratio": 0.9, "min_requests": 3, **steady})
    return analysis.analyse(run, s)["faults"][0]


def replica_kill(cold_until=20.0, replacement_from=14.0, end=30.0, cold_ttft=0.5, session=0, named=True,
                 replaced=True, relapse=None, step=0.1):
    """10 req/s of session turns: r1 r2 r3 before the kill; r2 r3 until the replacement r4 serves from
    ``replacement_from``; r4 is slow (cold) until ``cold_until`` (and again in ``relapse``)."""
    out, i, t = [], 0, 0.0
    while t < end - 1e-9:
        if t < INJECT:
            replicas = ["r1", "r2", "r3"]
        elif t < replacement_from or not replaced:
            replicas = ["r2", "r3"]
        else:
            replicas = ["r2", "r3", "r4"]
        r = replicas[i % len(replicas)]
        ttft = 0.1 + 0.001 * (i % 7)
        if r == "r4" and (t < cold_until or (relapse and relapse[0] <= t < relapse[1])):
            ttft = cold_ttft
        out.append(req(i, t, r if named else None, ttft=ttft, session=session, phase="warmup" if t < 1 else "measure"))
        i, t = i + 1, round(t + step, 4)
    return out


# ---------------------------------------------------------------- warm-up
def after_last_cold(rs, until):
    """The send after r4's last cold request, in s from the injection: where the first window without it starts."""
    last = max(r.sent_offset_s for r in rs if r.served_replica == "r4" and r.sent_offset_s < until)
    return min(r.sent_offset_s for r in rs if r.sent_offset_s > last) - INJECT


def test_replacement_warm_once_its_cold_requests_are_behind_and_baseline_from_before():
    rs = replica_kill()
    f = analyse(rs)
    w = f["warmup"]
    assert w["replacements"] == ["r4"] and w["first_served_by_replacement_s"] == pytest.approx(4.0, abs=0.11)
    assert w["baseline_p95_ttft_s"] == pytest.approx(0.106, abs=1e-3)
    # the last cold request of r4 was sent just before 20.0 s: the first window after it starts at the next send
    assert w["time_to_warm_s"] == pytest.approx(after_last_cold(rs, 20.0)) and w["warmed"] is True
    assert 9.5 < w["time_to_warm_s"] <= 10.0
    assert w["reason"] is None and w["windows_judged"] > 0 and w["factor"] == 1.2
    assert "warmup.time_to_warm_s" not in f["unmeasurable"]


def test_a_relapse_of_the_replacement_moves_time_to_warm_after_it():
    rs = replica_kill(relapse=(24.0, 25.0))
    w = analyse(rs)["warmup"]
    assert w["time_to_warm_s"] == pytest.approx(after_last_cold(rs, 25.0))


def test_never_warm_within_the_window_is_null_without_a_reason():
    f = analyse(replica_kill(cold_until=99))
    w = f["warmup"]
    assert w["time_to_warm_s"] is None and w["warmed"] is False and w["reason"] is None
    assert "warmup.time_to_warm_s" not in f["unmeasurable"]  # a null not listed there means never


def test_a_replacement_warm_from_the_start_is_warm_at_its_first_request_not_before():
    w = analyse(replica_kill(cold_until=0))["warmup"]
    # windows start at every send: one starting before r4's first request may already be judged in bound
    assert w["time_to_warm_s"] == pytest.approx(w["first_served_by_replacement_s"]) == pytest.approx(4.0, abs=0.11)


def test_the_factor_is_an_option():
    w = analyse(replica_kill(cold_ttft=0.2), warm_factor=2.5)["warmup"]
    assert w["factor"] == 2.5 and w["time_to_warm_s"] == pytest.approx(4.0, abs=0.11)
    rs = replica_kill(cold_ttft=0.2)
    assert analyse(rs, warm_factor=1.5)["warmup"]["time_to_warm_s"] == pytest.approx(after_last_cold(rs, 20.0))


def test_no_prefix_sharing_request_is_null_with_its_reason():
    f = analyse(replica_kill(session=None))
    w = f["warmup"]
    assert w["time_to_warm_s"] is None and w["baseline_p95_ttft_s"] is None and w["warmed"] is None
    assert w["reason"] == f["unmeasurable"]["warmup.time_to_warm_s"] == analysis.NO_PREFIX_SHARING
    assert "warmup.baseline_p95_ttft_s" in f["unmeasurable"] and w["requests"] == 0
    assert w["prefix_sharing"] == {"session_turns": 0, "trace_rows": 0, "groups": 0}


def test_trace_rows_that_share_a_first_prefix_block_are_prefix_sharing_requests():
    """A trace has no sessions; its rows that begin with the same prefix block share prompt text (issue 33:
    the warm-up was unmeasurable on a real trace whose every request shared its first block)."""
    rs = replica_kill(session=None)
    for r in rs:
        r.prefix_group = 46  # the trace's shared first block
    w = analyse(rs)["warmup"]
    assert w["prefix_sharing"] == {"session_turns": 0, "trace_rows": len(rs), "groups": 1}
    assert w["warmed"] is True and w["time_to_warm_s"] == pytest.approx(after_last_cold(rs, 20.0))


def test_nothing_replaced_is_null_with_its_reason():
    f = analyse(replica_kill(replaced=False))
    assert f["warmup"]["replacements"] == [] and f["warmup"]["time_to_warm_s"] is None
    assert f["unmeasurable"]["warmup.time_to_warm_s"].startswith("nothing was replaced")


def test_responses_that_name_no_replica_are_null_with_their_reason():
    f = analyse(replica_kill(named=False))
    assert "named no replica" in f["unmeasurable"]["warmup.time_to_warm_s"]


def test_a_replacement_seen_too_little_to_judge_is_insufficient_evidence():
    f = analyse(replica_kill(replacement_from=29.5))  # r4 serves 1-2 requests before the end
    assert f["warmup"]["replacements"] == ["r4"] and f["warmup"]["windows_judged"] == 0
    assert f["unmeasurable"]["warmup.time_to_warm_s"].startswith(analysis.INSUFFICIENT)


def test_a_replica_seen_in_the_warm_up_phase_is_not_a_replacement():
    rs = replica_kill()
    rs.append(req(9999, 0.5, "r4", phase="warmup"))  # r4 served before the injection (warm-up phase)
    assert analyse(rs)["warmup"]["replacements"] == []


def _sample(t, ids):
    return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.01, controller_ok=True,
                      app_status="RUNNING", replicas={"D": {"a": len(ids)}}, nodes_alive={"a": 1},
                      replica_ids={"D": list(ids)})


def test_a_running_replica_that_served_nothing_before_is_not_a_replacement_when_the_samples_know_the_ids():
    """r5 runs from the start but serves only after the kill (routed around before, as a vLLM replica once was,
    2026-12-05): the samples saw it before the injection, so only r4, which they saw start, is the replacement.
    Without replica ids in the samples the data plane alone decides, and r5 counts as it always did."""
    rs = replica_kill() + [req(10_000 + k, INJECT + 1 + k, "r5") for k in range(5)]
    samples = [_sample(t, ["r1", "r2", "r3", "r5"] if t < INJECT else ["r2", "r3", "r5"] + (["r4"] if t >= 14 else []))
               for t in range(0, 30)]
    run = rec.RunRecords(header={"run_id": "r"}, requests=sorted(rs, key=lambda r: r.sent_ns), marks=[mark(INJECT)],
                         footer={"stopped_ns": T0 + 30 * NS}, samples=samples)
    steady = analysis.SteadyState(window_s=2.0, min_success_ratio=0.9, min_requests=3)
    f = analysis.analyse(run, steady)["faults"][0]
    assert [x["replica"] for x in f["replacement"]["new"]] == ["r4"]
    assert f["warmup"]["replacements"] == ["r4"]
    assert analyse(rs)["warmup"]["replacements"] == ["r4", "r5"]  # no samples: the data plane's rule alone


# ---------------------------------------------------------------- locality
def spread(end=30.0):
    """Clients in zone a (east); served in a before, in b (east) and c (west) during 10-15, in a after."""
    out, i, t = [], 0, 0.0
    while t < end - 1e-9:
        if INJECT <= t < 15:
            where = [("b", "east"), ("c", "west")][i % 2]
            ok = i % 2 == 0 or t >= 11  # a few failures make 10-11 s out of bound: steady state after
        else:
            where, ok = ("a", "east"), True
        out.append(req(i, t, "r", ok=ok, served_zone=where[0], served_region=where[1], session=None))
        i, t = i + 1, round(t + 0.1, 4)
    return out


def test_locality_before_during_after():
    f = analyse(spread())
    loc = f["locality"]
    assert loc["before"]["cross_zone_share"] == 0 and loc["before"]["cross_region_share"] == 0
    assert loc["before"]["requests"] > 0
    steady = f["service"]["time_to_steady_state_s"]
    assert 0 < steady <= 2.0  # the failures of 10-11 s: steady once they are behind
    d = loc["during"]
    assert d["cross_zone_share"] == 1.0 and d["cross_region_share"] == pytest.approx(0.5, abs=0.1)
    a = loc["after"]
    assert a["cross_zone"] > 0 and 0 < a["cross_region_share"] < 0.5  # 15-30 s mostly back home
    for p in ("before", "during", "after"):
        assert set(loc[p]) == {"requests", "cross_zone", "cross_zone_share", "cross_region", "cross_region_share"}


def test_max_cross_region_share_bound():
    f = analyse(spread())
    summary = {"faults": [f]}
    (met,) = bounds.check(summary, {"max_cross_region_share": 0.6})
    (violated,) = bounds.check(summary, {"max_cross_region_share": 0.1})
    assert met["met"] is True and violated["met"] is False
    assert violated["value"] == max(f["locality"]["during"]["cross_region_share"],
                                    f["locality"]["after"]["cross_region_share"])


def test_clients_without_a_zone_make_locality_unmeasurable_not_zero():
    rs = spread()
    for r in rs:
        r.zone = r.region = None  # one front door for every zone
    f = analyse(rs)
    assert f["locality"]["during"]["cross_zone_share"] is None
    assert "carry no zone" in f["unmeasurable"]["locality.cross_zone_share"]
    assert "carry no region" in f["unmeasurable"]["locality.cross_region_share"]
    (row,) = bounds.check({"faults": [f]}, {"max_cross_region_share": 0.0})
    assert row["met"] is None and row["status"] == bounds.UNMEASURABLE


def test_responses_without_headers_make_locality_unmeasurable():
    rs = spread()
    for r in rs:
        r.served_zone = r.served_region = r.served_replica = None
    f = analyse(rs)
    assert "named no zone" in f["unmeasurable"]["locality.cross_zone_share"]
    assert f["locality"]["during"]["requests"] == 0


def test_the_report_shows_who_served_and_the_warm_up():
    from chaos.reports.report import served_rows

    rows = {r[1]: r[2] for r in served_rows(analyse(replica_kill()))}
    assert rows["time to warm s (the replacement's p95 within 1.2x the warm replicas')"] != "never"
    assert rows["replacement (first served at s)"].startswith("r4")
    rows = {r[1]: r[2] for r in served_rows(analyse(spread()))}
    assert rows["share served outside the client's zone, before / during / after"].startswith("0.00 / 1.00")
    assert not any(r[0] == "warm-up" for r in served_rows(analyse(spread())))  # no sessions: no warm-up rows


def test_one_slow_request_of_a_warm_replacement_does_not_unwarm_it():
    """Stays warm is judged pooled: a p95 of a 2 s window's few requests is their maximum, so the
    every-window rule of steady state would reset the figure on one slow request."""
    rs = replica_kill()
    late = next(r for r in rs if r.served_replica == "r4" and r.sent_offset_s > 27.0)
    late.ttft_s = 0.5
    w = analyse(rs)["warmup"]
    assert w["time_to_warm_s"] == pytest.approx(after_last_cold(rs, 20.0)) and w["warmed"] is True
    assert w["pooled_p95_ttft_s"]["replacement"] <= 1.2 * w["pooled_p95_ttft_s"]["warm"]


def poisson_replica_kill(seed, rate=8.0, sigma=0.35, cold_until=12.0, replacement_from=5.0, end=60.0):
    """Poisson sends at ``rate``, routed at random over the live replicas; lognormal TTFT (shape
    ``sigma``), twice as slow on the replacement r4 until ``cold_until`` s after the injection."""
    import math
    import random

    rnd, out, t, i = random.Random(seed), [], 0.0, 0
    while True:
        t += rnd.expovariate(rate)
        if t >= INJECT + end:
            return out
        replicas = (["r1", "r2", "r3"] if t < INJECT else ["r2", "r3"] if t < INJECT + replacement_from
                    else ["r2", "r3", "r4"])
        r = rnd.choice(replicas)
        ttft = math.exp(rnd.gauss(math.log(0.1), sigma)) * (2.0 if r == "r4" and t < INJECT + cold_until else 1.0)
        out.append(req(i, t, r, ttft=ttft, phase="warmup" if t < 1 else "measure"))
        i += 1


def test_the_figure_has_the_power_to_see_a_twelve_second_cold_cache():
    """40 synthetic runs as noisy as the stream target's (8 req/s over 3 replicas, 5 s windows): the
    replacement is cold for 12 s; the figure finds it warm in nearly every run, near 12 s."""
    got = [analyse(poisson_replica_kill(seed), end_t=INJECT + 60.0, window_s=5.0)["warmup"]["time_to_warm_s"]
           for seed in range(40)]
    warm = sorted(x for x in got if x is not None)
    assert len(warm) >= 38, got
    assert 10.0 <= warm[len(warm) // 2] <= 13.0, warm  # the median
    assert warm[int(len(warm) * 0.9)] <= 20.0, warm
