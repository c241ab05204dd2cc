"""The harness' lean transport behaves as httpx's own transport does, failure by failure.

Every scenario runs against a small server on loopback that this test starts, once through
``LeanTransport`` and once through ``httpx.AsyncHTTPTransport``: both must return the same
bodies and raise the same httpx exception classes (the harness classifies failures by them).
"""

import asyncio
import socket
import struct
import threading
import time

import httpx
import pytest

from chaos.recording import records as rec
from chaos.load._timer import PreciseTimer
from chaos.load._transport import LeanTransport
from chaos.load.failures import classify_exception
from chaos.load.workload import LoadShape

SSE = [b'data: {"choices":[{"text":"a"}]}\n\n', b'data: {"choices":[{"text":"b","finish_reason":"length"}]}\n\n',
       b"data: [DONE]\n\n"]


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Server:
    """Answers by path; counts the connections it accepted."""

    def __init__(self):
        self.connections = 0
        self.requests: list[bytes] = []
        self.handlers: set[asyncio.Task] = set()

    async def start(self):
        self.srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.srv.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        self.srv.close()
        await asyncio.sleep(0.05)  # a handler whose TLS handshake was still finishing starts now
        for t in self.handlers:
            t.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.connections += 1
        self.handlers.add(asyncio.current_task())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length:
                    await reader.readexactly(length)
                method, path = head.split(b" ")[:2]
                if not await self.answer(method, path, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answer(self, method: bytes, path: bytes, w: asyncio.StreamWriter) -> bool:
        """Write the response; False closes the connection."""
        if path in (b"/sse", b"/v1/completions"):
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for ev in SSE:
                w.write(chunk(ev))
                await w.drain()
                await asyncio.sleep(0.01)
            w.write(b"0\r\n\r\n")
            return True
        if path == b"/len":
            body = b"" if method == b"HEAD" else b"hello"
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + body)
            return True
        if path == b"/len-then-close":  # keep-alive, but the server closes the idle connection soon after
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            await w.drain()
            await asyncio.sleep(0.02)
            return False
        if path == b"/503":
            w.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
            return True
        if path == b"/until-close":
            w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
            await w.drain()
            return False
        if path == b"/stall-body":
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(SSE[0]))
            await asyncio.sleep(5)
            return False
        if path == b"/no-answer":
            await asyncio.sleep(5)
            return False
        if path == b"/drop":
            return False
        if path == b"/cut":
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(SSE[0]))
            await w.drain()
            await asyncio.sleep(0.05)
            return False
        if path == b"/reset":
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(SSE[0]))
            await w.drain()
            await asyncio.sleep(0.05)
            sock = w.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if path == b"/garbage":
            w.write(b"HELLO THERE\r\n\r\n")
            await w.drain()
            return False
        raise AssertionError(path)


TRANSPORTS = {"lean": LeanTransport, "httpx": httpx.AsyncHTTPTransport}


async def fetch(transport, url: str, method: str = "POST", read_timeout: float = 2.0):
    async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(read_timeout, connect=1.0),
                                 trust_env=False) as client:
        chunks = []
        async with client.stream(method, url, json={"prompt": "x"}) as resp:
            async for c in resp.aiter_bytes():
                chunks.append(c)
        return resp.status_code, b"".join(chunks)


def outcome(kind: str, path: str, method: str = "POST", read_timeout: float = 2.0):
    async def main():
        server = await Server().start()
        try:
            return await fetch(TRANSPORTS[kind](), f"http://127.0.0.1:{server.port}{path}", method, read_timeout)
        except httpx.HTTPError as e:
            return type(e)
        finally:
            await server.stop()

    return asyncio.run(main())


@pytest.mark.parametrize("path,expected", [
    ("/sse", (200, b"".join(SSE))),
    ("/len", (200, b"hello")),
    ("/503", (503, b"busy")),
    ("/until-close", (200, b"all of it")),
    ("/drop", httpx.RemoteProtocolError),
    ("/cut", httpx.RemoteProtocolError),
    ("/reset", httpx.ReadError),
    ("/garbage", httpx.RemoteProtocolError),
])
def test_same_outcome_as_httpx_transport(path, expected):
    got = {kind: outcome(kind, path) for kind in TRANSPORTS}
    assert got == {"lean": expected, "httpx": expected}


@pytest.mark.parametrize("path", ["/stall-body", "/no-answer"])
def test_read_timeouts(path):
    got = {kind: outcome(kind, path, read_timeout=0.3) for kind in TRANSPORTS}
    assert got == {"lean": httpx.ReadTimeout, "httpx": httpx.ReadTimeout}


