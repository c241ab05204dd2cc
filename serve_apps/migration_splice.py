"""The migrating ingress's stream splicing (issue 47), apart from Serve and HTTP: :class:`Splice`.

A :class:`Splice` follows one request's answer from the engine replicas through a *transport*: anything with
``open(body, chat)`` returning an async iterator of the engine's items (the ingress's is a Serve
``DeploymentHandle``, :mod:`serve_apps.migrating_ingress`; the unit tests' a fake that breaks where they say).
The items of one answer: first the serving replica's description (``{served_by.MARK: {"identity": ...,
"engine": ...}}``), then either one JSON answer (``{"status": 500, "json": {...}}``: an error before any token)
or the SSE chunks of a stream (``"data: {...}\\n\\n"``, ``"data: [DONE]\\n\\n"``). The engine is always asked for a
stream (a non-streamed request is collected by the ingress, so it migrates too).

**A break**: the transport raises (the replica died: Serve's handle raises ``ActorDiedError`` and the like), an
error event or answer of the server's (type ``EngineDeadError``, or a code or status of 500 and up: vLLM's dead
engine says ``InternalServerError``, 500, "EngineCore encountered an issue"; its engine errored or died, and a
watchdog's take-out ends in one of these), or the stream ends without its last token (no ``finish_reason``).
Then, unless the request is refused migration (:func:`serve_apps.migration_refusal.refusal`, or ``limit``: it
migrated ``limit`` times already), a **continuation** goes out (:func:`serve_apps.continuation.body`: the
original request plus the text so far, ``max_tokens`` reduced by the tokens so far; a break before any token
re-sends the original request).
Its first event with a token carries ``"migrated": k`` (k the migrations so far) and ``"served_by"`` (the replica
serving from there: the response's headers were sent with the first one's); the events keep the first answer's
``id`` and ``created``; a continuation's role-only opening event is dropped; its usage counts the whole answer
(the tokens before the continuation added to ``completion_tokens``, taken off ``prompt_tokens``). A refused
migration ends the stream with an error event carrying ``"migration_refused": why`` (or, when nothing was sent
yet, a 500 answer carrying it): the request fails as it did without migration.

**Routing away**: Serve's handle cannot be told to avoid a replica, so a continuation answered by a replica that
broke before (its description names it) is closed at once and sent again, and so is a continuation that fails
before its first token (it reached a dead replica that Serve had not dropped yet): after a backoff (0.2 s,
doubling, at most 1 s), until :attr:`Policy.retry_deadline_s` (10 s) after the break. These attempts are not
migrations (no marker, not counted against the limit; :attr:`Splice.retries` counts them). Past the deadline
the stream fails with ``migration_refused: "no-replica"``. A continuation the engine answers with another error
(a 4xx) fails the stream with ``migration_refused: "continuation-failed"``.

Tokens are counted one per event with text (exact for the stream target), or, with :attr:`Policy.usage_tokens`
(the vLLM app), from the engine's own count: the engine is asked for its usage on every event
(``stream_options: {include_usage, continuous_usage_stats}``), each event's ``usage.completion_tokens`` is the
tokens of that answer so far (vLLM may put several tokens in one event, or none in an event it holds back), and
the usage is taken off the events again where the client did not ask for it (the usage-only last event kept when
it asked for ``include_usage``, the usage on every event when it asked for ``continuous_usage_stats``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from serve_apps import continuation, migration_refusal, served_by

DONE = "[DONE]"
MIGRATED = "migrated"  # the event field that opens a continuation (the harness's chaos.load.continuity.MIGRATED)
REFUSED = "migration_refused"  # the error's field that says why the stream was not migrated
ENGINE_DEAD = "EngineDeadError"


@dataclass
class Policy:
    limit: int  # migrations per request at most
    app: str = "stream"  # stream | llm: which refusals apply (serve_apps.migration_refusal)
    default_max_tokens: int | None = 16  # the app's budget when a request gives none (vLLM: None, the context)
    retry_deadline_s: float = 10.0  # routing away: how long after a break a continuation may be sent again
    backoff_s: tuple[float, float] = (0.2, 1.0)  # routing away: the first wait, and the most
    usage_tokens: bool = False  # count tokens by the engine's usage on every event (vLLM), not one per text event


@dataclass
class Served:
    """The replica serving from here on (its description, :mod:`serve_apps.served_by`)."""

    desc: dict[str, Any]


@dataclass
class Response:
    """An answer that is not a stream (an error before anything was sent): status and JSON body."""

    status: int
    payload: dict[str, Any]


@dataclass
class Event:
    """An event for the client: a JSON object, or :data:`DONE`."""

    data: Any


@dataclass
class _Attempt:
    replica: str | None = None
    outcome: str = "broken"  # done | answered | failed | broken | routed-back
    error: str | None = None
    tokens: int = 0  # tokens it delivered


def replica_of(desc: dict[str, Any] | None) -> str | None:
    return ((desc or {}).get("identity") or {}).get("replica")


def _dead(payload: Any, status: Any = None) -> bool:
    """Whether an error (event, or answer with ``status``) is the server's: a break, not the request's fault."""
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        return False
    codes = [c for c in (status, err.get("code")) if isinstance(c, int) and not isinstance(c, bool)]
    return err.get("type") == ENGINE_DEAD or any(c >= 500 for c in codes)


def _message(payload: Any) -> str:
    err = payload.get("error") if isinstance(payload, dict) else None
    return str(err.get("message") if isinstance(err, dict) else err)[:300]


def sse_data(chunk: Any) -> list[str]:
    """The ``data`` of each event in an SSE chunk (bytes or text; one chunk may hold several events)."""
    text = chunk.decode() if isinstance(chunk, (bytes, bytearray)) else str(chunk)
    out = []
    for block in text.split("\n\n"):
        lines = [ln[5:].lstrip(" ") for ln in block.splitlines() if ln.startswith("data:")]
        if lines:
            out.append("\n".join(lines))
    return out


def _choice(event: dict[str, Any]) -> tuple[str, str | None]:
    """The text and finish reason of an event's first choice."""
    choices = event.get("choices") or []
    c = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = c.get("delta") if isinstance(c.get("delta"), dict) else {}
    text = c.get("text") if isinstance(c.get("text"), str) else delta.get("content")
    return (text if isinstance(text, str) else ""), c.get("finish_reason")


