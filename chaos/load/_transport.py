"""A lean HTTP/1.1 transport for httpx: asyncio protocols and httptools' C parser.

The harness keeps httpx's client API (requests, responses, timeouts, exceptions) and swaps
the transport, as httpx is designed for. httpx's default transport (httpcore over h11 and
anyio) costs most of a load client's CPU per streamed chunk: an async stream read, a pure
Python HTTP parser and several context managers per chunk, plus a scan of the connection
pool on every request. Here each connection is an :class:`asyncio.Protocol` whose
``data_received`` feeds ``httptools`` (llhttp, the parser in Node.js); body bytes wait in a
list until the response stream reads them.

What it does: HTTP/1.1 over TCP, TLS when the URL is ``https`` (the SSL context given),
keep-alive with a bounded number of idle connections per origin, connections opened ahead of
planned sends (:meth:`LeanTransport.prepare`: a burst's sends find them open), chunked and
``Content-Length`` and read-until-close bodies, HEAD. What it does not: proxies, HTTP/2,
upgrades, ``Expect: 100-continue``.

Failures map onto httpx's exceptions exactly as the default transport raises them, so
callers classify them the same way (``tests/unit/test_transport.py`` checks both side by
side): refused -> ``ConnectError``, connect deadline -> ``ConnectTimeout``, no bytes within
the read timeout -> ``ReadTimeout``, peer closed before the end of the message or sent
something that is not HTTP -> ``RemoteProtocolError``, connection reset -> ``ReadError``.
"""

from __future__ import annotations

import asyncio
import select
import ssl
from collections.abc import AsyncIterator

import httptools
import httpx

class _Connection(asyncio.Protocol):
    """One TCP connection; one response at a time."""

    def __init__(self, origin: tuple[str, str, int]):
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.complete = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future | None = None
        self.until_close = False  # the body ends with the connection (no length, not chunked)
        self.head_only = False
        self.keep_alive = False

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("unexpected protocol upgrade"))
        except httptools.HttpParserError as e:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.complete or self.error:
            return
        if self.status is not None and self.until_close and exc is None:
            self.complete = True  # a body delimited by the end of the connection
            self._wake()
        elif isinstance(exc, OSError):
            self._fail(httpx.ReadError(str(exc) or type(exc).__name__))
        elif self.status is None:
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))
        else:
            self._fail(httpx.RemoteProtocolError("peer closed connection without sending complete message body"))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message ends
        if self.head_only:
            self.complete = True  # the parser cannot know a HEAD response has no body,
            self.keep_alive = False  # so what follows on this connection cannot be trusted
        else:
            names = {k.lower() for k, _ in self.headers}
            self.until_close = b"content-length" not in names and b"transfer-encoding" not in names
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    # -- waiting
    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.error is None:
            self.error = exc
        self._wake()
        self.close()

    async def wait(self, timeout: float | None) -> None:
        """Until the parser has something new (headers, body, the end) or an error."""
        loop = asyncio.get_running_loop()
        self.waiter = fut = loop.create_future()
        timer = None
        if timeout is not None:
            timer = loop.call_later(timeout, _expire, fut)
        try:
            await fut
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def reusable(self) -> bool:
        return (self.complete and not self.closed and self.error is None
                and not self.until_close and self.keep_alive)


def _readable(conn: _Connection) -> bool:
    """An idle connection with bytes (or EOF) waiting that the loop has not read yet."""
    sock = conn.transport.get_extra_info("socket") if conn.transport else None
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLRDHUP)
    return bool(poller.poll(0))


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class _ResponseBody(httpx.AsyncByteStream):
    def __init__(self, pool: "LeanTransport", conn: _Connection, read_timeout: float | None):
        self._pool = pool
        self._conn = conn
        self._read_timeout = read_timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.chunks:
                data = conn.chunks[0] if len(conn.chunks) == 1 else b"".join(conn.chunks)
                conn.chunks.clear()
                yield data
                continue
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return
            try:
                await conn.wait(self._read_timeout)
            except TimeoutError:
                conn.close()
                raise httpx.ReadTimeout("timed out waiting for the response body") from None

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._pool._release(self._conn)


class LeanTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncClient(transport=LeanTransport())``: HTTP/1.1 with keep-alive, see the module doc."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, max_idle_per_origin: int = 256):
        self._ssl = ssl_context  # None: httpx's default context, made at the first https connection
        self._max_idle = max_idle_per_origin
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._reserved: dict[tuple[str, str, int], int] = {}  # sends announced by prepare(), not yet made
        self._opening: dict[tuple[str, str, int], int] = {}  # connections prepare() is opening
        self._preparing: set[asyncio.Task] = set()
        self._closed = False

    def prepare(self, url: httpx.URL | str, timeout: float | None = None) -> None:
        """A send on ``url``'s origin is planned shortly: open a connection for it now, in the background,
        unless an idle (or opening) one is spare for every send announced and not yet made. The requests of
        a burst then find their connections open at their instant instead of connecting then, one after
        another. Nothing is awaited: a connection not open by the send's instant, or not at all, is left to
        the send, which connects itself and raises failures as it always does."""
        if self._closed:
            return
        u = httpx.URL(url)
        origin = (u.scheme, u.host, u.port or (443 if u.scheme == "https" else 80))
        want = self._reserved[origin] = self._reserved.get(origin, 0) + 1
        if len(self._idle.get(origin, ())) + self._opening.get(origin, 0) >= want:
            return
        self._opening[origin] = self._opening.get(origin, 0) + 1
        task = asyncio.get_running_loop().create_task(self._open_idle(origin, timeout))
        self._preparing.add(task)
        task.add_done_callback(self._preparing.discard)

    async def _open_idle(self, origin: tuple[str, str, int], timeout: float | None) -> None:
        try:
            conn = await self._connect(origin, timeout, None)
        except (httpx.HTTPError, OSError):
            return  # the send will connect, and fail, itself
        finally:
            self._opening[origin] -= 1
        if self._closed:
            conn.close()
            return
        self._idle.setdefault(origin, []).append(conn)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}", request=request)
        port = url.port or (443 if scheme == "https" else 80)
        origin = (scheme, url.host, port)
        if self._reserved.get(origin):
            self._reserved[origin] -= 1
        timeouts = request.extensions.get("timeout") or {}
        body = request.content if isinstance(request.stream, httpx.ByteStream) else await request.aread()
        head = [request.method.encode(), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        chunked = False
        for k, v in request.headers.raw:
            if k.lower() == b"transfer-encoding":
                chunked = b"chunked" in v.lower()
            head += [k, b": ", v, b"\r\n"]
        head.append(b"\r\n")
        if chunked:
            head += [b"%x\r\n" % len(body), body, b"\r\n0\r\n\r\n"] if body else [b"0\r\n\r\n"]
        elif body:
            head.append(body)
        wire = b"".join(head)

        conn = self._take_idle(origin)
        if conn is None:
            conn = await self._connect(origin, timeouts.get("connect"), request)
        self._open.add(conn)
        conn.head_only = request.method == "HEAD"
        conn.transport.write(wire)
        read_timeout = timeouts.get("read")
        try:
            while conn.status is None:
                if conn.error is not None:
                    raise conn.error
                try:
                    await conn.wait(read_timeout)
                except TimeoutError:
                    raise httpx.ReadTimeout("timed out waiting for the response headers", request=request) from None
        except BaseException:
            self._discard(conn)
            raise
        return httpx.Response(conn.status, headers=conn.headers, stream=_ResponseBody(self, conn, read_timeout),
                              extensions={"http_version": b"HTTP/1.1"}, request=request)

    def _take_idle(self, origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.closed:
                continue
            if _readable(conn):  # the peer closed it (or sent something unasked): as httpcore, do not reuse
                conn.close()
                continue
            conn._reset()
            return conn
        return None

    async def _connect(self, origin, timeout: float | None, request: httpx.Request) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = None
        if scheme == "https":
            if self._ssl is None:  # once: loading the CA bundle costs ~25 ms of CPU
                self._ssl = httpx.create_ssl_context()
            tls = self._ssl
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(lambda: _Connection(origin), host, port, ssl=tls,
                                                       server_hostname=host if tls else None)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out", request=request) from None
        except OSError as e:
            raise httpx.ConnectError(str(e) or type(e).__name__, request=request) from None
        return conn

    def _release(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if not conn.reusable:
            conn.close()
            return
        idle = self._idle.setdefault(conn.origin, [])
        if len(idle) < self._max_idle:
            idle.append(conn)
        else:
            conn.close()

    def _discard(self, conn: _Connection) -> None:
        self._open.discard(conn)
        conn.close()

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._preparing):
            task.cancel()
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        for conn in list(self._open):
            conn.close()
        self._open.clear()
