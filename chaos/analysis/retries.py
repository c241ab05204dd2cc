"""A client's retries (``load.retry``, :mod:`chaos.load.retry`), per fault, per population: what its users saw in
logical requests, and how much more the service was sent than they asked for.

Every attempt is a record of its own (:class:`chaos.recording.records.RequestRecord`: ``id`` its logical request's,
``attempt`` its number). **Logical requests** (:func:`logical_requests`): the attempts of one load worker with
one ``id``, in send order, a new one at each first attempt; a record that says no attempt (a run without a
policy, a file written before retries) is a logical request of its own, so an old file reads as one attempt
per logical request. A logical request **failed** when none of its attempts succeeded: what a user sees. It is
measured when its first attempt was (warm-up left out); its zone is its first attempt's target's (a retry goes
to the same target).

Per fault, each population (``affected``, ``service``: :mod:`chaos.analysis.populations`, the zones of the
first attempts' targets) gets ``retries`` (``null`` with the reason in ``unmeasurable`` ``<population>.retries``
when the run had no retry policy). Over the fault's logical requests (first sent in its analysis window, or in
flight at the injection, as the population's requests are counted):

- ``logical_requests``, ``logical_failed``, ``logical_failed_ratio``; ``retried`` (sent more than once);
  ``attempts`` (sent in all); ``attempts_per_request_mean``, ``_p99`` (nearest rank), ``_max``;
  ``failed_by_stop``: the failed ones by why their last attempt was the last (``retry_stop``; ``unsaid``
  when the run ended while one waited to retry);
- ``amplification``: attempts / logical requests; ``prompt_amplification``: the prompt tokens of every
  attempt / those of the logical requests (each attempt sends its request's prompt again), counted in
  ``prompt_basis``: the planned tokens (``prompt_len``) when every request has them, else the tokens the
  server counted in a successful attempt (``prompt_tokens``) when every request has one, else characters
  (``prompt_chars``: a proxy, said);
- ``timeline``: bins of ``bin_s`` (the steady state's window) aligned on the injection, from two bins before
  it (not before the measurement) to the analysis window's end: per bin, the attempts sent in it (of the
  population's measured logical requests), the logical requests first sent in it, and their ratio
  ``amplification`` (and ``prompt_amplification``): the load the service was sent against what was asked
  for at that time (null in a bin that started no logical request);
- ``peak_amplification`` (``peak_at_s``, the bin's start): the largest bin ``amplification`` from the
  injection to the population's steady state (the analysis window's end when it never got there), over the
  bins that started at least ``steady_state.min_requests`` logical requests (a thinner bin's ratio is noise);
  null with its reason when none did. The bound ``max_amplification`` reads it (:mod:`chaos.core.bounds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from chaos.recording import request_columns as rc
from chaos.analysis.windows import NS, SteadyState

NO_POLICY = "the run had no retry policy (load.retry): every request was sent once"
BINS_BEFORE = 2  # timeline bins before the injection


def policy_of(header: dict[str, Any]) -> dict[str, Any] | None:
    """The run's retry policy as its header recorded it (``load.retry``), or None."""
    load = header.get("load") if isinstance(header, dict) else None
    policy = load.get("retry") if isinstance(load, dict) else None
    return policy if isinstance(policy, dict) else None


@dataclass
class Logical:
    """The logical requests of a set of attempts (columns ``cols``), one entry each, in no particular order."""

    first: np.ndarray  # the row (in cols) of each one's first attempt
    last: np.ndarray  # the row of its last attempt (the latest sent)
    attempts: np.ndarray  # its attempts
    start_ns: np.ndarray  # its first attempt's send
    end_ns: np.ndarray  # the end of its last attempt
    ok: np.ndarray  # one of its attempts succeeded
    group: np.ndarray  # the logical request of each row of cols
    prompt: np.ndarray  # its prompt's size in ``prompt_basis``
    prompt_basis: str


