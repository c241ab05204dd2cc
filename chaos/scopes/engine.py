"""engine: a replica's engine SIGSTOPped, alive but stuck (:func:`chaos.faults_engine.hang_engine`); Serve must
detect it from health checks. SIGCONT at the heal."""

from chaos.backends.kube_access import EXEC, Access
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "engine", "engine hang", fault="hang_engine", backend_methods=("pause_engine", "resume_engine"),
    zoned=True, every_target_affected=True,
    effect_bound_s=10.0,  # a stopped process is in state T at once
    kube_access=EXEC + (Access("patch", "pods", why="the stopped processes recorded on their pod, for recover "
                                                     "(_mark_paused)"),),
)
