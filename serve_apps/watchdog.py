"""The progress watchdog (opt-in, both apps): a replica whose engine has work in flight and has produced
no token for ``stall_s`` seconds fails its Serve health check, so Serve replaces it.

Why: a hung engine is a gray failure. vLLM's health check (``AsyncLLM.check_health``, behind Serve
LLM's ``LLMServer.check_health``) raises only once the engine *errored*; a stopped or wedged engine
passes it, its replica keeps its share of requests until the clients time out, and nothing replaces it.
Progress is what a hung engine lacks: tokens coming out while requests wait for them.

The rule (:class:`Watchdog`, plain logic with an injectable clock):

- a request is *in flight* from when the replica admits it until its answer ends (finished, failed or
  cancelled by the client): :meth:`Watchdog.request` and :meth:`Watchdog.watch`;
- *progress* is a token (any token, of any request) coming out of the engine: :meth:`Watchdog.progress`.
  The stall clock starts at the last progress, or when work appeared (in flight went from 0 to 1),
  whichever is later; a request ending is not progress (a client giving up is not the engine working);
- stalled: at least one request in flight and ``now - start >= stall_s``; with nothing in flight it
  never fires. :meth:`Watchdog.check` raises :class:`Stalled` with one line, e.g. ``no token for 12.3 s
  with 4 requests in flight (stall_s 10)``; the replica's ``check_health`` calls it.

Configured by ``stall_s`` in the deployment's Serve ``user_config`` (``{"stall_s": 10}``; absent,
``null`` or 0: off, the default), which ``serve_apps.config`` writes from ``AppSpec.stall_s``; each app's
``reconfigure`` reads it (:func:`stall_s_of`), so turning it on or off reconfigures the replicas in place.

How fast: Serve calls ``check_health`` every ``health_check_period_s`` (x0.9-1.1) and marks a replica
unhealthy after ``REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD`` (3, Ray 2.60) failures in a row. So the
first failing check comes within stall_s + one health period of the last token, and the replacement
starts about two periods later (stall_s + up to ~3.3 periods in all). Choose ``stall_s`` above the
longest gap between tokens a healthy engine can have under load (a long prefill behind a full batch):
a false detection replaces a working replica.

The watchdog v2 (:mod:`serve_apps.watchdog_v2`, ``{"stall_s": N, "watchdog": 2}``) closes this rule's blind
spots (a partial hang, a hung replica with no requests, a long prefill); this one is kept to compare.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, AsyncIterator, Callable


class Stalled(RuntimeError):
    """The engine has work in flight and produced no token for ``stall_s``."""


def stall_s_of(user_config: Any) -> float | None:
    """``stall_s`` from a deployment's ``user_config`` (a dict, or None): None when off. Anything else
    (another key, a negative or non-numeric value) is refused, so a bad config fails the deploy."""
    if user_config is None:
        return None
    if not isinstance(user_config, dict):
        raise ValueError(f"user_config must be an object, got {user_config!r}")
    unknown = set(user_config) - {"stall_s"}
    if unknown:
        raise ValueError(f"user_config: unknown keys {sorted(unknown)} (only stall_s)")
    value = user_config.get("stall_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"user_config.stall_s must be a number of seconds >= 0, got {value!r}")
    return float(value) or None


class Watchdog:
    """Requests in flight and the engine's last progress; :meth:`stalled` says whether they disagree
    for ``stall_s``. Not thread-safe: one replica's event loop drives it."""

    def __init__(self, stall_s: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.stall_s = stall_s or None
        self.in_flight = 0
        self.since = clock()

    def configure(self, stall_s: float | None) -> None:
        """On (a number of seconds) or off (None or 0); what is in flight is kept."""
        self.stall_s = stall_s or None

    def begin(self) -> None:
        """A request was admitted."""
        if self.in_flight == 0:
            self.since = self.clock()
        self.in_flight += 1

    def end(self) -> None:
        """A request's answer ended, however it ended."""
        self.in_flight = max(0, self.in_flight - 1)

    def progress(self) -> None:
        """A token came out of the engine."""
        self.since = self.clock()

    def stalled(self) -> str | None:
        """Why the engine is stalled, in one line, or None (off, nothing in flight, or progress)."""
        if self.stall_s is None or self.in_flight == 0:
            return None
        idle = self.clock() - self.since
        if idle < self.stall_s:
            return None
        n = self.in_flight
        return (f"no token for {idle:.1f} s with {n} request{'s' if n != 1 else ''} in flight "
                f"(stall_s {self.stall_s:g})")

    def check(self) -> None:
        """Raise :class:`Stalled` when :meth:`stalled` says so (a replica's ``check_health``)."""
        reason = self.stalled()
        if reason:
            raise Stalled(reason)

    @contextlib.contextmanager
    def request(self):
        """One request in flight for the ``with`` block."""
        self.begin()
        try:
            yield self
        finally:
            self.end()

    async def watch(self, stream: AsyncIterator, is_token: Callable[[Any], bool] = lambda item: True):
        """``stream`` as it is, one request in flight while it runs (from its first step to its end or
        cancellation), each item that ``is_token`` progress. Closing it closes ``stream``."""
        with self.request():
            try:
                async for item in stream:
                    if is_token(item):
                        self.progress()
                    yield item
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
