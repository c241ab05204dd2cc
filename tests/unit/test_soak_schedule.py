"""The soak's schedule (chaos/soak/schedule.py): seeded Poisson instants, the rules for what one cluster cannot run
at once, the input checks, and what is read from experiment files."""

import json
from pathlib import Path

import numpy as np
import pytest

from chaos.claim.rates import parse_rates
from chaos.base.errors import UsageError
from chaos.soak import schedule as sch
from chaos.soak.schedule import SoakFault

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
DAY = 86_400


def rates(**scopes):
    return parse_rates({"period_days": 30, "scopes": {k: {"events": v} for k, v in scopes.items()}}, "RATES")


REPLICA = SoakFault("replica", "replica-kill", 30.0, "occupancy", 30.0, 10.0, ("zone-a",))
NODE = SoakFault("node", "worker-node-kill", 20.0, "heal", 30.0, 10.0, ("zone-b",))
ZONE_A = SoakFault("zone", "zone-loss", 20.0, "heal", 40.0, 10.0, ("zone-a",))
ZONE_B = SoakFault("zone", "zone-loss-b", 20.0, "heal", 40.0, 10.0, ("zone-b",))
HEAD = SoakFault("head", "head-kill-gcs-ft", 10.0, "heal", 40.0, 10.0)
REDIS = SoakFault("redis", "redis-loss", 10.0, "heal", 30.0, 10.0)
FAULTS = [REPLICA, NODE, ZONE_A, HEAD]
RATES = rates(replica=4, node=0.34, zone=1, head=0.5)
K = 2000.0  # 30 days' 5.84 events in ~2.2 h: replica every ~324 s


def by(*faults):
    return {f.scope: f for f in faults}


# ---------------------------------------------------------------- the draw

def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    a = sch.draw(RATES, FAULTS, K, 3600, seed=1)
    b = sch.draw(RATES, FAULTS, K, 3600, seed=1)
    c = sch.draw(RATES, FAULTS, K, 3600, seed=2)
    assert a.to_dict() == b.to_dict()
    assert [p.instant_s for p in a.injected] != [p.instant_s for p in c.injected]
    drawn = sorted(a.injected + a.skipped, key=lambda p: p.index)
    assert [p.instant_s for p in drawn] == sorted(p.instant_s for p in drawn)
    assert all(0 <= p.instant_s < 3600 for p in drawn)
    assert all(p.heal_at_s == pytest.approx(p.instant_s + a.faults[p.scope].heal_s) for p in drawn)


def test_adding_a_scope_does_not_move_another_scopes_instants():
    one = sch.draw(rates(replica=4), [REPLICA], K, 3600, seed=5)
    two = sch.draw(rates(replica=4, redis=0.25), [REPLICA, REDIS], K, 3600, seed=5)
    mine = lambda s: [p.instant_s for p in sorted(s.injected + s.skipped, key=lambda p: p.index)  # noqa: E731
                      if p.scope == "replica"]
    assert mine(one) == mine(two) and mine(one)


def test_poisson_counts_average_rate_times_speedup_times_duration():
    fast = SoakFault("replica", "replica-kill", 10.0, "occupancy", 30.0, 5.0, ("zone-a",))
    k = DAY / 60  # 1 event a day x 1440: one a minute
    counts = [len(s.injected) + len(s.skipped)
              for s in (sch.draw(rates(replica=30), [fast], k, 3600, seed) for seed in range(300))]
    assert np.mean(counts) == pytest.approx(60, abs=1.5)  # 3 standard errors of the mean: sqrt(60 / 300)
    assert np.var(counts) == pytest.approx(60, rel=0.3)  # Poisson: the variance is the mean


def test_end_runs_on_to_the_last_heal_plus_its_recovery_window():
    s = sch.draw(RATES, FAULTS, K, 3600, seed=3)
    last = max(p.heal_at_s + s.faults[p.scope].recovery_window_s for p in s.injected)
    assert s.end_s == pytest.approx(max(3600, last))


def test_schedule_round_trips_through_json():
    s = sch.draw(RATES, FAULTS, K, 3600, seed=4)
    d = json.loads(json.dumps(s.to_dict()))
    assert sch.Schedule.from_dict(d).to_dict() == s.to_dict()


# ---------------------------------------------------------------- the rules

def test_a_second_fault_of_a_scope_before_the_first_healed_is_skipped_with_why():
    inj, skipped, overlaps = sch.apply_rules([(0.0, "node"), (25.0, "node"), (31.0, "node")], by(NODE))
    assert [p.instant_s for p in inj] == [0.0, 31.0]  # the first holds to 20 s heal + 10 s settle
    assert len(skipped) == 1 and skipped[0].instant_s == 25.0
    assert "node fault #0" in skipped[0].why and "until 30.0 s" in skipped[0].why
    assert overlaps == []


