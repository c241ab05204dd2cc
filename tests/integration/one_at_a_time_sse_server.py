"""An OpenAI-style streaming server that saturates at a known rate.

`python one_at_a_time_sse_server.py HOST PORT SERVICE_S`.

It serves one request at a time: each POST waits for the one before it, takes SERVICE_S seconds of
"prefill", then streams 3 tokens at once. Its capacity is 1 / SERVICE_S requests per second: below
it a request's TTFT is about SERVICE_S; above it requests queue and TTFT grows without bound. The
test ends it by its PID.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVICE_S = 0.1
ONE_AT_A_TIME = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        with ONE_AT_A_TIME:  # the queue: one request served at a time
            time.sleep(SERVICE_S)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        for i in range(3):
            ev = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
            chunk(f"data: {json.dumps(ev)}\n\n".encode())
        chunk(b'data: {"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":3}}\n\n')
        chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    SERVICE_S = float(sys.argv[3])
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
