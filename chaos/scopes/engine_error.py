"""engine-error: a replica's engine made to fail from inside its step loop, the way a device error does
(:func:`error_engine`): the rig sends SIGUSR1 to the engine process, whose fault hook (the app
installs it when ``AVAILPROOF_ENGINE_FAULTS=1``) raises in the next step, so the serving stack's own error
path runs (vLLM: the exception inside EngineCore that becomes its EngineDeadError). The replica's process
lives: it must answer its requests with errors, fail its health check, and Serve replace it. Nothing to heal."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope
from chaos.scopes.engine_signal import signal_one_engine


def error_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """One replica's engine made to fail from inside its step loop (as a device error does): SIGUSR1 to its
    engine, whose hook (the app's: ``AVAILPROOF_ENGINE_FAULTS=1``) raises at its next step and records it (its
    tombstone, :func:`serve_apps.engine_faults.tombstone_path`). The replica lives; Serve replaces it. The engine is
    found and checked to take the signal before the mark; the proof: each engine's tombstone, the replica alive."""
    return signal_one_engine(backend, marker, SCOPE.name, backend.error_engine, zone)  # its tombstone the proof


SCOPE = Scope(
    "engine-error", "engine error", fault=error_engine, backend_methods=("error_engine",),
    zoned=True, every_target_affected=True,
    orphan_check=True,  # the failed engine exits; the replaced replica leaves none (chaos.system.orphan_watch)
    # the hook fires at the engine's next step, then its error path runs and the process exits
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep of the EngineCore children, their signal masks read, kill -USR1; nothing to heal
    conflict_class="replica-level",  # nothing to heal: Serve replaces it (held for its recovery window)
)
