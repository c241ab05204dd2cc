"""The claim's verdict at its stated credibility (chaos/claim/credible.py, decide.py, unrecovered.py,
cost_model.py, background.py): known answers for each point of issue 42, on seeded synthetic models.

The rule: supported when P(P(miss | theta) <= risk) >= c. With no cost near the budget, P(miss | theta) =
1 - exp(-lam q), so the credibility is P(q <= -ln(1 - risk) / lam) under q's posterior Beta(0.5 + u, 0.5 + n - u):
an exact answer to compare with."""

import math

import numpy as np
import pytest

from chaos.claim import cost_model, credible, decide, unrecovered
from chaos.claim.model import ScopeModel as M
from chaos.claim.scope_entry import FLOOR_MARGIN_S, unrecovered_cost
from chaos.claim.rates import DEFAULT_UNRECOVERED_COST_S, Rate

MONTH = 30
BUDGET = 0.001 * MONTH * 86_400  # 99.9 % of a 30-day month: 2592 s
GOAL = decide.Goal(MONTH, 0.999, 0.05)


def clean(n, events, u=0, cost=1.0, prior=unrecovered.Prior()):
    return M("replica", (cost,) * (n - u), n, u, BUDGET + 1, events=events, prior=prior)


def exact_credibility(n, u, events, risk=0.05, a=0.5, b=0.5):
    """P(q <= -ln(1 - risk) / events), q ~ Beta(a + u, b + n - u), by a large seeded sample."""
    q = np.random.default_rng(99).beta(a + u, b + n - u, 2_000_000)
    return float((q <= -math.log(1 - risk) / events).mean())


def test_the_credibility_is_the_posterior_probability_that_the_miss_chance_is_within_the_risk():
    for n, u, ev in ((20, 0, 2), (60, 1, 1), (150, 0, 4)):
        got = credible.credibility([clean(n, ev, u)], MONTH, BUDGET, 0.05, seed=1)
        want = exact_credibility(n, u, ev)
        assert got["value"] == pytest.approx(want, abs=3 * math.sqrt(want * (1 - want) / got["outer"]) + 0.005)
        assert got["interval"][0] <= got["value"] <= got["interval"][1]


def test_twenty_clean_trials_at_two_events_a_month_are_not_supported():
    """Issue 42, point 1: the posterior-mean rule called this supported (P(miss) averaged 0.047); twenty clean
    trials cannot rule out that one event in ten never recovers (0.9^20 = 0.12)."""
    j = decide.judge([clean(20, 2)], None, GOAL, 0)
    assert not j["met"] and j["resolved"]
    assert j["availability"]["value"] == pytest.approx(exact_credibility(20, 0, 2), abs=0.03)  # ~0.72
    assert j["availability"]["p_miss_at_credibility"] > 0.05  # at credibility 0.9 the miss chance may be ~0.1
    # the rule of three with credibility 0.9: about 1.35 x 2 / 0.05 = 54 clean trials support it
    assert decide.judge([clean(70, 2)], None, GOAL, 0)["met"]


def test_a_verdict_whose_monte_carlo_error_straddles_the_credibility_runs_more_draws_then_says_so():
    m = clean(48, 2)  # near the rule of three's threshold: the credibility is 0.887 (exact_credibility)
    small = credible.credibility([m], MONTH, BUDGET, 0.05, 0, outer=200, inner=200, max_outer=200, max_inner=200)
    assert small["interval"][0] < 0.9 <= small["interval"][1] and not small["resolved"] and not small["met"]
    grown = credible.credibility([m], MONTH, BUDGET, 0.05, 0, outer=200, inner=200, max_outer=12800, max_inner=400)
    assert grown["outer"] > 200 and grown["resolved"] and not grown["met"]  # doubled until it told 0.9 apart
    assert grown["value"] == pytest.approx(exact_credibility(48, 0, 2), abs=0.01)


def test_an_unrecovered_event_must_cost_more_than_the_budget():
    with pytest.raises(ValueError, match="more than the budget"):
        credible.credibility([M("replica", (1.0,), 5, 0, BUDGET, events=1)], MONTH, BUDGET, 0.05, 0)


def test_the_floor_is_strictly_above_the_budget_at_exactly_the_shipped_default():
    """Issue 42, point 3: 99.5 % over a month is a 12,960 s budget, above the shipped 3600 s unrecovered cost:
    an event never seen unrecovered could never make the period miss. 0.5 events a month, 3 trials at 0.2 s was
    `supported`; with the floor it is not."""
    budget = 0.005 * MONTH * 86_400
    rate = Rate("replica", events=0.5)
    assert rate.unrecovered_cost_s == DEFAULT_UNRECOVERED_COST_S == 3600
    entry = {"_counted": [{"lower_bound": None, "lost_service_s": 0.2}] * 3}
    floor = unrecovered_cost(entry, rate, budget)
    assert floor == budget + FLOOR_MARGIN_S > budget
    m = M("replica", (0.2, 0.2, 0.2), 3, 0, floor, events=0.5)
    j = decide.judge([m], None, decide.Goal(MONTH, 0.995, 0.05), 0)
    assert not j["met"]  # Beta(0.5, 3.5): q may be ~0.3; 0.5 x 0.3 = 0.15 events a month never recovered


