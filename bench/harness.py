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

``--sweep``: the highest rate one worker (the harness in the rig's process) and two workers
(``load.workers`` 2: two harness processes and the rig's process merging their records) sustain
with gamma arrivals (``--burstiness``, as vllm bench's) with p99 schedule error under 1 ms and
nothing failed: rates tried in increasing order, ``--seconds`` each, until one misses. The
planned instants are the harness' own (its records' ``planned_ns``), matched in order with the
kernel's arrival stamps; a rate missed once is tried once more (the machine is shared). At each
highest rate, ``vllm bench serve`` at the same rate and
burstiness, for its CPU per request (its schedule is its own draw, rescaled: no error measured for
it). CPU is per process: the rig's, each worker's, the server's; records are written as in a run.

    python bench/harness.py --sweep [--burstiness 0.5] [--rates 150 200 250 300 400 500 600 800] [--seconds 4]

``--bursts``: simultaneous arrivals. A Mooncake-format trace (:func:`chaos.load.trace.bursts`) of
``--burst-count`` bursts of each of ``--burst-sizes`` (16 and 32) requests at one instant, in turn,
``--burst-gap`` s apart, replayed by the harness with 1 and 2 workers (``load.trace``, speed 1) and
by ``vllm bench serve`` (its ``timed_trace`` dataset: the same file, the same instants). Per client
and burst size, the lag of every request (kernel arrival stamps) p50 / p99 / max in ms against its
planned instant (the harness' records) and against its burst's first arrival (every client: vllm
bench's planned instants are not known outside it), and the client's CPU seconds.

    python bench/harness.py --bursts [--burst-sizes 16 32] [--burst-count 4] [--burst-gap 2]
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
from chaos.base.stats import percentile  # noqa: E402

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
                if url.startswith((b"/v1/completions", b"/v1/chat/completions")):
                    arrivals.append(arrived)  # not vllm bench's /tokenize, /detokenize, /metrics calls
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
    from chaos.recording import records as rec
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


def client_workers(url: str, rate: float, n: int, burstiness: float, workers: int, out_dir: str) -> None:
    """The harness with gamma arrivals, in this process (``workers`` 1) or as a pool of worker
    processes, writing records as a run does; prints CPU per process and the planned instants."""
    from chaos.load.workload import LoadShape

    shape = LoadShape(mode="open", arrival="gamma", burstiness=burstiness, rate=rate, duration_s=n / rate + 1,
                      max_requests=n, warmup_s=0, timeout_s=30, route="completions", model="bench",
                      max_tokens=(TOKENS, TOKENS), prompt_words=(8, 8), seed=1, workers=workers)
    _client_run(url, shape, out_dir)


def client_trace(url: str, trace_path: str, workers: int, out_dir: str) -> None:
    """The harness replaying a trace (``load.trace``, speed 1), as :func:`client_workers` measures it."""
    from chaos.load import trace
    from chaos.load.workload import LoadShape

    t = trace.load(trace_path)
    shape = LoadShape(mode="open", trace=trace_path, duration_s=t.span_s + 1, max_requests=len(t.rows), warmup_s=0,
                      timeout_s=30, route="completions", model="bench", seed=1, workers=workers)
    _client_run(url, shape, out_dir)


def _client_run(url: str, shape, out_dir: str) -> None:
    from chaos.recording import records as rec

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    from chaos.load.harness import LoadRun
    from chaos.load.workers import WorkerPool
    from chaos.load.workload import Target

    workers = shape.workers
    events = rec.Events()
    writer = rec.RecordWriter(Path(out_dir) / "records.ndjson").attach(events)
    planned: list[int] = []
    failed = [0]
    events.request_done.append(lambda r: (planned.append(r.planned_ns), failed.__setitem__(0, failed[0] + (not r.ok))))
    run = (LoadRun([Target("bench", url)], shape, events) if workers == 1 else
           WorkerPool([Target("bench", url)], shape, events, records_dir=out_dir))
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    footer = run.run()
    writer.close()
    if workers > 1:
        rec.order_by_send_time(Path(out_dir) / "records.ndjson")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    parent = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    per_worker = [w["cpu_s"] for w in footer.get("workers", [])]
    print(json.dumps({"cpu_s": parent + sum(per_worker), "cpu_parent_s": parent, "cpu_workers_s": per_worker,
                      "ok": footer["ok"], "sent": footer["sent"], "failed": failed[0], "planned_ns": sorted(planned),
                      "clocks": [(w["clock_start"], w["clock_end"]) for w in footer.get("workers", [])]}))


def client_vllm(url: str, rate: float, n: int, tokenizer: str, burstiness: float = 1000000) -> None:
    import argparse as ap

    from vllm.benchmarks import serve

    p = ap.ArgumentParser()
    serve.add_cli_args(p)
    args = p.parse_args([
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", "bench",
        "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", "8",
        "--random-output-len", str(TOKENS), "--num-prompts", str(n), "--request-rate", str(rate),
        "--burstiness", str(burstiness), "--disable-tqdm", "--ignore-eos", "--seed", "1",
    ])
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    result = serve.main(args) or {}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "completed": result.get("completed")}))


def client_vllm_trace(url: str, trace_path: str, n: int, tokenizer: str) -> None:
    """``vllm bench serve`` replaying the same trace (its ``timed_trace`` dataset, self-timed: the
    trace's timestamps in ms), without its initial test prompt (``--ready-check-timeout-sec 0``)."""
    import argparse as ap

    from vllm.benchmarks import serve

    p = ap.ArgumentParser()
    serve.add_cli_args(p)
    args = p.parse_args([
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", "bench",
        "--tokenizer", tokenizer, "--dataset-name", "timed_trace", "--dataset-path", trace_path,
        "--timed-trace-sec-multiplier", "0.001", "--timed-trace-chunk-hash-size", "512",
        "--num-prompts", str(n), "--ready-check-timeout-sec", "0", "--disable-tqdm", "--seed", "1",
    ])
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    result = serve.main(args) or {}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "completed": result.get("completed")}))


