"""What the Chaos Toolkit actions and probes share: the run in progress (:func:`chaos.run.current`).

- An action injects only into a run that is open and measuring (:func:`measuring_run`): outside
  one (``chaos run`` of an experiment without the availproof control, a run whose set-up failed,
  or one already finishing) it refuses, saying why, and touches nothing (Chaos Toolkit records the
  activity as failed; every later action refuses the same way).
- A probe reads the run's backend, or, with no run, one attached from the experiment's
  ``configuration`` (reading changes nothing).
"""

from __future__ import annotations

from chaoslib.exceptions import InterruptExecution

from chaos import provision
from chaos import run as core
from chaos.options import Options


def measuring_run() -> core.Run:
    """The run whose load is on: the only one a fault may be injected into; else refuse."""
    run = core.current()
    if run is None:
        raise InterruptExecution("availproof: no run is open (its set-up failed, or the experiment has no "
                                 "availproof control): refusing to inject a fault that nothing would measure")
    if not run.measuring():
        raise InterruptExecution("availproof: the run is not measuring (its load is not on, or it is finishing): "
                                 "refusing to inject a fault that nothing would measure")
    return run


def backend_for(configuration: dict | None):
    """A probe's backend: the current run's, or one attached from the configuration."""
    run = core.current()
    if run is not None:
        return run.backend
    return provision.attach(Options.from_configuration(configuration), log=core.log)
