"""The claim rule's operating characteristic (chaos.claim.calibrate): seeded synthetic worlds of known P(miss)
judged by the claim's own rule, and the cost model's coverage."""

from __future__ import annotations

import math

import pytest

from chaos.commands import cli
from chaos.claim import calibrate
from chaos.claim import calibrate_worlds as cw

RISK, C, SEED = 0.05, 0.9, 0


@pytest.fixture(scope="module")
def reduced():
    # the CLI's reduced grid at its default 60 worlds per cell; two processes (the results stay in this
    # process: the CLI test below reuses them)
    return calibrate.table("reduced", None, SEED, C, RISK, processes=2)


def test_reduced_grid_at_twice_the_risk_is_rarely_supported(reduced):
    assert reduced["worlds"] == 60 and reduced["sizes"] == cw.SIZES
    for f in cw.FAMILIES:
        cells = [r for r in reduced["cells"] if r["family"] == f and r["m"] == 2.0]
        assert len(cells) == 6 and all(r["null"] is None for r in cells)
        assert reduced["pooled"][f]["2"] <= 0.05, (f, reduced["pooled"][f])
        for r in cells:
            assert r["share"] <= 0.12, r
    # at the risk itself the rule is not blind either: some world near n* is supported
    assert max(r["share"] for r in reduced["cells"] if r["m"] == 1.0) > 0


def test_power_at_half_the_risk():
    # rare_unrecovered, 1 event a period, 100 trials, true P(miss) = 0.025: with Jeffreys' prior and c = 0.9 the
    # claim is supported when at most 2 of the 100 trials did not recover (P(Beta(2.5, 98.5) <= 0.0513) = 0.94),
    # which Binomial(100, q = 0.0253) gives in 53 % of worlds
    q = -math.log(1 - 0.5 * RISK)
    theory = sum(math.comb(100, k) * q ** k * (1 - q) ** (100 - k) for k in range(3))
    assert 0.5 < theory < 0.56
    (r,) = calibrate.judge_cells([("rare_unrecovered", 1.0, 100, 0.5)], 60, SEED, C, RISK)
    assert abs(r["share"] - theory) <= 3 * math.sqrt(theory * (1 - theory) / 60), r
    assert r["share"] >= 0.4


@pytest.mark.parametrize("family", cw.FAMILIES)
@pytest.mark.parametrize("lam,m", [(0.34, 0.5), (0.34, 2.0), (4.0, 0.5), (4.0, 2.0), (1.0, 1.4)])
def test_worlds_have_the_p_miss_they_claim(family, lam, m):
    p = cw.true_p_miss(family, lam, m, RISK, seed=12345)  # a different seed than the one that solved the world
    assert abs(p / (m * RISK) - 1) <= 0.10, p


def test_unattainable_cells_are_null():
    w = cw.world_params("cost_driven", 0.34, 2.0, 0.2)  # P(miss) 0.4 > 1 - exp(-0.34) = 0.288
    assert w["null"] and "out of reach" in w["null"]
    w = cw.world_params("rare_unrecovered", 0.34, 2.0, 0.2)  # q = -log(0.6) / 0.34 = 1.5
    assert w["null"] and "> 1" in w["null"]
    (r,) = calibrate.judge_cells([("rare_unrecovered", 0.34, 5, 2.0)], 3, SEED, C, 0.2)
    assert r["share"] is None and r["worlds"] == 0 and r["null"]


def test_world_trials_are_nested_in_n():
    small, _ = cw.world_model("cost_driven", 1.0, 5, 2.0, RISK, SEED, 3)
    large, _ = cw.world_model("cost_driven", 1.0, 20, 2.0, RISK, SEED, 3)
    assert large.values[:5] == small.values and small.u == large.u == 0 and large.n == 20
    rare, _ = cw.world_model("rare_unrecovered", 0.34, 100, 2.0, RISK, SEED, 3)
    assert rare.u > 0 and len(rare.values) == 100 - rare.u and rare.unrecovered_cost_s > cw.budget_s()


def test_cost_model_coverage_at_five_trials():
    # measured (200 worlds per cell, seed 0): cost model 0.885 / 0.74 / 0.655 against the bootstrap's
    # 0.775 / 0.67 / 0.615 at sigma 0.5 / 1 / 1.5: both under the nominal 0.95 once the tail is heavy
    rows = {s: cw.coverage_cell(s, 5, 200, SEED) for s in calibrate.COVERAGE_SIGMAS}
    for s, r in rows.items():
        assert r["cost_model"] >= r["bootstrap"], r
    assert rows[0.5]["cost_model"] >= 0.85
    assert rows[1.0]["cost_model"] >= 0.7
    assert rows[1.5]["cost_model"] >= 0.6


def _table():
    cells = [{"family": f, "lam": lam, "n": n, "m": m, "worlds": 7, "supported": 0,
              "share": (0.02 if f == "rare_unrecovered" and m == 2.0 and lam == 1.0 and n == 20 else 0.0),
              "null": None}
             for f in cw.FAMILIES for lam in (0.34, 1.0, 4.0) for n in (5, 20, 100) for m in (0.5, 1.0, 1.4, 2.0)]
    return {"lams": [0.34, 1.0, 4.0], "ns": [5, 20, 100], "families": list(cw.FAMILIES), "cells": cells,
            "seed": 0, "risk": 0.05, "credibility": 0.9, "date": "2026-12-06"}


def test_own_row_picks_the_nearest_cell():
    t = _table()
    row = calibrate.own_row(1.6, 57, None, t)  # log-nearest rate: 1 (log 1.6 is nearer 0 than log 4)
    assert (row["lam"], row["n"], row["worlds"]) == (1.0, 20, 7)
    assert row["supported_share_at"]["rare_unrecovered"] == {"0.5": 0.0, "1": 0.0, "1.4": 0.0, "2": 0.02}
    assert "at most 2.0 % of worlds like these (rate ~1 a period, 20 trials" in row["statement"]
    assert calibrate.own_row(2.1, 100, None, t)["lam"] == 4.0  # log 2.1 nearer log 4 than log 1
    assert calibrate.own_row(0.5, 3, None, t)["n"] == 5  # fewer trials than any cell: the smallest
    assert " 0.0 %" in calibrate.own_row(1.0, 20, "cost_driven", t)["statement"]  # that family alone


def test_shipped_table_and_its_rows():
    t = calibrate.shipped()
    assert t["grid"] == "full" and t["date"] == "2026-12-06" and t["sizes"] == cw.SIZES
    assert len(t["cells"]) == 2 * 4 * 7 * 4
    row = calibrate.own_row(1.0, 20, None)
    assert (row["lam"], row["n"]) == (1.0, 20) and row["worlds"] == t["worlds"]
    x = max(row["supported_share_at"][f]["2"] for f in cw.FAMILIES)
    assert f"at most {x * 100:.1f} %" in row["statement"]


def test_cli_calibrate_reduced(reduced, capsys):
    assert cli.main(["claim", "--calibrate", "reduced", "--worlds", "10"]) == 0
    out = capsys.readouterr().out
    assert "the rule's operating characteristic" in out and "10 worlds per cell" in out
    assert "400 x 400 draws doubling to 1600 x 1600" in out
    for f in cw.FAMILIES:
        assert f"{f}, m = 2 (true P(miss) = 0.1" in out
    assert "cost_model.mean_interval / Bayesian bootstrap" in out