def test_connect_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now

    async def main(kind):
        try:
            await fetch(TRANSPORTS[kind](), f"http://127.0.0.1:{port}/len")
        except httpx.HTTPError as e:
            return type(e)

    assert {kind: asyncio.run(main(kind)) for kind in TRANSPORTS} == {"lean": httpx.ConnectError,
                                                                       "httpx": httpx.ConnectError}
    assert classify_exception(httpx.ConnectError("refused"), False)[0] == rec.CONNECT_REFUSED


def test_keep_alive_reuses_one_connection_and_recovers_from_a_closed_one():
    async def main():
        server = await Server().start()
        url = f"http://127.0.0.1:{server.port}"
        transport = LeanTransport()
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            for _ in range(3):
                assert (await client.post(url + "/len", json={})).content == b"hello"
            head = await client.head(url + "/len")  # no body follows a HEAD response
            assert head.status_code == 200 and head.content == b""
            assert (await client.post(url + "/len", json={})).content == b"hello"
            n_before_close = server.connections
            # the server closes after this one; the next request needs (and gets) a new connection
            assert (await client.get(url + "/until-close")).content == b"all of it"
            assert (await client.post(url + "/len", json={})).content == b"hello"
            sent = list(server.requests)
        await server.stop()
        return n_before_close, server.connections, sent

    before_close, total, sent = asyncio.run(main())
    # 3 posts on one connection; the HEAD response is not reused (its length cannot be trusted)
    assert before_close == 2
    assert total == 3
    assert sent[0].startswith(b"POST /len HTTP/1.1\r\n") and b"\r\ncontent-length: 2\r\n" in sent[0].lower()


def test_precise_timer_wakes_in_deadline_order_never_early():
    async def main():
        timer = PreciseTimer()
        precise = timer.precise
        base = time.monotonic() + 0.02
        deadlines = [base + 0.003 * k for k in (5, 1, 4, 2, 3, 0)]
        woke = []

        async def sleeper(d):
            await timer.sleep_until(d)
            woke.append((d, time.monotonic()))

        await asyncio.wait_for(asyncio.gather(*(sleeper(d) for d in deadlines)), 5)
        timer.close()
        return precise, woke

    precise, woke = asyncio.run(main())
    assert precise  # Linux: a timerfd
    assert [d for d, _ in woke] == sorted(d for d, _ in woke)
    assert all(t >= d - 20e-6 for d, t in woke)


def test_open_loop_sends_every_request_no_earlier_than_its_instant():
    from tests.unit.loopback import run_against

    shape = LoadShape(mode="open", arrival="constant", rate=100, duration_s=1.0, max_requests=1000, warmup_s=0,
                      timeout_s=5, route="completions", model="m", max_tokens=(2, 2), prompt_words=(2, 2))
    got, footer, _, run = run_against(Server(), shape)
    assert footer["sent"] == len(got) == 100
    assert all(r.ok for r in got), [r.detail for r in got if not r.ok][:3]
    # never sent before the planned instant (the timer may fire 20 us early by design)
    assert all(r.sent_ns >= r.planned_ns - 50_000 for r in got)
    # every request is published, none kept: nothing the run holds grows with the requests it sent
    assert not [k for k, v in vars(run).items() if isinstance(v, (list, dict, set)) and len(v) >= len(got)]


def _self_signed(tmp_path):
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_pem, key_pem = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert_pem, key_pem


def test_https_with_the_given_ssl_context(tmp_path):
    import ssl

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def main():
        server = Server()
        server.srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=server_ctx)
        port = server.srv.sockets[0].getsockname()[1]
        try:
            ok = await fetch(LeanTransport(ssl_context=trusting), f"https://127.0.0.1:{port}/sse")
            try:  # the default CA bundle does not trust this certificate: refused, as httpx refuses it
                await fetch(LeanTransport(), f"https://127.0.0.1:{port}/len")
                untrusted = None
            except httpx.HTTPError as e:
                untrusted = type(e)
            return ok, untrusted
        finally:
            await server.stop()

    ok, untrusted = asyncio.run(main())
    assert ok == (200, b"".join(SSE))
    assert untrusted is httpx.ConnectError


def test_an_idle_connection_the_server_closed_unseen_is_not_reused():
    """The server closes a keep-alive connection while the client's loop is busy (it has not
    read the FIN yet): the next request must go out on a new connection, as with httpx's own."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(Server().start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{server.port}"

    async def main(kind):
        async with httpx.AsyncClient(transport=TRANSPORTS[kind](), trust_env=False) as client:
            first = (await client.post(url + "/len-then-close", json={})).content
            time.sleep(0.3)  # blocks this loop: the FIN arrives unread
            second = (await client.post(url + "/len", json={})).content
            return first, second

    try:
        got = {kind: asyncio.run(main(kind)) for kind in TRANSPORTS}
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
    assert got == {"lean": (b"hello", b"hello"), "httpx": (b"hello", b"hello")}
    assert server.connections == 4
