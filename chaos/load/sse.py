"""An incremental Server-Sent Events parser for OpenAI-style streams, hardened against bad input.

Feed it bytes as they arrive; it returns complete events (their joined ``data`` fields).
Malformed input raises :class:`MalformedStream` instead of hanging or growing without bound:
a line longer than ``max_line`` bytes, or bytes that are not UTF-8.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DONE = "[DONE]"


class MalformedStream(ValueError):
    def __init__(self, message: str, migration_refused: str | None = None):
        super().__init__(message)
        self.migration_refused = migration_refused  # an error event's migration_refused (chaos.load.continuity)


class SSEParser:
    def __init__(self, max_line: int = 1 << 20):
        self._buf = bytearray()
        self._data: list[str] = []
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the data of every event completed by them."""
        self._buf += chunk
        events: list[str] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > self.max_line:
                    raise MalformedStream(f"line longer than {self.max_line} bytes")
                return events
            raw = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            if len(raw) > self.max_line:
                raise MalformedStream(f"line longer than {self.max_line} bytes")
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise MalformedStream("stream is not valid UTF-8") from None
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(":"):
                continue  # comment / keep-alive
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            # event:, id:, retry: carry nothing we measure

    def pending(self) -> bool:
        """True when a partial event is buffered (the stream ended mid-event)."""
        return bool(self._buf.strip()) or bool(self._data)


@dataclass
class Chunk:
    """What one OpenAI stream event tells us."""

    text: str  # generated text in this event ('' when none)
    has_token: bool  # the event carries generated output
    finish_reason: str | None
    completion_tokens: int | None  # from a usage block, when present
    prompt_tokens: int | None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (vLLM's prefix cache hits)
    fingerprint: str | None = None  # system_fingerprint, when the server says (the stream target does)
    migrated: int | None = None  # a migrating ingress's marker: this event opens continuation k (chaos.load.continuity)


def parse_openai_event(data: str) -> Chunk:
    """Decode one ``data:`` payload of /v1/completions or /v1/chat/completions streaming."""
    try:
        obj = json.loads(data)
    except ValueError:
        raise MalformedStream(f"event is not JSON: {data[:60]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedStream("event is not a JSON object")
    if "error" in obj:
        refused = obj.get("migration_refused")
        raise MalformedStream(f"error event: {str(obj['error'])[:120]}",
                              migration_refused=str(refused)[:120] if refused is not None else None)
    text_parts: list[str] = []
    finish = None
    token = False
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            raise MalformedStream("choice is not an object")
        if isinstance(choice.get("text"), str):
            text_parts.append(choice["text"])
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            text_parts.append(delta["content"])
        finish = choice.get("finish_reason") or finish
        token = token or bool("".join(text_parts))
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    migrated = obj.get("migrated")
    return Chunk(
        text="".join(text_parts),
        has_token=token,
        finish_reason=finish,
        completion_tokens=usage.get("completion_tokens"),
        prompt_tokens=usage.get("prompt_tokens"),
        cached_tokens=cached_tokens(usage),
        fingerprint=obj.get("system_fingerprint") if isinstance(obj.get("system_fingerprint"), str) else None,
        migrated=migrated if isinstance(migrated, int) and not isinstance(migrated, bool) else None,
    )


def cached_tokens(usage: dict | None) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` when the server says (an integer), else None."""
    details = (usage or {}).get("prompt_tokens_details")
    n = details.get("cached_tokens") if isinstance(details, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None
