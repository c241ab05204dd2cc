"""Interval computations against known values, and the aggregation of synthetic trials."""

import random
import statistics

import pytest

from chaos.base import stats


@pytest.mark.parametrize("k,n,lo,hi", [
    # Newcombe (1998), Stat. Med. 17:857, table I, method 3 (Wilson score, no continuity correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_published_values(k, n, lo, hi):
    got = stats.wilson(k, n)
    assert got[0] == pytest.approx(lo, abs=6e-5) and got[1] == pytest.approx(hi, abs=6e-5)


def test_wilson_edges():
    assert stats.wilson(0, 0) is None
    lo, hi = stats.wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)


def test_percentile_is_nearest_rank_always_a_value_seen():
    assert stats.percentile([], 0.5) is None
    assert stats.median([1, 2, 3, 4]) == 2  # the lower middle value, not 2.5 (interpolation)
    assert stats.p95(list(range(1, 21))) == 19  # the 19th of 20, not 19.05
    assert stats.percentile([3, 1, 2], 0.5) == 2 and stats.percentile([10.0], 0.95) == 10.0
    assert stats.percentile(list(range(1, 101)), 0.95) == 95
    assert stats.percentile(list(range(1, 101)), 0.07) == 7  # 0.07 * 100 is 7.000000000000001 in floats
    assert stats.percentile([5, 9], 0.0) == 5 and stats.percentile([5, 9], 1.0) == 9


def test_every_figure_takes_its_percentiles_from_the_one_function():
    """Per-request ITL p95 (harness), run figures (analysis), the sampling resolution (planes) and the
    statistics over trials agree: the median gap of 4 samples 1, 2, 3 and 4 s apart is 2 s everywhere."""
    from chaos import analysis
    from chaos.analysis import planes
    from chaos.recording import records as rec
    from chaos.load import harness

    assert analysis.percentile is stats.percentile and harness.percentile is stats.percentile
    t = [0, 1, 3, 6, 10]
    smp = [rec.Sample(t_ns=x * 1_000_000_000, took_s=0.0, gcs_ok=True, gcs_latency_s=None, controller_ok=True,
                      app_status="RUNNING", replicas=None, nodes_alive=None) for x in t]
    assert planes.resolution(smp) == stats.median([1, 2, 3, 4]) == 2.0
    assert stats.describe([1.0, 2.0, 3.0, 4.0], missing=0)["median"] == 2.0


def test_bootstrap_of_constant_values_is_a_point_and_seeded():
    assert stats.bootstrap_ci([3.0] * 8, stats.median) == (3.0, 3.0)
    values = [random.Random(1).gauss(0, 1) for _ in range(50)]
    assert stats.bootstrap_ci(values, stats.median, seed=4) == stats.bootstrap_ci(values, stats.median, seed=4)


def test_bootstrap_median_interval_has_the_asymptotic_width():
    # median of N(10, 2): standard error ~ 1.2533 * 2 / sqrt(n); the 95% interval ~ +-1.96 SE
    rng = random.Random(11)
    values = [rng.gauss(10.0, 2.0) for _ in range(400)]
    lo, hi = stats.bootstrap_ci(values, stats.median, resamples=3000, seed=2)
    expected = 2 * 1.96 * 1.2533 * 2.0 / 400 ** 0.5  # 0.491
    assert lo < statistics.median(values) < hi
    assert 0.6 * expected < hi - lo < 1.5 * expected
    assert lo < 10.0 < hi


def _fault(detect, first, steady, failed, window, recovered=True, scope="node", unmeasurable=None):
    pop = {"time_to_impact_s": detect, "time_to_detect_s": detect, "time_to_first_success_s": first,
           "time_to_steady_state_s": steady, "disrupted": detect is not None, "recovered": recovered,
           "failed_total": failed, "requests": window}
    return {"scope": scope, "affected": pop, "service": dict(pop, requests=window * 3),
            "unmeasurable": unmeasurable or {}}


def _summary(detect, first, steady, failed, window, met=True, recovered=True):
    return {"faults": [_fault(detect, first, steady, failed, window, recovered)], "bounds": {"all_met": met}}


def test_trials_aggregate_known_values_and_flag_small_n():
    trials = [_summary(0.1 * i, 0.2 * i, 1.0 * i, i, 100) for i in range(1, 6)]
    agg = stats.trials(trials)
    steady = agg["figures"]["time_to_steady_state_s"]
    assert steady["n"] == 5 and steady["median"] == 3.0 and steady["p95"] == 5.0  # nearest rank: the 5th of 5
    lo, hi = steady["median_ci95"]
    assert 1.0 <= lo <= 3.0 <= hi <= 5.0
    assert steady["p95_ci95"] is None  # 5 trials cannot support an interval on a p95
    assert agg["failed"]["failed"] == 15 and agg["failed"]["requests"] == 500
    assert agg["failed"]["wilson95"] == pytest.approx(stats.wilson(15, 500))
    assert any("p95 needs at least 20" in f for f in steady["flags"])
    assert not any("median" in f for f in steady["flags"])  # 5 trials are enough for the median's interval
    assert agg["bounds_met"]["trials"] == 5
    # the service population uses its own denominator
    assert stats.trials(trials, population="service")["failed"]["requests"] == 1500


def test_small_samples_get_no_intervals():
    agg = stats.trials([_summary(0.1, 0.2, 1.0 + i, 1, 10) for i in range(3)])
    assert agg["figures"]["time_to_steady_state_s"]["median_ci95"] is None
    assert agg["figures"]["time_to_steady_state_s"]["median"] == 2.0


def test_a_trial_that_never_recovers_is_counted_not_dropped():
    trials = [_summary(0.1, 0.2, 3.0, 2, 50), _summary(0.1, 0.3, None, 40, 50, met=False, recovered=False)]
    agg = stats.trials(trials)
    steady = agg["figures"]["time_to_steady_state_s"]
    assert steady["n"] == 1 and steady["missing"] == 1
    assert any("never reached" in f for f in steady["flags"])
    assert agg["bounds_met"] == {"trials": 1, "of": 2, "wilson95": stats.wilson(1, 2)}


def test_unmeasurable_is_neither_a_value_nor_never():
    f = _fault(0.1, 0.2, None, 1, 10, recovered=None,
               unmeasurable={"affected.time_to_steady_state_s": "insufficient evidence"})
    agg = stats.trials([{"faults": [f], "bounds": {"all_met": False}}])
    steady = agg["figures"]["time_to_steady_state_s"]
    assert steady["n"] == 0 and steady["missing"] == 0 and steady["unmeasurable"] == 1


def test_undisturbed_trials_have_no_missing_detection():
    agg = stats.trials([_summary(None, None, 0.0, 0, 40) for _ in range(3)])
    assert agg["figures"]["time_to_detect_s"]["missing"] == 0
    assert agg["figures"]["time_to_detect_s"]["n"] == 0
    assert agg["figures"]["time_to_steady_state_s"]["median"] == 0.0


def test_two_fault_trials_give_positions_and_the_incident_is_the_last_fault():
    # head-outage-second-fault: the head's window is cut (never recovered in it), the replica's is not
    runs = [{"faults": [dict(_fault(0.5, None, None, 3, 20, recovered=False, scope="head"), window_cut_by="f2"),
                        _fault(0.1, 0.2, 2.0 + i, 4, 200, scope="replica")], "bounds": {"all_met": True}}
            for i in range(5)]
    agg = stats.trials(runs)
    assert [p["scope"] for p in agg["positions"]] == ["head", "replica"]
    assert agg["incident"]["scope"] == "replica"
    assert agg["figures"]["time_to_steady_state_s"]["median"] == 4.0  # the replica's, not the cut head's
    assert agg["figures"]["time_to_steady_state_s"]["missing"] == 0
    # the head's window was cut by the replica kill: not "never recovered", not judged
    assert agg["positions"][0]["figures"]["time_to_steady_state_s"]["missing"] == 0
    assert agg["positions"][0]["window_cut"] == 5 and agg["incident"]["window_cut"] == 0
    assert agg["failed"] == {"failed": 20, "requests": 1000, "fraction": 0.02, "wilson95": stats.wilson(20, 1000)}
