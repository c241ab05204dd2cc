"""The moments of one experiment, as a driver hands them to the run core (:mod:`chaos.core.run`).

A driver runs the experiment (the steady-state hypothesis, the method, the rollbacks); the core drives
the load, the recovery window, the analysis and the verdict. The driver holds one :class:`Session` per
experiment and hands it each of its moments, one call each (Chaos Toolkit's control,
:mod:`chaos.ctk.control`, is such a driver; it keeps the session in Chaos Toolkit's configuration, where
the actions and probes find its run: :mod:`chaos.ctk.session`)::

    session = Session(interrupt_activity, run)   # the driver's way to end an activity that is running; the
                                                 #   run `availproof run` opened around the driver, if any
    session.begin(experiment, configuration)     # that run adopted, else one opened (system up, records
                                                 #   open; options from the driver's configuration)
    session.before_method()                      # load on, warm-up and baseline, the baseline gate
    session.before_activity() / after_activity() # where the method is, for a stop condition
    session.after_method()                       # the recovery window (or, after a stop, the heal at once),
                                                 #   then the analysis: summary.json
    verdict = session.after_experiment(journal)  # the end (chaos.core.run.end): heal, close, the one verdict;
                                                 #   journal["availproof"] and the run's journal.json

Every moment is guarded: the only exception it raises is :class:`Interrupt` (the driver interrupts its
experiment with the reason), for a stop condition, a baseline out of steady state, or a step that
failed; a step that failed is recorded on the run first (``run.error``: the verdict is ERROR with that
reason, in ``summary.json`` and the journal). :meth:`Session.after_experiment` raises nothing: its own
steps are guarded by :func:`chaos.core.run.end`, and a set-up that failed is judged ERROR there too.

Stop conditions (:mod:`chaos.core.stop_conditions`) call :meth:`Session.interrupt` (the run's ``on_stop``):
while a method activity runs it asks the driver to end it (``interrupt_activity``); otherwise the stop
stays pending, and the next moment raises :class:`Interrupt` with it.
"""

from __future__ import annotations

from typing import Any, Callable

from chaos.core import baseline_gate as gate
from chaos.core import run as core
from chaos.core import verdict
from chaos.base.errors import AvailproofError
from chaos.core.options import Options


class Interrupt(Exception):
    """The driver must interrupt its experiment; the message says why."""


class Session:
    """One experiment under a driver: its run (or why it could not open) and where the method is."""

    def __init__(self, interrupt_activity: Callable[[], bool] = lambda: False, run: core.Run | None = None):
        self.run: core.Run | None = run  # the run opened around the driver (availproof run), else begin's
        self.setup_error: str | None = None  # the set-up failed: nothing opened, nothing injected
        self.in_method = False  # between before_method and after_method
        self.in_activity = False  # a method activity is running
        self.interrupt_activity = interrupt_activity  # the driver's way to end the activity that runs

    @property
    def opened_by_driver(self) -> bool:
        """The driver's own call opened the run (plain ``chaos run``), not ``availproof run`` around it."""
        return self.run is None or self.run.driver != "availproof"

    # ---------------------------------------------------------------- the moments
    def begin(self, experiment: dict[str, Any], configuration: dict | None = None) -> None:
        """Before the experiment: the run the session was made with (``availproof run`` opened it) is
        adopted, else one is opened (:func:`chaos.core.run.open_run`, options from the driver's configuration);
        a set-up that fails is recorded and interrupts: nothing is injected."""
        try:
            if self.run is None:
                self.run = core.open_run(experiment, Options.from_configuration(configuration))
        except Exception as e:  # noqa: BLE001 - any set-up failure: nothing may be injected
            self.setup_error = str(e) if isinstance(e, AvailproofError) else f"{type(e).__name__}: {e}"
            core.log(f"error: {self.setup_error}")
            raise Interrupt(f"availproof: set-up failed, nothing injected: {self.setup_error}") from None
        self.run.on_stop = self.interrupt

    def before_method(self) -> None:
        """The load on, the warm-up and the baseline waited out, the baseline judged."""
        run = self.run
        if run is None:
            return
        self._step("starting the load", lambda: core.start_load(run))
        with run.lock:
            self._take_stop(run)
            self.in_method = True

    def before_activity(self) -> None:
        """A method activity starts (a probe of the hypothesis or a rollback: nothing to do)."""
        run = self.run
        if run is None:
            return
        with run.lock:
            if not self.in_method:
                return
            self._take_stop(run)
            self.in_activity = True

    def after_activity(self) -> None:
        if self.run is None:
            return
        with self.run.lock:
            self.in_activity = False

    def after_method(self) -> None:
        """The recovery window, load still on; after a stop, Ctrl-C or the gate, none: what the run
        injected is healed at once (the load still on, so the heal is in the records). Then the analysis."""
        run = self.run
        if run is None:
            return
        with run.lock:
            self.in_method = self.in_activity = False
        if run.load is None:
            return
        if run.stop_reason is None and not run.interrupted and not gate.blocks(run.baseline_gate):
            self._step("the recovery window", lambda: core.keep_load_for_recovery(run))
        else:
            self._step("healing the run's faults", lambda: core.heal_quietly(run))
        self._step("the analysis", lambda: core.finish(run))

    def after_experiment(self, journal: dict[str, Any] | None) -> dict[str, Any] | None:
        """The end of the experiment (the journal final): :func:`end_experiment`, or, for a set-up that
        failed, its verdict (ERROR) into the journal. None: the session never began."""
        if self.run is not None:
            return end_experiment(self.run, journal)
        if self.setup_error is None:
            return None
        v = verdict.decide(None, journal, setup_error=self.setup_error)
        if journal is not None:
            journal["availproof"] = {"summary": None, "verdict": v, "error": self.setup_error}
        return v

    # ---------------------------------------------------------------- stop conditions
    def interrupt(self, reason: str) -> bool:
        """The run's ``on_stop`` (the Guard's thread, the run's lock held): True when the driver ended the
        running activity; else the stop stays pending for the next moment."""
        if not (self.in_method and self.in_activity):
            return False
        return self.interrupt_activity()

    def _take_stop(self, run: core.Run) -> None:
        reason = run.take_stop()
        if reason is not None:
            raise Interrupt(f"stop condition: {reason}")

    def _step(self, what: str, step: Callable[[], Any]) -> Any:
        """One step of the run, guarded: a stop or the gate interrupts; a failure is the run's error, then interrupts."""
        try:
            return step()
        except core.Stopped as e:
            raise Interrupt(f"stop condition: {e}") from None
        except gate.Unsteady as e:  # the verdict (ERROR) reads it from the summary's baseline_gate
            raise Interrupt(f"availproof: {e}") from None
        except Exception as e:  # noqa: BLE001 - a driver would swallow it and go on to the method
            raise Interrupt(f"availproof: {core.failed(self.run, what, e)}") from None


def end_experiment(run: core.Run, journal: dict[str, Any] | None) -> dict[str, Any]:
    """The end of every run, whoever drove it: :func:`chaos.core.run.end` (never raises for a step of its
    own), the summary and the verdict into the journal (``availproof``), the journal into the run's
    directory (``journal.json``). A journal that cannot be written makes the verdict ERROR."""
    v = core.end(run, journal)
    if journal is None:
        return v
    journal["availproof"] = {"out_dir": str(run.out_dir), "summary": run.summary, "verdict": v}
    try:
        core.write_json(run.out_dir / "journal.json", journal)
    except Exception as e:  # noqa: BLE001
        core.failed(run, "writing journal.json", e)
        v = core.conclude(run, journal)
        journal["availproof"]["verdict"] = v
    return v
