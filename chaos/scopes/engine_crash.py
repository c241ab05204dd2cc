"""engine-crash: a replica's engine process SIGKILLed while the replica's own process lives
(:func:`chaos.faults_engine.crash_engine`): the replica must notice, fail its health check, and Serve replace it."""

from chaos.backends.kube_access import EXEC
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "engine-crash", "engine crash", fault="crash_engine", backend_methods=("crash_engine",),
    zoned=True, every_target_affected=True,
    effect_bound_s=10.0,  # a SIGKILLed process is gone at once
    kube_access=EXEC,  # pgrep and kill -9 of the replica's EngineCore children; nothing to heal
)