def test_a_half_percent_background_at_a_hundred_requests_a_second_is_not_supported_at_999():
    """Issue 42, point 4: 0.5 % of requests failing with no fault costs 0.005 x the month, five times a 99.9 %
    budget; subtracted per fault and never charged, ten clean trials said supported."""
    seconds = 10 * 60  # ten 60 s baselines at 100 requests a second
    bg = credible.Background(failed=int(0.005 * 100 * seconds), requests=100 * seconds, runs=10)
    m = clean(300, 0.3)
    assert decide.judge([m], None, GOAL, 0)["met"]  # without the background: supported
    j = decide.judge([m], None, GOAL, 0, background=bg)
    assert not j["met"] and j["availability"]["value"] == 0.0
    # the optimistic end keeps it: a background this sure is not narrowed by more runs
    assert not decide.judge([m], None, GOAL, 0, background=bg, limit=True)["met"]


def test_a_clean_background_of_few_requests_is_uncertain_and_more_runs_narrow_it():
    few = credible.Background(0, 1000, runs=10)  # 0 of 1000: at credibility 0.9 it may be ~0.13 %
    m = clean(300, 0.3)
    assert not decide.judge([m], None, GOAL, 0, background=few)["met"]
    assert decide.judge([m], None, GOAL, 0, background=few.with_more_runs(400))["met"]
    assert few.with_more_runs(10) == credible.Background(0, 2000, 20)


def test_not_supported_only_when_even_the_optimistic_end_misses():
    """Issue 42, point 6: 1 unrecovered in 11 runs at 1 event a month was `not_supported` from the plug-in share
    1/11; its 5 % posterior quantile (~0.012) is within the risk, so more trials can support it."""
    m = clean(11, 1, u=1)
    assert not decide.judge([m], None, GOAL, 0)["met"]
    optimistic = decide.judge([m], None, GOAL, 0, limit=True)
    assert optimistic["met"]
    v = decide.verdict([], decide.judge([m], None, GOAL, 0), GOAL, optimistic, decide.trials_needed([m], None, GOAL, 0))
    assert v["word"] == decide.INSUFFICIENT and "more of replica would support it" in v["reasons"][-1]
    # 4 unrecovered in 11: even the optimistic end (q ~0.15) misses at one event a month
    worse = clean(11, 1, u=4)
    opt = decide.judge([worse], None, GOAL, 0, limit=True)
    v = decide.verdict([], decide.judge([worse], None, GOAL, 0), GOAL, opt, None)
    assert v["word"] == decide.NOT_SUPPORTED and "optimistic end" in v["reasons"][-1]


def test_a_fleet_prior_gives_power_and_the_default_priors_credibility_is_said_beside_it():
    from chaos.claim import judgement

    fleet = unrecovered.Prior.fleet(events=1, trials=400)  # 1 of 400 fleet events needed a human
    m = clean(20, 2, prior=fleet)
    j = judgement.judgement([m], None, GOAL, 0, None, None)
    block = judgement.credibility_block(j, GOAL, [m])
    assert j["judged"]["met"] and not j["default_prior"]["met"]
    assert block["from_prior"] == pytest.approx(j["judged"]["value"] - j["default_prior"]["value"])
    assert "Beta(1.5, 399.5)" in block["priors"]["replica"]["source"]
    assert block["statement"].startswith("P(miss) <= 5 % with credibility")


def test_pooling_lets_ten_clean_scopes_inform_each_other():
    names = ["replica", "engine", "node", "zone", "head", "redis", "upgrade", "region", "partition", "drain"]
    models = [M(n, (1.0,) * 30, 30, 0, BUDGET + 1, events=0.3) for n in names]
    alone = decide.judge(models, None, GOAL, 0)
    pooled = decide.judge(models, None, decide.Goal(MONTH, 0.999, 0.05, pool=True), 0)
    assert pooled["value"] > alone["value"]
    # pooling does not hide a bad scope: one scope with 3 of 30 unrecovered keeps the pool from supporting it
    bad = models[:-1] + [M("drain", (1.0,) * 27, 30, 3, BUDGET + 1, events=0.3)]
    assert not decide.judge(bad, None, decide.Goal(MONTH, 0.999, 0.05, pool=True), 0)["met"]


def test_the_cost_model_draws_costs_it_has_not_seen():
    """Issue 42, point 7: the bootstrap could only draw the costs seen, so one trial's cost was the least any
    event could cost. The Dirichlet process's new mass puts costs below and above it."""
    atoms, w = cost_model.draw(np.array([3.0]), np.array([1]), cost_model.Base.of([3.0], 1.0), 4000,
                               np.random.default_rng(1), np.random.default_rng(2))
    below = (w * (atoms < 2.0)).sum(axis=1).mean()
    above = (w * (atoms > 5.0)).sum(axis=1).mean()
    assert below > 0.1 and above > 0.1
    # with many trials it becomes the bootstrap: the new mass ~ 1 / (n + 1)
    v = np.linspace(1, 2, 200)
    atoms, w = cost_model.draw(v, np.ones(200, dtype=int), cost_model.Base.of(list(v), 1.0), 4000,
                               np.random.default_rng(1), np.random.default_rng(2))
    assert w[:, 200:].sum(axis=1).mean() == pytest.approx(1 / 201, rel=0.15)


def test_the_pooled_log_spread_shrinks_to_its_prior_and_learns_from_scopes_with_two_costs():
    assert cost_model.pooled_log_sd([[5.0]]) == pytest.approx(cost_model.PRIOR_LOG_SD)
    tight = cost_model.pooled_log_sd([[1.0, 1.01, 0.99] * 10])
    assert tight < 0.3
    assert cost_model.pooled_log_sd([[1.0, 10.0]]) > tight


def test_the_trials_search_adds_trials_at_the_typical_cost_not_the_first():
    m = M("replica", (400.0, 1.0, 2.0, 1.5, 3.0), 5, 0, BUDGET + 1, events=1)
    assert m.typical_cost() == 2.0
    assert m.with_more_trials(3).extra == 3 and m.with_more_trials(3).trials == 8
