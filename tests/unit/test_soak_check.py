"""The soak's two-part check (chaos/soak/check.py) on known answers: the Beta-Binomial count against sums done by
hand, the recovered cost's mid-p at the edges of its predictive draws, end to end on synthetic soak records (a
constant 10 req/s load, faults failing known stretches), and a soak's events as a claim's trials."""

import json
import math

import numpy as np
import pytest

from chaos import analysis
from chaos.recording import records as rec
from chaos.claim import theta as th
from chaos.base.errors import UsageError
from chaos.soak import check as ck, figures as fig
from tests.unit.test_soak_figures import Planned, at, inject, load, records, schedule


def claim(values, n=None, u=0, prior=(0.5, 0.5), cost_s=250.0):
    """A claim document of one scope, replica: its recovered runs costing ``values``, ``u`` of ``n`` unrecovered."""
    n = len(values) + u if n is None else n
    runs = [{"experiment": "replica-kill", "trial": i + 1, "pooled": True, "counted": True, "scopes": ["replica"],
             "lost_service_s": v, "lower_bound": None} for i, v in enumerate(values)]
    entry = {"lost_service_s": {"values": list(values), "lower_bound": []},
             "unrecovered": {"runs": u, "of": n, "prior": {"a": prior[0], "b": prior[1], "source": "test"},
                             "cost_s": cost_s}}
    return {"suite_dir": "runs/suite", "population": "service", "runs": runs, "scopes": {"replica": entry},
            "rates": {"scopes": {"replica": {"events": 4.0, "unrecovered_cost_s": 10.0}}}}


def draws_for(doc, k, seed=0):
    models, _ = fig.claim_models(doc, 600.0)
    theta = th.draw(list(models.values()), ck.OUTER, 1.0, seed)[0]
    return ck.recovered_sum_draws(theta, k, seed)


# ---------------------------------------------------------------- (a) the count


def by_hand(m, u, a, b):
    """P(U >= u) for U ~ Beta-Binomial(m, a, b), term by term with lgamma."""
    def lbeta(x, y):
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
    return sum(math.comb(m, j) * math.exp(lbeta(j + a, m - j + b) - lbeta(a, b)) for j in range(u, m + 1))


def test_the_beta_binomial_p_value_is_the_exact_sum():
    got = ck.count_part(3, 1, 1.5, 2.5)
    assert got["p_upper"] == pytest.approx(by_hand(3, 1, 1.5, 2.5), abs=1e-6)
    assert got["p_lower"] == pytest.approx(1 - by_hand(3, 2, 1.5, 2.5), abs=1e-6)
    # Beta(1, 1): U is uniform on 0..m, so P(U >= u) = (m - u + 1) / (m + 1)
    assert ck.count_part(4, 3, 1.0, 1.0)["p_upper"] == pytest.approx(2 / 5, abs=1e-6)
    assert sum(ck.beta_binomial_pmf(j, 6, 0.5, 20.5) for j in range(7)) == pytest.approx(1.0)


def test_three_unrecovered_of_four_is_surprising_against_beta_half_twenty_and_a_half():
    got = ck.count_part(4, 3, 0.5, 20.5)
    assert got["p_upper"] < 0.01 and got["verdict"] == "surprising"
    assert got["p_upper"] == pytest.approx(by_hand(4, 3, 0.5, 20.5), abs=1e-6)
    assert got["predicted_mean"] == pytest.approx(4 * 0.5 / 21, abs=1e-6)


def test_none_unrecovered_of_four_is_consistent():
    got = ck.count_part(4, 0, 0.5, 20.5)
    assert got["p_upper"] == 1.0 and got["verdict"] == "consistent"
    assert got["p_lower"] == pytest.approx(1 - by_hand(4, 1, 0.5, 20.5), abs=1e-6)


# ---------------------------------------------------------------- (b) the recovered cost


def test_a_recovered_sum_above_every_draw_is_surprising():
    d = draws_for(claim([0.5, 0.6, 0.7]), 4)
    got = ck.cost_part(d, float(d.max()) + 1.0, 4)
    assert got["p_value"] == 0.0 and got["verdict"] == "surprising" and got["observed_percentile"] == 100.0
    below = ck.cost_part(d, float(d.min()) / 2, 4)  # two-sided: below every draw too
    assert below["verdict"] == "surprising"


def test_a_recovered_sum_at_the_median_is_consistent():
    d = draws_for(claim([0.5, 0.6, 0.7]), 4)
    got = ck.cost_part(d, float(np.median(d)), 4)
    assert got["p_value"] > 0.95 and got["verdict"] == "consistent"
    assert got["interval90_s"][0] < float(np.median(d)) < got["interval90_s"][1]


def test_mid_p_counts_ties_half():
    d = np.array([1.0, 2.0, 2.0, 3.0])
    assert ck.mid_p(d, 2.0) == 1.0
    assert ck.mid_p(d, 1.0) == pytest.approx(2 * (0 + 0.25 / 2))
    assert ck.mid_p(d, 9.0) == 0.0


# ---------------------------------------------------------------- end to end on synthetic soak records

