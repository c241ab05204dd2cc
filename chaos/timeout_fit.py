"""Does the load's timeout fit its outputs? A trace's or a length distribution's longest output may need
more than ``load.timeout_s`` at the deployment's token rate: every such request then fails as a deadline,
before any fault, and a run would blame the fault for them.

:func:`judge` measures the token rate on the baseline's answered requests (two tokens or more): the
per-token time is the median of ``(e2e - ttft) / (output_tokens - 1)`` (a request that was not streamed:
``e2e / output_tokens``), the first token the p95 of their TTFT; the longest planned output
(:func:`longest_output`, from the load's own seeded plan) then needs ``ttft_p95 + per_token x (longest - 1)``.
When that passes ``timeout_s`` the run is refused before the fault (:mod:`chaos.baseline_gate`), in one line
saying what would fit. Without such a request the fit is not judged (``fits`` null, with why)."""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Iterable

from chaos import records as rec
from chaos.stats import percentile


def longest_output(shape) -> int | None:
    """The longest output (``max_tokens``) of the load's plan (:func:`chaos.load.workload.plan`, seeded: the
    same plan the harness sends), after clipping to the model's context."""
    from chaos.load import workload

    router = workload.Router([workload.Target(name="plan", url="http://127.0.0.1:9", zone=None)])
    longest = None
    for req in workload.plan(shape, router):
        if req.max_tokens is not None:
            longest = req.max_tokens if longest is None else max(longest, req.max_tokens)
    return longest


def judge(requests: Iterable[rec.RequestRecord], longest: int | None, timeout_s: float) -> dict[str, Any]:
    """Whether ``longest`` output tokens finish within ``timeout_s`` at the rate ``requests`` were answered."""
    out: dict[str, Any] = {"timeout_s": timeout_s, "longest_output_tokens": longest, "per_token_s": None,
                           "ttft_p95_s": None, "needs_s": None, "fits": None, "why": None}
    if longest is None:
        out["why"] = "the load plans no output length"
        return out
    answered = [r for r in requests if r.ok and r.e2e_s and (r.output_tokens or 0) >= 2]
    if not answered:
        out["why"] = "no answered request of two tokens or more in the baseline to measure the token rate"
        return out
    per = [((r.e2e_s - r.ttft_s) / (r.output_tokens - 1)) if r.ttft_s is not None else r.e2e_s / r.output_tokens
           for r in answered]
    per_token = median(per)
    ttfts = [r.ttft_s for r in answered if r.ttft_s is not None]
    ttft = percentile(ttfts, 0.95) if ttfts else 0.0
    needs = ttft + per_token * (longest - 1)
    out.update(per_token_s=round(per_token, 6), ttft_p95_s=round(ttft, 4), needs_s=round(needs, 3),
               fits=needs <= timeout_s)
    if not out["fits"]:
        fit_tokens = max(1, math.floor((timeout_s - ttft) / per_token) + 1) if per_token > 0 else longest
        out["why"] = (f"load.timeout_s {timeout_s:g} s is too short for the longest planned output ({longest} tokens): "
                      f"at the measured {per_token * 1000:.1f} ms a token after a {ttft:.2f} s first token (p95) it "
                      f"needs {needs:.1f} s; set timeout_s to at least {math.ceil(needs)}, or keep outputs within "
                      f"{fit_tokens} tokens")
    return out
