"""Chaos Toolkit actions: one per fault function of every registered scope (:func:`chaos.scopes.actions`),
each a thin call of that function on the experiment's run, and the rollback (:func:`heal_all`).

An action is made from its fault function (:func:`action`): the same name, the function's parameters but
``backend`` and ``marker`` (the run's) and those its scope's ``action_omits`` names, and ``configuration``
(Chaos Toolkit passes it: the run is in it, :mod:`chaos.ctk.session`). Every experiment names them as
``chaos.ctk.actions.<function>``.

An action injects only into the run of its ``configuration``, and only while that run is open and measuring
(:func:`chaos.ctk.session.measuring_run`); otherwise it refuses, saying why (the activity fails; nothing is
touched).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from chaos.core import run as core
from chaos import scopes
from chaos.ctk.session import measuring_run, run_of

CONFIGURATION = inspect.Parameter("configuration", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                  annotation="dict | None")


def action(fault: Callable[..., dict], omits: tuple[str, ...] = ()) -> Callable[..., dict]:
    """The Chaos Toolkit action of ``fault(backend, marker, **arguments)``: called with its arguments (and
    Chaos Toolkit's ``configuration``), it calls ``fault`` with the backend and marker of the configuration's
    run, when it is measuring."""
    params = list(inspect.signature(fault).parameters.values())[2:]  # after backend, marker
    signature = inspect.Signature([p for p in params if p.name not in omits] + [CONFIGURATION],
                                  return_annotation="dict")

    @functools.wraps(fault, assigned=("__name__", "__qualname__", "__doc__"), updated=())
    def act(*args: Any, **kwargs: Any) -> dict:
        arguments = signature.bind(*args, **kwargs).arguments  # as a function of that signature would refuse
        run = measuring_run(arguments.pop(CONFIGURATION.name, None))
        return fault(run.backend, run.marker, **arguments)

    act.__signature__ = signature
    act.__module__ = __name__
    act.__qualname__ = fault.__name__
    return act


def heal_all(timeout_s: float = 240.0, configuration: dict | None = None) -> dict:
    """The rollback of every experiment: heal exactly what this run injected and has not healed
    (none: nothing is touched), wait for health, redeploy the app if the cluster lost it (a head
    restart without GCS fault tolerance). With no run in the configuration (its set-up failed) there is
    nothing to heal."""
    run = run_of(configuration)
    if run is None:
        return {"healed": [], "note": "no run is open: nothing was injected, nothing to heal"}
    return core.heal_injected(run, timeout_s)


def __getattr__(name: str) -> Callable[..., dict]:
    """The action of the registered fault function ``name`` (made at each look: a scope registered or
    replaced later, a plug-in's, is found as the built-in ones are)."""
    found = scopes.actions().get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    scope, fault = found
    return action(fault, scope.action_omits)


def __dir__() -> list[str]:
    """The module's names and every registered action's: what Chaos Toolkit's validation looks among."""
    return sorted(set(globals()) | set(scopes.actions()))