def split_bursts(arrivals_ns: list[int], gap_ns: int) -> list[list[int]]:
    """Sorted arrivals cut into bursts wherever two consecutive ones are more than ``gap_ns`` apart."""
    out: list[list[int]] = []
    for a in sorted(arrivals_ns):
        if out and a - out[-1][-1] <= gap_ns:
            out[-1].append(a)
        else:
            out.append([a])
    return out


def burst_lags(arrivals_ns: list[int], planned_ns: list[int] | None, gap_ns: int) -> dict[int, dict[str, list[float]]]:
    """Per burst size, the lags (ms) of every request of every burst of that size: ``planned``
    (arrival minus its planned instant, the i-th arrival against the i-th planned instant; only when
    the planned instants are known) and ``first`` (arrival minus the first arrival of its burst).
    Bursts are the planned instants' when known, else the arrivals cut by :func:`split_bursts`."""
    arrivals_ns = sorted(arrivals_ns)
    groups: list[list[tuple[int, int | None]]] = []
    if planned_ns is not None:
        last = None
        for a, p in zip(arrivals_ns, sorted(planned_ns)):
            if p != last:
                groups.append([])
                last = p
            groups[-1].append((a, p))
    else:
        groups = [[(a, None) for a in g] for g in split_bursts(arrivals_ns, gap_ns)]
    out: dict[int, dict[str, list[float]]] = {}
    for g in groups:
        first = min(a for a, _ in g)
        lags = out.setdefault(len(g), {"planned": [], "first": [], "bursts": []})
        lags["bursts"].append(len(g))
        lags["first"] += [(a - first) / 1e6 for a, _ in g]
        if planned_ns is not None:
            lags["planned"] += [(a - p) / 1e6 for a, p in g]
    return out


def lag_figures(lags: list[float]) -> str:
    """p50 / p99 / max of lags in ms, or n/a."""
    if not lags:
        return "n/a"
    xs = sorted(lags)
    return f"{percentile(xs, 0.5):.2f} / {percentile(xs, 0.99):.2f} / {xs[-1]:.2f}"


