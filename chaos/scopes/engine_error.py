"""engine-error: a replica's engine made to fail from inside its step loop, the way a device error does
(:func:`chaos.faults_engine.error_engine`): the rig sends SIGUSR1 to the engine process, whose fault hook (the app
installs it when ``AVAILPROOF_ENGINE_FAULTS=1``) raises in the next step, so the serving stack's own error
path runs (vLLM: the exception inside EngineCore that becomes its EngineDeadError). The replica's process
lives: it must answer its requests with errors, fail its health check, and Serve replace it. Nothing to heal."""

from chaos.backends.kube_access import EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "engine-error", "engine error", fault="error_engine", backend_methods=("error_engine",),
    zoned=True, every_target_affected=True,
    # the hook fires at the engine's next step, then its error path runs and the process exits
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep of the EngineCore children, their signal masks read, kill -USR1; nothing to heal
)
