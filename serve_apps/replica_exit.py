"""``on_stall: exit`` (opt-in, the watchdog v2 only): a replica whose watchdog found its engine stalled ends itself
and its engine processes, rather than fail Serve's health check until Serve takes it out.

Why: Serve takes a replica out after ``REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD`` (3) failed checks in a row, one
per ``health_check_period_s``, but at once when the check finds the replica's actor dead
(``ReplicaHealthCheckResponse.ACTOR_CRASHED``, Ray 2.60 ``ray/serve/_private/deployment_state.py``). At Serve LLM's
default period (10 s) the three checks put a detection at about ``stall_s`` + 20-30 s; a replica that exits on the
first check that finds it stalled is out within that check: ``stall_s`` + up to one period. This is the liveness
probe's way (Kubernetes restarts a container whose probe fails; vLLM's engine exits when its core dies): the replica
gives up instead of waiting to be judged. The cost: a false positive kills a replica at once instead of after three
checks (one failed check is enough: the v2's idle canary that failed once, which a later canary would have cleared,
ends the replica too; the scorecard's fault-free run measures it only with ``fault_free.detector: v2-exit``), and the
replica's requests in flight end with it (they were stuck on its engine).

:func:`exit_replica` SIGKILLs every descendant of the replica's process first (the stream target's engine child and
its ranks; vLLM's ``EngineCore`` and its workers), deepest first, so that no engine outlives its replica holding its
memory (the rig's orphan check reads it), then ends the process at once (``os._exit``: a stalled engine would hang an
orderly shutdown). Python's ``multiprocessing`` resource tracker (a child of a process that started another with
spawn, as vLLM starts ``EngineCore``) is left alone: it unlinks the shared memory the engine registered once the
replica is gone, which a SIGKILL would stop. Plain functions, the kill and the exit seams for tests.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Callable

from serve_apps import heartbeat

EXIT_CODE = 75  # the replica's exit status when it ended itself on a stall (EX_TEMPFAIL: a new one may do better)
MODES = ("fail", "exit")  # on_stall: fail the health check (Serve's three strikes; the default) or end the replica

logger = logging.getLogger("ray.serve")


def on_stall_of(value) -> str:
    """``user_config.on_stall``: ``fail`` (absent) or ``exit``; anything else is refused, so a bad config fails the
    deploy."""
    if value is None:
        return "fail"
    if value not in MODES:
        raise ValueError(f"user_config.on_stall must be one of {MODES}, got {value!r}")
    return value


def descendants(pid: int, proc: str = "/proc") -> list[int]:
    """Every process below ``pid`` (children, theirs, ...), parents before their children; read from ``proc``."""
    parents = heartbeat.children_by_parent(proc)
    out, frontier = [], [pid]
    while frontier:
        children = sorted(c for p in frontier for c in parents.get(p, ()) if c not in out and c != pid)
        out.extend(children)
        frontier = children
    return out


def _resource_tracker(pid: int, proc: str) -> bool:
    """Whether ``pid`` is Python's multiprocessing resource tracker (its command line names the module)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            return b"multiprocessing.resource_tracker" in f.read()
    except OSError:
        return False


def exit_replica(reason: str, pid: int | None = None, kill: Callable[[int, int], None] = os.kill,
                 exit: Callable[[int], None] = os._exit, proc: str = "/proc") -> list[int]:
    """End this replica on a stall: say why, SIGKILL every descendant of ``pid`` (this process), deepest first, then
    ``exit`` (:data:`EXIT_CODE`). Returns the processes signalled (only reached when ``exit`` returns: a test's)."""
    pid = os.getpid() if pid is None else pid
    logger.error("availproof: the watchdog v2 found the engine stalled (%s); on_stall is exit: ending this replica "
                 "(pid %d) and its engine processes", reason, pid)
    killed = []
    for child in reversed(descendants(pid, proc)):
        if _resource_tracker(child, proc):
            continue
        try:
            kill(child, signal.SIGKILL)
            killed.append(child)
        except ProcessLookupError:
            continue
        except OSError:
            logger.exception("availproof: process %d could not be killed", child)
    for handler in logging.getLogger().handlers + logger.handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - a handler that cannot flush never keeps the replica alive
            pass
    exit(EXIT_CODE)
    return killed
