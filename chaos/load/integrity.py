"""Streams that end wrong: every answer checked for integrity, not just for an error.

A stream that ends cleanly (``[DONE]``, no error event) can still be wrong:
- **truncated** (:data:`chaos.recording.records.TRUNCATED`): it ended without a ``finish_reason`` on any choice; or,
  from the stream target, with fewer tokens than its own usage says, or with a correct beginning cut short;
- **corrupted** (:data:`chaos.recording.records.CORRUPTED`): more token events than the server's usage counts tokens;
  or, from the stream target (``system_fingerprint`` :data:`serve_apps.stream_tokens.FINGERPRINT`, whose
  i-th token is a function of the prompt and i: :func:`serve_apps.stream_tokens.text`), content that differs
  from what it must be;
- **aborted** (:data:`chaos.recording.records.ABORTED`): it ended with ``finish_reason`` ``abort`` or ``error`` (vLLM's, for
  a request its engine gave up on): an answer cut off, however cleanly the stream closed.
A vLLM stream may carry several tokens in one event (a multi-byte character, a detokenizer's hold-back), so
fewer events than tokens is not held against it; more is. These classes are failures counted per fault
like the others, and after the first token (mid-stream). 0 is expected under every scope."""

from __future__ import annotations

from typing import Any

from chaos.recording import records as rec
from chaos.load import sse
from chaos.load.sse import Chunk
from serve_apps import stream_tokens


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt as the stream target reads it: a completion's prompt, or a chat's messages' contents."""
    if "messages" in body:
        return " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))
    return str(body.get("prompt") or "")


ABORTED_REASONS = ("abort", "error")  # finish reasons of an answer the server gave up on


class StreamCheck:
    """Follows one answer's events (:meth:`event`), then judges it (:meth:`verdict`)."""

    def __init__(self, body: dict[str, Any]):
        self.body = body
        self.texts: list[str] = []
        self.finish: str | None = None
        self.fingerprint: str | None = None
        self.marks: list[int] = []  # migration markers: the token events received before each (chaos.load.continuity)
        self.refused: str | None = None  # why the ingress refused to migrate the stream, when it said

    def parse(self, data: str) -> Chunk:
        """One event's ``data`` decoded (:func:`chaos.load.sse.parse_openai_event`) and followed; an error event
        raises :class:`chaos.load.sse.MalformedStream` after its migration refusal, if any, is noted."""
        try:
            chunk = sse.parse_openai_event(data)
        except sse.MalformedStream as e:
            self.refused = e.migration_refused or self.refused
            raise
        self.event(chunk)
        return chunk

    def event(self, chunk: Chunk) -> None:
        if chunk.migrated is not None:
            self.marks.append(len(self.texts))
        if chunk.has_token:
            self.texts.append(chunk.text)
        self.finish = chunk.finish_reason or self.finish
        self.fingerprint = chunk.fingerprint or self.fingerprint

    def verdict(self, usage_tokens: int | None) -> tuple[str, str] | None:
        """(failure class, detail) when the answer is truncated or corrupted, else None."""
        events = len(self.texts)
        if self.finish is None:
            return rec.TRUNCATED, f"the stream ended with [DONE] but no finish_reason, after {events} token events"
        if self.finish in ABORTED_REASONS:
            return rec.ABORTED, f"finish_reason {self.finish!r} after {events} token events"
        if usage_tokens is not None and events > usage_tokens:
            return rec.CORRUPTED, f"{events} token events for {usage_tokens} tokens in the server's usage"
        if self.fingerprint != stream_tokens.FINGERPRINT:
            return None
        return deterministic("".join(self.texts), self.body, usage_tokens, events)


def deterministic(got: str, body: dict[str, Any], usage_tokens: int | None, events: int | None = None
                  ) -> tuple[str, str] | None:
    """The stream target's answer against what it must be for this prompt."""
    n = usage_tokens if usage_tokens is not None else body.get("max_tokens")
    if not isinstance(n, int):
        return None
    want = stream_tokens.text(prompt_of(body), n)
    if got == want and (events is None or events == n):
        return None
    got_words, want_words = got.split(" "), want.split(" ")
    for i, (a, b) in enumerate(zip(got_words, want_words)):
        if a != b:
            return rec.CORRUPTED, f"token {i} is {a[:20]!r}, the target's answer has {b!r} there"
    if len(got_words) > len(want_words):
        return rec.CORRUPTED, f"{len(got_words)} tokens where the target's answer has {len(want_words)}"
    if events is not None and events != n and got == want:
        return rec.TRUNCATED, f"{events} token events for {n} tokens in the usage"
    return rec.TRUNCATED, f"{len(got_words)} of the answer's {len(want_words)} tokens, then it ended"
