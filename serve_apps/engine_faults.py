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
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time

ENV = "AVAILPROOF_ENGINE_FAULTS"
MESSAGE = "engine error (injected)"
ERROR_BYTE = b"E"  # the stream target's engine child, to its replica: errored, not crashed
ERROR_EXIT = 70  # the stream target's engine child's exit status after an injected error
TOMBSTONE_DIR = "/tmp"  # not $TMPDIR: the rig (or an exec in the pod) must find it without the engine's environment
_WRAPPED = "__availproof_engine_fault__"

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
    path = tombstone_path(os.getpid() if pid is None else pid)
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{time.time():.3f}\n")
        os.replace(tmp, path)
        return True
    except OSError:
        logger.exception("availproof: the engine error's tombstone %s could not be written", path)
        return False


def install_handler(trigger: Trigger | None = None) -> bool:
    """SIGUSR1 arms ``trigger`` (:data:`TRIGGER`); only from the main thread (else nothing, False)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGUSR1, (trigger or TRIGGER).arm)
    return True


def _failing_step(step, trigger: Trigger):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if trigger.take():
            logger.error("availproof: %s raised in the engine's step (SIGUSR1)", MESSAGE)
            write_tombstone()
            raise InjectedEngineError(MESSAGE)
        return step(self, *args, **kwargs)
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _arming_loop(run_busy_loop, trigger: Trigger):
    @functools.wraps(run_busy_loop)
    def wrapper(self, *args, **kwargs):
        if install_handler(trigger):
            logger.info("availproof: engine fault hook armed by SIGUSR1 in pid %d", os.getpid())
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
    (:func:`install`); without it do nothing. Never raises (a failing plugin would stop vLLM): a failure
    is logged, and SIGUSR1 then keeps its default meaning."""
    if not enabled():
        return False
    try:
        from vllm.v1.engine import core

        loops = [core.EngineCoreProc] + [c for c in (getattr(core, "DPEngineCoreProc", None),) if c is not None]
        done = install(core.EngineCore, loops)
    except Exception:  # noqa: BLE001 - the engine must start anyway
        logger.exception("availproof: the engine fault hook could not be installed")
        return False
    if done:
        logger.info("availproof: engine fault hook installed (%s)", ", ".join(done))
    return True
