"""Processes by session: every node of the local cluster runs in a session of its own.

`ray start` is launched as a session leader; the raylet, the GCS, the dashboard agents and
every worker it forks inherit that session id (actor workers get process groups of their
own, but not sessions). Killing a node therefore means killing its session, and nothing
outside it: the backend never signals a process it did not start. A single process recorded by
its PID (Redis, HAProxy) is stopped with :func:`stop_pid` and a check that the PID still names
it (``same``): once it exited, the kernel may give its PID to any other process.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, session id) of a process, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces or parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[3])


def session_of(pid: int) -> int | None:
    """The session id of a process, or None if it is gone."""
    st = _stat(pid)
    return st[1] if st else None


def alive(pid: int | None) -> bool:
    """True if the process exists and is not a zombie."""
    if not pid:
        return False
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is ``sid``."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st and st[1] == sid and st[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def cmdline(pid: int) -> str:
    return " ".join(argv(pid))


def argv(pid: int) -> list[str]:
    """The process's arguments as it holds them now (a program may rewrite them: Redis puts its
    address there); [] when it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    raw = raw.rstrip(b"\0")  # a rewritten title is padded with NULs
    return [a.decode(errors="replace") for a in raw.split(b"\0")] if raw else []


def reap() -> None:
    """Collect exit statuses of our own dead children so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def signal_pids(pids: list[int], sig: int) -> list[int]:
    sent = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except ProcessLookupError:
            pass
    return sent


def kill_session(sid: int, sig: int = signal.SIGKILL, timeout: float = 10.0) -> list[int]:
    """Signal every process of a session until none is left (or timeout); return what was signalled."""
    signalled: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        members = session_members(sid)
        if not members:
            reap()
            return signalled
        signalled += signal_pids(members, sig)
        if time.monotonic() > deadline:
            return signalled
        time.sleep(0.05)
        reap()


def wait_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap()
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def stop_pid(pid: int, timeout: float = 10.0, same: Callable[[int], bool] | None = None) -> None:
    """SIGTERM, then SIGKILL after ``timeout``.

    ``same`` tells whether ``pid`` is still the process meant, checked before each signal: a PID
    read from a file names whatever process holds it now, and once the one meant exited (even
    between the two signals) that can be any other. Not the same: it is left alone."""
    if not alive(pid) or (same is not None and not same(pid)):
        return
    signal_pids([pid], signal.SIGTERM)
    if not wait_gone([pid], timeout) and (same is None or same(pid)):
        signal_pids([pid], signal.SIGKILL)
        wait_gone([pid], 5)


def state(pid: int) -> str | None:
    """The process state letter (R, S, T, Z, ...), or None when it is gone."""
    st = _stat(pid)
    return st[0] if st else None


def parent(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rfind(")") + 2 :].split()[1])


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def resident_mb(pid: int) -> float | None:
    """The process's resident memory (VmRSS of /proc/PID/status) in MB; None when it is gone or says none (a
    zombie holds no memory and has no VmRSS line)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def left(pids: list[int]) -> dict[int, float | None]:
    """Those of ``pids`` still alive (a zombie is gone: it holds no memory), each with its resident memory in MB
    (:func:`resident_mb`, None when it cannot be read)."""
    return {p: resident_mb(p) for p in pids if alive(p)}
