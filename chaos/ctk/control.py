"""The Chaos Toolkit control that turns an experiment into a measurement: each hook is a step of
the run's lifecycle (:mod:`chaos.run`, the core). ``availproof run`` and ``suite`` open the run
themselves around the Chaos Toolkit call (:mod:`chaos.runner`); under plain ``chaos run`` this
control opens it. Either way:

- before the experiment: :func:`chaos.run.open_run` (system up, app deployed, records open), unless
  the runner already did; a set-up that fails is recorded and raises ``InterruptExecution``, so
  nothing is injected (the actions refuse outside a measuring run too, and the rollback has
  nothing to heal); plain ``chaos run`` then exits 2 with the error's one line;
- before the method: :func:`chaos.run.start_load` (load on, warm-up and baseline waited out, the
  baseline judged: one out of steady state interrupts the experiment before any fault, verdict ERROR,
  :mod:`chaos.baseline_gate`);
- after the method: :func:`chaos.run.keep_load_for_recovery`, then :func:`chaos.run.finish`
  (analysis, bounds, ``summary.json``);
- after the experiment (after the rollbacks, the journal final): :func:`chaos.run.end` heals what
  is still injected (Chaos Toolkit's default strategy plays no rollback for an interrupted run),
  decides the one verdict (:mod:`chaos.verdict`) and closes the run.

Stop conditions interrupt the experiment the ways Chaos Toolkit supports, and it then plays
the rollbacks (under ``availproof run``: strategy ``always``) and ends the journal ``interrupted``:

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

from chaos import baseline_gate
from chaos import run as core
from chaos import verdict
from chaos.errors import AvailproofError
from chaos.options import Options


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


def _failed(run: core.Run, step: str, e: Exception) -> InterruptExecution:
    """A step of the run failed inside a hook: recorded on the run (its verdict is ERROR) and the
    experiment interrupted (Chaos Toolkit swallows any other exception of a control)."""
    run.error = f"{step}: {type(e).__name__}: {e}"[:300]
    core.log(f"error: {run.error}")
    return InterruptExecution(f"availproof: {run.error}")


# a set-up that failed under plain `chaos run` (no run to record it on): said again at the end
_setup_error: str | None = None


def before_experiment_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    global _setup_error
    _setup_error = None
    if core.current() is not None:
        return  # the runner opened the run around the Chaos Toolkit call
    try:
        core.open_run(context, Options.from_configuration(configuration))
    except Exception as e:  # noqa: BLE001 - any set-up failure: nothing may be injected
        _setup_error = str(e) if isinstance(e, AvailproofError) else f"{type(e).__name__}: {e}"
        core.log(f"error: {_setup_error}")
        raise InterruptExecution(f"availproof: set-up failed, nothing injected: {_setup_error}") from None


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
    except baseline_gate.Unsteady as e:  # the verdict (ERROR) reads it from the summary's baseline_gate
        raise InterruptExecution(f"availproof: {e}") from None
    except Exception as e:  # noqa: BLE001 - Chaos Toolkit would log it at debug level and go on to the method
        raise _failed(run, "starting the load", e) from None
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
    if run.stop_reason is None and not run.interrupted and not baseline_gate.blocks(run.baseline_gate):
        try:
            core.keep_load_for_recovery(run)
        except core.Stopped as e:
            raise _interrupted(str(e)) from None
        except Exception as e:  # noqa: BLE001
            raise _failed(run, "the recovery window", e) from None
    else:
        # a stop condition, Ctrl-C or the baseline gate ended the method: no recovery window; what it
        # injected (the gate: nothing) is healed now, the load still on, so the heal is in the records
        # and the summary (the rollbacks find it healed)
        core.heal_quietly(run)
    try:
        core.finish(run)
    except Exception as e:  # noqa: BLE001
        raise _failed(run, "the analysis", e) from None


def after_experiment_control(context: dict, state: dict | None = None, configuration: dict | None = None,
                             **kwargs) -> None:
    journal = state if isinstance(state, dict) else None
    run = core.current()
    if run is None:
        if _setup_error is not None:
            v = verdict.decide(None, journal, setup_error=_setup_error)
            if journal is not None:
                journal["availproof"] = {"summary": None, "verdict": v, "error": _setup_error}
            # plain `chaos run` (the runner raises its set-up errors itself): exit 2, as availproof does
            raise SystemExit(v["exit_code"])
        return
    v = core.end(run, journal)
    if journal is not None:
        journal["availproof"] = {"out_dir": str(run.out_dir), "summary": run.summary, "verdict": v}
        if run.driver == "chaostoolkit" and v["word"] != verdict.PASS:
            # plain `chaos run` exits 1 on a failed or deviated journal: the verdict says which
            if v["word"] == verdict.ERROR:
                journal["status"] = "failed"
            else:
                journal["deviated"] = True
