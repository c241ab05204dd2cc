"""A straggler's figures (chaos/analysis/slow_replica.py, issue 35): for an engine-slow fault, over the requests sent
from its injection to its heal, the share the slow replica got against its fair share, and the p50/p95 TTFT and
ITL of its requests against the others'; null with a reason when a figure cannot be measured. On synthetic
records with known answers; in the catalogue, the summary's schema and the report."""

import json

import pytest

from chaos import analysis
from chaos.analysis import figures
from chaos.recording import records as rec
from chaos.core import summary as summary_mod
from chaos.analysis import slow_replica as st
from chaos.reports import plane_rows
from tests.unit.test_summary import DEFS, schema, write_run

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
SLOW = "r1"


def req(i, t, replica, ttft=0.1, itl=0.02, ok=True, stream=True):
    sent = T0 + int(round(t, 4) * NS)
    return rec.RequestRecord(id=i, target="w-a", url="http://127.0.0.1:1", zone="a", route="/v1/chat/completions",
                             phase="measure", planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else rec.CONNECT_REFUSED, ttft_s=ttft if ok else None, e2e_s=0.5,
                             itl_mean_s=itl if ok else None, itl_p95_s=itl, stream=stream, served_replica=replica,
                             served_zone="a")


def marks(scope="engine-slow", heal=30.0, target=SLOW):
    out = [(rec.INJECT_START, 10.0), (rec.INJECT_END, 10.5)] + ([(rec.HEAL_START, heal), (rec.HEAL_END, heal + 0.01)]
                                                                 if heal is not None else [])
    return [rec.FaultMark(event=e, fault_id="f1", scope=scope, target=target, t_ns=T0 + int(t * NS), zones=["a"],
                          detail={"factor": 4, "period_s": 0.2, "duration_s": 20}) for e, t in out]


def load(slow_every=5, named=True, slow_ok=True, slow_itl=True, end=40.0):
    """10 req/s from 0 to ``end`` s, round robin over r1 r2 r3 outside the fault; from 10 s to 30 s every
    ``slow_every``-th request served by the slow r1 (0: none), the others by r2 and r3. r1's TTFT is
    0.40 + 0.01 x (k % 10) for its k-th request of the fault, its ITL 0.08 + 0.001 x (k % 10); the others' 0.10 and
    0.02 + 0.001 x (j % 5)."""
    out, k, j = [], 0, 0
    for i in range(int(end * 10)):
        t = i / 10
        if not 10.0 <= t < 30.0:
            out.append(req(i, t, ("r1", "r2", "r3")[i % 3] if named else None))
        elif slow_every and i % slow_every == 0:
            out.append(req(i, t, SLOW if named else None, ttft=0.40 + 0.01 * (k % 10),
                           itl=(0.08 + 0.001 * (k % 10)) if slow_itl else None, ok=slow_ok))
            k += 1
        else:
            out.append(req(i, t, ("r2", "r3")[j % 2] if named else None, itl=0.02 + 0.001 * (j % 5)))
            j += 1
    return out


def analyse(rs, ms, end=40.0):
    run = rec.RunRecords(header={"run_id": "r"}, requests=rs, marks=ms, footer={"stopped_ns": T0 + int(end * NS)})
    return analysis.analyse(run, analysis.SteadyState(window_s=2.0, min_success_ratio=0.9, min_requests=3))["faults"][0]


def test_the_share_and_latencies_of_the_slow_replica_against_the_others_during_the_fault():
    f = analyse(load(), marks())
    s = f["straggler"]
    # 200 requests sent from 10 s to 30 s (the heal's start), 40 of them (every 5th) served by r1
    assert (s["replica"], s["from_s"], s["to_s"]) == (SLOW, 0.0, 20.0)
    assert (s["requests"], s["replicas"], s["slow_requests"]) == (200, 3, 40)
    assert (s["share"], s["fair_share"], s["share_of_fair"]) == (0.2, 0.333333, 0.6)
    # r1's 40 TTFTs: 0.40 .. 0.49, four of each; nearest rank: the 20th (0.44) and the 38th (0.49)
    assert s["slow_p50_ttft_s"] == pytest.approx(0.44) and s["slow_p95_ttft_s"] == pytest.approx(0.49)
    assert s["others_p50_ttft_s"] == s["others_p95_ttft_s"] == 0.1
    assert s["slow_p50_itl_s"] == pytest.approx(0.084) and s["slow_p95_itl_s"] == pytest.approx(0.089)
    # the others' 160 ITLs: 0.020 .. 0.024, 32 of each: the 80th (0.022) and the 152nd (0.024)
    assert s["others_p50_itl_s"] == pytest.approx(0.022) and s["others_p95_itl_s"] == pytest.approx(0.024)
    assert not [k for k in f["unmeasurable"] if k.startswith("straggler.")]
    assert set(s) == {"replica", "from_s", "to_s", *st.FIGURES}


