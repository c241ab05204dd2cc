"""The local backend's faults from inside an engine (the app's fault hook, :mod:`serve_apps.engine_faults`):
``engine-error`` and ``engine-wedge``, both armed by SIGUSR1 to a replica's engine processes, each of which is
first checked to take it (without the hook the signal's default action would kill it: a crash, not the fault
asked for). Each function takes the backend first, as its methods do."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from chaos import placement
from chaos.backends import engine_faults
from chaos.backends.local import procs
from chaos.errors import ClusterError
from serve_apps import engine_faults as app_engine_faults


def status(pid: int) -> str:
    """/proc/PID/status ("" when the process is gone): its signal masks."""
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def read(path: Path) -> str | None:
    """A small file's text, None when it is not there (or cannot be read)."""
    try:
        return path.read_text()
    except OSError:
        return None


def hooked(b, r: placement.Replica, what: str, to: str) -> list[int]:
    """The replica's engine processes (none: refused, "no engine child process to ``to``"), each checked to take
    SIGUSR1 (the app's fault hook); refused in one line, nothing sent, when one would not ``what``."""
    pids = b.engine_pids(r, to)
    for p in pids:
        takes, seen = engine_faults.handles(status(p))
        if not takes:
            raise ClusterError(f"replica {r.replica_id}: its engine process {p} would not {what} from inside on "
                               f"SIGUSR1 ({seen}): the app's engine-fault hook is off (AVAILPROOF_ENGINE_FAULTS=1 "
                               f"in the engine's environment); nothing sent")
    return pids


def error(b, r: placement.Replica) -> Callable[[], list[int]]:
    """Everything but the signal done (:func:`hooked`); the returned callable removes any stale tombstone and
    sends it: the engine raises at its next step."""
    pids = hooked(b, r, "fail", "make fail")

    def fire() -> list[int]:
        app_engine_faults.remove_tombstones(pids)  # a stale one (a reused pid) proves nothing
        return procs.signal_pids(pids, engine_faults.ERROR_SIGNAL)
    return fire


def wedge(b, r: placement.Replica, spin: bool = False) -> Callable[[], list[int]]:
    """Everything but the signal done (:func:`hooked`). The returned callable removes any stale wedge mark,
    leaves each engine the request to wedge for this run (:func:`chaos.backends.engine_faults.wedge_request`)
    and sends SIGUSR1: the engine's next step blocks (or spins) until :func:`release`."""
    pids = hooked(b, r, "wedge", "wedge")
    request = engine_faults.wedge_request(b.run_id, spin)

    def fire() -> list[int]:
        for p in pids:
            Path(app_engine_faults.wedge_path(p)).unlink(missing_ok=True)  # a reused pid's proves nothing
            Path(app_engine_faults.request_path(p)).write_text(request)
        return procs.signal_pids(pids, engine_faults.ERROR_SIGNAL)
    return fire


def release(run_id: str | None, pids: list[int]) -> list[dict]:
    """The wedge of each engine in ``pids`` ended where its mark still names ``run_id`` (the mark removed: the
    step returns), and a request the engine never took made void (the signal armed it: its next step takes the
    void request and does nothing); what each was
    (:func:`chaos.backends.engine_faults.release_outcome`). Another run's or nobody's mark is left as it is."""
    out = []
    for p in pids:
        mark, request = Path(app_engine_faults.wedge_path(p)), Path(app_engine_faults.request_path(p))
        outcome = engine_faults.release_outcome(p, read(mark), run_id, procs.state(p))
        if outcome["released"]:
            mark.unlink(missing_ok=True)
        if engine_faults.mark_run(read(request)) == run_id:  # never taken: the signal left the engine armed
            request.write_text(engine_faults.void_request(run_id))  # its next step takes this and does nothing
        out.append(outcome)
    return out


def wedged(pids) -> list[int]:
    """Those of ``pids`` (the cluster's processes) that carry a wedge mark: a wedge some run left in place."""
    return [p for p in pids if Path(app_engine_faults.wedge_path(p)).exists()]


def unwedge(pids) -> list[int]:
    """``availproof recover``: every wedge mark of ``pids`` removed, whichever run left it (only the rig writes
    them); the pids released."""
    out = []
    for p in wedged(pids):
        Path(app_engine_faults.wedge_path(p)).unlink(missing_ok=True)
        out.append(p)
    return out


def wedge_checks(fault: dict, run_id: str | None) -> list[dict]:
    """One look at a wedge (:func:`chaos.backends.engine_faults.wedge_checks`): the engines' marks and states."""
    pids = list(fault.get("pids") or [])
    marks = {p: read(Path(app_engine_faults.wedge_path(p))) for p in pids}
    return engine_faults.wedge_checks(pids, marks, {p: procs.state(p) for p in pids}, run_id)
