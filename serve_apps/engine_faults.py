"""``engine-error`` from inside the engine: a hook in the engine process, enabled by an environment
variable and armed by SIGUSR1, that makes the engine's next step fail the way a device error does.

A process kill (``engine-crash``) does not exercise a serving stack's own error path; a device error
does: it is raised inside the engine's step, and the stack turns it into "engine dead" for every request
in flight and for its health check. This module injects such an error, on both apps, never by editing
the stack's files:

- **enabled** only where :data:`ENV` (``AVAILPROOF_ENGINE_FAULTS=1``) is set in the engine's process;
  without it nothing is installed and SIGUSR1 keeps its default meaning (the process terminates). The
  LLM app sets it in its runtime env (``serve_apps.llm_app.ENV``), the stream target for its engine
  child (``serve_apps.stream_engine``); it is opt-in for anyone who installs the plugin elsewhere;
- **armed** by SIGUSR1 sent to the engine process (the rig sends it to the children of one replica's
  process whose command line says ``EngineCore``): the handler only sets a flag;
- **fired** by the engine's next step: it raises :class:`InjectedEngineError` (:data:`MESSAGE`) instead
  of stepping. When the engine is idle the next step is that of the next request;
- **recorded** by the engine as it fires: it writes its *tombstone* (:func:`tombstone_path`, the wall-clock
  time as text) before raising, the engine's own word that the error was raised in it. The rig removes a
  stale one before it signals and proves the fault by it (vLLM's engine process outlives its error until
  Serve replaces the replica, so "the process gone" proves nothing there).

**vLLM** (the CPU build 0.32 in the lock): :func:`register` is a vLLM *general plugin* (entry point group
``vllm.general_plugins``, pyproject.toml), which vLLM loads in every one of its processes
(``vllm/plugins/__init__.py`` ``load_general_plugins``), the engine process included: the first line of
``EngineCore.__init__`` (``vllm/v1/engine/core.py``) loads them, in the engine process's main thread.
The plugin wraps two things at class level, in whichever process it runs (an ``EngineCore`` only ever
runs in the engine process, and a forked engine process inherits the classes as wrapped):

- ``EngineCore.step`` and ``EngineCore.step_with_batch_queue``: ``EngineCore.__init__`` binds
  ``self.step_fn`` to one of them *after* loading the plugins, so the engine's busy loop
  (``EngineCoreProc.run_busy_loop`` -> ``_process_engine_step`` -> ``self.step_fn()``) calls the wrapper;
- ``EngineCoreProc.run_busy_loop`` (and ``DPEngineCoreProc``'s own): entering the busy loop installs the
  SIGUSR1 handler, in the main thread only (``signal.signal`` refuses any other; vLLM's own SIGTERM
  handler is installed in the same thread, ``EngineCoreProc.run_engine_core``).

The raised exception then takes the path a device error takes (a device error is raised by
``future.result()`` inside ``EngineCore.step``, under ``log_error_detail``): out of ``step_fn()`` in
``EngineCoreProc._process_engine_step``, out of ``run_busy_loop`` (its ``fault_tolerant_wrapper``
re-raises when fault tolerance is off, vLLM's default), into ``EngineCoreProc.run_engine_core``'s
``except Exception`` ("EngineCore encountered a fatal error.", ``engine_core._send_engine_dead()``);
the output thread sends ``ENGINE_CORE_DEAD``; in the frontend ``AsyncMPClient``'s
``process_outputs_socket`` -> ``resources.validate_alive`` sets ``engine_dead`` and raises
``EngineDeadError`` into the outputs queue; ``AsyncLLM``'s output handler gets it from
``get_output_async`` and ``output_processor.propagate_error`` hands it to every request in flight; from
then on ``AsyncLLM.errored`` is true, so ``AsyncLLM.check_health`` raises ``EngineDeadError`` and so
does Serve LLM's ``LLMServer.check_health``: Serve replaces the replica. The engine process exits
non-zero. Only vLLM's multiprocessing mode has a busy loop (the rig sets
``VLLM_ENABLE_V1_MULTIPROCESSING=1``); with an in-process engine nothing arms the flag.

**Stream target**: its engine child (``serve_apps.stream_engine``) installs its own handler from the
same variable: on SIGUSR1 it writes :data:`ERROR_BYTE` to its replica's pipe and exits with
:data:`ERROR_EXIT`; the replica then reports :data:`MESSAGE` to requests and fails its health check.

**Which fault the signal arms** (``engine-wedge``): before the signal the rig may leave a *request*
(:func:`request_path`, one line of JSON: ``{"fault": "wedge", "run": RUN_ID, "spin": false}``); the hook
takes it (reads and removes it) when it fires; without one the fault is ``error`` (as above). A **wedge**
is what operators report of engines that stop for good (vllm-project/vllm #39863, #17972, #46811: the busy
loop blocked in a ``future.result()`` without a timeout, ``/health`` 200 for hours, nothing decoding):
the engine's step does not return, its other threads (vLLM's input and output socket threads) run on,
the process stays in state S (blocked, the default) or R (``spin``: a busy loop at 100 % of a core),
never T, so a detector keyed on process state or an I/O ping gets no credit. The hook records it as it
wedges: its *wedge mark* (:func:`wedge_path`, JSON: the run's id and the wall-clock time), the engine's own
word, and the step stays blocked **as long as that mark exists**: nothing in the engine ends it. The rig
removes it only at the run's end (and only while it still names the run), or the engine goes with its
replica when something real (a detector, Serve) replaces it.

**Garbage and stall** (``engine-garbage``, ``engine-stall``): a request naming ``garbage`` or ``stall`` makes the
engine *hold* the fault while it steps on (:func:`hold`, :mod:`serve_apps.held_faults`): its mark
(:func:`mark_path`) written as it begins, looked at from the step at most every 0.1 s and rewritten in place with
the steps since; garbage shifts the token ids of every step's outputs, a stall makes the scheduler's KV-cache
manager refuse every request not yet started. Both end when the rig removes the mark (:func:`let_go`). A request
naming ``slow`` and a ``factor`` F (``engine-slow``, an even straggler) makes the step wrapper sleep (F - 1) times
each step's measured duration after it (:class:`serve_apps.held_faults.Slowdown`); its mark carries the mean step
duration before (:data:`RECENT`) and since; the rig removes it after the fault's duration, and the engine itself
once past the request's ``hold_s`` (the duration and a margin: a rig that died ends nothing).

**In the ranks** (``rank-hang``): the same plugin wraps vLLM's tensor-parallel workers (:mod:`serve_apps.rank_faults`),
whose step then takes a request to wedge as the engine's does; the stream target's rank processes install the same hook
(:mod:`serve_apps.stream_ranks`).

**The step's heartbeat** (for the progress watchdog v2, :mod:`serve_apps.watchdog_v2`): the same step
wrapper marks each step's start and end in the engine's heartbeat file (:mod:`serve_apps.heartbeat`, a
memory-mapped file per engine pid under ``/tmp``), so a wedged step (it starts, never ends) stops it while a
chunked prefill (one step per chunk) keeps it beating. A step that raises does not count.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import threading
import time

from serve_apps import device_loss, heartbeat, held_faults
from serve_apps.held_faults import GARBAGE, SLOW, STALL, write_atomically

ENV = "AVAILPROOF_ENGINE_FAULTS"
MESSAGE = "engine error (injected)"
ERROR_BYTE = b"E"  # the stream target's engine child, to its replica: errored, not crashed
ERROR_EXIT = 70  # the stream target's engine child's exit status after an injected error
TOMBSTONE_DIR = "/tmp"  # not $TMPDIR: the rig (or an exec in the pod) must find it without the engine's environment
_WRAPPED = "__availproof_engine_fault__"
ERROR, WEDGE = "error", "wedge"  # the faults a signal can arm (the request names one; none: error)
FAULTS = (ERROR, WEDGE, GARBAGE, STALL, SLOW)  # the last three held while the engine steps (serve_apps.held_faults)
# the rig's word that a signal it sent is void (the run ended before the engine stepped to take it): nothing fires
VOID = "void"
WEDGE_POLL_S = 0.1  # a blocked wedge looks this often whether its mark is still there

logger = logging.getLogger(__name__)


class InjectedEngineError(RuntimeError):
    """The injected engine error (what a device error would be)."""


class Trigger:
    """The armed flag: set by the signal handler, taken (and cleared) by the next step. A plain attribute,
    safe to set from a signal handler (no lock the interrupted thread might hold)."""

    def __init__(self) -> None:
        self.armed = False

    def arm(self, signum=None, frame=None) -> None:
        self.armed = True

    def take(self) -> bool:
        armed, self.armed = self.armed, False
        return armed


TRIGGER = Trigger()


def enabled(environ=None) -> bool:
    """Whether the hook is enabled in this process: :data:`ENV` is ``1``."""
    return (os.environ if environ is None else environ).get(ENV) == "1"


def tombstone_path(pid: int) -> str:
    """Where the engine process ``pid`` records that it raised the injected error."""
    return f"{TOMBSTONE_DIR}/availproof-engine-error-{int(pid)}"


def remove_tombstones(pids) -> None:
    """Remove the tombstones of engine processes ``pids`` (a stale one before a signal; the read one at the heal)."""
    for pid in pids:
        try:
            os.unlink(tombstone_path(pid))
        except FileNotFoundError:
            pass


def write_tombstone(pid: int | None = None) -> bool:
    """Record (atomically) that this engine process raised the injected error; never raises (the error path
    must run whatever happens to the record)."""
    return write_atomically(tombstone_path(os.getpid() if pid is None else pid), f"{time.time():.3f}\n")


def request_path(pid: int) -> str:
    """Where the rig leaves, for the engine process ``pid``, which fault its next SIGUSR1 arms (JSON)."""
    return f"{TOMBSTONE_DIR}/availproof-engine-fault-{int(pid)}.request"


def mark_path(fault: str, pid: int) -> str:
    """The engine process ``pid``'s mark of ``fault`` (wedge, garbage, stall): written as the fault begins; the
    fault holds while it exists."""
    return f"{TOMBSTONE_DIR}/availproof-engine-{fault}-{int(pid)}"


def wedge_path(pid: int) -> str:
    """The engine process ``pid``'s wedge mark: written as it wedges; its step stays blocked while it exists."""
    return mark_path(WEDGE, pid)