def bursts(url: str, srv_pid: int, args, tokenizer: str) -> None:
    """Bursts of 16 and 32 requests at one instant, one every ``--burst-gap`` s, from a trace replayed
    by the harness (1 and 2 workers) and by vllm bench serve: send lag per burst size."""
    import tempfile

    import httpx

    from chaos.load import trace

    rows = trace.bursts(tuple(args.burst_sizes), args.burst_count, int(args.burst_gap * 1000),
                        output_length=TOKENS)
    gap_ns = int(args.burst_gap * 1e9 / 2)
    print(f"trace: {args.burst_count} bursts each of {'/'.join(map(str, args.burst_sizes))} requests at one "
          f"instant, in turn, {args.burst_gap:g} s apart ({len(rows)} requests)")
    print("lag ms, p50 / p99 / max over every request of every burst of that size: vs planned = kernel arrival "
          "minus the planned instant; vs first = minus the burst's first arrival")
    print(f"{'client':<22} {'burst':>5} {'bursts':>6} {'vs planned':>22} {'vs first':>22} {'failed':>6} "
          f"{'CPU s':>6} {'server s':>8}")
    with tempfile.TemporaryDirectory() as d:
        path = str(trace.write(rows, Path(d) / "bursts.jsonl"))
        clients = [(f"availproof, {w} worker{'s' if w > 1 else ''}",
                    [sys.executable, __file__, "_trace", url, path, str(w), str(Path(d) / f"w{w}")])
                   for w in args.workers]
        if not args.no_vllm:
            clients.append(("vllm bench serve", [sys.executable, __file__, "_vllm_trace", url, path, str(len(rows)),
                                                 tokenizer]))
        for name, cmd in clients:
            httpx.get(url + "/stats", trust_env=False)  # reset
            srv0 = proc_cpu_s(srv_pid)
            res = run_client(cmd)
            srv = proc_cpu_s(srv_pid) - srv0
            arrivals = sorted(httpx.get(url + "/stats", trust_env=False).json())
            failed = res.get("failed", 0) + (len(rows) - len(arrivals))
            planned = res.get("planned_ns")
            if planned is not None and len(planned) != len(arrivals):
                planned = None  # cannot be matched in order: the first-arrival figure only
            for size, lags in sorted(burst_lags(arrivals, planned, gap_ns).items()):
                print(f"{name:<22} {size:5d} {len(lags['bursts']):6d} {lag_figures(lags['planned']):>22} "
                      f"{lag_figures(lags['first']):>22} {failed:6d} {res['cpu_s']:6.2f} {srv:8.2f}", flush=True)


def schedule_errors_ms(arrivals_ns: list[int], rate: float) -> tuple[float, float]:
    t0 = arrivals_ns[0]
    errs = [(a - t0) / 1e6 - i * 1e3 / rate for i, a in enumerate(sorted(arrivals_ns))]
    med = percentile(errs, 0.5)
    dev = [abs(e - med) for e in errs]
    return percentile(dev, 0.5), percentile(dev, 0.99)


def planned_errors_ms(arrivals_ns: list[int], planned_ns: list[int]) -> tuple[float, float]:
    """p50 and p99 of |arrival - planned - median|, the i-th arrival against the i-th planned instant."""
    errs = [(a - p) / 1e6 for a, p in zip(sorted(arrivals_ns), sorted(planned_ns))]
    med = percentile(errs, 0.5)
    dev = [abs(e - med) for e in errs]
    return percentile(dev, 0.5), percentile(dev, 0.99)


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (seconds), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sweep_step(url: str, srv_pid: int, args, workers: int, rate: float, attempt: int) -> dict:
    """One run of the harness at ``rate`` with ``workers``, measured and printed as a row."""
    import tempfile

    import httpx

    n = int(rate * args.seconds)
    httpx.get(url + "/stats", trust_env=False)  # reset
    srv0, t0 = proc_cpu_s(srv_pid), time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        res = run_client([sys.executable, __file__, "_workers", url, str(rate), str(n), str(args.burstiness),
                          str(workers), d])
    wall, srv = time.monotonic() - t0, proc_cpu_s(srv_pid) - srv0
    arrivals = sorted(httpx.get(url + "/stats", trust_env=False).json())
    p50, p99 = planned_errors_ms(arrivals, res["planned_ns"])
    failed = res["failed"] + (n - len(arrivals))
    row = {"rate": rate, "n": n, "p50": p50, "p99": p99, "failed": failed, "cpu1k": res["cpu_s"] / n * 1000,
           "rig": res["cpu_parent_s"], "workers": res["cpu_workers_s"], "server": srv,
           "busy": (res["cpu_s"] + srv) / wall / (os.cpu_count() or 1)}
    name = ("availproof, 1 worker" if workers == 1 else f"availproof, {workers} workers") + (" (2nd)" if attempt > 1 else "")
    print(f"{name:<28} {rate:6.0f} {n:6d} {p50:7.3f} {p99:7.3f} {failed:6d} {row['cpu1k']:7.2f} "
          f"{row['rig']:6.2f} {'/'.join(f'{c:.2f}' for c in row['workers']) or '-':>13} {srv:7.2f}  "
          f"{row['busy']:.0%}", flush=True)
    return row