def logical_requests(cols: rc.RequestColumns) -> Logical:
    """Group attempts into logical requests (see the module doc)."""
    n = len(cols)
    order = np.lexsort((cols.sent_ns, cols.id, cols.worker.codes))
    w, ids, att = cols.worker.codes[order], cols.id[order], cols.attempt[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (w[1:] != w[:-1]) | (ids[1:] != ids[:-1]) | (att[1:] <= 1)
    starts = np.flatnonzero(new)
    group = np.empty(n, dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    first, last = order[starts], order[np.append(starts[1:], n) - 1]
    attempts = np.diff(np.append(starts, n))
    if n:
        end = np.maximum.reduceat(cols.end_ns[order], starts)
        ok = np.logical_or.reduceat(cols.ok[order], starts)
    else:
        end, ok = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    prompt, basis = _prompt_sizes(cols, group, first, len(starts))
    return Logical(first, last, attempts, cols.sent_ns[first], end, ok, group, prompt, basis)


def _prompt_sizes(cols: rc.RequestColumns, group: np.ndarray, first: np.ndarray, count: int) -> tuple[np.ndarray, str]:
    planned = cols.prompt_len[first].astype(np.float64)
    if count and not np.isnan(planned).any():
        return planned, "prompt_len"
    counted = np.full(count, np.nan)
    told = cols.ok & ~np.isnan(cols.prompt_tokens)
    counted[group[told]] = cols.prompt_tokens[told]
    if count and not np.isnan(counted).any():
        return counted, "prompt_tokens"
    chars = cols.prompt_chars[first].astype(np.float64)
    if count and np.isnan(chars).any():  # a size not recorded is not 0: no prompt figure (null)
        return chars, "none: a request's prompt size is not recorded"
    return chars, "prompt_chars"


def _ratio(num: float, den: float) -> float | None:
    """num / den rounded; None when den is 0 or either is not known (NaN)."""
    if not den or num != num or den != den:
        return None
    return round(num / den, 4)


def population_retries(lg: Logical, cols: rc.RequestColumns, mine: np.ndarray, t0: int, window_end_ns: int,
                       cut: bool, recovered_ns: int | None, measure_start_ns: int,
                       steady: SteadyState) -> tuple[dict[str, Any], str | None]:
    """One population's ``retries`` (``mine``: which logical requests are measured and of the population); the
    second value is why the peak could not be judged."""
    start, end = lg.start_ns, lg.end_ns
    sent = (start >= t0) & (start < window_end_ns)
    if cut:  # a later fault's window: what it sent that ended after its injection belongs to it
        sent &= end <= window_end_ns
    rows = np.flatnonzero(mine & (sent | ((start < t0) & (end > t0))))
    n, att = len(rows), lg.attempts[rows]
    failed = rows[~lg.ok[rows]]
    stops: dict[str, int] = {}
    for r in cols.retry_stop.codes[lg.last[failed]].tolist():
        key = cols.retry_stop.values[r] if r >= 0 else "unsaid"
        stops[key] = stops.get(key, 0) + 1
    out: dict[str, Any] = {
        "logical_requests": n,
        "logical_failed": len(failed),
        "logical_failed_ratio": _ratio(len(failed), n),
        "retried": int(np.count_nonzero(att > 1)),
        "attempts": int(att.sum()),
        "attempts_per_request_mean": _ratio(int(att.sum()), n),
        "attempts_per_request_p99": rc.percentile(att, 0.99),
        "attempts_per_request_max": int(att.max()) if n else None,
        "failed_by_stop": dict(sorted(stops.items())),
        "amplification": _ratio(int(att.sum()), n),
        "prompt_amplification": _ratio(float((lg.prompt[rows] * att).sum()), float(lg.prompt[rows].sum())),
        "prompt_basis": lg.prompt_basis,
    }
    timeline, peak, why = _timeline(lg, cols, mine, t0, window_end_ns, recovered_ns, measure_start_ns, steady)
    out.update(bin_s=steady.window_s, timeline=timeline, peak_amplification=peak[0], peak_at_s=peak[1])
    return out, why


def _timeline(lg: Logical, cols: rc.RequestColumns, mine: np.ndarray, t0: int, window_end_ns: int,
              recovered_ns: int | None, measure_start_ns: int,
              steady: SteadyState) -> tuple[list[dict[str, Any]], tuple[float | None, float | None], str | None]:
    width = int(steady.window_s * NS)
    before = min(BINS_BEFORE, max(0, (t0 - measure_start_ns) // width))
    lo = t0 - before * width
    count = int(before + max(1, -(-(window_end_ns - t0) // width)))
    edges = lo + width * np.arange(count + 1, dtype=np.int64)
    rows = np.flatnonzero(mine[lg.group])  # the population's attempts
    sent = cols.sent_ns[rows]
    keep = (sent >= lo) & (sent < edges[-1])
    which = (sent[keep] - lo) // width
    attempts = np.bincount(which, minlength=count)
    tokens = np.bincount(which, weights=lg.prompt[lg.group[rows[keep]]], minlength=count)
    firsts = np.flatnonzero(mine & (lg.start_ns >= lo) & (lg.start_ns < edges[-1]))
    fwhich = (lg.start_ns[firsts] - lo) // width
    logical = np.bincount(fwhich, minlength=count)
    asked = np.bincount(fwhich, weights=lg.prompt[firsts], minlength=count)
    out, peak, peak_at = [], None, None
    until = recovered_ns if recovered_ns is not None else window_end_ns
    for i in range(count):
        amp = _ratio(int(attempts[i]), int(logical[i]))
        out.append({"from_s": round((int(edges[i]) - t0) / NS, 4), "attempts": int(attempts[i]),
                    "logical_requests": int(logical[i]), "amplification": amp,
                    "prompt_amplification": _ratio(float(tokens[i]), float(asked[i]))})
        judged = edges[i + 1] > t0 and edges[i] <= until and logical[i] >= steady.min_requests
        if judged and amp is not None and (peak is None or amp > peak):
            peak, peak_at = amp, out[-1]["from_s"]
    why = None
    if peak is None:
        why = (f"no {steady.window_s:g} s bin from the injection to recovery started at least "
               f"{steady.min_requests} logical requests of this population")
    return out, (peak, peak_at), why


def fault_retries(fault: dict[str, Any], lg: Logical | None, cols: rc.RequestColumns, window_end_ns: int,
                  measure_start_ns: int, steady: SteadyState) -> None:
    """Put ``retries`` into each population of ``fault`` (an :func:`chaos.analysis.analyse_fault` result) and
    the reasons of its nulls into its ``unmeasurable``; ``lg``: the logical requests of every attempt ``cols``
    (warm-up included), None when the run had no retry policy."""
    unm = fault["unmeasurable"]
    zones = fault["affected"].get("zones")
    for name in ("service", "affected"):
        pop = fault[name]
        if lg is None:
            pop["retries"] = None
            unm[f"{name}.retries"] = NO_POLICY
            continue
        mine = cols.measure[lg.first]
        if name == "affected" and zones is not None:
            mine = mine & cols.zone.isin(set(zones))[lg.first]
        steady_s = pop.get("time_to_steady_state_s")
        recovered = None if steady_s is None else fault["inject_ns"] + int(round(steady_s * NS))
        pop["retries"], why = population_retries(lg, cols, mine, fault["inject_ns"], window_end_ns,
                                                 bool(fault.get("window_cut_by")), recovered, measure_start_ns, steady)
        if why:
            unm[f"{name}.retries.peak_amplification"] = why