def take_request(pid: int | None = None) -> dict:
    """The request the rig left for this engine process (read, then removed): ``{"fault": ...}``; none, or one
    that cannot be read, is ``{"fault": "error"}`` (the engine-error of a rig that leaves no request); ``void``:
    the run that sent the signal ended before this engine stepped (nothing fires)."""
    path = request_path(os.getpid() if pid is None else pid)
    try:
        with open(path) as f:
            request = json.loads(f.read() or "{}")
        os.unlink(path)
    except (OSError, ValueError):
        return {"fault": ERROR}
    if not isinstance(request, dict) or request.get("fault") not in FAULTS + (VOID,):
        return {"fault": ERROR}
    return request


def wedge(request: dict, pid: int | None = None, poll_s: float = WEDGE_POLL_S, exists=os.path.exists,
          sleep=time.sleep, spin_checks: int = 200_000) -> float:
    """Wedge the calling thread (the engine's step): its wedge mark written (:func:`wedge_path`, the request's
    run and the time), then blocked (``sleep`` between looks) or spinning (``request["spin"]``: a busy loop,
    looking every ``spin_checks`` turns) for as long as the mark exists. Returns how long it was wedged (s).
    A mark that cannot be written does not wedge (the fault's proof then fails: nothing is claimed)."""
    path = wedge_path(os.getpid() if pid is None else pid)
    began = time.time()
    if not write_atomically(path, json.dumps({"run": request.get("run"), "t": round(began, 3)}) + "\n"):
        return 0.0
    logger.error("availproof: the engine's step wedged (SIGUSR1 %s), for as long as %s exists",
                 "spinning" if request.get("spin") else "blocked", path)
    if request.get("spin"):
        n = 0
        while True:
            n += 1
            if n % spin_checks == 0 and not exists(path):
                break
    else:
        while exists(path):
            sleep(poll_s)
    return time.time() - began


