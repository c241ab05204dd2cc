"""The stream target's engine: a child process the replica depends on, as a vLLM replica depends
on its EngineCore.

A vLLM replica (Ray Serve LLM) is an actor whose engine runs in a child process
(``VLLM::EngineCore``). The engine can die while the actor lives (an engine crash: vLLM reports
the engine dead, in-flight requests fail, the replica's health check fails and Serve replaces the
replica), or stop answering while alive (a hang: requests wait, the health check times out). The
model-free stream target runs such a child for the same purpose, so that ``engine-crash`` and
``engine-hang`` hit the same kind of process on both apps:

- the child writes one heartbeat byte every :data:`BEAT_S` to a pipe, and nothing else;
- the replica reads the pipe in a thread: end of file (the child died) is **dead** for good;
  no beat for :data:`HUNG_AFTER_S` (the child is stopped) is **hung** until beats resume.

Its command line names it ``availproof::EngineCore`` so the backends find it the way they find
vLLM's (a child of the replica's process whose command line says ``EngineCore``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

BEAT_S = 0.1
HUNG_AFTER_S = 1.0
ARGV0 = "availproof::EngineCore"
_CHILD = ("import os, sys, time\n"
          "fd = int(sys.argv[1])\n"
          "while True:\n"
          "    os.write(fd, b'.')\n"
          f"    time.sleep({BEAT_S})\n")


class EngineProcess:
    """The child engine of one replica, and what the replica knows of it (:meth:`state`)."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen([ARGV0, "-c", _CHILD, str(write_fd)], executable=sys.executable,
                                     pass_fds=(write_fd,), stdin=subprocess.DEVNULL, close_fds=True)
        os.close(write_fd)
        self._read_fd = read_fd
        self.last_beat = time.monotonic()
        self.dead_since: float | None = None
        threading.Thread(target=self._read, name="engine-heartbeat", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_fd, 64)
            except OSError:
                chunk = b""
            if not chunk:  # every writer gone: the child died
                self.dead_since = time.monotonic()
                return
            self.last_beat = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def state(self) -> str:
        """``ok``, ``hung`` (alive, no beat for :data:`HUNG_AFTER_S`) or ``dead`` (for good)."""
        if self.dead_since is not None or self.proc.poll() is not None:
            return "dead"
        return "hung" if time.monotonic() - self.last_beat > HUNG_AFTER_S else "ok"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)


class EngineDead(RuntimeError):
    """The engine process died: what vLLM calls ``EngineDeadError``."""


async def wait_ready(engine: EngineProcess, poll_s: float = 0.05) -> None:
    """Return when the engine answers; wait while it is hung (as a request to a stuck vLLM engine
    waits); raise :class:`EngineDead` once it is dead."""
    import asyncio

    while True:
        state = engine.state()
        if state == "ok":
            return
        if state == "dead":
            raise EngineDead("engine process died")
        await asyncio.sleep(poll_s)