def test_a_skipped_fault_holds_nothing():
    inj, skipped, _ = sch.apply_rules([(0.0, "node"), (25.0, "node"), (32.0, "node"), (45.0, "node")], by(NODE))
    assert [p.instant_s for p in inj] == [0.0, 32.0] and [p.instant_s for p in skipped] == [25.0, 45.0]
    assert "#2" in skipped[1].why  # held by the injected fault at 32 s, not the skipped one at 25 s


def test_a_conflicting_pair_is_skipped():
    inj, skipped, overlaps = sch.apply_rules([(0.0, "node"), (10.0, "zone")], by(NODE, ZONE_B))
    assert [p.scope for p in inj] == ["node"] and [p.scope for p in skipped] == ["zone"]
    assert "conflicts with node fault #0" in skipped[0].why and "zone-b" in skipped[0].why
    assert overlaps == []
    inj, skipped, _ = sch.apply_rules([(0.0, "head"), (5.0, "replica")], by(HEAD, REPLICA))
    assert [p.scope for p in skipped] == ["replica"] and "control plane" in skipped[0].why
    inj, skipped, _ = sch.apply_rules([(0.0, "head"), (5.0, "redis")], by(HEAD, REDIS))
    assert [p.scope for p in skipped] == ["redis"]


def test_a_non_conflicting_overlap_is_injected_and_recorded():
    inj, skipped, overlaps = sch.apply_rules([(0.0, "replica"), (10.0, "node")], by(REPLICA, NODE))
    assert [p.scope for p in inj] == ["replica", "node"] and skipped == []
    assert overlaps == [{"faults": [0, 1], "scopes": ["replica", "node"],
                         "experiments": ["replica-kill", "worker-node-kill"], "from_s": 10.0, "to_s": 40.0}]
    # not every pair of scopes may overlap: a zone's heal restarts nodes, which register with the GCS
    inj, skipped, overlaps = sch.apply_rules([(0.0, "zone"), (5.0, "head")], by(ZONE_A, HEAD))
    assert [p.scope for p in skipped] == ["head"] and "GCS" in skipped[0].why and overlaps == []


def test_the_conflict_table():
    assert sch.conflict(NODE, ZONE_B) and sch.conflict(REPLICA, ZONE_A)  # the same zone
    assert sch.conflict(NODE, ZONE_A) is None and sch.conflict(REPLICA, NODE) is None  # other zones
    anywhere = SoakFault("replica", "r", 30.0, "occupancy", 30.0, 10.0, ())
    assert "any zone" in sch.conflict(anywhere, NODE)  # a fault naming no zone may hit any
    assert sch.conflict(HEAD, REDIS) and sch.conflict(HEAD, REPLICA)
    upgrade = SoakFault("upgrade", "upgrade", 30.0, "occupancy", 30.0, 10.0)
    assert sch.conflict(upgrade, REPLICA) and sch.conflict(upgrade, NODE) is None
    partition = SoakFault("partition", "zone-partition", 20.0, "heal", 60.0, 10.0, ("zone-c",))
    assert sch.conflict(HEAD, partition) is None
    for pair in list(sch.conflicts()) + list(sch.same_zone()):
        assert len(pair) == 2  # pairs of different scopes; one scope with itself is the first rule


def test_drawn_schedules_obey_the_rules():
    s = sch.draw(RATES, FAULTS, 6000, 3600, seed=7)
    assert s.skipped and all(p.why for p in s.skipped)
    for i, a in enumerate(s.injected):
        for b in s.injected[i + 1:]:
            if b.instant_s < a.until_s:
                assert a.scope != b.scope and sch.conflict(s.faults[a.scope], s.faults[b.scope]) is None
                assert {"faults": [a.index, b.index]}.items() <= next(
                    o for o in s.overlaps if o["faults"] == [a.index, b.index]).items()


# ---------------------------------------------------------------- input checks: one line each

