"""What every pool of load workers shares, wherever the workers run (:mod:`chaos.load.workers`: processes
of the rig; :mod:`chaos.backends.kuberay.kube.load_pool`: pods of a Kubernetes Job).

- The plan is drawn **once**, here, from the seed (:func:`chaos.load.workload.plan`) and dealt
  round-robin (:func:`deal`): worker ``w`` gets requests ``w, w + N, w + 2N, ...``; its spec
  (:meth:`LoadPool.spec`) is what it needs to send its share.
- Each worker writes its finished requests as NDJSON lines; the pool publishes each one on the run's
  :class:`~chaos.recording.records.Events` as it arrives (:meth:`LoadPool.publish`: the records file, the exporter,
  the stop conditions), with its ``worker`` and its wall-clock instants corrected by the worker's measured
  offset when the worker's clock is another machine's. :class:`LineBuffer` cuts a byte stream (a file
  tailed, a pod's log followed) into whole lines.
- :class:`LoadPool` has :class:`~chaos.load.harness.LoadRun`'s surface (``start``, ``stop``, ``join``,
  ``running``, ``counts``, ``elapsed_s``, ``progress_line``, ``header``), so the run does not care where
  the workers are; a subclass says how to start, supervise, signal and end them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from chaos.recording import records as rec
from chaos.load.workload import LoadShape, Router, Target, check_target_allowed, plan

WALL_CLOCK_FIELDS = ("planned_ns", "sent_ns")  # a request line's instants on the worker's wall clock


def deal(requests: list, n: int) -> list[list]:
    """Round-robin: worker ``w`` gets requests ``w, w + n, ...`` (their order kept)."""
    return [requests[w::n] for w in range(n)]


class LineBuffer:
    """Whole lines out of a byte stream that arrives in pieces: an unfinished last line waits for its end."""

    def __init__(self):
        self._partial = b""

    def feed(self, data: bytes) -> list[bytes]:
        if not data:
            return []
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return lines


class LoadPool:
    """N load workers driven as one load run; subclasses start them (``_start``), watch them until they are
    done (``_supervise``), signal a stop (``_signal_stop``) and end whatever is left (``_abort``)."""

    where = "workers"  # what the workers are, in the header

    def __init__(self, targets: list[Target], shape: LoadShape, events: rec.Events, routing: str = "round_robin",
                 allow_hosts: tuple[str, ...] = (), run_id: str | None = None,
                 header_extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                 ca_file: str | None = None):
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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._emit_lock = threading.Lock()  # workers' lines may be published from several threads
        self.t0: float | None = None  # the run's start on our monotonic clock
        self.started_ns: int | None = None  # and on our wall clock
        self.clock_start: list[dict] = []
        self.clock_end: list[dict | None] = []
        self._wcounts = [{"sent": 0, "ok": 0, "failed": 0, "clipped": 0} for _ in range(self.n)]
        self._seen = [{"ok": 0, "failed": 0, "last_offset_s": 0.0} for _ in range(self.n)]  # the published records
        self._done: list[tuple | None] = [None] * self.n  # (footer, counts, cpu_s, error) once a worker is done
        self.forwarded = [0] * self.n
        self.error: BaseException | None = None
        self.footer: dict[str, Any] | None = None
        self._planned = 0

    # ---------------------------------------------------------------- LoadRun's surface
    @property
    def counts(self) -> dict[str, int]:
        # a worker reports what it sent now and then; what it recorded may be newer
        sent = sum(max(c["sent"], s["ok"] + s["failed"]) for c, s in zip(self._wcounts, self._seen))
        return {"sent": sent, "ok": sum(c["ok"] for c in self._seen),
                "failed": sum(c["failed"] for c in self._seen), "clipped": sum(c["clipped"] for c in self._wcounts)}

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
                                         "where": self.where, **self._header_workers(),
                                         "clock_start": self.clock_start},
                          **self.header_extra)

    def start(self) -> "LoadPool":
        """Draw the plan, start the workers, measure their clocks, start them at one instant; returns
        once the run has started (its header published)."""
        try:
            self._start()
        except BaseException:
            self._abort()
            raise
        self._thread = threading.Thread(target=self._supervise_safely, name=f"load-pool-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._signal_stop()

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

    # ---------------------------------------------------------------- what subclasses say
    def _start(self) -> None:
        raise NotImplementedError

    def _supervise(self) -> None:
        raise NotImplementedError

    def _signal_stop(self) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        """End every worker still running (after a failed start or supervision)."""

    def _header_workers(self) -> dict[str, Any]:
        """Where the workers are, for the header's ``workers`` (pids and records files; a Job and its pods)."""
        return {}

    # ---------------------------------------------------------------- shared steps
    def _supervise_safely(self) -> None:
        try:
            self._supervise()
        except BaseException as e:  # noqa: BLE001 - surfaced by join()
            self.error = e
            self._abort()

    def shares(self) -> list[list[tuple]]:
        """The plan drawn once from the seed and dealt: per worker, its requests as (id, offset_s, target
        index, prompt, max_tokens, prompt_len, clipped, prefix_group)."""
        requests = list(plan(self.shape, self.router))
        self._planned = len(requests)
        index = {t: i for i, t in enumerate(self.targets)}
        return deal([(r.id, r.offset_s, index[r.target], r.prompt, r.max_tokens, r.prompt_len, r.clipped,
                      r.prefix_group) for r in requests], self.n)

    def worker_shape(self, w: int) -> dict[str, Any]:
        """Worker ``w``'s load shape: one harness; a closed loop's concurrency split among the workers."""
        s = self.shape
        out = {**s.to_dict(), "workers": 1}
        if s.mode == "closed":
            out["concurrency"] = s.concurrency // self.n + (1 if w < s.concurrency % self.n else 0)
        return out

    def spec(self, w: int, share: list[tuple], **extra: Any) -> dict[str, Any]:
        """What worker ``w`` needs to send its share (:func:`chaos.load.worker.load_run` reads it); ``extra``
        adds to it or replaces a field (a pod's ``header_extra``: who it is, nothing more)."""
        return {"worker": w, "shape": self.worker_shape(w), "targets": [t.__dict__ for t in self.targets],
                "routing": self.router.policy, "allow_hosts": list(self.allow_hosts), "share": share,
                "run_id": self.run_id, "headers": self._headers, "ca_file": self.ca_file,
                "header_extra": {**self.header_extra, "worker": w, "workers_total": self.n}, **extra}

    def publish(self, w: int, line: bytes, wall_correction_ns: int = 0) -> dict | None:
        """One NDJSON line of worker ``w``: a finished request is published on the run's Events (its
        wall-clock instants less ``wall_correction_ns``, the worker's clock offset); any other JSON object
        is returned for the caller (a worker's control lines); nothing else is kept."""
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(obj, dict):
            return None
        if obj.get("kind") != "request":
            return obj
        if wall_correction_ns:
            for key in WALL_CLOCK_FIELDS:
                if isinstance(obj.get(key), int):
                    obj[key] -= wall_correction_ns
        r = rec.request_from(obj)
        if r is None:
            return None
        with self._emit_lock:
            seen = self._seen[w]
            seen["ok" if r.ok else "failed"] += 1
            seen["last_offset_s"] = max(seen["last_offset_s"], r.sent_offset_s)
            self.forwarded[w] += 1
            self.events.emit(self.events.request_done, r)
        return None

    def per_worker(self, w: int, **where: Any) -> dict[str, Any]:
        """Worker ``w``'s line of the footer: where it ran, its counts, its rate over its sending phase, CPU
        seconds, why it stopped, its error, the records forwarded and its clocks at the start and the end."""
        footer, counts, cpu, err = self._done[w]
        el = self._seen[w]["last_offset_s"]  # the sending phase: the run's start to its last send
        return {"worker": w, **where, **{k: counts.get(k, 0) for k in ("sent", "ok", "failed", "clipped")},
                "rate": round(counts.get("sent", 0) / el, 3) if el > 0 else None,
                "cpu_s": None if cpu is None else round(cpu, 3), "reason": footer.get("reason") if footer else None,
                "error": err, "forwarded": self.forwarded[w],
                "clock_start": self.clock_start[w] if w < len(self.clock_start) else None,
                "clock_end": self.clock_end[w] if w < len(self.clock_end) else None,
                **({"goldens": footer["goldens"]} if footer and footer.get("goldens") else {})}  # chaos.load.golden

    def end(self, per_worker: list[dict], problems: list[str], **extra: Any) -> None:
        """The run's footer (totals, why it stopped, each worker's line), published; problems raise at join()."""
        s = self.shape
        totals = {k: sum(p[k] for p in per_worker) for k in ("sent", "ok", "failed", "clipped")}
        self.footer = {
            "run_id": self.run_id,
            "stopped_ns": time.time_ns(),
            "reason": ("error" if problems else "stopped" if self._stop.is_set()
                       else "max_requests" if self._planned >= s.max_requests else "duration"),
            "elapsed_s": round(time.monotonic() - self.t0, 6),
            **totals,
            "workers": per_worker,
            **extra,
        }
        if problems:
            self.footer["problems"] = problems
        self.events.emit(self.events.run_stopped, self.footer)
        if problems:
            self.error = RuntimeError("; ".join(problems))
