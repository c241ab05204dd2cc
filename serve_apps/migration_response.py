"""The HTTP answer of a migrating ingress (issue 47), either app's: :func:`respond` runs a
:class:`serve_apps.migration_splice.Splice` over a transport and turns its items into a FastAPI response.

Both migrating ingresses use it: the stream target's (:mod:`serve_apps.migrating_ingress`, a Serve handle of the
``StreamTarget`` engine deployment) and the vLLM app's (:mod:`serve_apps.llm_migrating`, a handle of Ray Serve LLM's
``LLMServer``). A streamed request is answered with a stream whose headers (:mod:`serve_apps.served_by`) name the
engine replica that began it; a non-streamed one is asked of the engine as a stream (with its usage) and collected
(:func:`serve_apps.migration_splice.collect`) into the JSON answer, whose headers name the replica that finished it.
An error before the first event is the engine's JSON answer (or the refusal's 500).
"""

from __future__ import annotations

import contextlib
import json

from fastapi.responses import JSONResponse, StreamingResponse

from serve_apps import served_by
from serve_apps.migration_splice import DONE, Event, Policy, Response, Served, Splice, collect


def sse(data) -> str:
    """One server-sent event of ``data`` (a JSON object, or :data:`DONE`)."""
    return f"data: {data if data == DONE else json.dumps(data)}\n\n"


def headers_of(desc: dict | None) -> dict[str, str]:
    """The ``x-availproof-*`` headers of an engine replica's description (none when it gave none)."""
    return served_by.headers((desc or {}).get("identity") or {}, (desc or {}).get("engine")) if desc else {}


async def respond(transport, body: dict, chat: bool, policy: Policy):
    """The HTTP answer to ``body`` through ``transport``, spliced over migrations: a stream when it asked for one,
    else the collected JSON; an error before the first event as the engine's JSON answer (or the refusal's 500)."""
    streamed = bool(body.get("stream"))
    if not streamed:  # asked of the engine as a stream, with its usage, and collected
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    splice = Splice(transport, body, chat, policy)
    items = splice.run()
    served, first = None, None
    async for item in items:
        if isinstance(item, Served):
            served = item.desc
        elif isinstance(item, Response):
            await items.aclose()
            return JSONResponse(item.payload, status_code=item.status, headers=headers_of(served))
        elif isinstance(item, Event):
            first = item
            break
    if first is None:
        return JSONResponse({"error": {"message": "no answer from the engine", "type": "EngineDeadError"}}, 500)
    if streamed:
        return StreamingResponse(_stream(first, items), media_type="text/event-stream", headers=headers_of(served))
    events = [first.data]
    async for item in items:
        if isinstance(item, Served):
            served = item.desc
        elif isinstance(item, Event):
            events.append(item.data)
    status, payload = collect(events, chat)
    return JSONResponse(payload, status_code=status, headers=headers_of(served))


async def _stream(first: Event, items):
    async with contextlib.aclosing(items):  # the client gone: the engine's stream closed with it
        yield sse(first.data)
        async for item in items:
            if isinstance(item, Event):
                yield sse(item.data)
