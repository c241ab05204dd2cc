"""What a failed answer or a client-side exception of a request means: its failure class (:mod:`chaos.recording.records`)
and a short detail, the same for every load loop (the harness, its workers)."""

from __future__ import annotations

import asyncio

import httpx

from chaos.recording import records as rec
from chaos.load.retry import retry_after_s
from chaos.load.sse import MalformedStream


def classify_exception(exc: BaseException, got_first_token: bool) -> tuple[str, str]:
    """Map a client-side exception onto a failure class (and a short detail)."""
    detail = f"{type(exc).__name__}: {exc}"[:200]
    if got_first_token and not isinstance(exc, (asyncio.TimeoutError, httpx.TimeoutException)):
        return rec.STREAM_BROKEN, detail
    if isinstance(exc, asyncio.TimeoutError):
        return rec.DEADLINE, detail or "deadline"
    if isinstance(exc, httpx.ConnectTimeout):
        return rec.CONNECT_TIMEOUT, detail
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return rec.READ_TIMEOUT, detail
    if isinstance(exc, httpx.ConnectError):
        return rec.CONNECT_REFUSED, detail
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return rec.CONNECTION_CLOSED, detail
    if isinstance(exc, MalformedStream):
        return rec.MALFORMED, detail
    return rec.OTHER, detail


# what Ray Serve's proxy answers a request refused because the deployment's queue is full (BackPressureError's
# message, ray/serve/exceptions.py), with or without a Retry-After header (backpressure_config.retry_after_s)
SERVE_BACKPRESSURE = "Request dropped due to backpressure"


def refused(status: int, text: str, headers: httpx.Headers) -> bool:
    """An answer that refuses because the service is full (``refused``, issue 48): a 429, or a 503 with a
    ``Retry-After`` header or Ray Serve's backpressure message. Any other 503 (a balancer with no server up, a
    deployment unavailable) is the server's failure (``http_5xx``)."""
    if status == 429:
        return True
    return status == 503 and (headers.get("retry-after") is not None or SERVE_BACKPRESSURE in text)


def http_failure(r: rec.RequestRecord, status: int, text: str, headers: httpx.Headers, now_s: float) -> None:
    """An HTTP error answer: its class and detail on the record, and the wait its ``Retry-After`` asked for."""
    r.failure = (rec.REFUSED if refused(status, text, headers) else
                 rec.HTTP_5XX if status >= 500 else rec.HTTP_4XX)
    r.detail = f"HTTP {status}: {text[:160]}"
    r.retry_after_s = retry_after_s(headers.get("retry-after"), now_s)
