"""What the claim counts a run's lost service in: its requests, or, when its client retried, its **logical requests**.

The one place the choice is made (:func:`counted`): :mod:`chaos.claim.cost` (each fault's cost, the baseline, a
fault-free run's background evidence) and :mod:`chaos.soak.figures` (a soak's observed cost, set against the claim's)
read a run's requests through it.

- A run without a retry policy (``load.retry`` null in its header, as every run before retries was): its request
  columns as recorded, one row per request, and nothing in the claim changes.
- A run whose client retried (:mod:`chaos.load.retry`): every attempt is a record of its own, grouped into logical
  requests as the summary's ``retries`` are (:func:`chaos.analysis.retries.logical_requests`). One row per logical
  request: what a user saw. It **failed** only when none of its attempts succeeded (its last attempt failed: a client
  stops at its first success); it was **sent** at its first attempt's send and **ended** at its final answer (the end
  of its last attempt), so its latency runs from the first send to the final answer: its ``ttft`` the wait before
  its last attempt plus that attempt's time to first token, its ``e2e`` first send to final end, its inter-token
  figures and failure class its last attempt's. It belongs to its first attempt's target's zone and is measured when
  its first attempt was. A failure the retries hid costs nothing; one they did not hide costs the whole span the user
  waited (a closed loop's user is busy from the first send to the final answer, backoffs included).

``counted_in`` (a run's, a fault's, a scope's in the claim document) says which, only for runs whose client retried: a
claim from runs without retries is the same document, to the byte, as before retries existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from chaos.analysis import retries
from chaos.recording import records as rec, request_columns as rc

NS = 1_000_000_000
LOGICAL = "logical requests"
# per logical request, the fields its final answer (its last attempt) gives; the rest are its first attempt's
FROM_LAST_FLOATS = ("itl_p95", "itl_mean", "tokens_lost", "tokens_duplicated", "tokens_out_of_order",
                    "tokens_corrupted", "migrations")
FROM_LAST_CODED = ("served_replica", "served_zone", "served_region", "served_version", "failure", "clipped",
                   "retry_stop", "migration_refused")


@dataclass
class Counted:
    """A run's requests as the claim counts them: ``columns`` one row per request (or per logical request), in send
    order; ``attempts`` the attempts of each row (None: no retries, one each); ``policy`` the run's retry policy as
    its header recorded it (None: no retries)."""

    columns: rc.RequestColumns
    attempts: np.ndarray | None = None
    policy: dict[str, Any] | None = None

    @property
    def logical(self) -> bool:
        return self.policy is not None

    def attempts_of(self, mask: np.ndarray) -> int | None:
        """The attempts sent for the rows ``mask`` (a mask over a prefix of the rows); None without retries."""
        if self.attempts is None:
            return None
        return int(self.attempts[:len(mask)][mask].sum())

    def counted_in(self) -> dict[str, Any] | None:
        """What a run's figures are counted in, for the claim document; None without retries."""
        if self.policy is None:
            return None
        return {"unit": LOGICAL, "retries": True, "policy_attempts": policy_attempts(self.policy)}


def policy_attempts(policy: dict[str, Any]) -> int | None:
    """The attempts the policy allowed in all (``load.retry.attempts``), None when the header did not say."""
    n = policy.get("attempts")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def logical_columns(cols: rc.RequestColumns) -> tuple[rc.RequestColumns, np.ndarray]:
    """One row per logical request of the attempts ``cols`` (see the module doc), in first-send order, and each one's
    attempts. The rows' records (``source``) are their last attempts'."""
    lg = retries.logical_requests(cols)
    order = np.argsort(lg.start_ns, kind="stable")
    first, last = lg.first[order], lg.last[order]
    out = cols.take(first)
    fin = cols.take(last)
    out.end_ns = lg.end_ns[order]
    out.ok = lg.ok[order]
    out.e2e = (out.end_ns - out.sent_ns) / NS
    out.ttft = (fin.sent_ns - out.sent_ns) / NS + fin.ttft  # NaN where the last attempt saw no first token
    out.first_token = ~np.isnan(out.ttft)
    for name in FROM_LAST_FLOATS:
        setattr(out, name, getattr(fin, name))
    out.attempt = fin.attempt
    out.coded = {**out.coded, **{k: fin.coded[k] for k in FROM_LAST_CODED if k in fin.coded}}
    out.source = fin.source
    return out, lg.attempts[order]


def counted(records: rec.RunRecords, columns: rc.RequestColumns | None = None) -> Counted:
    """The run's requests as the claim counts them: logical requests when its header records a retry policy, else
    its requests as recorded (``columns``: the run's request columns when already made)."""
    cols = columns if columns is not None else rc.of(records)
    policy = retries.policy_of(records.header)
    if policy is None:
        return Counted(cols)
    logical, attempts = logical_columns(cols)
    return Counted(logical, attempts, policy)


def scope_counted_in(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A scope's ``counted_in`` over its counted runs (:func:`chaos.claim.cost.run_cost`'s): None when none retried;
    else the unit, how many of its runs retried, the policies' attempts, the attempts and logical requests of their
    fault windows, and the sentence the claim shows."""
    on = [r for r in runs if r.get("counted_in")]
    if not on:
        return None
    allowed = sorted({r["counted_in"]["policy_attempts"] for r in on if r["counted_in"]["policy_attempts"] is not None})
    faults = [f for r in on for f in r["faults"]]
    attempts = None if any(f.get("attempts") is None for f in faults) else sum(f["attempts"] for f in faults)
    logical = None if any(f.get("requests") is None for f in faults) else sum(f["requests"] for f in faults)
    said = ("attempts " + "/".join(map(str, allowed))) if allowed else "attempts not recorded"
    mixed = "" if len(on) == len(runs) else f" in {len(on)} of {len(runs)} runs (the others sent each request once)"
    sent = ("" if attempts is None or logical is None
            else f"; {attempts} attempts for {logical} logical requests in the fault windows")
    return {"unit": LOGICAL, "retries": True, "runs": len(on), "of": len(runs), "policy_attempts": allowed,
            "attempts": attempts, "logical_requests": logical,
            "statement": f"counted in {LOGICAL}: retries on{mixed} ({said}){sent}"}
