"""Load from several processes (``load.workers`` N > 1): one schedule, dealt to N harness processes.

- The plan (arrival instants, targets, prompts, lengths) is drawn **once**, here in the rig's
  process, from the seed (:func:`chaos.load.workload.plan`), and dealt round-robin: worker ``w``
  gets requests ``w, w + N, w + 2N, ...``. The union of the shares is the plan, so the merged
  arrivals keep the stated burstiness (dealing a gamma schedule is not N gamma schedules).
- Each worker is a process of its own (``python -m chaos.load.worker``, :mod:`chaos.load.worker`)
  with its own event loop, its share, and its own records file (``workers/worker-W.ndjson`` beside
  the run's records). All start at one instant, ``t0``, given on the monotonic clock the processes
  of one machine share; each worker's wall-clock (and monotonic) offset against the rig is measured
  at the start and at the end, with its uncertainty (half the best round trip of 9 pings over the
  socket), and recorded in the run's header and footer.
- This process tails the workers' files: every finished request is published on the run's
  :class:`~chaos.records.Events` (the run's records file, the exporter, the stop conditions) as it
  arrives, with its ``worker``; once the run ends the records file is put in send order
  (:func:`chaos.records.order_by_send_time`, called by whoever owns the writer).

:class:`WorkerPool` has :class:`~chaos.load.harness.LoadRun`'s surface (``start``, ``stop``,
``join``, ``running``, ``counts``, ``elapsed_s``, ``progress_line``). Every wait is bounded; a
worker that outlives the run's bound is killed by its PID (and only it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from multiprocessing.connection import Connection, wait as mp_wait
from pathlib import Path
from typing import Any

from chaos import records as rec
from chaos import secret_env
from chaos.load.workload import LoadShape, Router, Target, check_target_allowed, plan

READY_TIMEOUT_S = 60.0
PING_SAMPLES = 9
START_LEAD_S = 0.3  # t0 this far after the last worker is ready: every worker is waiting for it


def deal(requests: list, n: int) -> list[list]:
    """Round-robin: worker ``w`` gets requests ``w, w + n, ...`` (their order kept)."""
    return [requests[w::n] for w in range(n)]


def clock_offset(conn: Connection, samples: int = PING_SAMPLES, timeout_s: float = 5.0) -> dict[str, Any]:
    """A worker's clocks minus ours, from the ping with the shortest round trip: the worker's reading
    against the midpoint of ours; the uncertainty is half that round trip (NTP's bound)."""
    best = None
    for k in range(samples):
        w1, m1 = time.time_ns(), time.monotonic_ns()
        conn.send(("ping", k))
        if not conn.poll(timeout_s):
            raise TimeoutError("a load worker did not answer its clock ping")
        msg = conn.recv()
        w2, m2 = time.time_ns(), time.monotonic_ns()
        if msg[0] != "pong" or msg[1] != k:
            raise RuntimeError(f"a load worker answered {msg[0]!r} to a clock ping")
        rtt = m2 - m1
        if best is None or rtt < best[0]:
            best = (rtt, msg[2] - (w1 + w2) // 2, msg[3] - (m1 + m2) // 2)
    rtt, wall, mono = best
    return {"wall_offset_ns": wall, "mono_offset_ns": mono, "uncertainty_ns": rtt // 2 + 1, "rtt_ns": rtt,
            "samples": samples}


class WorkerPool:
    """N load workers driven as one load run (see the module's docstring)."""

    def __init__(self, targets: list[Target], shape: LoadShape, events: rec.Events, routing: str = "round_robin",
                 allow_hosts: tuple[str, ...] = (), run_id: str | None = None,
                 header_extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                 ca_file: str | None = None, records_dir: str | Path | None = None):
        for t in targets:
            check_target_allowed(t.url, allow_hosts)
        self.targets, self.shape, self.events = targets, shape, events
        self.n = shape.workers
        self.router = Router(list(targets), routing)
        self.allow_hosts = tuple(allow_hosts)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.header_extra = dict(header_extra or {})
        self._headers = dict(headers or {})
        self.ca_file = ca_file
        base = Path(records_dir) if records_dir else Path(tempfile.mkdtemp(prefix="availproof-workers-"))
        self.records_dir = base / "workers"
        self.paths = [self.records_dir / f"worker-{w}.ndjson" for w in range(self.n)]
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Connection] = []
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0: float | None = None
        self.started_ns: int | None = None
        self.clock_start: list[dict] = []
        self.clock_end: list[dict | None] = []
        self._wcounts = [{"sent": 0, "ok": 0, "failed": 0, "clipped": 0} for _ in range(self.n)]
        self._seen = [{"ok": 0, "failed": 0, "last_offset_s": 0.0} for _ in range(self.n)]  # the tailed records
        self._done: list[tuple | None] = [None] * self.n
        self._tails: list[Any] = [None] * self.n
        self._partial = [b""] * self.n
        self.forwarded = [0] * self.n
        self.error: BaseException | None = None
        self.footer: dict[str, Any] | None = None
        self._planned = 0

    # ---------------------------------------------------------------- LoadRun's surface
    @property
    def counts(self) -> dict[str, int]:
        # a worker reports what it sent twice a second; what it recorded may be newer
        sent = sum(max(c["sent"], s["ok"] + s["failed"]) for c, s in zip(self._wcounts, self._seen))
        out = {"sent": sent, "ok": sum(c["ok"] for c in self._seen),
               "failed": sum(c["failed"] for c in self._seen), "clipped": sum(c["clipped"] for c in self._wcounts)}
        return out

    @property
    def running(self) -> bool:
        return bool(self._thread and self._thread.is_alive())

    def elapsed_s(self) -> float:
        return 0.0 if self.t0 is None else max(0.0, time.monotonic() - self.t0)

    def progress_line(self) -> str:
        c, el = self.counts, self.elapsed_s()
        rates = " ".join(f"w{w} {max(wc['sent'], s['ok'] + s['failed']) / el if el > 0 else 0.0:.1f}"
                         for w, (wc, s) in enumerate(zip(self._wcounts, self._seen)))
        total = c["sent"] / el if el > 0 else 0.0
        return (f"t+{el:5.0f} s  sent {c['sent']}  ok {c['ok']}  failed {c['failed']}  rate {total:.1f} req/s "
                f"({rates})")

    def header(self) -> dict[str, Any]:
        from chaos.load.harness import run_header

        return run_header(self, workers={"n": self.n, "dealing": "round_robin", "planned": self._planned,
                                         "pids": [p.pid for p in self.procs],
                                         "records": [str(p) for p in self.paths], "clock_start": self.clock_start},
                          **self.header_extra)

    def start(self) -> "WorkerPool":
        """Draw the plan, start the workers, measure their clocks, start them at one instant; returns
        once the run has started (its header published)."""
        try:
            self._start()
        except BaseException:
            self._kill_all()
            raise
        self._thread = threading.Thread(target=self._supervise_safely, name=f"load-pool-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._send_all(("stop",))

    def join(self, timeout: float | None = None) -> None:
        if self._thread:
            self._thread.join(timeout)
        if self.error:
            raise self.error

    def run(self) -> dict[str, Any]:
        """Start, wait for the end, return the footer."""
        self.start()
        self.join()
        return self.footer or {}

    # ---------------------------------------------------------------- internals
    def _start(self) -> None:
        s = self.shape
        requests = list(plan(s, self.router))
        self._planned = len(requests)
        index = {t: i for i, t in enumerate(self.targets)}
        shares = deal([(r.id, r.offset_s, index[r.target], r.prompt, r.max_tokens, r.prompt_len, r.clipped)
                       for r in requests], self.n)
        del requests
        self.records_dir.mkdir(parents=True, exist_ok=True)
        env = secret_env.child_env()
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for w in range(self.n):
            ours, theirs = socket.socketpair()
            try:
                proc = subprocess.Popen([sys.executable, "-m", "chaos.load.worker", str(theirs.fileno())],
                                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, env=env, start_new_session=True)
            finally:
                theirs.close()
            self.procs.append(proc)
            self.conns.append(Connection(ours.detach()))
            self.paths[w].unlink(missing_ok=True)
            wshape = {**s.to_dict(), "workers": 1}
            if s.mode == "closed":
                wshape["concurrency"] = s.concurrency // self.n + (1 if w < s.concurrency % self.n else 0)
            self.conns[w].send({
                "worker": w, "shape": wshape, "targets": [t.__dict__ for t in self.targets],
                "routing": self.router.policy, "allow_hosts": list(self.allow_hosts), "share": shares[w],
                "records": str(self.paths[w]), "run_id": self.run_id, "headers": self._headers,
                "ca_file": self.ca_file,
                "header_extra": {**self.header_extra, "worker": w, "workers_total": self.n},
            })
        deadline = time.monotonic() + READY_TIMEOUT_S
        for w, conn in enumerate(self.conns):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"load worker {w} not ready within {READY_TIMEOUT_S:.0f} s")
            msg = conn.recv()
            if msg[0] != "ready":
                raise RuntimeError(f"load worker {w} answered {msg[0]!r} instead of ready")
        self.clock_start = [{"worker": w, **clock_offset(c)} for w, c in enumerate(self.conns)]
        self.clock_end = [None] * self.n
        for w, path in enumerate(self.paths):
            self._tails[w] = open(path, "rb")
        self.t0 = time.monotonic() + START_LEAD_S
        self.started_ns = time.time_ns() + int(START_LEAD_S * 1e9)
        self._send_all(("go", self.t0, self.started_ns))
        self.events.emit(self.events.run_started, self.header())

    def _send_all(self, msg) -> None:
        with self._send_lock:
            for w, conn in enumerate(self.conns):
                if self._done[w] is None and not conn.closed:
                    try:
                        conn.send(msg)
                    except (OSError, ValueError):
                        pass

    def _tail(self) -> None:
        """Publish the request lines the workers wrote since the last look."""
        for w, f in enumerate(self._tails):
            if f is None:
                continue
            data = f.read()
            if not data:
                continue
            data = self._partial[w] + data
            lines = data.split(b"\n")
            self._partial[w] = lines.pop()  # an unfinished last line waits for its end
            for line in lines:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(obj, dict) or obj.get("kind") != "request":
                    continue
                r = rec.request_from(obj)
                if r is None:
                    continue
                self._seen[w]["ok" if r.ok else "failed"] += 1
                self._seen[w]["last_offset_s"] = max(self._seen[w]["last_offset_s"], r.sent_offset_s)
                self.forwarded[w] += 1
                self.events.emit(self.events.request_done, r)

    def _supervise_safely(self) -> None:
        try:
            self._supervise()
        except BaseException as e:  # noqa: BLE001 - surfaced by join()
            self.error = e
            self._kill_all()

    def _supervise(self) -> None:
        s = self.shape
        drain = s.drain_s if s.drain_s is not None else s.timeout_s + 1.0
        deadline = self.t0 + s.duration_s + drain + 60.0  # every worker ends by itself well before
        problems = []
        while any(d is None for d in self._done) and time.monotonic() < deadline:
            live = [c for w, c in enumerate(self.conns) if self._done[w] is None]
            for conn in mp_wait(live, timeout=0.1):
                w = self.conns.index(conn)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    code = self.procs[w].wait(timeout=10)
                    self._done[w] = ({}, self._wcounts[w], None, f"exited with code {code} before it was done")
                    problems.append(f"load worker {w} exited with code {code} before it was done")
                    continue
                if msg[0] == "counts":
                    self._wcounts[w] = msg[1]
                elif msg[0] == "done":
                    _, footer, counts, cpu, err = msg
                    self._wcounts[w] = counts
                    self._done[w] = (footer, counts, cpu, err)
                    if err:
                        problems.append(f"load worker {w}: {err}")
            self._tail()
        late = [w for w, d in enumerate(self._done) if d is None]
        for w in late:
            problems.append(f"load worker {w} still running past the run's bound: killed")
            self._kill(w)
            self._done[w] = ({}, self._wcounts[w], None, "killed past the run's bound")
        self._tail()
        for w, conn in enumerate(self.conns):
            if w not in late and not problems_for(w, self._done):
                try:
                    self.clock_end[w] = {"worker": w, **clock_offset(conn)}
                except (TimeoutError, RuntimeError, OSError, EOFError):
                    self.clock_end[w] = None
            try:
                conn.send(("exit",))
            except (OSError, ValueError):
                pass
        for w, p in enumerate(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._kill(w)
        for f in self._tails:
            if f is not None:
                f.close()
        for c in self.conns:
            c.close()
        per_worker = []
        for w, d in enumerate(self._done):
            footer, counts, cpu, err = d
            el = self._seen[w]["last_offset_s"]  # the sending phase: the run's start to its last send
            per_worker.append({"worker": w, "pid": self.procs[w].pid, **{k: counts.get(k, 0) for k in
                                                                          ("sent", "ok", "failed", "clipped")},
                               "rate": round(counts.get("sent", 0) / el, 3) if el > 0 else None,
                               "cpu_s": None if cpu is None else round(cpu, 3), "reason": footer.get("reason") if footer else None,
                               "error": err, "forwarded": self.forwarded[w],
                               "clock_start": self.clock_start[w], "clock_end": self.clock_end[w]})
        totals = {k: sum(p[k] for p in per_worker) for k in ("sent", "ok", "failed", "clipped")}
        self.footer = {
            "run_id": self.run_id,
            "stopped_ns": time.time_ns(),
            "reason": ("error" if problems else "stopped" if self._stop.is_set()
                       else "max_requests" if self._planned >= s.max_requests else "duration"),
            "elapsed_s": round(time.monotonic() - self.t0, 6),
            **totals,
            "workers": per_worker,
        }
        if problems:
            self.footer["problems"] = problems
        self.events.emit(self.events.run_stopped, self.footer)
        if problems:
            self.error = RuntimeError("; ".join(problems))

    def _kill(self, w: int) -> None:
        p = self.procs[w]
        if p.poll() is None:
            p.kill()  # by its PID: the process this pool started
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _kill_all(self) -> None:
        for w in range(len(self.procs)):
            self._kill(w)


def problems_for(w: int, done: list) -> bool:
    """Whether worker ``w`` ended without its done message (no clock to read at the end)."""
    d = done[w]
    return d is None or d[2] is None
