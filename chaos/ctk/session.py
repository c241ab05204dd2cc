"""What the Chaos Toolkit actions and probes share: the backend and the marker of the run in
progress (:func:`chaos.run.current`), or, with no run (an activity run on its own, a rollback
after the run closed), ones attached from the experiment's ``configuration``."""

from __future__ import annotations

from chaos import provision
from chaos import run as core
from chaos.faults import Marker


def options(configuration: dict | None) -> core.Options:
    return core.Options.from_configuration(configuration)


def backend_for(configuration: dict | None):
    """The backend of the current run, or one attached from the configuration."""
    run = core.current()
    if run is not None:
        return run.backend
    return provision.attach(options(configuration), log=core.log)


def marker_for() -> Marker:
    run = core.current()
    return run.marker if run is not None else Marker(log=core.log)


def redeploy_if_gone(backend, configuration: dict | None) -> bool:
    return core.redeploy_if_gone(backend, options(configuration))
