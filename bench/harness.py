"""This harness versus `vllm bench serve`, against the same local SSE server, in one run.

Both clients send constant-rate (vllm bench: gamma arrivals with burstiness 1e6, i.e.
practically constant) streaming /v1/completions requests to one local SSE server, where the
kernel timestamps the arrival of every request (``SO_TIMESTAMPNS``: the instant its first
segment came off loopback, unaffected by the server's own event loop). Schedule error is
measured there for both: arrival_i minus the
ideal arrival t_first + i / rate, with the median subtracted (a constant offset is not an
error), reported as p50 and p99 of its absolute value. Client CPU is the client process'
user+system CPU seconds per 1,000 requests. Everything stays on loopback; every run is bounded.

    python bench/harness.py [--rates 50 200] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine  # noqa: E402
from chaos.stats import percentile  # noqa: E402

TOKENS = 16
TOKEN_DELAY_S = 0.002


SO_TIMESTAMPNS = 35  # Linux: the kernel stamps each received segment (CLOCK_REALTIME, ns)


def server(port: int) -> None:
    """A small SSE server on raw sockets that takes each request's arrival time from the kernel.

    The arrival of a request is the kernel's receive timestamp of its first segment
    (``SO_TIMESTAMPNS``), not the instant a handler ran: the server's own event-loop delay
    (it streams to tens of clients at once) stays out of the clients' schedule error.
    """
    import asyncio
    import socket
    import struct

    import httptools

    loop = asyncio.new_event_loop()
    arrivals: list[int] = []
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # accepted sockets inherit it from the start
    lsock.bind(("127.0.0.1", port))
    lsock.listen(1024)
    lsock.setblocking(False)

    def event(i: int) -> bytes:
        ev = {"id": "x", "object": "text_completion", "model": "bench",
              "choices": [{"index": 0, "text": f" t{i}", "finish_reason": None if i < TOKENS - 1 else "length"}]}
        return f"data: {json.dumps(ev)}\n\n".encode()

    usage = {"id": "x", "object": "text_completion", "model": "bench", "choices": [],
             "usage": {"prompt_tokens": 8, "completion_tokens": TOKENS, "total_tokens": 8 + TOKENS}}
    events = [event(i) for i in range(TOKENS)] + [f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()]

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(data), data)

    class Conn:
        def __init__(self, sock):
            self.sock = sock
            self.parser = httptools.HttpRequestParser(self)
            self.url = b""
            self.first_ns: int | None = None

        def on_url(self, url: bytes) -> None:
            self.url += url

        def on_message_complete(self) -> None:
            url, self.url = self.url, b""
            arrived, self.first_ns = self.first_ns, None
            if url.startswith(b"/stats"):
                self.send_json(list(arrivals))
                arrivals.clear()
            elif url.startswith(b"/v1/models"):
                self.send_json({"object": "list", "data": [{"id": "bench", "object": "model"}]})
            else:
                if arrived is None:
                    raise SystemExit("bench server: a request without a kernel timestamp")
                arrivals.append(arrived)
                self.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i, ev in enumerate(events):
                    last = i == len(events) - 1
                    loop.call_later(TOKEN_DELAY_S * (i + 1), self.send, chunk(ev) + (b"0\r\n\r\n" if last else b""))

        def send_json(self, obj) -> None:
            body = json.dumps(obj).encode()
            self.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))

        def send(self, data: bytes) -> None:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

        def readable(self) -> None:
            try:
                data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16))
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(self.sock)
                self.sock.close()
                return
            if self.first_ns is None:
                for level, kind, raw in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = struct.unpack("qq", raw[:16])
                        self.first_ns = sec * 1_000_000_000 + nsec
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                loop.remove_reader(self.sock)
                self.sock.close()

    def accept() -> None:
        try:
            sock, _ = lsock.accept()
        except BlockingIOError:
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        loop.add_reader(sock, Conn(sock).readable)

    loop.add_reader(lsock, accept)
    loop.run_forever()


def client_ours(url: str, rate: float, n: int) -> None:
    from chaos import records as rec
    from chaos.load.harness import LoadRun
    from chaos.load.workload import LoadShape, Target

    shape = LoadShape(mode="open", arrival="constant", rate=rate, duration_s=n / rate + 1, max_requests=n,
                      warmup_s=0, timeout_s=30, route="completions", model="bench", max_tokens=(TOKENS, TOKENS),
                      prompt_words=(8, 8))
    run = LoadRun([Target("bench", url)], shape, rec.Events())
    ru0 = resource.getrusage(resource.RUSAGE_SELF)  # after imports, as for vllm bench below
    footer = run.run()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "ok": footer["ok"], "sent": footer["sent"]}))


def client_vllm(url: str, rate: float, n: int, tokenizer: str) -> None:
    import argparse as ap

    from vllm.benchmarks import serve

    p = ap.ArgumentParser()
    serve.add_cli_args(p)
    args = p.parse_args([
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", "bench",
        "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", "8",
        "--random-output-len", str(TOKENS), "--num-prompts", str(n), "--request-rate", str(rate),
        "--burstiness", "1000000", "--disable-tqdm", "--ignore-eos", "--seed", "1",
    ])
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    serve.main(args)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    print(json.dumps({"cpu_s": cpu}))


def schedule_errors_ms(arrivals_ns: list[int], rate: float) -> tuple[float, float]:
    t0 = arrivals_ns[0]
    errs = [(a - t0) / 1e6 - i * 1e3 / rate for i, a in enumerate(sorted(arrivals_ns))]
    med = percentile(errs, 0.5)
    dev = [abs(e - med) for e in errs]
    return percentile(dev, 0.5), percentile(dev, 0.99)


def run_client(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    last = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not last:
        raise RuntimeError(f"client failed: {out.stderr[-800:]}")
    return json.loads(last[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=float, nargs="+", default=[50, 200])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir for vllm bench (default: the tiny checkpoint)")
    args = ap.parse_args()
    from chaos.backends.local import ports
    from serve_apps import checkpoint

    tokenizer = args.tokenizer or str(checkpoint.build(checkpoint.DEFAULT_DIR))
    port = ports.free_port()
    url = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([sys.executable, __file__, "_server", str(port)])
    try:
        import httpx

        for _ in range(100):
            try:
                httpx.get(url + "/stats", trust_env=False)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        print(f"machine: {machine()}; server: raw sockets, kernel arrival stamps, {TOKENS} tokens "
              f"{TOKEN_DELAY_S * 1e3:.0f} ms apart")
        print(f"{'client':<18} {'rate':>6} {'requests':>8} {'sched p50 ms':>12} {'sched p99 ms':>12} "
              f"{'CPU s/1k req':>12}")
        for rate in args.rates:
            n = int(rate * args.seconds)
            row: dict[str, tuple[float, float]] = {}
            for name, cmd in (("availproof", [sys.executable, __file__, "_ours", url, str(rate), str(n)]),
                              ("vllm bench serve", [sys.executable, __file__, "_vllm", url, str(rate), str(n),
                                                    tokenizer])):
                httpx.get(url + "/stats", trust_env=False)  # reset
                res = run_client(cmd)
                arrivals = sorted(httpx.get(url + "/stats", trust_env=False).json())
                # vllm bench sends one test prompt before its run: keep the scheduled requests only
                arrivals = arrivals[-n:]
                p50, p99 = schedule_errors_ms(arrivals, rate)
                cpu = res["cpu_s"] / len(arrivals) * 1000
                row[name] = (p99, cpu)
                print(f"{name:<18} {rate:6.0f} {len(arrivals):8d} {p50:12.3f} {p99:12.3f} {cpu:12.2f}", flush=True)
            (ours_p99, ours_cpu), (_, theirs_cpu) = row["availproof"], row["vllm bench serve"]
            print(f"{'':<18} {rate:6.0f} targets: p99 {ours_p99:.3f} ms < 1 ms: {'yes' if ours_p99 < 1 else 'NO'}; "
                  f"CPU ratio {ours_cpu / theirs_cpu:.2f} <= 1: {'yes' if ours_cpu <= theirs_cpu else 'NO'}",
                  flush=True)
    finally:
        srv.terminate()
        srv.wait(timeout=10)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_server":
        server(int(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_ours":
        client_ours(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_vllm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        client_vllm(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
