"""Load generation: the data plane's client. What it sends (:mod:`~chaos.load.workload`: load
shapes, prompts, targets, routing), how (:mod:`~chaos.load.harness`: open and closed loops over
httpx, every request recorded; :mod:`~chaos.load.sse`: the OpenAI streaming format), on a lean
httpx transport (``_transport``) and a sub-millisecond send timer (``_timer``), both private.
From several workers (:mod:`~chaos.load.pool`: one plan dealt, the lines published): processes of the rig
(:mod:`~chaos.load.workers`) or pods of a Kubernetes Job (:mod:`~chaos.load.pod_worker`,
:mod:`chaos.backends.kuberay.kube.load_pool`), their clocks read against the rig's (:mod:`~chaos.load.clock`).

The public surface is small: a :class:`LoadShape`, the :class:`Target` list, and a
:class:`LoadRun` that publishes every finished request on :class:`chaos.recording.records.Events`.

Also here: the capacity sweep (:mod:`chaos.load.capacity`), an experiment's rate as a share of it
(:mod:`chaos.load.utilization`) and whether the load's timeout fits its outputs (:mod:`chaos.load.timeout_fit`).

May import: chaos.analysis, chaos.base, chaos.recording, chaos.schemas, chaos.system.secret_env,
chaos.system.topology.
"""

from chaos.load.failures import classify_exception
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target, check_target_allowed

__all__ = ["LoadRun", "LoadShape", "Target", "check_target_allowed", "classify_exception"]
