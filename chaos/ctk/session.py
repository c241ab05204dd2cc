"""How the run reaches the Chaos Toolkit edge: one key of Chaos Toolkit's ``configuration``, :data:`KEY`.

Its value is the experiment's :class:`chaos.core.moments.Session`: the run (``session.run``), or why it could
not open (``session.setup_error``). Chaos Toolkit (chaostoolkit-lib 1.44) holds one configuration dict per
run of an experiment (its ``Runner``'s) and passes that very dict to every control hook that declares a
``configuration`` parameter (``chaoslib.control.python.apply_python_control``), and a shallow copy of it
to every Python activity that declares one (``chaoslib.provider.python.run_python_activity``). A key put
in it before the experiment's first hook is therefore seen by every hook and activity of that run, and
by no other run's (two runs in one process each have their own):

- ``availproof run`` and ``suite`` (:mod:`chaos.core.runner`) open the run around the Chaos Toolkit call and
  hand it over with :class:`HandOver`, a run event handler: chaostoolkit-lib calls its ``running(experiment,
  journal, configuration, ...)`` once the configuration is loaded, before the experiment's controls begin;
- under plain ``chaos run`` nothing is there: the control's first hook
  (:func:`chaos.ctk.control.before_experiment_control`) opens the run from the configuration's
  ``availproof_*`` settings and puts its session there;
- a soak (:mod:`chaos.soak.run`) calls the actions itself, with :func:`configuration_for` its run.

What the actions and probes read there:

- An action injects only into a run that is open and measuring (:func:`measuring_run`): outside one
  (``chaos run`` of an experiment without the availproof control, a run whose set-up failed, or one
  already finishing) it refuses, saying why, and touches nothing (Chaos Toolkit records the activity as
  failed; every later action refuses the same way).
- A probe reads the run's backend, or, with no run, one attached from the ``configuration`` (reading
  changes nothing): :func:`backend_for`.
"""

from __future__ import annotations

from typing import Any

from chaoslib.exceptions import InterruptExecution
from chaoslib.run import RunEventHandler

from chaos.core import provision
from chaos.core import run as core
from chaos.core.moments import Session
from chaos.core.options import Options

KEY = "availproof_session"  # the experiment's chaos.core.moments.Session in Chaos Toolkit's configuration


def session_of(configuration: dict | None) -> Session | None:
    """The experiment's session in ``configuration`` (None: there is none, or the key holds something else)."""
    found = (configuration or {}).get(KEY)
    return found if isinstance(found, Session) else None


def run_of(configuration: dict | None) -> core.Run | None:
    """The run in ``configuration`` (None: no session, or its set-up failed)."""
    session = session_of(configuration)
    return session.run if session is not None else None


def configuration_for(run: core.Run, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """``configuration`` (a copy) with ``run`` under :data:`KEY`: what an action is called with outside Chaos Toolkit."""
    return {**(configuration or {}), KEY: Session(run=run)}


class HandOver(RunEventHandler):
    """The run ``availproof run`` opened, put in Chaos Toolkit's configuration before the experiment's first
    hook (pass it in ``chaoslib.experiment.run_experiment(..., event_handlers=[HandOver(run)])``)."""

    def __init__(self, run: core.Run):
        self.run = run

    def running(self, experiment, journal, configuration, secrets, schedule, settings) -> None:
        configuration[KEY] = Session(run=self.run)


def measuring_run(configuration: dict | None) -> core.Run:
    """The run whose load is on: the only one a fault may be injected into; else refuse."""
    run = run_of(configuration)
    if run is None:
        raise InterruptExecution("availproof: no run is open (its set-up failed, or the experiment has no "
                                 "availproof control): refusing to inject a fault that nothing would measure")
    if not run.measuring():
        raise InterruptExecution("availproof: the run is not measuring (its load is not on, or it is finishing): "
                                 "refusing to inject a fault that nothing would measure")
    return run


def backend_for(configuration: dict | None):
    """A probe's backend: the run's, or one attached from the configuration."""
    run = run_of(configuration)
    if run is not None:
        return run.backend
    return provision.attach(Options.from_configuration(configuration), log=core.log)