REPLICA_AT = (50, 150, 250, 350)


def soak_records(fails):
    rs = load(450, fails=fails)
    marks = [m for t in REPLICA_AT for m in inject(t, f"r{t}", "replica")]
    return records(rs, marks, 450)


def soak_schedule():
    return schedule([Planned(i, float(t), "replica", "replica-kill", t + 30.0, t + 40.0)
                     for i, t in enumerate(REPLICA_AT)])


def test_end_to_end_all_recovered_far_above_the_prediction_is_surprising():
    # the claim's replica kills cost 0.1 s; the soak's four cost 25 s each (all recovered within their windows)
    recs = soak_records([(t, t + 25) for t in REPLICA_AT])
    c = ck.check(claim([0.1, 0.1, 0.1]), recs, soak_schedule())
    s = c["scopes"][0]
    assert (s["events"], s["recovered"], s["unrecovered"], s["unjudged"]) == (4, 4, 0, [])
    assert s["count"]["verdict"] == "consistent" and s["count"]["observed"] == 0
    assert s["cost"]["observed_s"] == pytest.approx(100.0) and s["cost"]["recovered_events"] == 4
    assert s["cost"]["p_value"] == 0.0 and s["cost"]["verdict"] == "surprising"
    assert c["verdict"] == "surprising" and c["surprising"] == ["replica: cost"]
    assert set(s["count"]) >= {"observed", "predicted_mean", "p_upper", "p_lower", "verdict"}
    assert set(s["cost"]) >= {"observed_s", "recovered_events", "predicted_mean_s", "interval90_s", "p_value",
                              "verdict"}
    assert set(s["excluded"]) >= {"overlapping_s", "quiet_s"}
    json.dumps(c)


def test_end_to_end_unrecovered_events_are_counted_and_the_recovered_one_compared_apart():
    # the first kill recovers (2 s of failures); the other three fail until the next injection / the run's end
    recs = soak_records([(50, 52), (150, 250), (250, 350), (350, 450)])
    c = ck.check(claim([2.0] * 20, n=20, u=0), recs, soak_schedule())  # q ~ Beta(0.5, 20.5)
    s = c["scopes"][0]
    assert (s["recovered"], s["unrecovered"]) == (1, 3)
    assert s["count"]["p_upper"] < 0.01 and s["count"]["verdict"] == "surprising"
    assert s["cost"]["recovered_events"] == 1 and s["cost"]["observed_s"] == pytest.approx(2.0)
    assert s["excluded"]["quiet_s"] > 0  # the failures after the 40 s windows: quiet, not compared
    assert "replica: count" in c["surprising"]


def test_an_unjudged_event_is_left_out_and_said():
    recs = soak_records([(t, t + 2) for t in REPLICA_AT])
    faults = analysis.analyse(recs)["faults"]
    faults[1]["service"]["recovered"] = None
    faults[1]["unmeasurable"]["service.recovered"] = "too few requests"
    c = ck.check(claim([0.2, 0.2]), recs, soak_schedule(), faults)
    s = c["scopes"][0]
    assert s["unjudged"] == [{"fault_id": "r150", "why": "too few requests"}]
    assert (s["recovered"], s["unrecovered"], s["count"]["of"]) == (3, 0, 3)
    assert s["cost"]["recovered_events"] == 3 and s["cost"]["observed_s"] == pytest.approx(6.0)


def test_no_claim_compares_nothing_and_says_why():
    c = ck.check({}, soak_records([(50, 52)]), soak_schedule())
    assert c["verdict"] is None and c["unmeasurable"]["verdict"] == "no claim to compare with"
    assert c["scopes"][0]["count"] is None and c["scopes"][0]["unmeasurable"]["count"] == "no claim to compare with"


# ---------------------------------------------------------------- a soak's events as a claim's trials


def write_soak(d, recs, sched):
    d.mkdir()
    with open(d / "records.ndjson", "w") as f:
        f.write(json.dumps({"kind": "run", **recs.header, "soak": {"schedule": sched.to_dict()}}) + "\n")
        for r in recs.requests:
            f.write(json.dumps({**vars(r), "kind": "request"}) + "\n")
        for m in recs.marks:
            f.write(json.dumps(vars(m)) + "\n")
        f.write(json.dumps({"kind": "end", **recs.footer}) + "\n")
    summary = analysis.analyse(rec.read(d / "records.ndjson"))
    (d / "summary.json").write_text(json.dumps(summary, default=str))


def test_soak_events_counts_each_scope_from_a_soak_run_dir(tmp_path):
    recs = soak_records([(50, 52), (150, 153), (250, 350), (350, 450)])
    write_soak(tmp_path / "soak", recs, soak_schedule())
    got = ck.soak_events(tmp_path / "soak", "service")
    assert got == {"replica": {"recovered": 2, "unrecovered": 2, "unjudged": 0, "values": [2.0, 3.0],
                               "from": str(tmp_path / "soak")}}
    aff = ck.soak_events(tmp_path / "soak", "affected")["replica"]
    assert (aff["recovered"], aff["unrecovered"], aff["values"]) == (2, 2, [])


