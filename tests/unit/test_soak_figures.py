"""The soak's figures (chaos/soak/figures.py) on synthetic records whose answers are known: a constant 10 req/s
load, faults failing known numbers of requests; and the prediction on known predictive distributions."""

import json

import pytest

from chaos.recording import records as rec
from chaos.base.errors import UsageError
from chaos.soak import check as soak_check, figures as fig
from chaos.soak.schedule import Planned, Schedule, SoakFault

NS = 1_000_000_000
T0 = 1_700_000_000 * NS  # run start

REPLICA = SoakFault("replica", "replica-kill", 30.0, "occupancy", 30.0, 10.0, ("zone-a",))
NODE = SoakFault("node", "worker-node-kill", 20.0, "heal", 30.0, 10.0, ("zone-b",))


def at(t):
    return T0 + int(round(t * NS))


def req(i, t, ok=True, e2e=0.05):
    return rec.RequestRecord(id=i, target="lb", url="http://127.0.0.1:1", zone=None, route="/v1/chat/completions",
                             phase="measure", planned_ns=at(t), sent_ns=at(t), sent_offset_s=t, ok=ok,
                             failure=None if ok else rec.CONNECT_REFUSED, ttft_s=0.01 if ok else None, e2e_s=e2e)


def load(end, fails=(), every_tenth=False):
    """10 req/s from 0 to ``end``; requests sent in any [a, b) of ``fails`` fail (and every tenth, if asked)."""
    out = []
    for k in range(int(end * 10)):
        t = round(k / 10, 4)
        bad = any(a <= t < b for a, b in fails) or (every_tenth and k % 10 == 0)
        out.append(req(k, t, ok=not bad))
    return out


def mark(event, t, fid, scope):
    return rec.FaultMark(event=event, fault_id=fid, scope=scope, target="x", t_ns=at(t))


def inject(t, fid, scope, heal_t=None):
    out = [mark(rec.INJECT_START, t, fid, scope), mark(rec.INJECT_END, t, fid, scope)]
    if heal_t is not None:
        out += [mark(rec.HEAL_START, heal_t, fid, scope), mark(rec.HEAL_END, heal_t, fid, scope)]
    return out


def records(reqs, marks, end_t):
    return rec.RunRecords(header={"run_id": "soak", "load": {"mode": "open"}}, requests=reqs, marks=marks,
                          footer={"stopped_ns": at(end_t)})


def schedule(planned=(), overlaps=()):
    return Schedule(0, 1000.0, 200.0, 30, {"replica": 0.001, "node": 0.0001}, {"replica": REPLICA, "node": NODE},
                    list(planned), [], list(overlaps), 200.0)


# ---------------------------------------------------------------- observed lost service-seconds

def test_two_faults_apart_total_and_per_scope():
    rs = load(200, fails=[(50, 52), (100, 105)])  # 20 and 50 failed requests at 10 req/s: 2 s and 5 s
    marks = inject(50, "r1", "replica") + inject(100, "n1", "node", heal_t=120)
    got = fig.observed_lost_service_s(records(rs, marks, 200), schedule())
    assert got["total"] == pytest.approx(7.0)
    assert got["per_scope"] == pytest.approx({"replica": 2.0, "node": 5.0})
    assert got["overlapping"] == {"value_s": 0.0, "stretches": []}
    assert got["quiet"] == pytest.approx(0.0)
    # windows: the replica kill held for its occupancy (30 s) + settle, the node to its heal's end + settle
    assert got["windows"] == [{"fault_id": "r1", "scope": "replica", "from_s": 0.0, "to_s": 40.0},
                              {"fault_id": "n1", "scope": "node", "from_s": 50.0, "to_s": 80.0}]


def test_the_baseline_is_taken_off_as_a_rate():
    rs = load(200, fails=[(50, 52)], every_tenth=True)  # 10 % fail all along; everything in [50, 52)
    got = fig.observed_lost_service_s(records(rs, inject(50, "r1", "replica"), 200), schedule())
    assert got["base_fraction"] == pytest.approx(0.1)
    assert got["total"] == pytest.approx(2 * 0.9)  # (1 - 0.1) x 2 s; elsewhere 0.1 - 0.1
    assert got["per_scope"]["replica"] == pytest.approx(1.8) and got["quiet"] == pytest.approx(0.0)


