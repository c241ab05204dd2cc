"""Minimal OpenAI-style streaming servers for harness tests: `python sse_server.py HOST PORT [SERVICE_S]`.

- Without SERVICE_S: streams 10 tokens 20 ms apart for every POST (requests served side by side).
- With SERVICE_S: serves **one request at a time**: each POST waits for the one before it, takes
  SERVICE_S seconds of "prefill", then streams 3 tokens at once. Its capacity is 1 / SERVICE_S
  requests per second: below it a request's TTFT is about SERVICE_S; above it requests queue and
  TTFT grows without bound (the capacity sweep's known knee).

The tests start it with :func:`start` and end (or kill and restart) it by its PID.
"""

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVICE_S = None  # set from argv: one request at a time, this long each
ONE_AT_A_TIME = threading.Lock()


def start(port: int, *args: str) -> subprocess.Popen:
    """This server on 127.0.0.1:``port`` (``args``: SERVICE_S), once it answers; killed if it never does."""
    import httpx

    p = subprocess.Popen([sys.executable, __file__, "127.0.0.1", str(port), *args])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}, timeout=1)
            return p
        except httpx.HTTPError:
            time.sleep(0.05)
    p.kill()
    p.wait()
    raise RuntimeError("test server did not start")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        if SERVICE_S is not None:
            with ONE_AT_A_TIME:  # the queue: one request served at a time
                time.sleep(SERVICE_S)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            if SERVICE_S is None:
                self.wfile.flush()

        tokens = 10 if SERVICE_S is None else 3
        for i in range(tokens):
            if SERVICE_S is None:
                time.sleep(0.02)
            ev = {"choices": [{"index": 0, "delta": {"content": f"t{i} "},
                               "finish_reason": "length" if i == tokens - 1 else None}]}
            chunk(f"data: {json.dumps(ev)}\n\n".encode())
        chunk(f'data: {{"choices":[],"usage":{{"completion_tokens":{tokens},"prompt_tokens":3}}}}\n\n'.encode())
        chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    if len(sys.argv) > 3:
        SERVICE_S = float(sys.argv[3])
        ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
