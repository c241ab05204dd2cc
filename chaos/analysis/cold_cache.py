"""The replacement replica's cold prefix cache, from the injection (who served, from the responses'
``x-availproof-*`` headers: ``serve_apps.served_by``).

- ``warmup`` (:func:`warmup`): the cost of a replacement's cold prefix cache. **Prefix-sharing
  requests** are the turns of sessions (``load.sessions``: each shares its group's system prompt,
  and from its second turn its conversation, with earlier requests). ``baseline_p95_ttft_s``: the
  p95 latency of the successful prefix-sharing requests measured before the injection. The
  **replacement**: a replica that served a prefix-sharing request in the window and had served
  nothing before the injection (warm-up requests included), and, when the control plane's samples knew
  the replicas' ids, one they saw start after it (``replacement.new``: a replica running before that
  happened to serve nothing is not one; seen with vLLM on 2026-12-05); **warm** replicas: those that had.
  Windows as for steady state (``window_s``, starting at the injection and at each prefix-sharing
  request's send, wholly inside the window); one is judged when it holds at least ``min_requests``
  successful prefix-sharing requests served by the replacement and as many served by warm replicas
  (so a cold cache is told apart from the capacity lost meanwhile: both sides see the same load),
  and is in bound when the replacement's p95 latency is at most ``steady_state.warm_factor``
  (default 1.2) times the warm replicas'. ``time_to_warm_s``: the start of the first in-bound
  window from which the replacement **stays** warm: all the prefix-sharing requests from that
  start to the analysis window's end, pooled, are in bound too (its p95 against the warm replicas'
  over the same span: ``pooled_p95_ttft_s``); never before the replacement's first request;
  ``null`` with ``warmed`` false when no window qualifies (not warm within the window). Why pooled,
  not "every later window in bound" as for steady state: a p95 of the 3-15 requests a replica
  serves in a 5 s window is nearly their maximum, and over the hundred overlapping windows of a
  recovery window some replica that is as warm as the others looks 1.2 times slower by chance. On
  synthetic runs (8 req/s, 3 replicas, a replacement cold for 12 s, lognormal TTFT of shape 0.35)
  the every-window rule called it warm in 39 of 60 runs, median 49 s; the pooled rule in 100 of
  100, median 11.4 s, p90 15.3 s (``tests/unit/test_warmup_locality.py``, the power test). ``null`` with its ``reason`` (also in ``unmeasurable``: ``warmup.time_to_warm_s``) when no
  prefix-sharing request was sent, the responses named no replica, nothing was replaced, or no
  window could be judged (insufficient evidence).
"""

from __future__ import annotations

from typing import Any

from chaos import records as rec
from chaos.analysis.windows import INSUFFICIENT, NS, SteadyState, _window_requests, judge_windows, latency
from chaos.stats import percentile  # the rig's one convention: nearest rank


NO_PREFIX_SHARING = ("no prefix-sharing request was sent (the load has no sessions, and no trace rows that "
                     "share a first prefix block)")


def _prefix_sharing(r: rec.RequestRecord) -> bool:
    """A request that shares a prefix with others: a session's turn (its group's system prompt, its
    conversation so far: chaos.load.sessions), or a trace row whose first prefix block other rows begin
    with (its ``prefix_group``: chaos.load.workload.plan)."""
    return r.session is not None or r.prefix_group is not None


def prefix_sharing_basis(rs: list[rec.RequestRecord]) -> dict[str, Any]:
    """Which requests the warm-up counted as prefix-sharing: sessions' turns, trace rows by shared first
    block, how many of each, and how many groups."""
    turns = [r for r in rs if r.session is not None]
    traced = [r for r in rs if r.session is None and r.prefix_group is not None]
    return {"session_turns": len(turns), "trace_rows": len(traced),
            "groups": len({r.prefix_group for r in turns + traced if r.prefix_group is not None})}


