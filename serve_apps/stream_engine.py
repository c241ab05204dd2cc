"""The stream target's engine: a child process the replica depends on, as a vLLM replica depends
on its EngineCore, with the same failure states and the same pace: it *steps*.

A vLLM replica (Ray Serve LLM) is an actor whose engine runs in a child process
(``VLLM::EngineCore``). The engine produces tokens in steps (each step lets every running request out
at most one token), so anything that stops it stops the tokens, and anything that slows it slows them.
It can stop while the actor lives (a hang: no token comes out, the health check passes, since vLLM's
raises only once the engine errored), run slowly (``engine-slow``: every step slower, from inside;
``engine-stutter``: a duty cycle of SIGSTOP and SIGCONT), fail from inside its step (an error: vLLM reports the
engine dead, requests in flight get an error, the health check fails and Serve replaces the replica), or die (a
crash: the same, seen from the process's end). The model-free stream target runs such a child for the same purpose,
so that ``engine`` (hang), ``engine-slow``, ``engine-stutter``, ``engine-error`` and ``engine-crash`` hit the same
kind of process on both apps:

- the child *steps*: it writes one byte to a pipe every :data:`STEP_S` (5 ms), and its step heartbeat around each
  step (:func:`serve_apps.heartbeat.child_code`, the file vLLM's hook writes: a step under way while a hung rank
  blocks its collective, which the rig's proof of ``rank-hang`` reads; the replica counts the pipe's bytes);
- the replica reads the pipe in a thread and counts the steps (:class:`Steps`, pure, its clock
  injectable); its view (:meth:`EngineProcess.state`):

  - ``ok``: steps arrive;
  - ``hung``: alive, no step for :data:`HUNG_AFTER_S` (the child is stopped), until steps resume (for the
    health view and the logs: the tokens do not wait for it, see below);
  - ``errored`` (for good): with ``AVAILPROOF_ENGINE_FAULTS=1`` in its environment
    (:mod:`serve_apps.engine_faults`; the replica sets it) the child answers SIGUSR1 by writing its
    tombstone (:data:`TOMBSTONE`, the pid appended: the wall-clock time as text, written atomically, as
    vLLM's hook writes :func:`~serve_apps.engine_faults.tombstone_path`; a failure to write it is
    ignored), then :data:`~serve_apps.engine_faults.ERROR_BYTE` to the pipe, and exiting with
    :data:`~serve_apps.engine_faults.ERROR_EXIT`: it reported an error, the reason is
    ``engine error (injected)``. Without the variable SIGUSR1 keeps its default meaning (the child
    terminates: ``dead``);
  - ``dead`` (for good): end of file without that report (the child died: a crash).
  - ``errored`` by a lost device (``device-loss``, :mod:`serve_apps.device_loss`): the child looks at its node's
    marker before its first step and every 20 steps; it then writes :data:`~serve_apps.device_loss.ERROR_BYTE` and
    exits :data:`~serve_apps.device_loss.ERROR_EXIT` (at its start: its replica's constructor raises), or hangs
    while the marker says hang.
  - and, with the hook on, a fault it *holds* while it steps on (``engine-garbage``, ``engine-stall``,
    ``engine-slow``: :mod:`serve_apps.held_faults`, the same request and marks as vLLM's hook): it says so through
    the pipe (:data:`HELD_ON`, :data:`HELD_OFF` when the rig removed the mark); from then on its steps' tokens are
    :data:`GARBAGE_WORD` (:func:`generate`), or its steps admit nothing new (:func:`wait_ready` waits, the
    running requests' tokens go on), or each of its steps sleeps F - 1 times its own measured duration more
    (as vLLM's hook: on a loaded machine too, each step F times as long as it would have been) and each token's
    delay is F times as long (:func:`generate`): every token F times later, evenly; its mark
    says the mean step period before and since (the child's own measure, byte to byte: none before its second
    step, and a slow that came before that is then unmeasured, its proof failed).

- every token of every request goes through :func:`generate`, which lets a token out once its pacing
  delay has elapsed *and* the engine has stepped since that request's previous token (its first: since
  the request came to the engine), and raises :class:`EngineDead` (with the reason) once it errored or
  died. So one step lets each request out at most one token; a stopped engine lets out no token at once
  (at most the one of a step already in the pipe), for a request in flight as for a new one, which wait,
  streaming nothing, and go on at its next step; a duty cycle running one part in ``f`` slows a stream
  about ``f`` times when its tokens come faster than the cycle (a token whose delay elapsed while the
  engine was stopped goes out at its next step); with the engine running, steps come far more often than
  tokens and the pacing is the delays' alone. The engine's step rate (1 / :data:`STEP_S`) caps a
  request's token rate, as a real engine's does.

The child ends by itself once its replica is gone: a thread of its own waits for the pipe's read end to close (the
replica's death, even by SIGKILL, which runs no ``__del__``), whatever its step loop is doing (blocked in a hung rank's
collective, wedged by ``engine-wedge``); its ranks follow it (their death pipe).

Its command line names it ``availproof::EngineCore`` so the backends find it the way they find
vLLM's (a child of the replica's process whose command line says ``EngineCore``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from typing import AsyncIterator, Callable, Iterable

from serve_apps import device_loss, engine_faults, heartbeat, held_faults, last_words, stream_ranks

STEP_S = 0.005  # the child's step: one byte to the pipe
HUNG_AFTER_S = 1.0
POLL_S = 0.1  # a token waiting for a step looks again this often even if no step wakes it
ARGV0 = "availproof::EngineCore"
DIED = "engine process died"
STEP_BYTE = b"."
TOMBSTONE = engine_faults.tombstone_path(0).removesuffix("0")  # + the child's pid: the same file as vLLM's hook
REQUEST = engine_faults.request_path(0).removesuffix("0.request")  # + pid + ".request": the rig's request
WEDGE = engine_faults.wedge_path(0).removesuffix("0")  # + the child's pid: its wedge mark, as vLLM's hook writes it
# the faults the child holds while it steps (serve_apps.held_faults): their marks (+ pid), and what it tells its replica
HELD_MARKS = {f: engine_faults.mark_path(f, 0).removesuffix("0") for f in held_faults.HELD}
# from the next step on: tokens wrong / nothing admitted / every step slow (b"L" then the factor in tenths and b";")
HELD_ON = {held_faults.GARBAGE: b"G", held_faults.STALL: b"S", held_faults.SLOW: b"L"}
HELD_OFF = {held_faults.GARBAGE: b"g", held_faults.STALL: b"s", held_faults.SLOW: b"l"}  # the mark removed: it ended
FACTOR_END = b";"  # ends slow's factor (in tenths, ASCII digits) after its HELD_ON byte
GARBAGE_WORD = "!"  # a token of a corrupted step (NaN logits' argmax is token 0, "!" in many vocabularies)
REPLICA_GONE_EXIT = 73  # the engine child's exit status once its replica is gone (70-72: its reported failures)
HELD_LOOK_STEPS = 20  # the child looks at (and rewrites) its held marks every this many steps (~0.1 s)
_CHILD = ("import json, os, select, signal, sys, threading, time\n"
          "fd = int(sys.argv[1])\n"
          "def replica_gone():  # its pipe's read end closed: the replica died (even SIGKILLed), the engine goes\n"
          "    watch = select.poll()\n"
          "    watch.register(fd, select.POLLERR | select.POLLHUP)  # a write end with no reader: POLLERR\n"
          "    while not watch.poll():\n"
          "        pass\n"
          f"    os._exit({REPLICA_GONE_EXIT})  # its ranks follow (their death pipe)\n"
          "threading.Thread(target=replica_gone, daemon=True).start()  # not the step loop's: a hung step still ends\n"
          + stream_ranks.HOOK_CODE  # atomically(path, text), wedge(request): the ranks' too
          + device_loss.child_code() +  # a lost device (device-loss): device_check('init' | 'step')
          "held = {}  # fault -> [mark, run, began, steps, slow's factor or None, period before, s since, deadline, until]\n"
          "def mark(h):  # as serve_apps.held_faults.mark_text (slow's: its factor and step periods, as Slowdown's)\n"
          "    m = {'run': h[1], 't': round(h[2], 3), 'steps': h[3]}\n"
          "    if h[8] is not None:\n"
          "        m['until'] = round(h[8], 3)\n"
          "    if h[4] is not None:\n"
          "        m.update(factor=h[4], base_s=None if h[5] is None else round(h[5], 6),\n"
          "                 step_s=round(h[6] / h[3], 6) if h[3] else None)\n"
          "    text = json.dumps(m)\n"
          f"    return text.ljust({held_faults.MARK_WIDTH}) + '\\n'\n"
          "def rewrite(h):  # in place, never recreated: False once the rig removed it\n"
          "    try:\n"
          "        fd_mark = os.open(h[0], os.O_WRONLY)\n"
          "    except FileNotFoundError:\n"
          "        return False\n"
          "    except BaseException:\n"
          "        return True\n"
          "    try:\n"
          "        os.pwrite(fd_mark, mark(h).encode(), 0)\n"
          "    except BaseException:\n"
          "        pass\n"
          "    os.close(fd_mark)\n"
          "    return True\n"
          "period = None  # the mean of the recent steps' periods (as held_faults.Recent), for slow's mark\n"
          "def hold(request):  # garbage, stall or slow: held while its mark exists, the child stepping on\n"
          "    fault = request['fault']\n"
          "    factor = request.get('factor')\n"
          f"    if fault == {held_faults.SLOW!r}:\n"
          "        if isinstance(factor, bool) or not isinstance(factor, (int, float)) \\\n"
          f"                or not 1 < factor <= {held_faults.MAX_FACTOR}:\n"
          "            return\n"
          "    else:\n"
          "        factor = None\n"
          "    hold_s = request.get('hold_s')  # as serve_apps.held_faults.hold_seconds: past it the child lets go\n"
          "    if isinstance(hold_s, bool) or not isinstance(hold_s, (int, float)) or not 0 < hold_s < float('inf'):\n"
          "        hold_s = None\n"
          "    began = time.time()\n"
          f"    h = [{HELD_MARKS!r}[fault] + str(os.getpid()), request.get('run'), began, 0, factor, period, 0.0,\n"
          "         None if hold_s is None else time.monotonic() + hold_s, None if hold_s is None else began + hold_s]\n"
          "    if atomically(h[0], mark(h)):\n"
          "        held[fault] = h\n"
          f"        os.write(fd, {HELD_ON!r}[fault] + (b'%d;' % round(factor * 10) if factor else b''))\n"
          f"if os.environ.get({engine_faults.ENV!r}) == '1':\n"
          "    def fault(signum, frame):\n"
          "        request = {'fault': 'error'}\n"
          "        try:  # the rig's request, taken (none: an error)\n"
          f"            path = {REQUEST!r} + str(os.getpid()) + '.request'\n"
          "            with open(path) as f:\n"
          "                request = json.loads(f.read() or '{}')\n"
          "            os.unlink(path)\n"
          "        except BaseException:\n"
          "            pass\n"
          f"        if isinstance(request, dict) and request.get('fault') == {engine_faults.WEDGE!r}:\n"
          "            return wedge(request)\n"
          f"        if isinstance(request, dict) and request.get('fault') == {engine_faults.VOID!r}:\n"
          "            return\n"
          f"        if isinstance(request, dict) and request.get('fault') in {held_faults.HELD!r}:\n"
          "            return hold(request)\n"
          f"        atomically({TOMBSTONE!r} + str(os.getpid()), f'{{time.time():.3f}}\\n')\n"
          f"        os.write(fd, {engine_faults.ERROR_BYTE!r})\n"
          f"        os._exit({engine_faults.ERROR_EXIT})\n"
          "    signal.signal(signal.SIGUSR1, fault)\n"
          + stream_ranks.GROUP_CODE +  # a rank group (app.ranks): start_ranks(n), collective()
          "start_ranks(int(sys.argv[2]) if len(sys.argv) > 2 else 1)  # before its first step, the hook in place\n"
          "device_check('init')  # before its first step: a new engine on a lost device fails (or hangs) here\n"
          + heartbeat.child_code() +  # beat: the step heartbeat's writer (begin() before a step, end() after)
          "n = k = 0\n"
          "last = None  # the previous step's byte: the first step's period is not known (no pacing before it)\n"
          "while True:\n"
          "    k += 1\n"
          "    top = time.monotonic()  # this step's own duration, from here to its pacing's end (slow: x factor)\n"
          "    began = beat.begin()  # a step under way (busy) while a hung rank blocks its collective below\n"
          f"    if k % {HELD_LOOK_STEPS} == 0:\n"
          "        device_check('step')\n"
          "    collective()  # every rank completes the step (none: nothing)\n"
          f"    os.write(fd, {STEP_BYTE!r})\n"
          "    beat.end(began)  # between steps (the sleep below is the pacing, not the step)\n"
          "    now = time.monotonic()\n"
          "    took, last = (None if last is None else now - last), now  # byte to byte: the pacing and the work\n"
          f"    slow = held.get({held_faults.SLOW!r})\n"
          "    if slow is None and took is not None:\n"
          "        period = took if period is None else period + 0.1 * (took - period)\n"
          "    if held:\n"
          "        n += 1\n"
          "        for h in list(held.values()):\n"
          "            if took is not None:\n"
          "                h[3] += 1\n"
          "                h[6] += took\n"
          f"        if n % {HELD_LOOK_STEPS} == 0:\n"
          "            for f, h in list(held.items()):\n"
          "                over = h[7] is not None and time.monotonic() >= h[7]  # past its hold_s: let go\n"
          "                if over:\n"
          "                    try:\n"
          "                        os.unlink(h[0])\n"
          "                    except BaseException:\n"
          "                        pass\n"
          "                if over or not rewrite(h):\n"
          "                    del held[f]\n"
          f"                    os.write(fd, {HELD_OFF!r}[f])\n"
          f"    time.sleep({STEP_S})\n"
          "    if slow:  # (factor - 1) times the step's own measured duration more, as vLLM's hook (Slowdown.extra);\n"
          "        # a step that took over a second was stopped (a hang on top of the slow), not slow: not multiplied\n"
          "        time.sleep((slow[4] - 1) * min(time.monotonic() - top, 1.0))\n")

logger = logging.getLogger("ray.serve")
# the engine child's exit statuses that say it reported why (an error, a lost device, a dead rank)
EXIT_MESSAGES = {engine_faults.ERROR_EXIT: engine_faults.MESSAGE, device_loss.ERROR_EXIT: device_loss.MESSAGE,
                 stream_ranks.RANK_DEAD_EXIT: stream_ranks.MESSAGE}


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class Steps:
    """The engine's steps as its replica knows them: how many, when the last, whether it reported an error
    or ended. Fed by one thread (:meth:`record`, :meth:`end`), waited on from event loops (:meth:`wait`);
    no process in it, its clock injectable."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.count = 0
        self.admissions = 0  # the steps that could take a new request in (all but a stalled engine's)
        self.garbage = False  # the engine said its steps' tokens are wrong (engine-garbage), until it says otherwise
        self.stalled = False  # the engine said it admits no new request (engine-stall), until it says otherwise
        self.slow = 1.0  # the factor the engine said its steps are slowed by (engine-slow), until it says otherwise
        self._factor: bytes | None = None  # slow's factor being read (its digits may come in two reads)
        self.last = clock()  # the last step (or the start)
        self.error: str | None = None  # what the engine reported before it ended
        self.intervals = heartbeat.Histogram()  # between steps (a read of n steps: n of its mean)
        self.ended: float | None = None
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    def record(self, chunk: bytes) -> None:
        """What the engine wrote: a step per :data:`STEP_BYTE`, an error report by
        :data:`~serve_apps.engine_faults.ERROR_BYTE`, a held fault's start and end (:data:`HELD_ON`,
        :data:`HELD_OFF`: from the next step on), in the order written."""
        with self._lock:
            if engine_faults.ERROR_BYTE in chunk:
                self.error = engine_faults.MESSAGE
            if device_loss.ERROR_BYTE in chunk:  # failed on its node's lost device (device-loss)
                self.error = device_loss.MESSAGE
            if stream_ranks.RANK_DEAD_BYTE in chunk:  # a rank of its group died: the executor shut down
                self.error = stream_ranks.MESSAGE
            n = chunk.count(STEP_BYTE)
            now = self.clock()
            if n:
                self.intervals.add((now - self.last) / n, n)
            if n == len(chunk):  # steps only (nearly always)
                self.count += n
                self.admissions += 0 if self.stalled else n
            else:
                self._states(chunk)
            self.last = now
        self._wake_all()

    def _states(self, chunk: bytes) -> None:
        for c in chunk:
            byte = bytes((c,))
            if self._factor is not None and byte != STEP_BYTE:  # slow's factor: digits (tenths), then FACTOR_END
                if byte == FACTOR_END:
                    self.slow = max(1.0, int(self._factor or b"10") / 10)
                    self._factor = None
                elif byte.isdigit():
                    self._factor += byte
                continue
            if byte == HELD_ON[held_faults.SLOW]:
                self._factor = b""
            elif byte == HELD_OFF[held_faults.SLOW]:
                self.slow = 1.0
            elif byte == STEP_BYTE:
                self.count += 1
                self.admissions += 0 if self.stalled else 1
            elif byte in (HELD_ON[held_faults.GARBAGE], HELD_OFF[held_faults.GARBAGE]):
                self.garbage = byte == HELD_ON[held_faults.GARBAGE]
            elif byte in (HELD_ON[held_faults.STALL], HELD_OFF[held_faults.STALL]):
                self.stalled = byte == HELD_ON[held_faults.STALL]

    def step(self, n: int = 1) -> None:
        """``n`` steps (a simulated engine)."""
        self.record(STEP_BYTE * n)

    def end(self) -> None:
        """The engine's pipe closed: it ended."""
        with self._lock:
            self.ended = self.clock()
        self._wake_all()

    def _wake_all(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # its loop closed: nobody waits there any more
                pass

    def beat(self) -> heartbeat.Beat:
        """The engine's heartbeat as the progress watchdog v2 reads it (:mod:`serve_apps.heartbeat`)."""
        return heartbeat.Beat(self.count, self.last, None, self.intervals.quantile(0.99))

    def state(self) -> str:
        """``ok``, ``hung`` (no step for :data:`HUNG_AFTER_S`), ``errored`` or ``dead`` (for good)."""
        if self.error is not None:
            return "errored"
        if self.ended is not None:
            return "dead"
        return "hung" if self.clock() - self.last > HUNG_AFTER_S else "ok"

    def reason(self) -> str | None:
        """Why the engine is gone (``engine error (injected)``, a lost device's, ``engine process died``), or None."""
        state = self.state()
        if state == "errored":
            return self.error
        return DIED if state == "dead" else None

    async def wait(self, seen: int, timeout: float) -> None:
        """Until a step after the ``seen``-th, the engine's end, or ``timeout``, whichever first."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if self.count > seen or self.ended is not None or self.error is not None:
                return
            self._waiters.append(entry)
        try:
            await asyncio.wait([fut], timeout=timeout)
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


class EngineProcess:
    """The child engine of one replica, and what the replica knows of it (:attr:`steps`, :meth:`state`,
    :meth:`reason`).

    ``faults``: whether the child's environment (the replica's otherwise) has ``AVAILPROOF_ENGINE_FAULTS=1``
    (the ``engine-error`` hook) or not at all. ``ranks``: the engine's rank group (:mod:`serve_apps.stream_ranks`; 1,
    the default: none)."""

    def __init__(self, faults: bool = True, ranks: int = 1) -> None:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        if faults:
            env[engine_faults.ENV] = "1"
        else:
            env.pop(engine_faults.ENV, None)
        group = [str(stream_ranks.check_ranks(ranks))] if ranks != 1 else []
        self.proc = subprocess.Popen([ARGV0, "-c", _CHILD, str(write_fd), *group], executable=sys.executable,
                                     pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     close_fds=True, env=env)
        os.close(write_fd)
        self._read_fd = read_fd
        self.steps = Steps()
        self._first_beat = threading.Event()  # its first word: a step, a failure's report, or its end
        self.stderr = last_words.LastWords(self.proc.stderr, "engine-stderr")  # passed on, its last words kept
        threading.Thread(target=self._read, name="engine-steps", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_fd, 256)
            except OSError:
                chunk = b""
            if not chunk:  # every writer gone: the child ended
                self.steps.end()
                self._first_beat.set()  # ended before its first step: said at once, not after wait_started's wait
                logger.error("engine %d: %s", self.pid, self.steps.error or f"{DIED} (exit {self.proc.poll()})")
                return
            self.steps.record(chunk)
            self._first_beat.set()

    def wait_started(self, timeout: float = 30.0) -> bool:
        """Whether the child said its first word within ``timeout``: a step (it installs its SIGUSR1 hook before its
        first step: before that a SIGUSR1 still terminates it), a failure's report, or its end (:meth:`start_failure`
        tells which)."""
        return self._first_beat.wait(timeout)

    def start_failure(self, timeout: float = 30.0) -> str | None:
        """None once the child stepped; else why it did not start, said as soon as it is known: no word within
        ``timeout``, a failure it reported (a lost device), or its end before its first step (its exit status and
        last words: e.g. a rank's start that raised)."""
        if not self.wait_started(timeout):
            return f"engine process {self.pid} did not start within {timeout:g} s"
        if self.error is not None:
            return f"engine process {self.pid} failed at its start: {self.error}"
        if self.steps.count or self.steps.ended is None:
            return None
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        words = self.stderr.last(wait_s=1)  # all read (a rank that outlives it holds the pipe: not waited for)
        return f"engine process {self.pid} ended before its first step (exit {code})" + (f": {words}" if words else "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def error(self) -> str | None:
        """What the engine reported before it ended (through the pipe; or its exit status, when the pipe's reader has
        not read the report yet), or None."""
        code = self.proc.poll() if self.steps.error is None else None
        return EXIT_MESSAGES.get(code, self.steps.error)

    @property
    def last_beat(self) -> float:
        return self.steps.last

    @property
    def beats(self) -> int:
        return self.steps.count

    def state(self) -> str:
        """``ok``, ``hung`` (alive, no step for :data:`HUNG_AFTER_S`), ``errored`` (it reported an error,
        for good) or ``dead`` (it ended without, for good)."""
        code = self.proc.poll()
        if self.steps.error is not None or code in EXIT_MESSAGES:
            return "errored"
        if self.steps.ended is not None or code is not None:
            return "dead"
        return self.steps.state()

    def reason(self) -> str | None:
        """Why the engine is gone (``engine error (injected)``, ``engine process died``), or None."""
        state = self.state()
        if state == "errored":
            return self.error
        return DIED if state == "dead" else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        try:
            os.unlink(heartbeat.path(self.pid))  # the step heartbeat the child wrote (for the rig), gone with it
        except OSError:
            pass


class EngineDead(RuntimeError):
    """The engine errored or died: what vLLM calls ``EngineDeadError``; the message says which."""


async def step_after(engine, seen: int, poll_s: float = POLL_S) -> int:
    """The engine's step count once it is past ``seen`` (at once if it is already): wait while it does
    not step (stopped, or not yet); raise :class:`EngineDead` once it errored or died. ``engine``: an
    :class:`EngineProcess`, or anything with its ``steps`` and ``reason()``."""
    steps = engine.steps
    while True:
        reason = engine.reason()
        if reason is not None:
            raise EngineDead(reason)
        count = steps.count
        if count > seen:
            return count
        await steps.wait(seen, poll_s)


async def wait_ready(engine, poll_s: float = POLL_S) -> None:
    """Return at the engine's next step that admits (as a real engine takes a request in at a step): wait while
    it does not step (as a request to a stuck vLLM engine waits) or steps without admitting (a stalled engine,
    engine-stall: its running requests go on, a new one waits for good); raise :class:`EngineDead` once it
    errored or died."""
    steps = engine.steps
    seen = steps.admissions
    while True:
        reason = engine.reason()
        if reason is not None:
            raise EngineDead(reason)
        if steps.admissions > seen:
            return
        await steps.wait(steps.count, poll_s)


async def generate(engine, words: Iterable[str], delays: Iterable[float],
                   poll_s: float = POLL_S) -> AsyncIterator[str]:
    """The engine's tokens of a request it took in (:func:`wait_ready`): each word once its delay elapsed (the
    first's is the prefill) and the engine stepped since the previous one (the first: since the call),
    :func:`step_after`; nothing comes out while it does not step; :class:`EngineDead` once it errored or died.
    A token let out by a step of an engine that said its tokens are wrong (engine-garbage) is
    :data:`GARBAGE_WORD`, not the word: the engine's corruption, which the client's exact check catches. An engine
    that said its steps are slowed (engine-slow, factor F) takes F times each delay too: the delays stand for the
    model's compute in the steps, which a straggler does F times slower."""
    seen = engine.steps.count
    for word, delay in zip(words, delays):
        await asyncio.sleep(delay * engine.steps.slow)
        seen = await step_after(engine, seen, poll_s)
        yield GARBAGE_WORD if engine.steps.garbage else word
