"""The stream target's engine: a child process the replica depends on, as a vLLM replica depends
on its EngineCore, with the same failure states.

A vLLM replica (Ray Serve LLM) is an actor whose engine runs in a child process
(``VLLM::EngineCore``). The engine can stop while the actor lives (a hang: no token comes out, the
health check passes, since vLLM's raises only once the engine errored), fail from inside its step (an
error: vLLM reports the engine dead, requests in flight get an error, the health check fails and Serve
replaces the replica), or die (a crash: the same, seen from the process's end). The model-free stream
target runs such a child for the same purpose, so that ``engine`` (hang), ``engine-error`` and
``engine-crash`` hit the same kind of process on both apps:

- the child writes one heartbeat byte every :data:`BEAT_S` to a pipe, and nothing else;
- the replica reads the pipe in a thread; its view (:meth:`EngineProcess.state`):

  - ``ok``: beats arrive;
  - ``hung``: alive, no beat for :data:`HUNG_AFTER_S` (the child is stopped), until beats resume;
  - ``errored`` (for good): with ``AVAILPROOF_ENGINE_FAULTS=1`` in its environment
    (:mod:`serve_apps.engine_faults`; the replica sets it) the child answers SIGUSR1 by writing
    :data:`~serve_apps.engine_faults.ERROR_BYTE` and exiting with
    :data:`~serve_apps.engine_faults.ERROR_EXIT`: it reported an error, the reason is
    ``engine error (injected)``. Without the variable SIGUSR1 keeps its default meaning (the child
    terminates: ``dead``);
  - ``dead`` (for good): end of file without that report (the child died: a crash).

- every token of every request goes through :func:`generate`, which lets a token out only while the
  engine is not hung (a request in flight and a new one both wait, streaming nothing, and go on when
  beats resume) and raises :class:`EngineDead` (with the reason) once it errored or died. The stop is
  noticed within :data:`HUNG_AFTER_S`: tokens may still come out for that long after a SIGSTOP.

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
from typing import AsyncIterator, Iterable

from serve_apps import engine_faults

BEAT_S = 0.1
HUNG_AFTER_S = 1.0
ARGV0 = "availproof::EngineCore"
DIED = "engine process died"
_CHILD = ("import os, signal, sys, time\n"
          "fd = int(sys.argv[1])\n"
          f"if os.environ.get({engine_faults.ENV!r}) == '1':\n"
          "    def error(signum, frame):\n"
          f"        os.write(fd, {engine_faults.ERROR_BYTE!r})\n"
          f"        os._exit({engine_faults.ERROR_EXIT})\n"
          "    signal.signal(signal.SIGUSR1, error)\n"
          "while True:\n"
          "    os.write(fd, b'.')\n"
          f"    time.sleep({BEAT_S})\n")

logger = logging.getLogger("ray.serve")


class EngineProcess:
    """The child engine of one replica, and what the replica knows of it (:meth:`state`, :meth:`reason`).

    ``faults``: whether the child's environment (the replica's otherwise) has ``AVAILPROOF_ENGINE_FAULTS=1``
    (the ``engine-error`` hook) or not at all."""

    def __init__(self, faults: bool = True) -> None:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        if faults:
            env[engine_faults.ENV] = "1"
        else:
            env.pop(engine_faults.ENV, None)
        self.proc = subprocess.Popen([ARGV0, "-c", _CHILD, str(write_fd)], executable=sys.executable,
                                     pass_fds=(write_fd,), stdin=subprocess.DEVNULL, close_fds=True, env=env)
        os.close(write_fd)
        self._read_fd = read_fd
        self.last_beat = time.monotonic()
        self.dead_since: float | None = None
        self.error: str | None = None  # what the engine reported before it ended
        self.beats = 0
        self._first_beat = threading.Event()
        threading.Thread(target=self._read, name="engine-heartbeat", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_fd, 64)
            except OSError:
                chunk = b""
            if not chunk:  # every writer gone: the child ended
                self.dead_since = time.monotonic()
                logger.error("engine %d: %s", self.pid, self.error or f"{DIED} (exit {self.proc.poll()})")
                return
            if engine_faults.ERROR_BYTE in chunk:
                self.error = engine_faults.MESSAGE
            self.last_beat = time.monotonic()
            self.beats += len(chunk)
            self._first_beat.set()

    def wait_started(self, timeout: float = 30.0) -> bool:
        """Whether the child beat once within ``timeout`` (it installs its SIGUSR1 hook before its first
        beat: before that a SIGUSR1 still terminates it)."""
        return self._first_beat.wait(timeout)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def state(self) -> str:
        """``ok``, ``hung`` (alive, no beat for :data:`HUNG_AFTER_S`), ``errored`` (it reported an error,
        for good) or ``dead`` (it ended without, for good)."""
        code = self.proc.poll()
        if self.error is not None or code == engine_faults.ERROR_EXIT:
            return "errored"
        if self.dead_since is not None or code is not None:
            return "dead"
        return "hung" if time.monotonic() - self.last_beat > HUNG_AFTER_S else "ok"

    def reason(self) -> str | None:
        """Why the engine is gone (``engine error (injected)``, ``engine process died``), or None."""
        state = self.state()
        if state == "errored":
            return engine_faults.MESSAGE
        return DIED if state == "dead" else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)


class EngineDead(RuntimeError):
    """The engine errored or died: what vLLM calls ``EngineDeadError``; the message says which."""


async def wait_ready(engine: EngineProcess, poll_s: float = 0.05) -> None:
    """Return when the engine answers; wait while it is hung (as a request to a stuck vLLM engine
    waits); raise :class:`EngineDead` once it errored or died."""
    while True:
        state = engine.state()
        if state == "ok":
            return
        if state in ("dead", "errored"):
            raise EngineDead(engine.reason())
        await asyncio.sleep(poll_s)


async def generate(engine: EngineProcess, words: Iterable[str], delays: Iterable[float],
                   poll_s: float = 0.05) -> AsyncIterator[str]:
    """The engine's tokens: each word after its delay (the first's is the prefill), and only once the
    engine is live (:func:`wait_ready`): nothing comes out while it is hung; :class:`EngineDead` once it
    errored or died."""
    for word, delay in zip(words, delays):
        await asyncio.sleep(delay)
        await wait_ready(engine, poll_s)
        yield word