def warmup(fault: dict[str, Any], every: list[rec.RequestRecord], measured: list[rec.RequestRecord],
           window_end_ns: int, measure_start_ns: int, steady: SteadyState) -> dict[str, Any]:
    """The replacement replica's cold prefix cache, from the injection (see the module doc: warm-up).

    ``baseline_p95_ttft_s``: p95 latency of the successful prefix-sharing requests measured before
    the injection. The **replacement**: a replica (``served_replica``) that served a prefix-sharing
    request in the window and served nothing before the injection (warm-up included); **warm**
    replicas: those that did. Windows as for steady state (W = ``window_s``, starting at the
    injection and at each prefix-sharing request's send); one is judged when it holds at least
    ``min_requests`` successful prefix-sharing requests served by the replacement and as many
    served by warm replicas, and is in bound when the p95 latency of the replacement's is at most
    ``warm_factor`` times the warm replicas'. ``time_to_warm_s``: the start of the first in-bound
    window from which every prefix-sharing request to the window's end, pooled, is in bound too,
    and not before the replacement's first request (null: not warm within it, ``warmed`` false)."""
    t0 = fault["inject_ns"]
    unmeasurable = fault["unmeasurable"]
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    before = [r for r in measured if measure_start_ns <= r.sent_ns < t0 and r.ok and _prefix_sharing(r)]
    baseline = percentile([x for x in map(latency, before) if x is not None], 0.95)
    seen_before = {r.served_replica for r in every if r.sent_ns < t0 and r.served_replica is not None}
    rs = [r for r in _window_requests(fault, measured, window_end_ns) if _prefix_sharing(r)]
    new = sorted({r.served_replica for r in rs if r.served_replica is not None} - seen_before)
    sampled = fault.get("replacement") or {}
    if sampled.get("replicas_before") is not None:  # the control plane knew the replicas' ids: a replica that
        # was running before the injection but served nothing then (idle, or routed around) is not a replacement
        started = {x["replica"] for x in sampled.get("new") or []}
        new = [i for i in new if i in started]
    first_new = min((r.sent_ns for r in rs if r.served_replica in set(new)), default=None)
    out = {"factor": steady.warm_factor, "baseline_p95_ttft_s": baseline, "time_to_warm_s": None, "warmed": None,
           "requests": len(rs), "replacements": new, "first_served_by_replacement_s": sec(first_new),
           "windows_judged": 0, "pooled_p95_ttft_s": None, "reason": None}
    if baseline is None:
        unmeasurable["warmup.baseline_p95_ttft_s"] = (
            "no successful prefix-sharing request was measured before the injection" if any(map(_prefix_sharing, every))
            else NO_PREFIX_SHARING)
    out["prefix_sharing"] = prefix_sharing_basis([r for r in every if _prefix_sharing(r)])
    if not any(map(_prefix_sharing, every)):
        why = NO_PREFIX_SHARING
    elif not any(r.served_replica is not None for r in every if _prefix_sharing(r)):
        why = "the responses named no replica (no x-availproof-replica header): the replacement cannot be told"
    elif not new:
        why = ("nothing was replaced: no prefix-sharing request of the window was served by a replica not seen "
               "before the injection")
    else:
        cold, warm = set(new), seen_before

        def p95s(ws: list[rec.RequestRecord]) -> tuple[float, float] | None:
            c = [x for r in ws if r.ok and r.served_replica in cold for x in [latency(r)] if x is not None]
            w = [x for r in ws if r.ok and r.served_replica in warm for x in [latency(r)] if x is not None]
            if len(c) < max(1, steady.min_requests) or len(w) < max(1, steady.min_requests):
                return None
            return percentile(c, 0.95), percentile(w, 0.95)

        def judge(ws: list[rec.RequestRecord]) -> bool | None:
            p = p95s(ws)
            return None if p is None else p[0] <= steady.warm_factor * p[1]

        windows = judge_windows(rs, t0, window_end_ns, steady, judge)
        out["windows_judged"] = len(windows)
        if not windows:
            why = (f"{INSUFFICIENT}: no {steady.window_s:g} s window held {steady.min_requests} successful "
                   f"prefix-sharing requests served by the replacement and as many served by warm replicas")
        else:
            warm_at = None
            for start, good in windows:
                if good and judge([r for r in rs if r.sent_ns >= start]):  # and stays warm, pooled to the end
                    pooled = p95s([r for r in rs if r.sent_ns >= start])
                    out["pooled_p95_ttft_s"] = {"replacement": round(pooled[0], 6), "warm": round(pooled[1], 6)}
                    warm_at = max(start, first_new)  # never before it served
                    break
            out["time_to_warm_s"], out["warmed"] = sec(warm_at), warm_at is not None
            return out
    out["reason"] = why
    unmeasurable["warmup.time_to_warm_s"] = why
    return out
