"""The local backend's faults from inside an engine (the app's fault hook, :mod:`serve_apps.engine_faults`):
``engine-error``, ``engine-wedge``, ``engine-garbage``, ``engine-stall`` and ``engine-slow``, all armed by SIGUSR1 to
a replica's engine processes (the last three with a request left first, naming the fault and the run), each of which is
first checked to take it (without the hook the signal's default action would kill it: a crash, not the fault
asked for). Each function takes the backend first, as its methods do."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from chaos.system import placement
from chaos.backends import engine_faults
from chaos.backends.local import procs
from chaos.base.errors import ClusterError
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
        for p in pids:  # a request left (a void one from recover) would make the signal arm it instead of the error
            Path(app_engine_faults.request_path(p)).unlink(missing_ok=True)
        return procs.signal_pids(pids, engine_faults.ERROR_SIGNAL)
    return fire


MARKED = (app_engine_faults.WEDGE,) + engine_faults.HELD  # the faults an engine holds while its mark exists


def arm(b, r: placement.Replica, fault: str, request: str, what: str) -> Callable[[], list[int]]:
    """Everything but the signal done (:func:`hooked`). The returned callable removes any stale mark of ``fault``,
    leaves each engine ``request`` and sends SIGUSR1: the engine's next step takes the fault, held until
    :func:`release`."""
    pids = hooked(b, r, what, what)

    def fire() -> list[int]:
        for p in pids:
            Path(app_engine_faults.mark_path(fault, p)).unlink(missing_ok=True)  # a reused pid's proves nothing
            Path(app_engine_faults.request_path(p)).write_text(request)
        return procs.signal_pids(pids, engine_faults.ERROR_SIGNAL)
    return fire


def wedge(b, r: placement.Replica, spin: bool = False) -> Callable[[], list[int]]:
    """The request to wedge for this run (:func:`chaos.backends.engine_faults.wedge_request`) armed (:func:`arm`):
    the engine's next step blocks (or spins) until :func:`release`."""
    return arm(b, r, app_engine_faults.WEDGE, engine_faults.wedge_request(b.run_id, spin), "wedge")


def hold(b, r: placement.Replica, fault: str, factor: float | None = None,
         hold_s: float | None = None) -> Callable[[], list[int]]:
    """The request to hold ``fault`` (garbage, stall, slow with its ``factor``) for this run
    (:func:`chaos.backends.engine_faults.held_request`) armed (:func:`arm`): from the engine's next step on its tokens
    are wrong, it admits nothing new, or every step is ``factor`` times as long, until :func:`release` (or, with
    ``hold_s``, until the engine lets go by itself past it)."""
    request = engine_faults.held_request(fault, b.run_id, factor, hold_s) if fault == "slow" else \
        engine_faults.held_request(fault, b.run_id, hold_s=hold_s)
    return arm(b, r, fault, request, f"hold {fault}")


def release(run_id: str | None, pids: list[int], fault: str = app_engine_faults.WEDGE) -> list[dict]:
    """The ``fault`` (wedge, garbage, stall) of each engine in ``pids`` ended where its mark still names ``run_id``
    (the mark removed: the step returns, or the engine lets the fault go), and a request the engine never took
    made void (the signal armed it: its next step takes the void request and does nothing); what each was
    (:func:`chaos.backends.engine_faults.release_outcome`). Another run's or nobody's mark is left as it is."""
    out = []
    for p in pids:
        mark, request = Path(app_engine_faults.mark_path(fault, p)), Path(app_engine_faults.request_path(p))
        outcome = engine_faults.release_outcome(p, read(mark), run_id, procs.state(p), fault)
        if outcome["released"]:
            mark.unlink(missing_ok=True)
        if engine_faults.mark_run(read(request)) == run_id:  # never taken: the signal left the engine armed
            request.write_text(engine_faults.void_request(run_id))  # its next step takes this and does nothing
        out.append(outcome)
    return out


def wedged(pids) -> list[int]:
    """Those of ``pids`` (the cluster's processes) that carry a mark (a wedge, garbage, a stall): a fault some run
    left in place."""
    return [p for p in pids if any(Path(app_engine_faults.mark_path(f, p)).exists() for f in MARKED)]


def unwedge(pids) -> list[int]:
    """``availproof recover``: every mark (wedge, garbage, stall) of ``pids`` removed, whichever run left it (only
    the rig writes them); the pids released."""
    out = []
    for p in wedged(pids):
        for f in MARKED:
            Path(app_engine_faults.mark_path(f, p)).unlink(missing_ok=True)
        out.append(p)
    return out


def pending(pids) -> list[int]:
    """Those of ``pids`` with a request left that they never took and that is not void: the rig's signal may have
    armed the engine, whose next step would take it (a run killed between the request and its end)."""
    return [p for p in pids if (text := read(Path(app_engine_faults.request_path(p)))) is not None
            and engine_faults.mark_field(text, "fault") != app_engine_faults.VOID]


def void_requests(pids) -> list[int]:
    """``availproof recover``: each request :func:`pending` for ``pids`` made void, whichever run left it (the
    armed engine's next step takes it and does nothing), as the KubeRay backend's recover does
    (:func:`chaos.backends.kuberay.engine_marks.recover_script`); the pids voided."""
    out = []
    for p in pending(pids):
        Path(app_engine_faults.request_path(p)).write_text(engine_faults.void_request(None))
        out.append(p)
    return out


def wedge_checks(fault: dict, run_id: str | None) -> list[dict]:
    """One look at a wedge (:func:`chaos.backends.engine_faults.wedge_checks`): the engines' marks and states."""
    pids = list(fault.get("pids") or [])
    marks = {p: read(Path(app_engine_faults.wedge_path(p))) for p in pids}
    return engine_faults.wedge_checks(pids, marks, {p: procs.state(p) for p in pids}, run_id)


def held_checks(fault: dict, kind: str, run_id: str | None) -> list[dict]:
    """One look at a held fault ``kind`` (:func:`chaos.backends.engine_faults.held_checks`): the engines' marks and
    states."""
    pids = list(fault.get("pids") or [])
    marks = {p: read(Path(app_engine_faults.mark_path(kind, p))) for p in pids}
    return engine_faults.held_checks(kind, pids, marks, {p: procs.state(p) for p in pids}, run_id)