def install_handler(trigger: Trigger | None = None) -> bool:
    """SIGUSR1 arms ``trigger`` (:data:`TRIGGER`); only from the main thread (else nothing, False)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGUSR1, (trigger or TRIGGER).arm)
    return True


_BEATS: list[tuple[str, heartbeat.Writer]] = []  # this process's (directory, heartbeat writer); a forked child's own
HOLDING: dict[str, held_faults.Held] = {}  # the faults this engine process holds while it steps (garbage, stall, slow)
SLOWING: list[held_faults.Slowdown] = []  # slow's timing while it is held (one at most)
RECENT = held_faults.Recent()  # this engine's recent step durations (those that ran the model, not slowed)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_BEATS.clear)
    os.register_at_fork(after_in_child=HOLDING.clear)
    os.register_at_fork(after_in_child=SLOWING.clear)


def heartbeat_path(pid: int) -> str:
    """The step heartbeat of engine process ``pid`` (:mod:`serve_apps.heartbeat`), beside its tombstone."""
    return heartbeat.path(pid, TOMBSTONE_DIR)


def step_heartbeat() -> heartbeat.Writer:
    """This engine process's heartbeat writer, made once (as its busy loop starts, else at its first step); no
    system call per step."""
    if not _BEATS or _BEATS[0][0] != TOMBSTONE_DIR:  # made here, or its directory since changed (a test's)
        _BEATS[:] = [(TOMBSTONE_DIR, heartbeat.Writer(heartbeat_path(os.getpid())))]
    return _BEATS[0][1]


def hold(core, request: dict, pid: int | None = None) -> bool:
    """Begin holding the fault ``request`` names (garbage, stall or slow) in the engine ``core`` (vLLM's EngineCore):
    its mark written (:func:`mark_path`, the request's run), then, for a stall, the scheduler's admission closed
    (:func:`serve_apps.held_faults.close_admission`); for slow, its steps slowed by the request's factor from now on.
    A mark that cannot be written, a slow request without a valid factor, or a stall whose scheduler cannot be gated
    (its mark removed), holds nothing: the fault's proof then fails, nothing is claimed."""
    fault = request["fault"]
    slowdown = None
    if fault == SLOW:
        factor = held_faults.slow_factor(request)
        if factor is None:
            logger.error("availproof: a request to slow without a factor above 1: nothing held (%r)", request)
            return False
        slowdown = held_faults.Slowdown(factor, RECENT.mean)
    held = held_faults.Held(fault, request.get("run"), mark_path(fault, os.getpid() if pid is None else pid),
                            detail=slowdown.detail if slowdown else None, hold_s=held_faults.hold_seconds(request))
    if not held.start():
        return False
    if fault == STALL:
        try:
            held_faults.close_admission(core.scheduler.kv_cache_manager)
        except Exception:  # noqa: BLE001 - not a scheduler this hook knows: no stall, and no mark claiming one
            logger.exception("availproof: the scheduler's admission could not be closed")
            os.unlink(held.path)
            return False
    HOLDING[fault] = held
    if slowdown is not None:
        SLOWING[:] = [slowdown]
    logger.error("availproof: the engine holds %s (SIGUSR1) for as long as %s exists", fault, held.path)
    return True


def let_go(core) -> None:
    """End each held fault whose mark the rig removed (a stall: admission open again)."""
    for fault, held in list(HOLDING.items()):
        if not held.holding():
            del HOLDING[fault]
            if fault == STALL:
                held_faults.open_admission(core.scheduler.kv_cache_manager)
            if fault == SLOW:
                SLOWING.clear()
            logger.error("availproof: the engine no longer holds %s (%s)", fault,
                         "past its deadline: its mark removed by the engine" if held.expired() else "its mark removed")


def executed(result) -> bool:
    """Whether a step ran the model (vLLM's step returns ``(outputs, model_executed)``)."""
    return bool(result[1]) if isinstance(result, tuple) and len(result) == 2 else False


def held_step(result) -> None:
    """After a step that held faults: its outputs corrupted under garbage, the step counted (one that ran the
    model)."""
    outputs = result[0] if isinstance(result, tuple) and len(result) == 2 else None
    if GARBAGE in HOLDING:
        held_faults.corrupt_outputs(outputs)
    if executed(result):
        for held in HOLDING.values():
            held.step()


def paced_step(result, took_s: float, sleep=time.sleep) -> None:
    """After a step that took ``took_s``: under slow, (factor - 1) times that slept (the step ``factor`` times as
    long) and, if it ran the model, its whole duration counted; otherwise a step that ran the model feeds
    :data:`RECENT`."""
    if not SLOWING:
        if executed(result):
            RECENT.add(took_s)
        return
    slowdown = SLOWING[0]
    extra = slowdown.extra(took_s)
    sleep(extra)
    if executed(result):
        slowdown.record(took_s + extra)


def _failing_step(step, trigger: Trigger):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        beat = step_heartbeat()
        started = beat.begin()
        device_loss.STEP.check()  # its node's device lost (device-loss): raises DeviceLost, or hangs, then raises
        if trigger.take():
            request = take_request()
            if request["fault"] == WEDGE:
                wedge(request)  # returns only once the rig removed the mark (the run's end)
            elif request["fault"] in held_faults.HELD:
                hold(self, request)  # held while its mark exists, the engine stepping on
            elif request["fault"] != VOID:  # void: the run that sent the signal has ended
                logger.error("availproof: %s raised in the engine's step (SIGUSR1)", MESSAGE)
                write_tombstone()
                raise InjectedEngineError(MESSAGE)
        if HOLDING:
            let_go(self)
        began = time.monotonic()
        result = step(self, *args, **kwargs)
        paced_step(result, time.monotonic() - began)
        if HOLDING:
            held_step(result)
        beat.end(started)
        return result
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _arming_loop(run_busy_loop, trigger: Trigger):
    @functools.wraps(run_busy_loop)
    def wrapper(self, *args, **kwargs):
        if install_handler(trigger):
            logger.info("availproof: engine fault hook armed by SIGUSR1 in pid %d", os.getpid())
        step_heartbeat()  # the heartbeat file made before the first step (a reader finds no stale one meanwhile)
        return run_busy_loop(self, *args, **kwargs)
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def install(core_cls, loop_classes, trigger: Trigger | None = None) -> list[str]:
    """Wrap ``core_cls``'s step methods and each of ``loop_classes``' own ``run_busy_loop`` (idempotent), the
    steps failing once ``trigger`` (:data:`TRIGGER`) is armed. Returns what it wrapped, as ``Class.method``."""
    trigger = trigger or TRIGGER
    done = []
    for name in ("step", "step_with_batch_queue"):
        fn = core_cls.__dict__.get(name)
        if fn is not None and not getattr(fn, _WRAPPED, False):
            setattr(core_cls, name, _failing_step(fn, trigger))
            done.append(f"{core_cls.__name__}.{name}")
    for cls in loop_classes:
        fn = cls.__dict__.get("run_busy_loop")
        if fn is not None and not getattr(fn, _WRAPPED, False):
            setattr(cls, "run_busy_loop", _arming_loop(fn, trigger))
            done.append(f"{cls.__name__}.run_busy_loop")
    return done


def register() -> bool:
    """The ``vllm.general_plugins`` entry point: with :data:`ENV` set, wrap vLLM's engine classes
    (:func:`install`); without it do nothing. A failure to wrap is logged, never raised (a failing plugin would
    stop vLLM), and SIGUSR1 then keeps its default meaning. What it does raise, on purpose, is a lost device's
    error (``device-loss``, :func:`serve_apps.device_loss.at_start`): vLLM loads its general plugins first in each
    of its processes (the replica's, as it makes its engine's arguments; the engine's), so a new engine on a node
    whose device is marked lost fails its start there (or waits while the marker says hang)."""
    if not enabled():
        return False
    device_loss.at_start()
    try:
        from vllm.v1.engine import core

        loops = [core.EngineCoreProc] + [c for c in (getattr(core, "DPEngineCoreProc", None),) if c is not None]
        done = install(core.EngineCore, loops)
    except Exception:  # noqa: BLE001 - the engine must start anyway
        logger.exception("availproof: the engine fault hook could not be installed")
        return False
    try:  # apart: a worker class that cannot be wrapped leaves the engine's hook installed (and says so)
        from serve_apps import rank_faults  # the same hook in its tensor-parallel workers (rank-hang)

        done += rank_faults.register_vllm()
    except Exception:  # noqa: BLE001 - the engine must start anyway
        logger.exception("availproof: the fault hook of vLLM's tensor-parallel workers could not be installed")
    if done:
        logger.info("availproof: engine fault hook installed (%s)", ", ".join(done))
    return True