def test_a_slow_replica_that_got_nothing_has_share_zero_and_no_latency_of_its_own():
    f = analyse(load(slow_every=0), marks())
    s = f["straggler"]
    assert (s["requests"], s["replicas"], s["slow_requests"], s["share"], s["share_of_fair"]) == (200, 3, 0, 0.0, 0.0)
    assert s["fair_share"] == 0.333333 and s["others_p50_ttft_s"] == 0.1
    for name in ("slow_p50_ttft_s", "slow_p95_ttft_s", "slow_p50_itl_s", "slow_p95_itl_s"):
        assert s[name] is None
        assert f["unmeasurable"][f"straggler.{name}"] == \
            "no successful request was served by the slow replica during the fault"


def test_failed_requests_count_in_the_share_not_in_the_latencies():
    f = analyse(load(slow_ok=False), marks())
    s = f["straggler"]
    assert s["slow_requests"] == 40 and s["share"] == 0.2 and s["slow_p50_ttft_s"] is None
    assert "no successful request was served by the slow replica" in f["unmeasurable"]["straggler.slow_p95_ttft_s"]


def test_requests_without_an_inter_token_latency_leave_the_itl_null_with_its_reason():
    f = analyse(load(slow_itl=False), marks())
    s = f["straggler"]
    assert s["slow_p50_ttft_s"] == pytest.approx(0.44) and s["slow_p50_itl_s"] is None
    assert f["unmeasurable"]["straggler.slow_p50_itl_s"] == (
        "no successful request served by the slow replica during the fault reported an inter-token latency (one "
        "token each)")


def test_responses_that_name_no_replica_leave_every_figure_null():
    f = analyse(load(named=False), marks())
    assert all(f["straggler"][k] is None for k in st.FIGURES)
    assert f["unmeasurable"]["straggler.share"].startswith("the responses named no replica")
    assert set(k for k in f["unmeasurable"] if k.startswith("straggler.")) == {f"straggler.{k}" for k in st.FIGURES}


def test_without_a_heal_in_the_window_the_interval_runs_to_its_end_and_other_scopes_have_none():
    s = analyse(load(end=25.0), marks(heal=None), end=25.0)["straggler"]
    assert s["to_s"] == 15.0 and s["requests"] == 150 and s["slow_requests"] == 30
    assert "straggler" not in analyse(load(), marks(scope="engine"))


def test_no_request_during_the_fault():
    rs = [r for r in load() if not 10.0 <= r.sent_offset_s < 30.0]
    f = analyse(rs, marks())
    assert f["straggler"]["requests"] is None
    assert f["unmeasurable"]["straggler.requests"] == "no request was sent during the fault"


# ---------------------------------------------------------------- the catalogue, the summary, the report
def test_the_figures_are_the_catalogue_s_straggler_plane():
    assert {f.name for f in figures.of("straggler")} == set(st.FIGURES)
    assert all(f.derived_by == "chaos.analysis.straggler" and f.bound is None for f in figures.of("straggler"))
    assert figures.get("straggler.share").value({"straggler": {"share": 0.2}}) == 0.2
    assert figures.get("straggler.share").value({}) is None  # a fault of another scope has none


def test_the_summary_validates_and_the_report_shows_the_straggler(tmp_path):
    stated = {"max_failed_requests": 0}
    header = summary_mod.header_block("engine slow", "engine-slow", DEFS, stated, "test", "stream")
    d = write_run(tmp_path / "engine-slow", header, load(), marks(), 40)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, stated, "test")
    (f,) = s["faults"]
    assert f["straggler"]["share"] == 0.2
    s.update(experiment="engine slow", scope="engine-slow", app="stream",
             cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True,
                      "network": "loopback"},
             environment={"ray": "2.60.0", "availproof": "0.test", "load": {"rate": 10}})
    schema("summary").validate(json.loads(json.dumps(s)))
    rows = {r[1]: r[2] for r in plane_rows.straggler_rows(f)}
    assert rows["slow replica (requests sent from s to s)"] == "r1 (0.00 to 20.00)"
    assert rows["share served by the slow replica"] == "0.20" and rows["fair share (1 / replicas serving)"] == "0.33"
    assert rows["slow replica p95 TTFT s"] == "0.49" and rows["other replicas p95 TTFT s"] == "0.10"
    assert rows["served by the slow replica"] == "40"
    none = analyse(load(slow_every=0), marks())
    rows = {r[1]: r[2] for r in plane_rows.straggler_rows(none)}
    assert rows["slow replica p50 TTFT s"].startswith("unmeasurable: no successful request was served by the slow")
    assert plane_rows.straggler_rows(analyse(load(), marks(scope="engine"))) == []