def test_overlapping_stretches_are_kept_apart():
    # replica at 50 (its window to 90), node at 70 healed at 90 (its window to 100): both from 70 to 90
    rs = load(200, fails=[(55, 57), (75, 78), (92, 93)])
    marks = inject(50, "r1", "replica") + inject(70, "n1", "node", heal_t=90)
    got = fig.observed_lost_service_s(records(rs, marks, 200), schedule())
    assert got["total"] == pytest.approx(6.0)
    assert got["per_scope"] == pytest.approx({"replica": 2.0, "node": 1.0})
    assert got["overlapping"]["value_s"] == pytest.approx(3.0)
    assert got["overlapping"]["stretches"] == [{"scopes": ["node", "replica"], "from_s": 20.0, "to_s": 40.0,
                                                "lost_s": pytest.approx(3.0)}]


def test_a_fault_that_should_heal_and_did_not_holds_to_the_run_end():
    rs = load(200, fails=[(150, 151)])
    got = fig.observed_lost_service_s(records(rs, inject(100, "n1", "node"), 200), schedule())
    assert got["windows"][0]["to_s"] == 100.0 and got["per_scope"] == pytest.approx({"node": 1.0})


def test_unmeasurable_is_null_with_why():
    got = fig.observed_lost_service_s(records(load(100), [], 100), schedule())
    assert got["total"] is None and got["unmeasurable"]["total"] == "no fault was injected"
    late = [r for r in load(100) if r.sent_ns >= at(50)]
    got = fig.observed_lost_service_s(records(late, inject(50, "r1", "replica"), 100), schedule())
    assert got["total"] is None and "no baseline" in got["unmeasurable"]["total"]


# ---------------------------------------------------------------- the prediction

def doc(values, of=None, lower=(), rate=None, runs=None):
    entry = {"lost_service_s": {"values": list(values), "lower_bound": [{"run": r, "why": "never steady"}
                                                                      for r in lower]},
             "unrecovered": {"runs": len(lower), "of": len(values) if of is None else of}}
    d = {"suite_dir": "runs/suite", "population": "service", "scopes": {"replica": entry},
         "rates": {"scopes": {"replica": rate or {"kind": "point", "events": 4.0, "unrecovered_cost_s": 1.0}}}}
    if runs is not None:
        d["runs"] = runs
    return d


def test_the_prediction_is_for_display_its_percentile_information_only():
    # one replica event per period, its costs 1 s (a DP posterior: unseen costs drawn too), Beta(0.5, 3.5)
    d = doc([1.0, 1.0, 1.0])
    p = fig.prediction(d, {"replica": 5}, 600, periods=2000, seed=0, observed_s=5.0)
    assert set(p) == {"mean_s", "interval_90_s", "observed_percentile", "from"}  # no inside_90: no verdict here
    assert p["interval_90_s"][0] <= 5.0 <= p["interval_90_s"][1] and 0 < p["observed_percentile"] < 100
    assert p["from"]["unrecovered_cost_s"] == {"replica": 1.0}  # the rate's, when the claim floored none


def test_the_prediction_uses_the_claims_floored_unrecovered_cost():
    d = doc([1.0, 1.0])
    d["scopes"]["replica"]["unrecovered"]["cost_s"] = 250.0  # the claim's floor, above its error budget
    p = fig.prediction(d, {"replica": 1}, 600, periods=500, seed=0)
    assert p["from"]["unrecovered_cost_s"] == {"replica": 250.0}
    p = fig.prediction(d, {"replica": 1}, 100, periods=500, seed=0)
    assert p["from"]["unrecovered_cost_s"] == {"replica": 100}  # at most the soak's duration


def test_an_unrecovered_event_costs_at_most_the_soaks_duration():
    runs = [{"experiment": "replica-kill", "trial": 1, "pooled": True, "counted": True, "scopes": ["replica"],
             "lost_service_s": 500.0, "lower_bound": "never steady"}]
    d = doc([500.0], lower=["replica-kill/trial-1"], rate={"events": 4.0, "unrecovered_cost_s": 3600.0}, runs=runs)
    p = fig.prediction(d, {"replica": 2}, 600, periods=1000, seed=0, observed_s=10.0)
    assert p["from"]["unrecovered_cost_s"] == {"replica": 600}
    assert p["mean_s"] == pytest.approx(1200.0)  # no recovered run: every event unrecovered, at 600 s
    m = fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], runs, 600)
    assert (m.values, m.n, m.u, m.unrecovered_cost_s) == ((), 1, 1, 600)
    with pytest.raises(UsageError, match="cannot be told"):
        fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], None)


def run(experiment, trial, cost, lower=None, scope="replica"):
    return {"experiment": experiment, "trial": trial, "pooled": True, "counted": True, "scopes": [scope],
            "lost_service_s": cost, "lower_bound": lower}


