"""Sleep until an instant with sub-millisecond precision, without spinning.

Event loops keep timers in milliseconds (libuv's clock, and the epoll timeout asyncio
rounds up): a sleep lands anywhere in a ~2 ms range around its deadline, which is most of
an open-loop client's schedule error. Linux' ``timerfd`` wakes ``epoll`` at the kernel's
high-resolution timer instead. :class:`PreciseTimer` keeps one timerfd per event loop,
armed for the earliest deadline of a heap of waiters; elsewhere (or when the fd cannot be
created) it falls back to ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import heapq
import itertools
import os
import sys
import time

_CLOCK_MONOTONIC = 1  # the clock of time.monotonic() on Linux
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1
_EARLY_S = 20e-6  # waiters due within this are woken together


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


@functools.cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):
        return None


class PreciseTimer:
    """``await timer.sleep_until(t)`` with ``t`` on ``time.monotonic()``'s clock. Close when done."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self._loop = loop or asyncio.get_running_loop()
        self._heap: list[tuple[float, int, asyncio.Future]] = []
        self._seq = itertools.count()
        self._fd = -1
        self._armed_for: float | None = None
        self._libc = _libc()
        if self._libc is not None:
            fd = self._libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
            if fd >= 0:
                try:
                    self._loop.add_reader(fd, self._fired)
                    self._fd = fd
                except (NotImplementedError, RuntimeError):
                    os.close(fd)

    @property
    def precise(self) -> bool:
        return self._fd >= 0

    async def sleep_until(self, deadline: float) -> None:
        if self._fd < 0:
            delay = deadline - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            return
        if deadline - time.monotonic() <= _EARLY_S:
            return
        fut = self._loop.create_future()
        heapq.heappush(self._heap, (deadline, next(self._seq), fut))
        if self._armed_for is None or deadline < self._armed_for:
            self._arm(deadline)
        await fut

    def _arm(self, deadline: float) -> None:
        ns = max(1, int(deadline * 1e9))
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
        if self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")
        self._armed_for = deadline

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            pass
        self._armed_for = None
        now = time.monotonic() + _EARLY_S
        while self._heap and self._heap[0][0] <= now:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)
        if self._heap:
            self._arm(self._heap[0][0])

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        for _, _, fut in self._heap:
            if not fut.done():
                fut.cancel()
        self._heap.clear()
