"""The claim's predictive statistics (chaos/claim/predict.py, theta.py) against known answers and synthetic worlds
whose truth is known: the compound Poisson tail, the Gamma-Poisson (negative binomial) count of an observed
history, the unrecovered share's Beta prior, a fitted slope moving costs, the coverage of the predictive
intervals. Exact answers are taken at the limit (``limit=True``: the costs seen, no unseen cost drawn) or with
enough trials that the Dirichlet process's new mass is negligible. The verdict's credibility is tested in
test_claim_credible.py. Every simulation is seeded."""

import math

import numpy as np
import pytest

from chaos.claim import decide, predict

M = predict.ScopeModel


def test_every_event_costing_one_second_gives_the_poisson_tail():
    # 2 events a period, each costs 1 s (the unrecovered cost too), a budget of 2.5 s: P(N >= 3), N ~ Poisson(2)
    exact = 1 - math.exp(-2) * (1 + 2 + 2)
    d = predict.simulate([M("replica", (1.0,), 5, 0, 1.0, events=2)], 30, 50_000, seed=3, limit=True)
    pm = predict.p_miss(d.loss, 2.5)
    assert pm["value"] == pytest.approx(exact, abs=4 * pm["stderr"])
    assert predict.p_miss(predict.simulate([M("replica", (1.0,), 5, 0, 1.0, events=2)], 30, 50_000, 3,
                                           limit=True).loss, 2.5) == pm  # seeded


def test_an_observed_history_gives_the_negative_binomial_count():
    # 3 events in 270 days, a 30-day period: the rate's posterior Gamma(3.5, rate 270) and a Poisson count make
    # N ~ NegBin(r = 3.5, p = 270 / 300); each event costs 1 s, so the loss is N
    r, p = 3.5, 270 / 300
    pmf = lambda k: math.exp(math.lgamma(k + r) - math.lgamma(k + 1) - math.lgamma(r)) * p ** r * (1 - p) ** k  # noqa
    m = M("zone", (1.0,), 5, 0, 1.0, count=3, exposure_days=270)
    d = predict.simulate([m], 30, 200_000, seed=1, limit=True)
    assert d.loss.mean() == pytest.approx(r * (1 - p) / p, rel=0.02)  # = (3 + 0.5) / 270 x 30
    assert (d.loss >= 1).mean() == pytest.approx(1 - pmf(0), abs=0.004)
    assert (d.loss >= 2).mean() == pytest.approx(1 - pmf(0) - pmf(1), abs=0.003)
    # the point rate of the same mean has a thinner tail: the history's uncertainty widens it
    point = predict.simulate([M("zone", (1.0,), 5, 0, 1.0, events=r * (1 - p) / p)], 30, 200_000, seed=1,
                             limit=True)
    assert (d.loss >= 2).mean() > (point.loss >= 2).mean()


def test_the_unrecovered_share_is_drawn_from_its_jeffreys_posterior():
    # recovered events cost 0 (the new mass of the cost model ~1 ms), unrecovered ones 1 s: the loss counts
    # unrecovered events; q ~ Beta(0.5 + u, n - u + 0.5)
    for n, u in ((5, 0), (20, 0), (10, 2)):
        d = predict.simulate([M("replica", (0.0,) * (n - u), n, u, 1.0, events=1)], 30, 100_000, seed=2)
        assert d.loss.mean() == pytest.approx((u + 0.5) / (n + 1), rel=0.04)
        assert d.expected["replica"].mean() == pytest.approx((u + 0.5) / (n + 1), rel=0.04)
    # at the optimistic end (limit) the share is its posterior's 5 % quantile: Beta(2.5, 8.5)'s is ~0.0604
    lim = predict.simulate([M("replica", (0.0,) * 8, 10, 2, 1.0, events=1)], 30, 100_000, seed=2, limit=True)
    assert lim.expected["replica"].mean() == pytest.approx(0.0604, abs=0.002)


def test_a_fitted_slope_moves_each_cost_to_the_stated_length():
    # costs measured at 10 s and 20 s outages, b = 0.5 s per s (se 0): at 60 s each costs its value + 0.5 x (60 - d)
    m = M("zone", (2.0, 7.0), 4, 0, 1e9, events=1, outages=(10.0, 20.0), fit=(0.5, 0.0, 2), duration_s=60.0)
    d = predict.simulate([replace_q0(m)], 30, 20_000, seed=4, limit=True)
    assert d.expected["zone"].mean() == pytest.approx(((2 + 25) + (7 + 20)) / 2, rel=1e-4)