def one_line(fn, *match):
    with pytest.raises(UsageError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg
    for m in match:
        assert m in msg, msg
    return msg


def test_rates_for_a_scope_no_listed_experiment_injects():
    one_line(lambda: sch.draw(rates(replica=4, redis=1), [REPLICA], K, 3600, 0),
             "RATES: scopes.redis: no listed experiment injects this scope", "replica (replica-kill)")


def test_a_speedup_that_brings_a_scopes_faults_closer_than_its_heal():
    # replica: 4 per 30 days x 100000: every ~6.5 s, a replica fault holds 40 s
    one_line(lambda: sch.draw(rates(replica=4), [REPLICA], 100_000, 3600, 0),
             "--speedup 100000: replica faults would arrive every 6.5 s", "at most --speedup 16200")


def test_a_duration_too_short_for_one_fault():
    one_line(lambda: sch.draw(rates(replica=4), [REPLICA], 10, 3600, 0), "faults expected in all", "at least 1")
    one_line(lambda: sch.draw(rates(zone=1), [ZONE_A], 64_800, 50, 0),  # one every 40 s
             "--duration 50: shorter than one zone fault and its recovery window (20 + 40 s, zone-loss)")


def test_bad_numbers_and_two_experiments_of_one_scope():
    one_line(lambda: sch.draw(RATES, FAULTS, 0, 3600, 0), "--speedup")
    one_line(lambda: sch.draw(RATES, FAULTS, K, -1, 0), "--duration")
    one_line(lambda: sch.draw(rates(zone=1), [ZONE_A, ZONE_B], K, 3600, 0), "zone-loss and zone-loss-b both inject")


def test_experiments_whose_loads_or_topologies_differ():
    a = SoakFault("replica", "a", 30.0, load={"rate": 8, "mode": "open"}, setup={"topology": "default"})
    b = SoakFault("node", "b", 20.0, load={"rate": 4, "mode": "open"}, setup={"topology": "default"})
    c = SoakFault("node", "c", 20.0, load={"rate": 8, "mode": "open"}, setup={"topology": "two-regions"})
    one_line(lambda: sch.draw(rates(replica=4, node=1), [a, b], K, 3600, 0), "a and b: load.rate differs (8 vs 4)")
    one_line(lambda: sch.draw(rates(replica=4, node=1), [a, c], K, 3600, 0),
             "a and c: topology differs ('default' vs 'two-regions')")
    one_line(lambda: sch.faults_from_experiments([EXPERIMENTS / "replica-kill.json",
                                                  EXPERIMENTS / "zone-partition.json"]),
             "replica-kill and zone-partition: network differs ('loopback' vs 'netns')")
    one_line(lambda: sch.faults_from_experiments([EXPERIMENTS / "replica-kill.json", EXPERIMENTS / "drain.json"]),
             "app.max_replicas_per_node differs")


# ---------------------------------------------------------------- read from the experiment files

def test_fault_from_experiment_reads_scope_heal_and_windows():
    node = sch.fault_from_experiment(EXPERIMENTS / "worker-node-kill.json")
    assert (node.scope, node.experiment, node.heal_s, node.healed_by, node.zones) == (
        "node", "worker-node-kill", 20.0, "heal", ("zone-b",))
    assert (node.recovery_window_s, node.settle_s) == (30.0, 10.0)
    replica = sch.fault_from_experiment(EXPERIMENTS / "replica-kill.json")
    assert (replica.heal_s, replica.healed_by) == (30.0, "occupancy")  # no heal: held for its recovery window
    assert sch.fault_from_experiment(EXPERIMENTS / "drain.json").heal_s == 30.0  # its deadline, then the outage
    assert sch.fault_from_experiment(EXPERIMENTS / "zone-partition.json").heal_s == 20.0  # duration_s
    assert sch.fault_from_experiment(EXPERIMENTS / "replica-kill.json", app="llm").heal_s == 234.0
    assert sch.fault_from_experiment(EXPERIMENTS / "region-loss.json").zones == ()  # a region: any zone
    faults = sch.faults_from_experiments([EXPERIMENTS / "replica-kill.json", EXPERIMENTS / "worker-node-kill.json",
                                          EXPERIMENTS / "zone-loss.json"])
    assert [f.scope for f in faults] == ["replica", "node", "zone"]
    assert "duration_s" not in faults[0].load  # the soak sets its own


def test_the_engine_faults_of_issue_35_are_known_to_the_soak():
    """engine-error has no heal of its own (Serve replaces the replica: held for its recovery window); engine-slow
    heals at its duration_s; both are replica-level: not with the control plane down, an upgrade, or in the zone
    of another replica-level or domain fault; and the soak calls their Chaos Toolkit actions."""
    from chaos.ctk import actions

    error = sch.fault_from_experiment(EXPERIMENTS / "engine-error.json")
    assert (error.scope, error.heal_s, error.healed_by, error.zones) == ("engine-error", 30.0, "occupancy", ("zone-a",))
    slow = sch.fault_from_experiment(EXPERIMENTS / "engine-slow.json")
    assert (slow.scope, slow.heal_s, slow.healed_by, slow.zones) == ("engine-slow", 20.0, "heal", ("zone-a",))
    for f in (error, slow):
        assert sch.conflict(f, HEAD) and sch.conflict(f, REDIS)
        assert sch.conflict(f, SoakFault("upgrade", "upgrade", 30.0, "occupancy", 30.0, 10.0))
        assert sch.conflict(f, ZONE_A) and sch.conflict(f, REPLICA) and sch.conflict(f, NODE) is None
    assert sch.conflict(error, slow).endswith("(zone-a)")
    assert all(callable(getattr(actions, func)) for func in sch.heal_args())


def test_the_soaks_heal_arguments_are_the_actions_own_defaults():
    """One source (issue 43): the soak restates no default; it reads each action's (its fault function's)."""
    import inspect

    from chaos import scopes
    from chaos.ctk import actions

    known = sch.heal_args()
    assert set(known) == set(scopes.actions())
    for func, args in known.items():
        params = inspect.signature(getattr(actions, func)).parameters
        assert args == {a: params[a].default for a in scopes.actions()[func][0].heal_args if a in params}, func
