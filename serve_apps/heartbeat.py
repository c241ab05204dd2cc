"""The engine-step heartbeat: how many steps an engine completed, when the last ended, whether one is under
way and since when, and how long its steps take (a histogram), for the progress watchdog v2
(:mod:`serve_apps.watchdog_v2`) in the replica's process to read.

**vLLM**: the engine-side hook (:mod:`serve_apps.engine_faults`, a vLLM general plugin that wraps
``EngineCore.step`` in the engine process) writes it around every step (:class:`Writer`): a chunk of a
chunked prefill is a step, so a long prefill keeps it beating. **Where**: a small file per engine process,
:func:`path` (``/tmp/availproof-engine-heartbeat-<pid>``, beside the engine's tombstone and wedge mark),
**mapped into memory** (``mmap``) by the engine and by its replica. Why: a step writes it with a few
stores into shared memory (no system call, about 2 µs of Python per step, nothing on a step of
milliseconds), the replica reads it when its health check runs (no pipe, socket or thread in the engine to
wedge with it, nothing the engine waits on), and a file under ``/tmp`` is found by pid alone, by the replica
(its engine is its child whose command line says ``EngineCore``: :func:`engine_children`) and by an
operator (``od`` on the file). The page is written back to disk now and then by the kernel, never on the
step's path. The file (one page) stays after the engine ends, as its tombstone does.

**Stream target**: its engine child's steps come to the replica through their pipe already
(:class:`serve_apps.stream_engine.Steps`, which keeps the same :class:`Histogram` of step intervals); the child
writes this file too (:func:`child_code`), for the rig: ``rank-hang``'s proof reads a step under way that does not
end (:mod:`chaos.backends.rank_hang`).

Times are ``time.monotonic()`` (``CLOCK_MONOTONIC``: one clock for every process of a host, so the engine's
times and the replica's compare). The record: a sequence number (odd while a write is under way: the reader
retries), the step count, the last step's end, the current step's start (0: between steps), then the
histogram's bucket counts. :class:`Histogram` buckets are powers of two from 1 ms: a quantile is the upper
edge of its bucket, at most twice the true figure (a threshold scaled by it errs on the long side).
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import time
from typing import Callable, NamedTuple

DIR = "/tmp"  # as the engine's tombstone: found without the engine's environment
EDGES = tuple(0.001 * 2 ** i for i in range(22))  # 1 ms .. ~35 min; bucket i holds durations <= EDGES[i]
_HEAD = struct.Struct("<QQdd")  # seq, count, last step's end, current step's start (0: none)
_BUCKETS = struct.Struct("<" + "Q" * (len(EDGES) + 1))  # the last: above EDGES[-1]
SIZE = _HEAD.size + _BUCKETS.size


class Beat(NamedTuple):
    """One look at an engine's heartbeat: ``count`` steps, the last ended at ``last`` (monotonic), one under
    way since ``busy_since`` (None: between steps), step times' 99th percentile ``p99`` (None: no step yet)."""
    count: int
    last: float
    busy_since: float | None
    p99: float | None


class Histogram:
    """Durations in power-of-two buckets from 1 ms (:data:`EDGES`); :meth:`quantile` the bucket's upper edge."""

    def __init__(self, counts: list[int] | None = None) -> None:
        self.counts = list(counts) if counts is not None else [0] * (len(EDGES) + 1)

    @staticmethod
    def bucket(seconds: float) -> int:
        return bisect.bisect_left(EDGES, seconds)

    def add(self, seconds: float, n: int = 1) -> None:
        self.counts[self.bucket(seconds)] += n

    @property
    def total(self) -> int:
        return sum(self.counts)

    def quantile(self, q: float) -> float | None:
        """The upper edge of the bucket of the ``q``-quantile (above the last edge: twice it); None when empty."""
        total = self.total
        if total == 0:
            return None
        rank, seen = q * total, 0
        for i, n in enumerate(self.counts):
            seen += n
            if seen >= rank and n:
                return EDGES[i] if i < len(EDGES) else 2 * EDGES[-1]
        return 2 * EDGES[-1]


def path(pid: int, directory: str | None = None) -> str:
    """The heartbeat file of engine process ``pid`` (in :data:`DIR` unless ``directory``)."""
    return f"{directory or DIR}/availproof-engine-heartbeat-{int(pid)}"


