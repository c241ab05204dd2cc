"""The progress watchdog v2 (opt-in, both apps): four signals where v1 (:mod:`serve_apps.watchdog`) has one.

v1 fails a replica's health check when requests are in flight and no token of any request came for
``stall_s``. Its blind spots: any token of any request resets its clock (a partial hang, or an admission
stall, never fires); a hung replica with no requests passes, and with no traffic it never probes; a prefill
longer than ``stall_s`` with nothing else decoding fires falsely. v2 (:class:`WatchdogV2`, plain logic with
an injectable clock) fails the check on any of:

1. **the engine not stepping**: a request is waiting on the engine and the engine's heartbeat
   (:mod:`serve_apps.heartbeat`: vLLM's wrapped ``EngineCore.step`` in the engine process; the stream
   target's engine child's steps) did not advance for the *step threshold*, counted from the last step or
   from when the oldest waiting request began to wait, whichever is later. A chunked prefill steps, so a
   long prefill is not a stall. Without a heartbeat (vLLM without the plugin) the last token of any request
   stands in for the last step (v1's rule);
2. **an admission stall**: while the engine steps, a request without its first token waited longer than its
   *first-token threshold*, which grows with its prompt;
3. **a stuck stream**: while the engine steps, a stream that had its first token waited for its next one
   longer than the *token threshold* (a partial hang: others progress, this one does not);
4. **an idle canary unanswered**: with nothing in flight and no traffic for :data:`IDLE_S` (10 s, as
   Dynamo's canary), the health check starts one tiny request to its own engine (a one-word prompt,
   ``max_tokens`` 1) in the background (:meth:`WatchdogV2.maybe_canary`); it fails while that request has
   no answer after the *canary threshold*, or once it failed, until a token or a later canary clears it.

Signals 2 and 3 need the engine to be stepping: a step within the last ``max(1 s, k x p99 step time)``
(:data:`RECENT_S`); while it is not, only signal 1 speaks, so each failure is named by its cause.

**Waiting on the engine**: a request waits on the engine from its admission to its first token and then
from each pull of its next token to the token; while its consumer (the client, Serve's stream) holds a
token it does not (a slow reader is not a stuck engine). A request that ended (finished, failed, cancelled
by its client) is gone at once: :meth:`WatchdogV2.watch` ends it in its ``finally``. A request that is
not streamed (vLLM's non-streamed answer comes out whole at its end) is watched by signal 1 alone.

**Thresholds**, scaled to what the replica observed (``k`` = :data:`K` = 4, each at least ``stall_s``):

- step: ``max(stall_s, k x p99 step time)`` (the heartbeat's histogram, an upper bound within x2);
- first token of a prompt of ``n`` tokens: ``max(step threshold, k x n x r)``, ``r`` the 99th percentile of
  the observed time to first token per prompt token (the last :data:`WINDOW` first tokens; queueing
  included, so it grows under load; before :data:`MIN_SAMPLES` first tokens, :data:`PRIOR_S_PER_TOKEN`,
  10 ms a token, slower than any engine the rig runs, so a cold replica errs on the late side). A long
  prompt gets a long budget: a replica's first long prompt is not a false positive, an admission stall
  shows first on the short prompts behind it;
- token: ``max(step threshold, k x p99 gap between a stream's tokens)`` (the last :data:`WINDOW` gaps);
- canary: the first-token threshold of a one-token prompt.

Prompt tokens are what each app can count before the engine tokenizes: words on the stream target (its
tokens), characters / 4 on vLLM (:func:`estimated_tokens`); ``r`` is learnt in the same unit.

**The canary's cost**: one request of one prompt token and one output token per :data:`IDLE_S` of idleness
(at most 6 a minute; none while traffic flows): one engine step of one short sequence, counted in the
engine's own metrics (vLLM's request counters include it). Its first failing check comes ``IDLE_S`` + the
canary threshold + up to one health period after the engine stopped.

Configured in the engine deployment's Serve ``user_config``: ``{"stall_s": 5, "watchdog": 2}``
(:func:`config_of`); without ``watchdog``, v1. ``"on_stall": "exit"`` beside them (:func:`on_stall_of`): the check
that finds a stall ends the replica and its engine (:mod:`serve_apps.replica_exit`) instead of only failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from serve_apps import replica_exit, watchdog as v1
from serve_apps.heartbeat import Beat

K = 4.0
IDLE_S = 10.0
PRIOR_S_PER_TOKEN = 0.01
MIN_SAMPLES = 8
WINDOW = 512
RECENT_S = 1.0  # "while the engine steps": a step within max(this, k x p99 step time)
VERSIONS = (1, 2)

logger = logging.getLogger("ray.serve")


class Stalled(v1.Stalled):
    """One of v2's signals fired; the message says which."""


