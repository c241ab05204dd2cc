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

import numpy as np

from chaos.recording import records as rec, request_columns as rc
from chaos.analysis.windows import INSUFFICIENT, NS, SteadyState, judge_windows, latency, window_mask
from chaos.base.stats import percentile  # the rig's one convention: nearest rank


NO_PREFIX_SHARING = ("no prefix-sharing request was sent (the load has no sessions, and no trace rows that "
                     "share a first prefix block)")


def _prefix_sharing(r: rec.RequestRecord) -> bool:
    """A request that shares a prefix with others: a session's turn (its group's system prompt, its
    conversation so far: chaos.load.sessions), or a trace row whose first prefix block other rows begin
    with (its ``prefix_group``: chaos.load.workload.plan)."""
    return r.session is not None or r.prefix_group is not None


def _sharing(cols: rc.RequestColumns) -> np.ndarray:
    """:func:`_prefix_sharing` of every request of the columns."""
    return cols.session.known() | cols.prefix_group.known()


def prefix_sharing_basis(rs: list[rec.RequestRecord] | rc.RequestColumns) -> dict[str, Any]:
    """Which requests the warm-up counted as prefix-sharing: sessions' turns, trace rows by shared first
    block, how many of each, and how many groups."""
    cols = rs if isinstance(rs, rc.RequestColumns) else rc.from_records(rs)
    turns = cols.session.known()
    traced = ~turns & cols.prefix_group.known()
    groups = cols.prefix_group.codes[(turns | traced) & cols.prefix_group.known()]
    return {"session_turns": int(np.count_nonzero(turns)), "trace_rows": int(np.count_nonzero(traced)),
            "groups": len(np.unique(groups))}


def warmup(fault: dict[str, Any], every: list[rec.RequestRecord] | rc.RequestColumns,
           measured: list[rec.RequestRecord] | rc.RequestColumns, window_end_ns: int, measure_start_ns: int,
           steady: SteadyState) -> dict[str, Any]:
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
    every = every if isinstance(every, rc.RequestColumns) else rc.from_records(sorted(every, key=lambda r: r.sent_ns))
    cols = measured if isinstance(measured, rc.RequestColumns) else rc.from_records(
        sorted(measured, key=lambda r: r.sent_ns))
    t0 = fault["inject_ns"]
    unmeasurable = fault["unmeasurable"]
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    sharing, sent = _sharing(cols), cols.sent_ns
    lat = cols.latency()
    before = (sent >= measure_start_ns) & (sent < t0) & cols.ok & sharing
    baseline = rc.percentile(lat[before & ~np.isnan(lat)], 0.95)
    replica = every.served_replica
    seen_before = {replica.values[c] for c in np.unique(replica.codes[(every.sent_ns < t0) & replica.known()])}
    window = window_mask(cols, fault, window_end_ns) & sharing
    served = cols.served_replica
    new = sorted({served.values[c] for c in np.unique(served.codes[window & served.known()])} - seen_before)
    sampled = fault.get("replacement") or {}
    if sampled.get("replicas_before") is not None:  # the control plane knew the replicas' ids: a replica that
        # was running before the injection but served nothing then (idle, or routed around) is not a replacement
        started = {x["replica"] for x in sampled.get("new") or []}
        new = [i for i in new if i in started]
    by_new = window & served.isin(set(new))
    first_new = int(sent[np.argmax(by_new)]) if by_new.any() else None
    out = {"factor": steady.warm_factor, "baseline_p95_ttft_s": baseline, "time_to_warm_s": None, "warmed": None,
           "requests": int(np.count_nonzero(window)), "replacements": new,
           "first_served_by_replacement_s": sec(first_new), "windows_judged": 0, "pooled_p95_ttft_s": None,
           "reason": None}
    every_sharing = _sharing(every)
    if baseline is None:
        unmeasurable["warmup.baseline_p95_ttft_s"] = (
            "no successful prefix-sharing request was measured before the injection" if every_sharing.any()
            else NO_PREFIX_SHARING)
    out["prefix_sharing"] = prefix_sharing_basis(every.take(every_sharing))
    if not every_sharing.any():
        why = NO_PREFIX_SHARING
    elif not (every_sharing & replica.known()).any():
        why = "the responses named no replica (no x-availproof-replica header): the replacement cannot be told"
    elif not new:
        why = ("nothing was replaced: no prefix-sharing request of the window was served by a replica not seen "
               "before the injection")
    else:
        cold, warm = set(new), seen_before
        rs = cols.records(window)  # the window's prefix-sharing requests, in send order

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
