"""Does the load's timeout fit its outputs (chaos/load/timeout_fit.py): the token rate measured on answered
requests, the longest planned output from the load's own plan, and the one line that says what would fit."""

import json

import pytest

from chaos.recording import records as rec
from chaos.load import timeout_fit
from chaos.load.workload import LoadShape
from tests.unit.test_analysis import req


def answered(n: int, tokens: int, ttft: float = 0.1, per_token: float = 0.05):
    out = []
    for i in range(n):
        r = req(i, i * 0.1, ttft=ttft, e2e=ttft + per_token * (tokens - 1))
        r.output_tokens = tokens
        out.append(r)
    return out


def test_a_long_output_that_cannot_finish_in_the_timeout_is_said_with_what_would_fit():
    got = timeout_fit.judge(answered(20, 30), longest=900, timeout_s=10)
    assert got["per_token_s"] == pytest.approx(0.05) and got["ttft_p95_s"] == pytest.approx(0.1)
    assert got["needs_s"] == pytest.approx(0.1 + 0.05 * 899, abs=1e-3) and got["fits"] is False
    assert got["why"] == ("load.timeout_s 10 s is too short for the longest planned output (900 tokens): at the "
                          "measured 50.0 ms a token after a 0.10 s first token (p95) it needs 45.1 s; set timeout_s "
                          "to at least 46, or keep outputs within 199 tokens")


def test_outputs_that_fit_pass_and_nothing_to_measure_is_not_judged():
    assert timeout_fit.judge(answered(20, 30), longest=48, timeout_s=10)["fits"] is True
    failed = [req(i, i * 0.1, ok=False) for i in range(5)]
    got = timeout_fit.judge(failed, longest=48, timeout_s=10)
    assert got["fits"] is None and "no answered request" in got["why"]
    assert timeout_fit.judge(answered(3, 30), longest=None, timeout_s=10)["fits"] is None


def test_the_longest_output_is_the_plans_own(tmp_path):
    shape = LoadShape(rate=10, duration_s=30, max_tokens=(16, 48))
    longest = timeout_fit.longest_output(shape)
    assert 16 <= longest <= 48
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": t * 1000, "input_length": 100, "output_length": o, "hash_ids": [1]}
            for t, o in ((0, 50), (3, 300), (6, 120))]
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    traced = LoadShape(trace=str(trace), duration_s=30, max_tokens=(16, 48))
    # the 300-token output is clipped to the context: 512 - 8 (template) less at least some prompt
    got = timeout_fit.longest_output(traced)
    assert 120 < got <= 300