def config_of(user_config: Any) -> tuple[int, float | None]:
    """``(watchdog version, stall_s)`` from a deployment's ``user_config``: ``watchdog`` 1 (absent) or 2,
    ``stall_s`` as v1 reads it (None: off), ``on_stall`` (:func:`on_stall_of`) with v2 only. Anything else is
    refused, so a bad config fails the deploy."""
    if isinstance(user_config, dict) and "watchdog" in user_config:
        version = user_config["watchdog"]
        if isinstance(version, bool) or version not in VERSIONS:
            raise ValueError(f"user_config.watchdog must be one of {VERSIONS}, got {version!r}")
        on_stall_of(user_config)
        rest = {k: v for k, v in user_config.items() if k not in ("watchdog", "on_stall")}
        return int(version), v1.stall_s_of(rest)
    on_stall_of(user_config)
    return 1, v1.stall_s_of(user_config)


def on_stall_of(user_config: Any) -> str:
    """What a v2 replica does when its watchdog finds the engine stalled: ``fail`` its health check (absent; Serve
    takes it out after three in a row) or ``exit`` (:mod:`serve_apps.replica_exit`: it ends itself and its engine
    at once, so Serve takes it out at that check). Set without the v2: refused."""
    if not isinstance(user_config, dict) or "on_stall" not in user_config:
        return "fail"
    if user_config.get("watchdog") != 2:
        raise ValueError('user_config.on_stall needs the watchdog v2 ("watchdog": 2)')
    return replica_exit.on_stall_of(user_config["on_stall"])