def test_a_bad_soak_dir_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "records.ndjson").write_text(json.dumps({"kind": "run", "run_id": "x"}) + "\n")
    for d, needle in ((tmp_path / "nope", "no such directory"), (tmp_path / "empty", "not a run directory"),
                      (plain, "not a soak run")):
        with pytest.raises(UsageError) as e:
            ck.soak_events(d, "service")
        assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_soaks_quiet_requests_are_evidence_of_the_background(tmp_path):
    """The requests never in flight while a window was open (before the first injection, between windows) are
    the background's evidence for claim --with-soak: a failure between windows counts, one inside a window does
    not, nor one sent just before an injection and broken by it (the real soak of 2026-12-06 had 9 such)."""
    recs = soak_records([(49.7, 52), (440, 441)])  # failed inside the first kill's window or in flight at it; 10 later
    for r in recs.requests:
        r.e2e_s = 0.5  # each request lasts 0.5 s: those sent in [49.5, 50) are in flight at the kill at 50 s
    sched = soak_schedule()
    wins = fig.windows(recs, sched)
    inside = sum(1 for r in recs.requests
                 if any(r.sent_ns <= w["end_ns"] and r.sent_ns + int(0.5e9) >= w["start_ns"] for w in wins))
    assert inside > sum(1 for r in recs.requests if any(w["start_ns"] <= r.sent_ns <= w["end_ns"] for w in wins))
    assert 0 < inside < len(recs.requests) and all(w["end_ns"] < rec_ns(440) for w in wins)
    got = ck.quiet_requests(recs, sched)
    assert got == {"requests": len(recs.requests) - inside, "failed": 10, "slo_missed": 10}
    write_soak(tmp_path / "soak", recs, sched)
    assert ck.soak_quiet(tmp_path / "soak") == got


def rec_ns(t):
    from tests.unit.test_soak_figures import at

    return at(t)


def test_a_recovered_event_that_met_another_faults_window_is_left_out_of_the_cost_part():
    """An overlap's seconds cannot be split between its events: comparing an overlapped event with only its
    stretches alone biased the observed sum low (the real soak of 2026-12-06 read 'surprising' for it). The
    compared events are those measured whole and alone, and the note says how many were left out."""
    rs = load(450, fails=[(50, 55), (150, 155), (160, 165), (250, 255)])  # 5 s each
    marks = [m for t in (50, 150, 250) for m in inject(t, f"r{t}", "replica")]
    marks += inject(160, "n160", "node", heal_t=170)  # its window meets the kill at 150's
    sched = schedule([Planned(0, 50.0, "replica", "replica-kill", 80.0, 90.0),
                      Planned(1, 150.0, "replica", "replica-kill", 180.0, 190.0),
                      Planned(2, 160.0, "node", "worker-node-kill", 170.0, 210.0),
                      Planned(3, 250.0, "replica", "replica-kill", 280.0, 290.0)])
    c = ck.check(claim([5.0, 5.0, 5.0]), records(rs, marks, 450), sched)
    s = next(x for x in c["scopes"] if x["scope"] == "replica")
    assert s["recovered"] == 3 and s["cost"]["recovered_events"] == 2
    assert s["cost"]["observed_s"] == pytest.approx(10.0)  # the two alone, 5 s each
    assert "1 of the 3 recovered events met another fault's window" in s["cost"]["note"]
    assert s["cost"]["verdict"] == "consistent"


def test_two_windows_of_one_scope_that_meet_are_not_told_apart():
    """Two kills 20 s apart, each window 40 s: the scope's stretches join into one that neither window holds whole.
    Their 10 s of failures were given to neither (each read 0 s, 'told apart'): the check compared 0 s against the
    claim and the soak's events went into a claim --with-soak as two costs of 0."""
    rs = load(300, fails=[(50, 55), (70, 75)])
    marks = inject(50, "r50", "replica") + inject(70, "r70", "replica")
    planned = [Planned(0, 50.0, "replica", "replica-kill", 80.0, 90.0),
               Planned(1, 70.0, "replica", "replica-kill", 100.0, 110.0)]
    sched = schedule(planned)
    recs = records(rs, marks, 300)
    evs = ck.observed_events(recs, sched)["scopes"]["replica"]["events"]
    assert [e["told_apart"] for e in evs] == [False, False]
    s = ck.check(claim([5.0, 5.0, 5.0]), recs, sched)["scopes"][0]
    assert s["cost"] is None and "no cost measured whole and alone" in s["unmeasurable"]["cost"]
    # a third kill alone, later, is told apart and carries its own 5 s
    rs = load(300, fails=[(50, 55), (70, 75), (200, 205)])
    marks += inject(200, "r200", "replica")
    sched = schedule(planned + [Planned(2, 200.0, "replica", "replica-kill", 230.0, 240.0)])
    s = ck.check(claim([5.0, 5.0, 5.0]), records(rs, marks, 300), sched)["scopes"][0]
    assert s["cost"]["recovered_events"] == 1 and s["cost"]["observed_s"] == pytest.approx(5.0)
