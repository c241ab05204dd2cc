"""Reading one attempt's answer into its record: a stream of server-sent events, or one JSON completion.

The harness (:mod:`chaos.load.harness`) sends the request and times the attempt; these read what came back:
the status and the serving replica (:mod:`chaos.load.served`), an HTTP error's class and ``Retry-After``
(:mod:`chaos.load.failures`), the tokens as they arrive (their instants appended to ``token_times``, their
text to ``reply`` when given: a session's turn), the usage, and whether the answer is whole and right
(:mod:`chaos.load.integrity`). A stream's token continuity is filled however it ended
(:mod:`chaos.load.continuity`). A failure is set on the record (``failure``, ``detail``) and the reader
returns; an exception (a broken connection, a timeout) is left to the harness, which classifies it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import httpx

from chaos.recording import records as rec
from chaos.load import continuity, integrity, served as served_mod
from chaos.load.failures import http_failure
from chaos.load.golden import Goldens
from chaos.load.sse import DONE, SSEParser, cached_tokens


async def read_stream(client: httpx.AsyncClient, request: httpx.Request, body: dict[str, Any], r: rec.RequestRecord,
                      token_times: list[float], engines_seen: set[str], clock_ns: Callable[[], int],
                      goldens: Goldens, reply: list[str] | None = None) -> None:
    """Send ``request`` streamed and read its events into ``r``; ``goldens``: the run's golden answers
    (:mod:`chaos.load.golden`): a complete warm-up answer may become one; a vLLM stream is checked against its
    prompt's."""
    resp = await client.send(request, stream=True)  # what client.stream() does, the request built before
    check, done = None, False
    try:
        r.status = resp.status_code
        served_mod.read(r, resp.headers, engines_seen)
        if resp.status_code >= 400:
            text = (await resp.aread()).decode(errors="replace")
            http_failure(r, resp.status_code, text, resp.headers, clock_ns() / 1e9)
            return
        parser = SSEParser()
        check = integrity.StreamCheck(body)
        done = False
        async for chunk in resp.aiter_bytes():
            for data in parser.feed(chunk):
                if data == DONE:
                    done = True
                    continue
                c = check.parse(data)
                if c.has_token:
                    token_times.append(time.monotonic())
                    if reply is not None:
                        reply.append(c.text)
                if c.completion_tokens is not None:
                    r.output_tokens = c.completion_tokens
                    r.prompt_tokens = c.prompt_tokens
                    r.cached_tokens = c.cached_tokens
        if not done:
            r.failure = rec.STREAM_BROKEN if token_times else rec.CONNECTION_CLOSED
            r.detail = "stream ended without [DONE]"
            return
        if not token_times and not r.output_tokens:
            r.failure, r.detail = rec.MALFORMED, "stream finished without any output"
            return
        wrong = check.verdict(r.output_tokens) or goldens.verdict(body, check.texts)
        if wrong:
            r.failure, r.detail = wrong
            return
        r.ok = True
        goldens.learn(body, check.texts, r.phase)  # the first complete warm-up answer to its prompt
    finally:
        continuity.fill(r, check, token_times, done, *goldens.reference(body))
        await resp.aclose()


async def read_unary(client: httpx.AsyncClient, request: httpx.Request, body: dict[str, Any], r: rec.RequestRecord,
                     engines_seen: set[str], clock_ns: Callable[[], int], reply: list[str] | None = None) -> None:
    """Send ``request`` and read its one JSON completion into ``r`` (no TTFT: not observable without streaming)."""
    resp = await client.send(request)
    r.status = resp.status_code
    served_mod.read(r, resp.headers, engines_seen)
    if resp.status_code >= 400:
        http_failure(r, resp.status_code, resp.text, resp.headers, clock_ns() / 1e9)
        return
    try:
        obj = resp.json()
        choices = obj["choices"]
        assert isinstance(choices, list) and choices
    except (ValueError, KeyError, TypeError, AssertionError):
        r.failure, r.detail = rec.MALFORMED, f"not an OpenAI completion: {resp.text[:120]!r}"
        return
    usage = obj.get("usage") or {}
    r.output_tokens = usage.get("completion_tokens")
    r.prompt_tokens = usage.get("prompt_tokens")
    r.cached_tokens = cached_tokens(usage)
    first = choices[0] if isinstance(choices[0], dict) else {}
    text = first.get("text") if "text" in first else (first.get("message") or {}).get("content")
    if reply is not None:
        reply.append(text if isinstance(text, str) else "")
    r.ttft_s = None  # not observable without streaming
    if obj.get("system_fingerprint") == integrity.stream_tokens.FINGERPRINT:
        wrong = integrity.deterministic(text if isinstance(text, str) else "", body, r.output_tokens)
        if wrong:
            r.failure, r.detail = wrong
            return
    r.ok = True
