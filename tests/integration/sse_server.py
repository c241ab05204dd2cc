"""A minimal OpenAI-style streaming server for harness tests: `python sse_server.py HOST PORT`.

Streams 10 tokens 20 ms apart for every POST; the test kills and restarts it by PID.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        for i in range(10):
            time.sleep(0.02)
            ev = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
            chunk(f"data: {json.dumps(ev)}\n\n".encode())
        chunk(b'data: {"choices":[],"usage":{"completion_tokens":10,"prompt_tokens":3}}\n\n')
        chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