def estimated_tokens(text: str) -> int:
    """Prompt tokens of ``text`` before tokenizing: characters / 4 (at least 1)."""
    return max(1, len(text) // 4)


class Recent:
    """The last ``size`` samples; :meth:`quantile` of them (None with fewer than ``least``)."""

    def __init__(self, size: int = WINDOW) -> None:
        self.size = size
        self.samples: list[float] = []
        self.next = 0

    def add(self, value: float) -> None:
        if len(self.samples) < self.size:
            self.samples.append(value)
        else:
            self.samples[self.next] = value
            self.next = (self.next + 1) % self.size

    def quantile(self, q: float, least: int = 1) -> float | None:
        if len(self.samples) < max(1, least):
            return None
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Flight:
    """One request in flight: when it began, its prompt's tokens, when it began waiting on the engine
    (None: its consumer holds a token), its tokens so far, whether they come one by one (``streamed``)."""
    began: float
    prompt_tokens: int
    waiting_since: float | None
    tokens: int = 0
    streamed: bool = True


class WatchdogV2:
    """Requests in flight, the engine's heartbeat (``heartbeat``: a function returning a
    :class:`~serve_apps.heartbeat.Beat`, or None when there is none) and the canary; :meth:`stalled` says
    which signal fired. Not thread-safe: one replica's event loop drives it."""

    def __init__(self, stall_s: float | None = None, clock: Callable[[], float] | None = None,
                 heartbeat: Callable[[], Beat | None] | None = None, k: float = K, idle_s: float = IDLE_S,
                 exit_replica: Callable[[str], Any] = replica_exit.exit_replica):
        import time

        self.clock = clock or time.monotonic
        self.stall_s = stall_s or None
        self.on_stall = "fail"
        self.exit_replica = exit_replica  # on_stall exit: ends the replica (a seam for tests)
        self.heartbeat = heartbeat or (lambda: None)
        self.k = k
        self.idle_s = idle_s
        self._flights: dict[int, Flight] = {}
        self._next_id = 0
        self.rates = Recent()  # time to first token per prompt token
        self.gaps = Recent()  # time a stream waited for its next token
        now = self.clock()
        self.last_token = now  # any request's: the heartbeat's stand-in when there is none
        self.last_traffic = now  # a request beginning or ending, a token, a canary answered
        self.canary_since: float | None = None  # a canary under way since
        self.canary_failure: str | None = None
        self.canary_unavailable: str | None = None  # the probe itself failed (not the engine): why
        self.canaries = 0
        self._canary_task: asyncio.Task | None = None

    def configure(self, stall_s: float | None, on_stall: str = "fail") -> None:
        """On (a number of seconds) or off (None or 0); what is in flight is kept. ``on_stall`` ``exit``: a check that
        finds the engine stalled ends the replica (:func:`serve_apps.replica_exit.exit_replica`) instead of raising."""
        self.stall_s = stall_s or None
        self.on_stall = replica_exit.on_stall_of(on_stall)

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    # the request path

    def begin(self, prompt_tokens: int = 1, streamed: bool = True) -> int:
        """A request was admitted; its handle for :meth:`pulling`, :meth:`token`, :meth:`end`. One not
        ``streamed`` (its answer comes out whole at its end) is watched by the engine's steps alone."""
        now = self.clock()
        self._next_id += 1
        self._flights[self._next_id] = Flight(now, max(1, int(prompt_tokens)), now, streamed=streamed)
        self.last_traffic = now
        return self._next_id

    def pulling(self, handle: int) -> None:
        """The request waits on the engine for its next token again (its consumer asked for it)."""
        flight = self._flights.get(handle)
        if flight is not None and flight.waiting_since is None:
            flight.waiting_since = self.clock()

    def token(self, handle: int) -> None:
        """A token of the request came out of the engine; its consumer holds it until the next pull."""
        now = self.clock()
        flight = self._flights.get(handle)
        if flight is not None:
            if not flight.streamed:
                pass
            elif flight.tokens == 0:
                self.rates.add((now - flight.began) / flight.prompt_tokens)
            elif flight.waiting_since is not None:
                self.gaps.add(now - flight.waiting_since)
            flight.tokens += 1
            flight.waiting_since = None
        self.last_token = self.last_traffic = now
        self.canary_failure = None  # the engine answers

    def progress(self) -> None:
        """A token of some request (which one unknown: vLLM's engine core outputs): the heartbeat's stand-in."""
        self.last_token = self.last_traffic = self.clock()

    def end(self, handle: int) -> None:
        """The request's answer ended, however it ended."""
        if self._flights.pop(handle, None) is not None:
            self.last_traffic = self.clock()

    @contextlib.contextmanager
    def request(self, prompt_tokens: int = 1, streamed: bool = True):
        """One request in flight for the ``with`` block; yields its handle."""
        handle = self.begin(prompt_tokens, streamed)
        try:
            yield handle
        finally:
            self.end(handle)

    async def watch(self, stream: AsyncIterator, is_token: Callable[[Any], bool] = lambda item: True,
                    prompt_tokens: int = 1, handle: int | None = None, streamed: bool = True):
        """``stream`` as it is, a request in flight while it runs (``handle``'s, when the request began
        before), waiting on the engine while it pulls, each item that ``is_token`` a token. Closing it
        closes ``stream``."""
        own = handle is None
        handle = self.begin(prompt_tokens, streamed) if own else handle
        try:
            self.pulling(handle)
            async for item in stream:
                if is_token(item):
                    self.token(handle)
                yield item
                self.pulling(handle)
        finally:
            if own:
                self.end(handle)
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    # thresholds

    def step_threshold(self, beat: Beat | None) -> float:
        p99 = beat.p99 if beat is not None else None
        return max(self.stall_s or 0.0, self.k * p99) if p99 else (self.stall_s or 0.0)

    def first_token_threshold(self, prompt_tokens: int, beat: Beat | None) -> float:
        rate = self.rates.quantile(0.99, least=MIN_SAMPLES) or PRIOR_S_PER_TOKEN
        return max(self.step_threshold(beat), self.k * prompt_tokens * rate)

    def token_threshold(self, beat: Beat | None) -> float:
        p99 = self.gaps.quantile(0.99)
        return max(self.step_threshold(beat), self.k * p99) if p99 else self.step_threshold(beat)

    # the signals

    def stalled(self) -> str | None:
        """Which signal fired, in one line, or None (off, or all well)."""
        if self.stall_s is None:
            return None
        now = self.clock()
        beat = self.heartbeat()
        step_t = self.step_threshold(beat)
        waiting = [f for f in self._flights.values() if f.waiting_since is not None]
        if waiting:
            last_step = beat.last if beat is not None else self.last_token
            since = max(last_step, min(f.waiting_since for f in waiting))
            if now - since >= step_t:
                what = "stepped" if beat is not None else "produced a token"
                busy = (f", one step under way for {now - beat.busy_since:.1f} s"
                        if beat is not None and beat.busy_since else "")
                return (f"the engine has not {what} for {now - since:.1f} s with {_n(len(waiting))} waiting on "
                        f"it{busy} (threshold {step_t:.1f} s)")
            if now - last_step < max(RECENT_S, self.k * (beat.p99 or 0.0) if beat is not None else 0.0):
                reason = self._admission(now, beat, waiting) or self._stuck_stream(now, beat, waiting)
                if reason:
                    return reason
        return self._canary(now, beat)

    def _admission(self, now: float, beat: Beat | None, waiting: list[Flight]) -> str | None:
        over = [(now - f.began, self.first_token_threshold(f.prompt_tokens, beat), f)
                for f in waiting if f.tokens == 0 and f.streamed]
        over = [o for o in over if o[0] >= o[1]]
        if not over:
            return None
        age, threshold, f = max(over, key=lambda o: o[0])
        return (f"admission stall: a request has had no first token for {age:.1f} s ({f.prompt_tokens} prompt "
                f"tokens; threshold {threshold:.1f} s) while the engine steps; {len(over)} such")

    def _stuck_stream(self, now: float, beat: Beat | None, waiting: list[Flight]) -> str | None:
        threshold = self.token_threshold(beat)
        stuck = [f for f in waiting if f.tokens > 0 and f.streamed and now - f.waiting_since >= threshold]
        if not stuck:
            return None
        age = max(now - f.waiting_since for f in stuck)
        others = sum(1 for f in self._flights.values() if f not in stuck)
        return (f"stuck stream: {_n(len(stuck), 'stream')} had no token for {age:.1f} s (threshold "
                f"{threshold:.1f} s) while the engine steps ({others} other{'s' if others != 1 else ''} in flight)")

    def _canary(self, now: float, beat: Beat | None) -> str | None:
        if self.canary_failure:
            return self.canary_failure
        if self.canary_since is None:
            return None
        threshold = self.first_token_threshold(1, beat)
        age = now - self.canary_since
        if age < threshold:
            return None
        return f"idle canary unanswered for {age:.1f} s (threshold {threshold:.1f} s)"

    def check(self) -> None:
        """Raise :class:`Stalled` when :meth:`stalled` says so (a replica's ``check_health``); with ``on_stall``
        ``exit``, end the replica first (:attr:`exit_replica`: it does not return but in a test)."""
        reason = self.stalled()
        if reason:
            if self.on_stall == "exit":
                self.exit_replica(reason)
            raise Stalled(reason)

    # the idle canary

    def canary_due(self) -> bool:
        """On, nothing in flight, no canary under way, no traffic for :attr:`idle_s`."""
        return (self.stall_s is not None and not self._flights and self.canary_since is None
                and self.clock() - self.last_traffic >= self.idle_s)

    def canary_began(self) -> None:
        self.canary_since = self.clock()
        self.canaries += 1

    def canary_answered(self) -> None:
        self.canary_since = None
        self.canary_failure = None
        self.last_traffic = self.clock()

    def canary_failed(self, error: BaseException) -> None:
        self.canary_since = None
        self.canary_failure = f"idle canary failed: {type(error).__name__}: {error}"
        self.last_traffic = self.clock()

    async def run_canary(self, probe: Callable[[], Awaitable[Any]]) -> None:
        """One canary: ``probe`` (a one-token request to the engine) awaited, its outcome recorded."""
        self.canary_began()
        await self._answer(probe)

    async def _answer(self, probe: Callable[[], Awaitable[Any]]) -> None:
        try:
            await probe()
        except asyncio.CancelledError:
            self.canary_since = None
            raise
        except (AttributeError, TypeError, ImportError) as e:  # the probe itself broken (the rig's, an API that
            self.canary_since, self.last_traffic = None, self.clock()  # moved): no finding about the engine
            self.canary_unavailable = f"{type(e).__name__}: {e}"[:200]
            logger.warning("progress watchdog v2: the idle canary is unavailable (%s)", self.canary_unavailable)
        except Exception as e:  # noqa: BLE001 - any other failure of the engine's answer is the finding
            self.canary_failed(e)
            logger.warning("progress watchdog v2: %s", self.canary_failure)
        else:
            self.canary_answered()

    def maybe_canary(self, probe: Callable[[], Awaitable[Any]]) -> bool:
        """Start a canary in the background on the running loop when one is due (:meth:`canary_due`)."""
        if not self.canary_due():
            return False
        loop = asyncio.get_running_loop()
        self.canary_began()  # under way from now: the next check does not start another
        self._canary_task = loop.create_task(self._answer(probe))
        return True


def _n(n: int, what: str = "request") -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"