def replace_q0(m):
    from dataclasses import replace

    return replace(m, n=10 ** 9)  # q's Beta(0.5, n + 0.5) at ~0: no unrecovered event


def test_no_period_missed_is_an_upper_bound_of_three_over_the_periods():
    pm = predict.p_miss(np.zeros(100_000), 1.0)
    assert pm["value"] == 0 and pm["upper95"] == pytest.approx(3e-5)
    pm = predict.p_miss(np.array([2.0] * 10 + [0.0] * 990), 1.0)
    assert pm["value"] == 0.01 and pm["upper95"] > 0.01 + 1.6 * pm["stderr"]


def test_the_observed_percentile_is_a_mid_rank():
    loss = np.array([0.0, 1.0, 2.0, 3.0])
    assert predict.percentile_of(1.0, loss) == 37.5 and predict.percentile_of(10.0, loss) == 100.0


# ---------------------------------------------------------------- synthetic worlds whose truth is known
LAM, U = 4, 300.0


def world(rng, sigma, q_true, n):
    unrec = rng.random(n) < q_true
    return M("replica", tuple(rng.lognormal(0.0, sigma, int((~unrec).sum()))), n, int(unrec.sum()), U, events=LAM)


@pytest.mark.parametrize("sigma", [0.5, 1.5])
def test_the_predictive_intervals_cover_the_truth_with_five_trials(sigma):
    """Five trials of a world whose events cost lognormal(0, sigma) and, with chance 0.02, U: the 90 %
    interval of the scope's expected loss covers the true one, and the 90 % predictive interval of a period
    covers a fresh period's loss, in at least 85 % of 200 worlds (measured 2026-12-05: 0.89-0.94 and
    0.90-0.95). A bootstrap interval of the mean from five trials covered 59-80 % (issue 31, point 4)."""
    rng = np.random.default_rng(11)
    true_mean = LAM * (0.98 * math.exp(sigma ** 2 / 2) + 0.02 * U)
    cov_e = cov_p = 0
    for r in range(200):
        d = predict.simulate([world(rng, sigma, 0.02, 5)], 30, 4000, seed=r)
        lo, hi = np.quantile(d.expected["replica"], (0.05, 0.95))
        cov_e += lo <= true_mean <= hi
        n = rng.poisson(LAM)
        fresh = np.where(rng.random(n) < 0.02, U, rng.lognormal(0, sigma, n)).sum()
        plo, phi = np.quantile(d.loss, (0.05, 0.95))
        cov_p += plo <= fresh <= phi
    assert cov_e / 200 >= 0.85 and cov_p / 200 >= 0.85, (cov_e, cov_p)