_END = object()


async def _next(stream: AsyncIterator[Any]) -> tuple[Any, BaseException | None]:
    """The stream's next item, :data:`_END` at its end, or the exception it raised (the replica died)."""
    try:
        return await stream.__anext__(), None
    except StopAsyncIteration:
        return _END, None
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the transport raises is a break
        return None, e


async def _close(stream: Any) -> None:
    if hasattr(stream, "aclose"):
        with contextlib.suppress(Exception):
            await stream.aclose()
    elif hasattr(stream, "cancel"):
        with contextlib.suppress(Exception):
            stream.cancel()


class Splice:
    """One request's answer, spliced over migrations: iterate :meth:`run` for :class:`Served`, :class:`Response`
    and :class:`Event` items (the module's doc says what it does)."""

    def __init__(self, transport: Any, body: dict[str, Any], chat: bool, policy: Policy,
                 sleep: Callable[[float], Any] = asyncio.sleep, clock: Callable[[], float] = time.monotonic):
        self.transport = transport
        self.original = dict(body, stream=True)  # the engine is always asked for a stream
        self.chat = chat
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.text = ""  # the answer so far
        self.tokens = 0
        self.migrations = 0
        self.retries = 0  # continuations sent again to route away from a failed replica (not migrations)
        self.finished = False  # a finish_reason came
        self.sent = 0  # events given to the client
        self.failed: set[str] = set()  # replicas whose stream broke
        self.served: dict[str, Any] | None = None
        self.refused: str | None = None
        self._id: Any = None
        self._created: Any = None

    async def run(self) -> AsyncIterator[Served | Response | Event]:
        request = self.original
        deadline = 0.0
        wait = self.policy.backoff_s[0]
        while True:
            a = _Attempt()
            async for item in self._attempt(request, a):
                yield item
            if a.outcome in ("done", "answered"):
                return
            if a.outcome == "failed":
                async for item in self._fail("continuation-failed", a.error):
                    yield item
                return
            if a.outcome == "broken" and a.replica is not None:
                self.failed.add(a.replica)
            if self.finished:  # it broke after its last token: nothing to continue, nothing to refuse
                yield Event(DONE)
                return
            if self.migrations and a.tokens == 0:  # routed back, or failed before its first token: send it again
                if self.clock() >= deadline:
                    async for item in self._fail("no-replica", a.error or "no other replica answered"):
                        yield item
                    return
                await self.sleep(max(0.0, min(wait, deadline - self.clock())))
                wait = min(wait * 2, self.policy.backoff_s[1])
                self.retries += 1
                continue
            why = migration_refusal.refusal(self.original, self.policy.app)
            if why is None and self.migrations >= self.policy.limit:
                why = "limit"
            if why is not None:
                async for item in self._fail(why, a.error):
                    yield item
                return
            if self.tokens == 0:
                request = self.original
            else:
                try:
                    request = continuation.body(self.original, self.chat, self.text, self.tokens,
                                                self.policy.default_max_tokens,
                                                mark_prompt=self.policy.app == "stream")
                except ValueError:  # the budget is spent: the answer is complete
                    yield Event(self._stamp({"choices": [self._finish_choice()]}))
                    yield Event(DONE)
                    return
            self.migrations += 1
            deadline = self.clock() + self.policy.retry_deadline_s
            wait = self.policy.backoff_s[0]

    def _finish_choice(self) -> dict[str, Any]:
        return ({"index": 0, "delta": {}, "finish_reason": "length"} if self.chat
                else {"index": 0, "text": "", "finish_reason": "length"})

    def _stamp(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event with the first answer's id and creation time."""
        if self._id is None:
            self._id, self._created = event.get("id"), event.get("created")
        else:
            event["id"], event["created"] = self._id, self._created
        return event

    async def _fail(self, why: str, error: str | None) -> AsyncIterator[Response | Event]:
        self.refused = why
        err = {"message": error or "the stream broke", "type": ENGINE_DEAD, "code": 500}
        if self.sent == 0:
            yield Response(500, {"error": err, REFUSED: why})
            return
        yield Event({"error": err, REFUSED: why})
        yield Event(DONE)

    async def _attempt(self, request: dict[str, Any], a: _Attempt) -> AsyncIterator[Served | Response | Event]:
        """One answer from the engine, its events given on (marked, stamped); ``a`` says how it ended."""
        base = self.tokens
        marked = self.migrations == 0  # the original answer carries no marker
        if self.policy.usage_tokens:
            request = {**request, "stream_options": {**(request.get("stream_options") or {}), "include_usage": True,
                                                     "continuous_usage_stats": True}}
        stream = self.transport.open(request, self.chat)
        try:
            while True:
                item, exc = await _next(stream)
                if exc is not None:
                    a.error = f"{type(exc).__name__}: {str(exc)[:200]}"
                    return
                if item is _END:
                    if self.finished:  # complete, its [DONE] lost
                        a.outcome = "done"
                        self.sent += 1
                        yield Event(DONE)
                    else:
                        a.error = "the stream ended without its last token"
                    return
                desc = served_by.served_item(item)
                if desc is not None:
                    a.replica = replica_of(desc)
                    if self.migrations and a.replica is not None and a.replica in self.failed:
                        a.outcome = "routed-back"
                        return
                    self.served = desc
                    yield Served(desc)
                    continue
                if isinstance(item, dict) and "status" in item:  # an answer that is not a stream
                    payload = item.get("json") or {}
                    if _dead(payload, item.get("status")):
                        a.error = _message(payload)
                    elif self.sent == 0 and self.migrations == 0:
                        a.outcome = "answered"
                        yield Response(int(item["status"]), payload)
                    else:
                        a.outcome, a.error = "failed", f"{item['status']}: {_message(payload)}"
                    return
                for data in sse_data(item):
                    if data == DONE:
                        if self.finished:
                            a.outcome = "done"
                            self.sent += 1
                            yield Event(DONE)
                        else:
                            a.error = "the stream ended without its last token"
                        return
                    try:
                        event = json.loads(data)
                    except ValueError:
                        a.error = f"an event that is not JSON: {data[:60]!r}"
                        return
                    if not isinstance(event, dict):
                        a.error = "an event that is not a JSON object"
                        return
                    if "error" in event:
                        if _dead(event):
                            a.error = _message(event)
                        else:  # an error that is not a break: given on, the answer ends
                            a.outcome = "done"
                            self.sent += 2
                            yield Event(event)
                            yield Event(DONE)
                        return
                    text, finish = _choice(event)
                    counted = self._engine_count(event) if self.policy.usage_tokens else None
                    if self.policy.usage_tokens and not event.get("choices") and not self._asked("include_usage"):
                        continue  # the usage-only last event, asked for the count's sake only
                    usage = event.get("usage")
                    if not marked and not text and finish is None and not usage:
                        continue  # a continuation's opening (the role): the client has had it
                    self._stamp(event)
                    if isinstance(usage, dict) and base:
                        self._whole_usage(usage, base)
                    if not marked:
                        event[MIGRATED] = self.migrations
                        event["served_by"] = served_by.headers((self.served or {}).get("identity") or {})
                        marked = True
                    if text:
                        self.text += text
                    if counted is not None:  # the engine's count of this answer's tokens so far
                        a.tokens = max(a.tokens, counted)
                        self.tokens = base + a.tokens
                    elif text:
                        self.tokens += 1
                        a.tokens += 1
                    self.finished = self.finished or finish is not None
                    self.sent += 1
                    yield Event(event)
        finally:
            await _close(stream)

    def _engine_count(self, event: dict[str, Any]) -> int | None:
        """The engine's count of the answer's tokens at ``event`` (its ``usage.completion_tokens`` on an event with
        a choice), None on an event without one; the usage taken off where the client did not ask for it."""
        usage = event.get("usage")
        counted = None
        if event.get("choices") and isinstance(usage, dict):
            value = usage.get("completion_tokens")
            counted = value if isinstance(value, int) and not isinstance(value, bool) else None
            if not (self._asked("include_usage") and self._asked("continuous_usage_stats")):
                event.pop("usage")
        return counted

    def _asked(self, option: str) -> bool:
        """Whether the client's request set ``stream_options.<option>``."""
        options = self.original.get("stream_options")
        return bool(options.get(option)) if isinstance(options, dict) else False

    @staticmethod
    def _whole_usage(usage: dict[str, Any], base: int) -> None:
        """A continuation's usage as the whole answer's: its prompt held ``base`` tokens of the answer."""
        if isinstance(usage.get("completion_tokens"), int):
            usage["completion_tokens"] += base
        if isinstance(usage.get("prompt_tokens"), int):
            usage["prompt_tokens"] = max(0, usage["prompt_tokens"] - base)
        if isinstance(usage.get("completion_tokens"), int) and isinstance(usage.get("prompt_tokens"), int):
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]


def collect(events: list[Any], chat: bool) -> tuple[int, dict[str, Any]]:
    """A non-streamed answer from a spliced stream's events: (status, JSON body). The events' texts joined, the
    last finish reason, the usage of the last event with one, ``"migrated": k`` when it migrated; an error event
    (with its ``migration_refused``) makes a 500 with that error."""
    text, finish, usage, first, migrated = "", None, None, None, 0
    for data in events:
        if not isinstance(data, dict):
            continue
        if "error" in data:
            return 500, {k: v for k, v in data.items() if k in ("error", REFUSED)}
        first = first or data
        t, f = _choice(data)
        text += t
        finish = f or finish
        usage = data.get("usage") or usage
        migrated = data.get(MIGRATED) or migrated
    first = first or {}
    choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish} if chat
              else {"index": 0, "text": text, "finish_reason": finish})
    out = {"id": first.get("id"), "object": "chat.completion" if chat else "text_completion",
           "created": first.get("created"), "model": first.get("model"), "choices": [choice]}
    if first.get("system_fingerprint") is not None:
        out["system_fingerprint"] = first["system_fingerprint"]
    if usage is not None:
        out["usage"] = usage
    if migrated:
        out[MIGRATED] = migrated
    return 200, out
