"""engine-slow: a straggler. A replica's engine process(es) throttled by a duty cycle of SIGSTOP and SIGCONT
for a stated time (:func:`chaos.faults_engine.slow_engine`; ``factor``: the engine runs one ``period_s`` of every
``factor``): alive and answering, slowly. What Serve's router does with it is the finding: the share of the
requests the slow replica still got, and its TTFT and ITL against the others' (:mod:`chaos.analysis.slow_replica`).
The heal stops the duty cycle and leaves the engine continued."""

from chaos.backends.kube_access import EXEC, Access
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "engine-slow", "engine slow", fault="slow_engine", backend_methods=("slow_engine", "resume_engine"),
    zoned=True, every_target_affected=True,
    effect_bound_s=10.0,  # one look samples two cycles (1.6 s at factor 4, period 0.2 s)
    kube_access=EXEC + (Access("patch", "pods", why="the stopped processes and the duty cycle recorded on their pod, "
                                                     "for recover (_mark_paused)"),),
)