def budget_for(sigma, p_true, seed=2):
    """The budget a true period misses with chance ``p_true`` (lognormal costs, no unrecovered event)."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(LAM, 200_000)
    loss = np.bincount(np.repeat(np.arange(len(n)), n), weights=rng.lognormal(0, sigma, n.sum()), minlength=len(n))
    return float(np.quantile(loss, 1 - p_true))


@pytest.mark.parametrize("sigma, n", [(0.5, 5), (1.5, 5), (1.5, 20)])
def test_a_world_that_misses_twice_the_risk_is_never_called_supported(sigma, n):
    """A world whose periods miss the budget 10 % of the time, claimed at risk 0.05 from n trials: the
    verdict's test (the miss share's upper bound at most the risk) passes in no more than 5 % of 60 worlds
    when an unrecovered event costs the budget (the shipped default, 3600 s, is above a month's 99.9 %
    budget). The Bayesian bootstrap alone (no unrecovered mode) passed it in 38-70 % of worlds (n = 5,
    sigma 0.5-1.5, measured 2026-12-05): the unrecovered mode is what keeps few trials from a claim."""
    budget = budget_for(sigma, 0.10)
    rng = np.random.default_rng(7)
    passed = 0
    for r in range(60):
        vals = tuple(rng.lognormal(0, sigma, n))
        m = M("replica", vals, n, 0, budget * 1.01, events=LAM)
        passed += predict.p_miss(predict.simulate([m], 30, 10_000, seed=r).loss, budget)["upper95"] <= 0.05
    assert passed <= 3, passed


def test_a_world_well_inside_its_budget_is_supported_once_the_trials_show_it():
    """Costs far below the budget: with 5 trials the unrecovered share keeps it insufficient (4 events a
    month); the optimistic end (q at its 5 % quantile) is within the risk, so more trials can help; the search
    finds how many more, and a model with that many more is supported. The rule of three with credibility 0.9
    wants about 1.35 x 4 / 0.05 = 108 clean trials."""
    goal = decide.Goal(30, 0.999, 0.05)
    budget = (1 - goal.target) * goal.period_s
    m = M("replica", (1.0, 2.0, 1.5, 0.5, 3.0), 5, 0, budget * 2, events=LAM)
    assert not decide.judge([m], None, goal, 0)["met"]
    assert decide.judge([m], None, goal, 0, limit=True)["met"]
    need = decide.trials_needed([m], None, goal, 0)
    k = need["extra"]["replica"]
    assert need["found"] and 80 <= k <= 200, need
    assert need["each_costing_s"]["replica"] == 1.5  # the median, not the first trial's cost
    assert decide.judge([m.with_more_trials(k)], None, goal, 0)["value"] >= 0.9
    assert decide.judge([m.with_more_trials(max(0, k - 20))], None, goal, 0)["value"] < 0.9


def test_the_plan_orders_scopes_by_how_much_one_more_trial_narrows_the_expected_loss():
    few = M("replica", (1.0, 2.0), 2, 0, 3600.0, events=4)
    many = M("node", tuple([5.0] * 40), 40, 0, 3600.0, events=0.3)
    rows = decide.plan([many, few], 30, 0, lambda s, k: f"run {s} x{k}")
    assert [r["scope"] for r in rows] == ["replica", "node"]
    assert rows[0]["lowers_by_s"] > rows[1]["lowers_by_s"] >= 0 and rows[0]["command"] == "run replica x1"


def test_a_negative_slope_is_floored_at_0_a_longer_outage_never_costs_less():
    m = M("zone", (3.0, 3.1, 1.0, 1.1), 10 ** 9, 0, 1.0, events=1, outages=(5.0, 5.0, 10.0, 10.0),
          fit=(-0.4, 0.02, 2), duration_s=20.0)
    d = predict.simulate([m], 30, 20_000, seed=4, limit=True)
    assert d.expected["zone"].mean() == pytest.approx((3.0 + 3.1 + 1.0 + 1.1) / 4, rel=0.05)


def test_thousands_of_events_a_period_are_drawn_without_holding_each_event():
    m = M("replica", tuple(float(i) for i in range(20)), 20, 0, 100.0, events=5000)
    d = predict.simulate([m], 30, 20_000, seed=1, limit=True)
    q = float(np.quantile(np.random.default_rng(0).beta(0.5, 20.5, 400_000), 0.05))  # the optimistic share
    assert d.loss.mean() == pytest.approx(5000 * ((1 - q) * 9.5 + q * 100), rel=0.02)


def test_the_miss_shares_bounds_are_never_narrower_than_the_exact_ones():
    # Clopper-Pearson one-sided 95 %: 5 of 100,000 -> 1.0513e-4; 0 of n -> 1 - 0.05 ** (1 / n) ~ 2.996 / n
    assert predict.upper95(5, 100_000) >= 1.0513e-4
    assert predict.upper95(0, 100_000) == pytest.approx(2.9957e-5, rel=1e-3)
    assert predict.upper95(500, 1000) >= 0.526  # exact ~0.526
    assert predict.lower95(5, 100_000) <= 1.97e-5 + 1e-6 and predict.lower95(0, 10) == 0.0


def test_more_trials_like_these_only_raise_the_credibility_common_random_numbers():
    """The trials search compares models that differ by their extra trials: with common random numbers the
    credibility rises with every doubling instead of wandering with the simulation's noise."""
    goal = decide.Goal(30, 0.999, 0.05)
    m = M("replica", tuple(float(x) for x in np.random.default_rng(3).lognormal(0, 1, 30)), 30, 0,
          (1 - goal.target) * goal.period_s + 1, events=2)
    fixed = dict(outer=1000, inner=500, max_outer=1000, max_inner=500)
    vals = [decide.judge([m.with_more_trials(k)], None, goal, 0, **fixed)["value"] for k in (0, 4, 8, 16, 32, 64)]
    assert all(b >= a - 1e-9 for a, b in zip(vals, vals[1:])), vals
    need = decide.trials_needed([m], None, goal, 0)
    assert need["found"] and decide.judge([m.with_more_trials(need["extra"]["replica"])], None, goal, 0,
                                          **fixed)["value"] >= 0.9


def test_the_t_quantile_is_taken_from_the_row_at_or_below():
    from chaos.claim import coverage

    assert coverage.t95(13) == 1.782 and coverage.t95(61) == 1.671 and coverage.t95(500) == 1.658
