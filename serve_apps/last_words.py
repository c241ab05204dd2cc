"""A child process's stderr passed on to this process's own (its logs as before), its last lines kept: what it said
before it ended (a Python traceback's last line says why), for a caller that must report a child's early death at once
(:meth:`serve_apps.stream_engine.EngineProcess.start_failure`)."""

from __future__ import annotations

import os
import sys
import threading
from typing import IO

KEEP_BYTES = 2048


class LastWords:
    """Reads ``stream`` (a child's stderr pipe) in a daemon thread until its end of file, writing each chunk to
    ``sys.stderr`` and keeping the last :data:`KEEP_BYTES`; ``done`` is set at the end of file (every writer gone: the
    child, and any of its children that share the pipe)."""

    def __init__(self, stream: IO[bytes], name: str = "child-stderr") -> None:
        self.stream = stream
        self.tail = b""
        self.done = threading.Event()
        threading.Thread(target=self._forward, name=name, daemon=True).start()

    def _forward(self) -> None:
        fd = self.stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                self.done.set()
                self.stream.close()
                return
            self.tail = (self.tail + chunk)[-KEEP_BYTES:]
            try:
                sys.stderr.write(chunk.decode(errors="replace"))
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - a closed or odd stderr must not stop the reading
                pass

    def last(self, wait_s: float = 0.0) -> str:
        """The last non-blank line written ("" for none), at most 300 characters; ``wait_s``: wait that long at most
        for the end of file first (what was written just before the child ended read too)."""
        self.done.wait(wait_s)
        lines = [x.strip() for x in self.tail.decode(errors="replace").splitlines() if x.strip()]
        return lines[-1][:300] if lines else ""
