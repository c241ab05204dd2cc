"""The Chaos Toolkit control that turns an experiment into a measurement: each hook is a step of
:mod:`chaos.run`, the core.

- before the experiment: :func:`chaos.run.open_run` (system up, app deployed, records open);
- before the method: :func:`chaos.run.start_load` (load on, warm-up and baseline waited out);
- after the method: :func:`chaos.run.keep_load_for_recovery`, then :func:`chaos.run.finish`
  (analysis, bounds, ``summary.json``);
- after the experiment: the summary into the journal, :func:`chaos.run.close`.

Stop conditions interrupt the experiment the ways Chaos Toolkit supports, and it then plays
the rollbacks (strategy ``always``) and ends the journal ``interrupted``:

- while a method activity runs (a fault can block for its whole outage):
  ``chaoslib.exit.exit_gracefully()``, Chaos Toolkit's immediate graceful exit (its own
  SIGUSR1 handler, installed for the run, raises ``SystemExit(20)`` in the activity);
- otherwise (this control's waits, or between two activities): the control raises
  ``chaoslib.exceptions.InterruptExecution`` with the stop reason.
"""

from __future__ import annotations

import signal

from chaoslib.exceptions import InterruptExecution
from chaoslib.exit import exit_gracefully

from chaos import run as core


class _Method:
    """Where the experiment is, as far as a stop condition's interruption cares (guarded by the run's lock)."""

    def __init__(self) -> None:
        self.running = False  # between before_method_control and after_method_control
        self.in_activity = False  # a method activity is running

    def interrupt(self, reason: str) -> bool:
        """The run's ``on_stop`` (called by the Guard's thread, the run's lock held): True when interrupted."""
        if not (self.running and self.in_activity):
            return False  # the control raises InterruptExecution at its next hook or wait
        if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, signal.SIG_IGN, None):
            return False  # not inside Chaos Toolkit's run (no exit handler): SIGUSR1 would kill the process
        exit_gracefully()
        return True


_method = _Method()


def _interrupted(reason: str) -> InterruptExecution:
    return InterruptExecution(f"stop condition: {reason}")


def before_experiment_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    core.open_run(context, core.Options.from_configuration(configuration))


def before_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    run = core.current()
    if run is None:
        return
    global _method
    _method = _Method()
    run.on_stop = _method.interrupt
    try:
        core.start_load(run)
    except core.Stopped as e:
        raise _interrupted(str(e)) from None
    with run.lock:
        reason = run.take_stop()
        if reason is not None:
            raise _interrupted(reason)
        _method.running = True


def before_activity_control(context: dict, **kwargs) -> None:
    run = core.current()
    if run is None:
        return
    with run.lock:
        if not _method.running:
            return  # a probe of the steady-state hypothesis, or a rollback
        reason = run.take_stop()
        if reason is not None:
            raise _interrupted(reason)
        _method.in_activity = True


def after_activity_control(context: dict, **kwargs) -> None:
    run = core.current()
    if run is None:
        return
    with run.lock:
        _method.in_activity = False


def after_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    run = core.current()
    if run is None:
        return
    with run.lock:
        _method.running = _method.in_activity = False
    if run.load is None:
        return
    try:
        core.keep_load_for_recovery(run)
    except core.Stopped as e:
        raise _interrupted(str(e)) from None
    core.finish(run)


def after_experiment_control(context: dict, state: dict | None = None, configuration: dict | None = None,
                             **kwargs) -> None:
    run = core.current()
    if run is None:
        return
    try:
        if run.summary is None:  # the method never ran to its end (interrupted, aborted)
            core.finish(run)
        if isinstance(state, dict):
            state["availproof"] = {"out_dir": str(run.out_dir), "summary": run.summary}
    finally:
        core.close(run)