def test_lower_bound_values_are_dropped_by_the_runs():
    runs = [run("replica-kill", 1, 2.0), run("replica-kill", 2, 50.0, "never steady"), run("replica-kill", 3, 3.0)]
    d = doc([2.0, 50.0, 3.0], lower=["replica-kill/trial-2"], runs=runs)
    m = fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], runs)
    assert (m.values, m.n, m.u, m.events) == ((2.0, 3.0), 3, 1, 4.0)


def test_the_soaks_own_experiments_costs_and_the_claims_prior():
    """Only the soak's experiment's recovered costs (its outage length), when the claim has any; every counted
    run of the scope still a trial of its unrecovered share; the prior as the claim states it."""
    runs = [run("replica-kill", 1, 2.0), run("replica-kill-long", 1, 40.0), run("replica-kill-long", 2, 90.0, "x")]
    d = doc([2.0, 40.0, 90.0], lower=["replica-kill-long/trial-2"], runs=runs)
    d["scopes"]["replica"]["unrecovered"]["prior"] = {"a": 1.5, "b": 9.5, "source": "fleet"}
    e, r = d["scopes"]["replica"], d["rates"]["scopes"]["replica"]
    m = fig.scope_model("replica", e, r, runs, experiment="replica-kill")
    assert (m.values, m.n, m.u, m.prior.a, m.prior.b) == ((2.0,), 3, 1, 1.5, 9.5)
    assert fig.scope_model("replica", e, r, runs, experiment="other").values == (2.0, 40.0)
    assert fig.scope_model("replica", e, r, runs).prior.a == 1.5


def test_scopes_the_claim_lacks_and_overlaps_are_said():
    ov = [{"faults": [0, 1], "scopes": ["replica", "node"], "from_s": 10.0, "to_s": 40.0}]
    p = fig.prediction(doc([1.0]), {"replica": 2, "node": 1}, 600, periods=500, seed=0, observed_s=3.0, overlaps=ov)
    assert p["from"]["left_out"] == {"node": "no rate in the claim's RATES"}
    assert p["observed_percentile"] is None and "node" in p["from"]["unmeasurable"]
    assert p["from"]["not_modelled"] == ov and p["mean_s"] is not None


# ---------------------------------------------------------------- the soak object

def test_the_soak_summary():
    rs = load(200, fails=[(55, 57), (75, 78), (92, 93)])
    marks = inject(50, "r1", "replica") + inject(70, "n1", "node", heal_t=90)
    planned = [Planned(0, 50.0, "replica", "replica-kill", 80.0, 90.0), Planned(1, 70.0, "node", "worker-node-kill",
                                                                               90.0, 100.0)]
    ov = [{"faults": [0, 1], "scopes": ["replica", "node"], "experiments": ["replica-kill", "worker-node-kill"],
           "from_s": 70.0, "to_s": 90.0}]
    d = doc([1.0, 1.0])
    d["scopes"]["node"] = {"lost_service_s": {"values": [5.0], "lower_bound": []}, "unrecovered": {"runs": 0, "of": 1}}
    d["rates"]["scopes"]["node"] = {"events": 0.34, "unrecovered_cost_s": 5.0}
    s = soak_check.soak_summary(schedule(planned, ov), records(rs, marks, 200), d, periods=1000, seed=0)
    assert set(s) == {"faults_injected", "faults_skipped", "overlaps", "observed_lost_service_s", "prediction", "check"}
    assert [f["scope"] for f in s["faults_injected"]] == ["replica", "node"] and s["faults_skipped"] == []
    assert s["observed_lost_service_s"]["total"] == pytest.approx(6.0)
    assert s["prediction"]["mean_s"] > 0 and "inside_90" not in s["prediction"]
    c = s["check"]
    assert [x["scope"] for x in c["scopes"]] == ["node", "replica"] and c["verdict"] in ("consistent", "surprising")
    assert c["excluded"]["overlapping_s"] == pytest.approx(3.0)
    assert s["prediction"]["from"]["not_modelled"] == ov
    json.dumps(s)


def test_the_closing_rollbacks_heal_marks_do_not_stretch_an_occupancy_window():
    """The soak heals every fault at its end, replica kills too: their windows stay their occupancy bound."""
    rs = load(200, fails=[(50, 52)])
    marks = inject(50, "r1", "replica", heal_t=190) + inject(100, "n1", "node", heal_t=120)
    got = fig.observed_lost_service_s(records(rs, marks, 200), schedule())
    assert got["windows"][0] == {"fault_id": "r1", "scope": "replica", "from_s": 0.0, "to_s": 40.0}
    assert got["overlapping"] == {"value_s": 0.0, "stretches": []}
