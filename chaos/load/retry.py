"""The client's retry policy (``load.retry``): what a client that retries sends again, when, and how much.

Off by default (``load.retry`` null): every request is sent once, as the harness always did. With a policy,
a request the client sends (a **logical request**, what a user asked for) is sent up to ``attempts`` times
in all; each attempt is recorded as its own line (:class:`chaos.recording.records.RequestRecord`) with the logical
request's ``id`` and its ``attempt`` number (1, 2, ...), to the same target as the first.

- ``per_attempt_timeout_s``: each attempt's deadline (null: the load's ``timeout_s``).
- Backoff before retry ``n`` (1 for the first retry): ``min(backoff_cap_s, backoff_base_s * 2 ** (n - 1))``,
  with ``jitter`` ``full`` a uniform draw in [0, that] (AWS's "full jitter"), ``none`` that exactly. The draw
  is a function of the run's seed, the logical request's id and ``n`` alone (:func:`backoff_s`): the same run
  backs off the same way whatever the order requests finish in.
- ``retry_on``: the failure classes retried (:data:`RETRY_CLASSES`): ``connect`` (refused, connect
  timeout), ``reset`` (the connection closed before the first token), ``timeout`` (no bytes within the read
  timeout, or the attempt's deadline), ``5xx`` (any HTTP 5xx, a refusal's 503 too), ``503`` and ``429`` (those
  statuses alone, refusals or not), ``refused`` (a refusal, :data:`chaos.recording.records.REFUSED`: 429 or 503).
  Malformed, truncated, corrupted or aborted answers and other 4xx are never retried.
- ``after_first_token``: false (the default) never retries a request whose first token reached the client
  (what a streaming client that showed the text cannot take back); true retries such a failure too when its
  class is retried (a stream broken mid-way counts as ``reset``).
- ``budget`` (optional, after Envoy's and gRPC's retry budgets): in any ``window_s`` seconds, retries at most
  ``ratio`` times the logical requests started in it, and always at least ``min_retries``. A retry the
  budget refuses is not sent: the logical request fails with its last attempt (``retry_stop`` ``budget``).
- ``honour_retry_after``: a 429 or 503 answer's ``Retry-After`` (seconds, or an HTTP date) is waited
  instead of the backoff, at most ``retry_after_cap_s``.

The last attempt of a failed logical request says why no further attempt was sent (``retry_stop``):
``attempts`` (all used), ``not_retried`` (its class is not in ``retry_on``), ``first_token`` (failed after
its first token), ``budget``, ``stopped`` (the run stopped sending).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from chaos.recording import records as rec
from chaos.base.errors import UsageError

# a retry_on name -> the failure classes (chaos.recording.records) it retries; 503 and 429 are statuses
RETRY_CLASSES: dict[str, tuple[str, ...]] = {
    "connect": (rec.CONNECT_REFUSED, rec.CONNECT_TIMEOUT),
    "reset": (rec.CONNECTION_CLOSED, rec.STREAM_BROKEN),
    "timeout": (rec.READ_TIMEOUT, rec.DEADLINE),
    "5xx": (rec.HTTP_5XX,),
    "503": (),
    "429": (),
    "refused": (rec.REFUSED,),
}
STATUS_CLASSES = {"503": 503, "429": 429}
RETRY_AFTER_STATUSES = (429, 503)
JITTERS = ("full", "none")
# why the last attempt of a failed logical request was the last (its record's retry_stop)
STOP_ATTEMPTS, STOP_NOT_RETRIED, STOP_FIRST_TOKEN, STOP_BUDGET, STOP_STOPPED = (
    "attempts", "not_retried", "first_token", "budget", "stopped")
CANCELLED = "cancelled at the end of the run (drain expired)"  # an attempt's detail when the run cancelled it


@dataclass(frozen=True)
class Budget:
    """Retries at most ``ratio`` x the logical requests started in the last ``window_s`` s, at least ``min_retries``."""

    ratio: float = 0.2
    window_s: float = 10.0
    min_retries: int = 3


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # attempts in all, the first included
    per_attempt_timeout_s: float | None = None  # None: the load's timeout_s
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 2.0
    jitter: str = "full"  # full | none
    retry_on: tuple[str, ...] = ("connect", "timeout", "5xx")
    after_first_token: bool = False
    budget: Budget | None = None
    honour_retry_after: bool = False
    retry_after_cap_s: float = 10.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RetryPolicy":
        """The policy of ``load.retry``; a one-line UsageError naming what is wrong."""
        if not isinstance(d, dict):
            raise UsageError(f"retry: must be an object, got {d!r}")
        d = dict(d)
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise UsageError(f"retry: unknown field(s) {', '.join(sorted(unknown))}")
        budget = d.get("budget")
        if isinstance(budget, dict):
            extra = set(budget) - set(Budget.__dataclass_fields__)
            if extra:
                raise UsageError(f"retry.budget: unknown field(s) {', '.join(sorted(extra))}")
            d["budget"] = Budget(**budget)
        if "retry_on" in d and isinstance(d["retry_on"], (list, tuple)):
            d["retry_on"] = tuple(d["retry_on"])
        policy = cls(**d)
        problems = policy.problems()
        if problems:
            raise UsageError("retry: " + "; ".join(problems))
        return policy

    def problems(self, timeout_s: float | None = None) -> list[str]:
        out = []
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or not 1 <= self.attempts <= 10:
            out.append(f"attempts must be 1..10, got {self.attempts!r}")
        t = self.per_attempt_timeout_s
        if t is not None and (not isinstance(t, (int, float)) or t <= 0 or (timeout_s and t > timeout_s)):
            out.append(f"per_attempt_timeout_s must be in (0, timeout_s], got {t!r}")
        if not 0 < self.backoff_base_s <= self.backoff_cap_s <= 600:
            out.append(f"backoff must be 0 < backoff_base_s <= backoff_cap_s <= 600, got {self.backoff_base_s!r} "
                       f"and {self.backoff_cap_s!r}")
        if self.jitter not in JITTERS:
            out.append(f"jitter must be full or none, got {self.jitter!r}")
        wrong = [c for c in self.retry_on if c not in RETRY_CLASSES]
        if not self.retry_on or wrong:
            out.append(f"retry_on must name one or more of {', '.join(RETRY_CLASSES)}, got {list(self.retry_on)!r}")
        b = self.budget
        if b is not None and not (isinstance(b, Budget) and 0 < b.ratio <= 10 and b.window_s > 0
                                  and isinstance(b.min_retries, int) and b.min_retries >= 0):
            out.append(f"budget must have 0 < ratio <= 10, window_s > 0, min_retries >= 0, got {b!r}")
        if not 0 < self.retry_after_cap_s <= 600:
            out.append(f"retry_after_cap_s must be in (0, 600], got {self.retry_after_cap_s!r}")
        return out

    def attempt_timeout_s(self, timeout_s: float) -> float:
        return self.per_attempt_timeout_s or timeout_s

    def worst_case_s(self, timeout_s: float) -> float:
        """The longest a logical request can take: every attempt to its deadline, the longest wait between."""
        wait = max(self.backoff_cap_s, self.retry_after_cap_s if self.honour_retry_after else 0.0)
        return self.attempts * self.attempt_timeout_s(timeout_s) + (self.attempts - 1) * wait

    def retried(self, r: rec.RequestRecord) -> bool:
        """Whether the failed attempt ``r`` is of a class this policy retries (the first token aside)."""
        for name in self.retry_on:
            if name in STATUS_CLASSES:
                if r.status == STATUS_CLASSES[name]:
                    return True
            elif r.failure in RETRY_CLASSES[name]:
                return True
            elif name == "5xx" and r.failure == rec.REFUSED and (r.status or 0) >= 500:
                return True  # a refusal's 503 is a 5xx still: a policy retrying 5xx retries it as before
        return False


def backoff_s(policy: RetryPolicy, seed: int, logical_id: int, retry: int) -> float:
    """The wait before retry ``retry`` (1: the first) of logical request ``logical_id``, from the run's seed alone."""
    ceiling = min(policy.backoff_cap_s, policy.backoff_base_s * 2 ** (retry - 1))
    if policy.jitter == "none":
        return ceiling
    return random.Random(f"{seed}:retry:{logical_id}:{retry}").uniform(0.0, ceiling)


