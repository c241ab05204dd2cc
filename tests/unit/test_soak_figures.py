"""The soak's figures (chaos/soak/figures.py) on synthetic records whose answers are known: a constant 10 req/s
load, faults failing known numbers of requests; and the prediction on known predictive distributions."""

import json

import pytest

from chaos import records as rec
from chaos.errors import UsageError
from chaos.soak import figures as fig
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


def test_every_event_costing_one_second_predicts_the_fixed_count():
    d = doc([1.0, 1.0, 1.0])
    for observed, pct, inside in ((5.0, 50.0, True), (4.0, 0.0, False), (6.0, 100.0, False)):
        p = fig.prediction(d, {"replica": 5}, 600, periods=2000, seed=0, observed_s=observed)
        assert p["mean_s"] == pytest.approx(5.0) and p["interval_90_s"] == [5.0, 5.0]
        assert (p["observed_percentile"], p["inside_90"]) == (pct, inside)
        assert set(p) == {"mean_s", "interval_90_s", "observed_percentile", "inside_90", "from"}


def test_the_percentile_in_a_known_distribution():
    # one event, costing 0 or 10 with equal Dirichlet weights, unrecovered (cost 10) with q ~ Beta(0.5, 2.5):
    # P(loss < 5) = E[(1 - q) x w0] = 5/6 x 1/2
    d = doc([0.0, 10.0], rate={"events": 1.0, "unrecovered_cost_s": 10.0})
    p = fig.prediction(d, {"replica": 1}, 600, periods=40_000, seed=1, observed_s=5.0)
    assert p["observed_percentile"] == pytest.approx(100 * 5 / 12, abs=1.0)
    assert p["interval_90_s"] == [0.0, 10.0] and p["inside_90"] is True


def test_an_unrecovered_event_costs_at_most_the_soaks_duration():
    runs = [{"experiment": "replica-kill", "trial": 1, "pooled": True, "counted": True, "scopes": ["replica"]}]
    d = doc([500.0], lower=["replica-kill/trial-1"], rate={"events": 4.0, "unrecovered_cost_s": 3600.0}, runs=runs)
    p = fig.prediction(d, {"replica": 2}, 600, periods=1000, seed=0, observed_s=10.0)
    assert p["from"]["unrecovered_cost_s"] == {"replica": 600}
    assert p["mean_s"] == pytest.approx(1200.0)  # no recovered run: every event unrecovered, at 600 s
    m = fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], runs, 600)
    assert (m.values, m.n, m.u, m.unrecovered_cost_s) == ((), 1, 1, 600)
    with pytest.raises(UsageError, match="cannot be told"):
        fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], None)


def test_lower_bound_values_are_dropped_by_the_runs():
    runs = [{"experiment": "replica-kill", "trial": t, "pooled": True, "counted": True, "scopes": ["replica"]}
            for t in (1, 2, 3)]
    d = doc([2.0, 50.0, 3.0], lower=["replica-kill/trial-2"], runs=runs)
    m = fig.scope_model("replica", d["scopes"]["replica"], d["rates"]["scopes"]["replica"], runs)
    assert (m.values, m.n, m.u, m.events) == ((2.0, 3.0), 3, 1, 4.0)


def test_scopes_the_claim_lacks_and_overlaps_are_said():
    ov = [{"faults": [0, 1], "scopes": ["replica", "node"], "from_s": 10.0, "to_s": 40.0}]
    p = fig.prediction(doc([1.0]), {"replica": 2, "node": 1}, 600, periods=500, seed=0, observed_s=3.0, overlaps=ov)
    assert p["from"]["left_out"] == {"node": "no rate in the claim's RATES"}
    assert p["observed_percentile"] is None and p["inside_90"] is None and "node" in p["from"]["unmeasurable"]
    assert p["from"]["not_modelled"] == ov and p["mean_s"] == pytest.approx(2.0)


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
    s = fig.soak_summary(schedule(planned, ov), records(rs, marks, 200), d, periods=1000, seed=0)
    assert set(s) == {"faults_injected", "faults_skipped", "overlaps", "observed_lost_service_s", "prediction"}
    assert [f["scope"] for f in s["faults_injected"]] == ["replica", "node"] and s["faults_skipped"] == []
    assert s["observed_lost_service_s"]["total"] == pytest.approx(6.0)
    assert s["prediction"]["mean_s"] == pytest.approx(6.0)  # 1 replica event at 1 s + 1 node event at 5 s
    assert s["prediction"]["observed_percentile"] == 50.0 and s["prediction"]["inside_90"] is True
    assert s["prediction"]["from"]["not_modelled"] == ov
    json.dumps(s)


def test_the_closing_rollbacks_heal_marks_do_not_stretch_an_occupancy_window():
    """The soak heals every fault at its end, replica kills too: their windows stay their occupancy bound."""
    rs = load(200, fails=[(50, 52)])
    marks = inject(50, "r1", "replica", heal_t=190) + inject(100, "n1", "node", heal_t=120)
    got = fig.observed_lost_service_s(records(rs, marks, 200), schedule())
    assert got["windows"][0] == {"fault_id": "r1", "scope": "replica", "from_s": 0.0, "to_s": 40.0}
    assert got["overlapping"] == {"value_s": 0.0, "stretches": []}