def sweep(url: str, srv_pid: int, args, tokenizer: str) -> None:
    """The highest rate with p99 < 1 ms and nothing failed, per worker count; vllm bench beside each."""
    import httpx

    print(f"gamma arrivals, burstiness {args.burstiness}; {args.seconds:.0f} s per rate; CPU s per 1k requests")
    print(f"{'client':<28} {'rate':>6} {'req':>6} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} {'CPU/1k':>7} "
          f"{'rig':>6} {'workers':>13} {'server':>7}  busy")
    best: dict[int, dict] = {}
    rows: dict[tuple[int, float], dict] = {}  # (workers, rate) -> row
    for workers in args.workers:
        for rate in sorted(args.rates):
            for attempt in (1, 2):  # the machine is shared: a rate missed once is tried once more
                row = _sweep_step(url, srv_pid, args, workers, rate, attempt)
                if row["p99"] < 1.0 and not row["failed"]:
                    break
            rows[(workers, rate)] = row
            if row["p99"] >= 1.0 or row["failed"]:
                break
            best[workers] = row
    for workers, row in (best.items() if not args.no_vllm else ()):
        rate, n = row["rate"], row["n"]
        httpx.get(url + "/stats", trust_env=False)
        srv0 = proc_cpu_s(srv_pid)
        res = run_client([sys.executable, __file__, "_vllm", url, str(rate), str(n), tokenizer, str(args.burstiness)])
        srv = proc_cpu_s(srv_pid) - srv0
        got = res.get("completed") or 0  # its own count (its readiness and test prompts are not counted)
        print(f"{'vllm bench serve':<28} {rate:6.0f} {got:6d} {'n/a':>7} {'n/a':>7} {n - got:6d} "
              f"{res['cpu_s'] / n * 1000:7.2f} {res['cpu_s']:6.2f} {'-':>13} {srv:7.2f}  "
              f"(beside {workers} worker{'s' if workers > 1 else ''}: CPU ratio {row['cpu1k'] / (res['cpu_s'] / n * 1000):.2f})",
              flush=True)
    if 1 in best and 2 in best:
        print(f"2 workers vs 1: highest rate x{best[2]['rate'] / best[1]['rate']:.2f}")
        for (w, rate), row in sorted(rows.items()):
            one = rows.get((1, rate / 2))
            if w == 2 and one:  # the same load per harness process: what the second process and the merge add
                print(f"  CPU per request, 2 workers at {rate:.0f} / 1 worker at {rate / 2:.0f} req/s: "
                      f"x{row['cpu1k'] / one['cpu1k']:.2f} (the rig's merge {row['rig'] / row['n'] * 1000:.2f} s/1k)")


def run_client(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    last = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not last:
        raise RuntimeError(f"client failed: {out.stderr[-800:]}")
    return json.loads(last[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=float, nargs="+", default=None,
                    help="default 50 200; with --sweep 150 200 250 300 400 500 600 800")
    ap.add_argument("--seconds", type=float, default=None, help="per rate; default 20, with --sweep 4")
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir for vllm bench (default: the tiny checkpoint)")
    ap.add_argument("--sweep", action="store_true", help="the highest rate 1 and 2 workers sustain (gamma arrivals)")
    ap.add_argument("--burstiness", type=float, default=0.5, help="--sweep: gamma shape, as vllm bench's")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="--sweep, --bursts: worker counts")
    ap.add_argument("--no-vllm", action="store_true", help="--sweep, --bursts: without vllm bench serve (a smoke run)")
    ap.add_argument("--bursts", action="store_true",
                    help="send lag of simultaneous arrivals: a trace of bursts replayed by 1 and 2 workers "
                         "and vllm bench serve")
    ap.add_argument("--burst-sizes", type=int, nargs="+", default=[16, 32], help="--bursts: requests per burst")
    ap.add_argument("--burst-count", type=int, default=4, help="--bursts: bursts of each size (at most 20)")
    ap.add_argument("--burst-gap", type=float, default=2.0, help="--bursts: seconds between bursts")
    args = ap.parse_args()
    args.rates = args.rates or ([150, 200, 250, 300, 400, 500, 600, 800] if args.sweep else [50, 200])
    if args.seconds is None:
        args.seconds = 4.0 if args.sweep else 20.0
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
        if args.sweep:
            sweep(url, srv.pid, args, tokenizer)
            return
        if args.bursts:
            if not (1 <= args.burst_count <= 20 and 0.5 <= args.burst_gap <= 10 and max(args.burst_sizes) <= 256):
                raise SystemExit("--burst-count 1..20, --burst-gap 0.5..10 s, bursts of at most 256")
            bursts(url, srv.pid, args, tokenizer)
            return
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
    elif len(sys.argv) > 1 and sys.argv[1] == "_workers":
        client_workers(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]),
                       sys.argv[7])
    elif len(sys.argv) > 1 and sys.argv[1] == "_trace":
        client_trace(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "_vllm_trace":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        client_vllm_trace(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "_vllm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        client_vllm(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], *map(float, sys.argv[6:7]))
    else:
        main()