def retry_after_s(value: str | None, now_epoch_s: float) -> float | None:
    """A ``Retry-After`` header's wait in seconds (delta-seconds, or an HTTP date against ``now``), None when absent
    or not readable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now_epoch_s)


@dataclass
class RetryBudget:
    """The sliding-window budget of one harness (:class:`Budget`): logical requests started and retries sent, by
    instant (monotonic seconds)."""

    budget: Budget
    _started: deque = field(default_factory=deque)
    _retries: deque = field(default_factory=deque)

    def started(self, now: float) -> None:
        self._started.append(now)

    def _prune(self, now: float) -> None:
        for q in (self._started, self._retries):
            while q and q[0] <= now - self.budget.window_s:
                q.popleft()

    def allows(self, now: float) -> bool:
        self._prune(now)
        return len(self._retries) < max(self.budget.min_retries, self.budget.ratio * len(self._started))

    def spend(self, now: float) -> None:
        self._retries.append(now)


@dataclass
class Decision:
    """What to do after a failed attempt: wait ``delay_s`` and send again, or stop (``stop``: why)."""

    delay_s: float | None = None
    stop: str | None = None


def decide(policy: RetryPolicy, r: rec.RequestRecord, seed: int, budget: RetryBudget | None, now: float,
           stopping: bool) -> Decision:
    """After attempt ``r`` (failed) of a logical request: retry after a delay, or stop and why. Spends the
    budget when it retries."""
    attempt = r.attempt or 1
    if r.detail == CANCELLED:
        return Decision(stop=STOP_STOPPED)
    if r.got_first_token and not policy.after_first_token:
        return Decision(stop=STOP_FIRST_TOKEN)
    if not policy.retried(r):
        return Decision(stop=STOP_NOT_RETRIED)
    if attempt >= policy.attempts:
        return Decision(stop=STOP_ATTEMPTS)
    if stopping:
        return Decision(stop=STOP_STOPPED)
    if budget is not None and not budget.allows(now):
        return Decision(stop=STOP_BUDGET)
    if budget is not None:
        budget.spend(now)
    wait = backoff_s(policy, seed, r.id, attempt)
    if policy.honour_retry_after and r.status in RETRY_AFTER_STATUSES and r.retry_after_s is not None:
        wait = min(r.retry_after_s, policy.retry_after_cap_s)
    return Decision(delay_s=wait)


class Retrying:
    """One harness' retries: its policy, the run's seed, its budget. :meth:`after` each attempt, before it is
    recorded, says whether to send another (and sets a failed last attempt's ``retry_stop``)."""

    def __init__(self, policy: RetryPolicy, seed: int):
        self.policy, self.seed = policy, seed
        self.budget = RetryBudget(policy.budget) if policy.budget is not None else None

    def started(self, now: float) -> None:
        """A logical request's first attempt is sent (the budget's denominator)."""
        if self.budget is not None:
            self.budget.started(now)

    def after(self, r: rec.RequestRecord, now: float, stopping: bool) -> float | None:
        """The wait before the next attempt of ``r``'s logical request, or None: ``r`` is its last."""
        if r.ok:
            return None
        d = decide(self.policy, r, self.seed, self.budget, now, stopping)
        r.retry_stop = d.stop
        return d.delay_s