class Writer:
    """The engine's side: :meth:`begin` as a step starts, :meth:`end` as it returns. Never raises (the step
    must run whatever happens to its heartbeat): a file that cannot be made leaves it off."""

    def __init__(self, file: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.seq = self.count = 0
        self.last = 0.0
        self.hist = Histogram()
        self.map: mmap.mmap | None = None
        try:
            # a new file (a reused pid's old one unlinked, never truncated under a reader's mapping), its blocks
            # allocated before it is mapped: a write to a page with no block on a full /tmp would be SIGBUS
            name = file or path(os.getpid())
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.posix_fallocate(fd, 0, SIZE)
                self.map = mmap.mmap(fd, SIZE)
            finally:
                os.close(fd)
        except OSError:
            self.map = None

    def _write(self, started: float, bucket: int | None) -> None:
        if self.map is None:
            return
        self.seq += 1  # odd: a write under way
        _HEAD.pack_into(self.map, 0, self.seq, self.count, self.last, started)
        if bucket is not None:
            struct.pack_into("<Q", self.map, _HEAD.size + 8 * bucket, self.hist.counts[bucket])
        self.seq += 1
        struct.pack_into("<Q", self.map, 0, self.seq)

    def begin(self) -> float:
        started = self.clock()
        self._write(started, None)
        return started

    def end(self, started: float) -> None:
        self.last = self.clock()
        self.count += 1
        bucket = Histogram.bucket(self.last - started)
        self.hist.counts[bucket] += 1
        self._write(0.0, bucket)


class Reader:
    """The replica's side: :meth:`read` the heartbeat of engine ``pid`` (None until its file exists)."""

    def __init__(self, pid: int, file: str | None = None) -> None:
        self.pid = pid
        self.file = file or path(pid)
        self.map: mmap.mmap | None = None
        self.inode: int | None = None

    def read(self) -> Beat | None:
        """The heartbeat as last written; None while there is none. A file made anew since it was mapped (the
        engine's own, after a reused pid's stale one) is mapped again."""
        try:
            now = os.stat(self.file).st_ino
        except OSError:
            return None
        if self.map is None or now != self.inode:
            try:
                fd = os.open(self.file, os.O_RDONLY)
                try:
                    st = os.fstat(fd)
                    if st.st_size < SIZE:
                        return None
                    self.map, self.inode = mmap.mmap(fd, SIZE, prot=mmap.PROT_READ), st.st_ino
                finally:
                    os.close(fd)
            except OSError:
                return None
        for _ in range(100):
            seq, count, last, started = _HEAD.unpack_from(self.map, 0)
            counts = _BUCKETS.unpack_from(self.map, _HEAD.size)
            if seq % 2 == 0 and struct.unpack_from("<Q", self.map, 0)[0] == seq:
                return Beat(count, last, started or None, Histogram(list(counts)).quantile(0.99))
        return None  # the writer never held still (it cannot: a write is a few stores); treated as unknown


def children_by_parent(proc: str = "/proc") -> dict[int, list[int]]:
    """Every process read from ``proc`` under its parent's pid: ppid -> its children's pids (sorted); a process that
    ended while being read is left out."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat") as f:
                stat = f.read()
            out.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return {p: sorted(c) for p, c in out.items()}


def engine_children(pid: int, proc: str = "/proc") -> list[int]:
    """The processes whose parent is ``pid`` and whose command line says ``EngineCore`` (vLLM's engine)."""
    found = []
    for child in children_by_parent(proc).get(pid, []):
        try:
            with open(f"{proc}/{child}/cmdline", "rb") as f:
                if b"EngineCore" in f.read():
                    found.append(child)
        except OSError:
            continue
    return found


def child_code() -> str:
    """Python source for a process started by ``python -c`` that imports nothing of the rig's (the stream target's
    engine child, :mod:`serve_apps.stream_engine`): it defines ``beat``, whose ``begin()`` and ``end(began)`` are this
    module's :class:`Writer`'s for the process's own pid (:func:`path`), the module loaded from its file by path (no
    package import, no change to ``sys.path``). Nothing of it may break the step: a module that cannot be loaded, or a
    write that raises, leaves the heartbeat off (``begin`` then returns None, ``end`` does nothing); each call is one
    ``try`` around a few stores into a mapped page (microseconds, on a step of milliseconds)."""
    return ("class beat:  # the engine-step heartbeat (serve_apps.heartbeat), as vLLM's hook writes it\n"
            "    writer = None\n"
            "    @classmethod\n"
            "    def begin(cls):\n"
            "        try:\n"
            "            return cls.writer.begin()\n"
            "        except Exception:  # no writer, or a write that failed: never in the step's way\n"
            "            return None\n"
            "    @classmethod\n"
            "    def end(cls, began):\n"
            "        try:\n"
            "            if began is not None:\n"
            "                cls.writer.end(began)\n"
            "        except Exception:\n"
            "            pass\n"
            "try:\n"
            "    import importlib.util\n"
            f"    _spec = importlib.util.spec_from_file_location('availproof_heartbeat', {os.path.abspath(__file__)!r})\n"
            "    _module = importlib.util.module_from_spec(_spec)\n"
            "    _spec.loader.exec_module(_module)\n"
            "    beat.writer = _module.Writer(_module.path(os.getpid()))\n"
            "except Exception:\n"
            "    pass\n")
