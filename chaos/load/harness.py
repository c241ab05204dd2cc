"""The load harness: async httpx against OpenAI-compatible endpoints, every request recorded.

- Open loop sends on the planned schedule whether or not earlier requests finished; closed
  loop keeps a fixed number of requests in flight. Both stop by themselves at
  ``duration_s`` or ``max_requests``, then wait at most ``drain_s`` for requests in flight. An open loop
  whose schedule has no send left before ``duration_s`` (a sparse or idle load) stays on until then.
- Open-loop sends wake on :class:`~chaos.load._timer.PreciseTimer` (a timerfd: the loop's own
  timers are millisecond-grained) from a task created just ahead of its instant, so the
  write follows the wake-up without waiting for another turn of the loop. The task builds its
  request (headers, JSON body) before the instant and has the transport open a connection for
  it ahead when no idle one is spare (:meth:`~chaos.load._transport.LeanTransport.prepare`): the
  requests of a burst (many at one instant) leave one write after another, not one connect and
  one request build after another.
- HTTP goes through :class:`~chaos.load._transport.LeanTransport`, an httpx transport over asyncio
  protocols and httptools (the same httpx client API and exceptions, a fraction of the CPU
  per streamed chunk); uvloop runs the loop when installed.
- Each attempt's answer (a stream, or one JSON completion) is read into its record by
  :mod:`chaos.load.answers`; a client that retries sends a failed request again (:mod:`chaos.load.retry`).
- Each finished request becomes one :class:`~chaos.recording.records.RequestRecord`, published on
  :class:`~chaos.recording.records.Events` (the NDJSON writer, the Prometheus exporter and the progress
  line subscribe there).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from typing import Any, Callable

import httpx

from chaos.recording import records as rec
from chaos.load._timer import PreciseTimer
from chaos.load._transport import LeanTransport
from chaos.base.stats import percentile
from chaos.load import answers, continuity, golden, sessions as sessions_mod
from chaos.load.failures import classify_exception
from chaos.load.retry import CANCELLED, Retrying
from chaos.load.workload import LoadShape, PlannedRequest, Router, Target, check_target_allowed, plan, request_body


class LoadRun:
    """One bounded load run. Use :meth:`run` (blocking) or :meth:`start` / :meth:`join` (thread)."""

    def __init__(
        self,
        targets: list[Target],
        shape: LoadShape,
        events: rec.Events,
        routing: str = "round_robin",
        allow_hosts: tuple[str, ...] = (),
        transport: httpx.AsyncBaseTransport | None = None,
        run_id: str | None = None,
        header_extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        worker: int = 0,
        share: list[PlannedRequest] | None = None,
        start_at: tuple[float, int] | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ):
        """``worker``, ``share`` and ``start_at`` are for a load worker (:mod:`chaos.load.workers`): its
        index (recorded on every request), its share of the run's plan (instead of drawing one), and
        the run's start (monotonic, wall ns) that the share's offsets count from. ``clock_ns`` is the
        wall clock the records' instants are read on (the machine's; a pod's worker is on its node's)."""
        for t in targets:
            check_target_allowed(t.url, allow_hosts)
        self.targets = targets
        self.shape = shape
        self.events = events
        self.router = Router(list(targets), routing)
        self.transport = transport
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.header_extra = dict(header_extra or {})  # e.g. the definitions the run is analysed with
        self._headers = dict(headers or {})  # sent with every request, never recorded (Authorization)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started_ns: int | None = None
        self.t0: float | None = None  # monotonic at start
        self.counts = {"sent": 0, "ok": 0, "failed": 0, "clipped": 0, **({"retries": 0} if shape.retry else {})}
        self.worker, self._share, self._start_at = worker, share, start_at
        self._clock_ns = clock_ns
        self.error: BaseException | None = None
        self._engines_seen: set[str] = set()  # replicas whose engine a record described (chaos.load.served)
        self._lengths = sessions_mod.Lengths()  # the server's token counts seen (load.sessions)
        self._session_ids = 0  # requests sent by sessions (their ids)
        self._lean: LeanTransport | None = None  # the run's transport, when it can open connections ahead
        # the client's retries (load.retry, chaos.load.retry): None sends every request once
        self._retrying = Retrying(shape.retry, shape.seed) if shape.retry is not None else None
        self.goldens = golden.Goldens(shape.constraint)  # vLLM's golden answers, from the warm-up (chaos.load.golden)

    # ---------------------------------------------------------------- public
    def header(self) -> dict[str, Any]:
        return run_header(self, **self.header_extra)

    def run(self) -> dict[str, Any]:
        """Run to completion in this thread; returns the footer (counts, stop reason)."""
        loop = _new_loop()
        self._loop = loop
        try:
            return loop.run_until_complete(self._main())
        finally:
            loop.close()

    def start(self) -> "LoadRun":
        def target():
            try:
                self.run()
            except BaseException as e:  # noqa: BLE001 - surfaced by join()
                self.error = e

        self._thread = threading.Thread(target=target, name=f"load-{self.run_id}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while self.started_ns is None and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop sending; requests in flight are given ``drain_s`` to finish."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread:
            self._thread.join(timeout)
        if self.error:
            raise self.error

    @property
    def running(self) -> bool:
        return bool(self._thread and self._thread.is_alive())

    def elapsed_s(self) -> float:
        return 0.0 if self.t0 is None else time.monotonic() - self.t0

    def progress_line(self) -> str:
        """The run's progress in one line: sent, ok, failed, the rate achieved."""
        c, el = self.counts, self.elapsed_s()
        rate = c["sent"] / el if el > 0 else 0.0
        return f"t+{el:5.0f} s  sent {c['sent']}  ok {c['ok']}  failed {c['failed']}  rate {rate:.1f} req/s"

    def _requests(self):
        """This run's requests: its share of a run's plan (a worker), else the plan drawn from the seed."""
        return iter(self._share) if self._share is not None else plan(self.shape, self.router)

    # ---------------------------------------------------------------- internals
    async def _main(self) -> dict[str, Any]:
        s = self.shape
        timeout = httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s)
        transport = self.transport or LeanTransport()
        self._lean = transport if isinstance(transport, LeanTransport) else None
        async with httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False,
                                     headers=self._headers) as client:
            if self._start_at is not None:  # a worker: the run's start, shared by every worker
                self.t0, self.started_ns = self._start_at
            else:  # the schedule starts one send lead from now: its first request is not late either
                self.t0 = time.monotonic() + SEND_LEAD_S
                self.started_ns = self._clock_ns() + int(SEND_LEAD_S * 1e9)
            self.events.emit(self.events.run_started, self.header())
            inflight: set[asyncio.Task] = set()
            timer = PreciseTimer()
            try:
                if s.mode == "open":
                    reason = await self._open_loop(client, inflight, timer)
                else:
                    reason = await self._closed_loop(client, inflight)
                drain = s.drain_bound_s()
                if inflight:
                    done, pending = await asyncio.wait(inflight, timeout=drain + SEND_LEAD_S)
                    for t in pending:
                        t.cancel()
                    if pending:
                        await asyncio.gather(*pending, return_exceptions=True)
            finally:
                timer.close()
        footer = {
            "run_id": self.run_id,
            "stopped_ns": self._clock_ns(),
            "reason": reason,
            "elapsed_s": round(time.monotonic() - self.t0, 6),
            **self.counts,
        }
        if self.goldens.constraint is not None:
            footer["goldens"] = self.goldens.to_dict()
        self.events.emit(self.events.run_stopped, footer)
        return footer

    def _phase(self, offset: float) -> str:
        return rec.WARMUP if offset < self.shape.warmup_s else rec.MEASURE

    async def _open_loop(self, client: httpx.AsyncClient, inflight: set, timer: PreciseTimer) -> str:
        """Each request's task is created ``SEND_LEAD_S`` ahead and sleeps to its planned instant on
        the precise timer: the send follows the timer's wake-up with no other hop through the loop."""
        s = self.shape
        if s.sessions is not None:
            return await self._open_sessions(client, inflight)
        planned = 0
        for req in self._requests():
            if self._stop.is_set():
                return "stopped"
            at = self.t0 + req.offset_s
            delay = at - SEND_LEAD_S - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._stop.is_set():
                return "stopped"
            task = asyncio.create_task(self._one(client, req, planned_ns=self.started_ns + int(req.offset_s * 1e9),
                                                 send_at=at, timer=timer))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
            planned += 1
        if planned >= s.max_requests:
            return "max_requests"
        if s.trace is not None and s.trace_end == "stop":
            return "duration"  # a replayed trace that ended: the load ends with it (trace_end "stop")
        # the schedule has no send left before duration_s (a sparse or idle load's next arrival falls past it): the load
        # stays on until duration_s all the same, its run measuring (a fault may be injected, the windows go on)
        while not self._stop.is_set():
            left = self.t0 + s.duration_s - time.monotonic()
            if left <= 0:
                return "duration"
            await asyncio.sleep(min(left, IDLE_LOOK_S))
        return "stopped"

    async def _closed_loop(self, client: httpx.AsyncClient, inflight: set) -> str:
        s = self.shape
        if s.sessions is not None:
            return await self._closed_sessions(client)
        requests = self._requests()
        end = self.t0 + s.duration_s
        reason = ["max_requests"]

        async def worker():
            for req in requests:  # a shared generator: each request goes to one worker
                if self._stop.is_set():
                    reason[0] = "stopped"
                    return
                if time.monotonic() >= end:
                    reason[0] = "duration"
                    return
                await self._one(client, req, planned_ns=None)

        workers = [asyncio.create_task(worker()) for _ in range(s.concurrency)]
        await asyncio.gather(*workers)
        return reason[0]

    async def _one(self, client: httpx.AsyncClient, req: PlannedRequest, planned_ns: int | None,
                   send_at: float | None = None, timer: PreciseTimer | None = None,
                   reply: list[str] | None = None) -> rec.RequestRecord | None:
        """Send one logical request (its attempts recorded, again to the same target as load.retry says) and return
        its last attempt (None: stopped before its instant); ``reply`` gets the text answered (a session's turn)."""
        r, wait = await self._attempt(client, req, planned_ns, send_at, timer, reply, 1 if self._retrying else None)
        while r is not None and wait is not None:
            planned = self._clock_ns() + int(wait * 1e9)
            await asyncio.sleep(wait)
            if self._stop.is_set():  # the run stopped during the wait: no attempt is sent after its stop
                break
            if reply is not None:
                reply.clear()  # the answer is the last attempt's
            self.counts["retries"] += 1
            r, wait = await self._attempt(client, req, planned, None, None, reply, r.attempt + 1, round(wait, 6))
        return r

    async def _attempt(self, client: httpx.AsyncClient, req: PlannedRequest, planned_ns: int | None,
                       send_at: float | None, timer: PreciseTimer | None, reply: list[str] | None,
                       attempt: int | None, backoff_s: float | None = None) -> tuple[Any, float | None]:
        """Send one attempt and record it: (its record, None when stopped before its instant; the wait before the
        next attempt, None when it is its logical request's last)."""
        s = self.shape
        path, body = request_body(s, req)
        url = req.target.url.rstrip("/") + path
        # built before the instant (headers, JSON): at the instant the send is the transport's write
        request: httpx.Request | BaseException
        try:
            request = client.build_request("POST", url, json=body)
        except Exception as e:  # noqa: BLE001 - raised and recorded with the request below
            request = e
        if send_at is not None:
            if self._lean is not None:  # a burst's connections open ahead, not one after another at the instant
                self._lean.prepare(url, s.connect_timeout_s)
            await timer.sleep_until(send_at)
            if self._stop.is_set():
                return None, None  # stopped before its instant: never sent, not recorded
        sent_mono = time.monotonic()
        sent_ns = self._clock_ns()
        offset = sent_mono - self.t0
        r = rec.RequestRecord(
            id=req.id, target=req.target.name, url=req.target.url, zone=req.target.zone, route=path,
            phase=self._phase(offset), planned_ns=planned_ns if planned_ns is not None else sent_ns,
            sent_ns=sent_ns, sent_offset_s=round(offset, 6), max_tokens=req.max_tokens,
            prompt_chars=len(req.prompt), stream=s.stream, worker=self.worker, prompt_len=req.prompt_len,
            clipped=req.clipped, region=req.target.region, session=req.session, turn=req.turn,
            prefix_group=req.prefix_group, attempt=attempt, backoff_s=backoff_s,
        )
        if attempt == 1:
            self._retrying.started(sent_mono)
        self.counts["sent"] += 1
        if req.clipped:
            self.counts["clipped"] += 1
        token_times: list[float] = []
        try:
            async with asyncio.timeout(s.retry.attempt_timeout_s(s.timeout_s) if s.retry else s.timeout_s):
                if isinstance(request, BaseException):
                    raise request
                if s.stream:
                    await answers.read_stream(client, request, body, r, token_times, self._engines_seen,
                                              self._clock_ns, self.goldens, reply)
                else:
                    await answers.read_unary(client, request, body, r, self._engines_seen, self._clock_ns, reply)
        except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - every failure is recorded
            if isinstance(e, asyncio.CancelledError):
                r.failure, r.detail = rec.DEADLINE, CANCELLED
            elif r.failure is None:
                r.failure, r.detail = classify_exception(e, bool(token_times))
            r.ok = False
        r.e2e_s = round(time.monotonic() - sent_mono, 6)
        if token_times:
            r.ttft_s = round(token_times[0] - sent_mono, 6)
            gaps = [b - a for a, b in zip(token_times, token_times[1:])]
            if gaps:
                r.itl_mean_s = round(sum(gaps) / len(gaps), 6)
                r.itl_p95_s = round(percentile(gaps, 0.95), 6)
                r.itl_max_s = round(max(gaps), 6)
        r.chunks = len(token_times)
        if r.ok and r.output_tokens is None:
            r.output_tokens = len(token_times)
        self.counts["ok" if r.ok else "failed"] += 1
        wait = self._retrying.after(r, time.monotonic(), self._stop.is_set()) if self._retrying else None
        self.events.emit(self.events.request_done, r)
        return r, wait

    # ---------------------------------------------------------------- sessions (load.sessions)
    def _conversation(self, i: int) -> sessions_mod.Conversation:
        s, spec = self.shape, self.shape.sessions
        return sessions_mod.Conversation(session=i, group=i % spec.prefix_groups, target=self.router.pick(), seed=s.seed,
                                         spec=spec, prompt_words=s.prompt_words, max_tokens=s.max_tokens,
                                         max_model_len=s.max_model_len,
                                         template_tokens=s.template_tokens if s.route == "chat" else 0)

    async def _open_sessions(self, client: httpx.AsyncClient, inflight: set) -> str:
        """Open loop: sessions start on the arrival process at ``rate / turns`` (chaos.load.sessions)."""
        s = self.shape
        for i, offset in enumerate(sessions_mod.start_offsets(s)):
            if self._stop.is_set():
                return "stopped"
            if self._session_ids >= s.max_requests:
                return "max_requests"
            delay = self.t0 + offset - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._stop.is_set():
                return "stopped"
            task = asyncio.create_task(self._session(client, self._conversation(i), self.t0 + offset))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        return "duration"

    async def _closed_sessions(self, client: httpx.AsyncClient) -> str:
        """Closed loop: each of ``concurrency`` workers runs one session after another."""
        s = self.shape
        counter = itertools.count()
        reason = ["duration"]

        async def worker():
            while True:
                if self._stop.is_set():
                    reason[0] = "stopped"
                    return
                if time.monotonic() >= self.t0 + s.duration_s:
                    return
                if self._session_ids >= s.max_requests:
                    reason[0] = "max_requests"
                    return
                if not await self._session(client, self._conversation(next(counter)), time.monotonic()):
                    # a session that sent nothing (its first turn no longer fits the context, as the
                    # tokens per word learnt from the answers say) awaited nothing: yield, or the loop
                    # spins and stalls every stream in flight until duration_s
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(asyncio.create_task(worker()) for _ in range(s.concurrency)))
        return reason[0]

    async def _session(self, client: httpx.AsyncClient, conv: sessions_mod.Conversation, at: float) -> int:
        """One session's turns, one after the other, ``think_time_s`` apart; none sent after
        ``duration_s``, past ``max_requests`` or once stopped. Returns how many turns it sent."""
        s = self.shape
        sent = 0
        while True:
            turn = conv.next(self._lengths)
            if turn is None or self._stop.is_set() or self._session_ids >= s.max_requests:
                return sent
            delay = at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._stop.is_set() or time.monotonic() - self.t0 >= s.duration_s:
                return sent
            req = PlannedRequest(id=self._session_ids, offset_s=at - self.t0, target=conv.target,
                                 prompt=sessions_mod.render(turn.messages), max_tokens=turn.max_tokens,
                                 messages=turn.messages, session=conv.session, turn=turn.turn, prefix_group=conv.group)
            self._session_ids += 1
            sent += 1
            reply: list[str] = []
            r = await self._one(client, req, planned_ns=self.started_ns + int((at - self.t0) * 1e9), reply=reply)
            if r is None:
                return sent
            conv.answered(turn, r.ok, "".join(reply), r.prompt_tokens, self._lengths, r.output_tokens)
            at = time.monotonic() + s.sessions.think_time_s


def run_header(run: Any, **extra: Any) -> dict[str, Any]:
    """The records' header of a load run (one harness, or the workers of :mod:`chaos.load.workers`):
    its format, id, start, load, routing, targets, the trace replayed, then ``extra``."""
    return {
        "format_version": rec.FORMAT_VERSION,
        "run_id": run.run_id,
        "started_ns": run.started_ns,
        "load": run.shape.to_dict(),
        "routing": run.router.policy,
        "targets": [t.__dict__ for t in run.targets],
        **({"trace": _trace_info(run.shape)} if run.shape.trace else {}),
        "continuity": continuity.FORMAT,  # the streams' records say their token continuity
        **extra,
    }


def _trace_info(shape: LoadShape) -> dict[str, Any]:
    """The replayed trace in the run header: path, sha256, requests, span, and how it is replayed."""
    from chaos.load import trace

    return {**trace.load(shape.trace).describe(), "speed": shape.trace_speed, "end": shape.trace_end}


SEND_LEAD_S = 0.05  # open loop: how far ahead of its instant a request's task is created
IDLE_LOOK_S = 0.1  # open loop with no send left before duration_s: how often it looks whether it was stopped


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (vLLM brings it: less CPU per request), else asyncio's epoll loop."""
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
