"""Does the load's timeout fit its outputs? A trace's or a length distribution's longest output may need
more than ``load.timeout_s`` at the deployment's token rate: every such request then fails as a deadline,
before any fault, and a run would blame the fault for them.

:func:`judge` measures the token rate on the baseline's answered requests (two tokens or more): the
per-token time is the median of ``(e2e - ttft) / (output_tokens - 1)`` (a request that was not streamed:
``e2e / output_tokens``), the first token the p95 of their TTFT; the longest planned output
(:func:`longest_output`, from the load's own seeded plan) then needs ``ttft_p95 + per_token x (longest - 1)``.
When that passes ``timeout_s`` the run is refused before the fault (:mod:`chaos.core.baseline_gate`), in one line
saying what would fit. Without such a request the fit is not judged (``fits`` null, with why).

:func:`from_file` makes the same judgement before anything runs, from the experiment file alone, where the
token rate is known without measuring it: the stream target answers at its configured rate
(``serve_apps.config.StreamOptions``: ``token_s`` a token after a ``prefill_s`` first token; the rig deploys
these values and an experiment's ``app`` block overrides neither). vLLM's rate is only known measured (a
``capacity.json`` records no per-token time: its steps hold the p95 TTFT alone), so an experiment run on it
is judged at the baseline gate only. ``availproof validate`` warns with its line (:mod:`chaos.core.validate`)."""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Iterable

from chaos.recording import records as rec
from chaos.base.stats import percentile


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
        out["why"] = too_short(timeout_s, longest, per_token, ttft,
                               f"the measured {per_token * 1000:.1f} ms a token after a {ttft:.2f} s first token (p95)")
    return out


def too_short(timeout_s: float, longest: int, per_token: float, ttft: float, at: str) -> str | None:
    """The one line saying that ``longest`` output tokens need more than ``timeout_s`` at ``per_token``
    seconds a token after a ``ttft`` first token (``ttft + per_token x (longest - 1)``), and what would
    fit: the timeout needed, or the outputs that finish within it. ``at`` says where the rate comes
    from. None when they fit."""
    needs = ttft + per_token * (longest - 1)
    if needs <= timeout_s:
        return None
    if ttft >= timeout_s or per_token <= 0:  # no output length helps: the first token alone is too late
        cap = ""
    else:
        cap = f", or keep outputs within {max(1, math.floor((timeout_s - ttft) / per_token) + 1)} tokens"
    said = f"{needs:.1f}"
    if float(said) <= timeout_s:  # just over: enough digits to show it is over
        said = f"{needs:.3f}".rstrip("0")
    return (f"load.timeout_s {timeout_s:g} s is too short for the longest planned output ({longest} tokens): "
            f"at {at} it needs {said} s; set timeout_s to at least {math.ceil(needs)}{cap}")


def configured_rate(app: str) -> tuple[float, float] | None:
    """(seconds a token, seconds to the first token) ``app`` is configured to answer at, known without
    measuring: the stream target's ``token_s`` and ``prefill_s`` (what the rig deploys,
    ``serve_apps.config.StreamOptions``; jittered around them, and a prompt not in its prefix cache
    adds ``uncached_token_s`` a token to the first: so the time needed is a lower bound). None for
    ``llm``: vLLM's rate is only known measured."""
    if app != "stream":
        return None
    from serve_apps.config import StreamOptions

    o = StreamOptions()
    return o.token_s, o.prefill_s


def from_file(shape, app: str = "stream") -> dict[str, Any]:
    """:func:`judge` before anything runs: whether the load's longest planned output (:func:`longest_output`)
    finishes within its ``timeout_s`` at ``app``'s configured rate (:func:`configured_rate`). The keys of
    :func:`judge`, but ``ttft_s`` (the configured first token) for ``ttft_p95_s``; ``fits`` null with why
    when the rate is not known before a run (``llm``) or the load plans no output length."""
    out: dict[str, Any] = {"timeout_s": shape.timeout_s, "longest_output_tokens": None, "per_token_s": None,
                           "ttft_s": None, "needs_s": None, "fits": None, "why": None}
    rate = configured_rate(app)
    if rate is None:
        out["why"] = f"the {app} app's token rate is only known measured: judged on the baseline"
        return out
    per_token, ttft = rate
    longest = out["longest_output_tokens"] = longest_output(shape)
    if longest is None:
        out["why"] = "the load plans no output length"
        return out
    needs = ttft + per_token * (longest - 1)
    out.update(per_token_s=per_token, ttft_s=ttft, needs_s=round(needs, 3), fits=needs <= shape.timeout_s)
    if not out["fits"]:
        out["why"] = too_short(shape.timeout_s, longest, per_token, ttft,
                               f"the {app} target's configured {per_token * 1000:.1f} ms a token after a {ttft:.2f} s "
                               "first token (serve_apps/config.py StreamOptions)")
    return out
