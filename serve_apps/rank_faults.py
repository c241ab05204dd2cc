"""``rank-hang`` inside vLLM's tensor-parallel workers: the engine-side fault hook (:mod:`serve_apps.engine_faults`)
installed in each worker process (a rank) as it is in the engine, by the same general plugin.

With ``tensor_parallel_size`` N >= 2 and the multiprocessing executor (vLLM 0.32, ``vllm/v1/executor/
multiproc_executor.py``) the engine process (``VLLM::EngineCore``) runs N worker processes (``VllmWorker-{rank}``,
titled ``VLLM::Worker_TP{rank}``) whose main thread runs ``WorkerProc.worker_busy_loop``: each step's RPC
(``execute_model``) dequeued from the broadcast queue and run through ``WorkerWrapperBase.execute_model``; their forward
passes meet in all-reduces. vLLM loads its general plugins in each worker (``WorkerWrapperBase.init_worker`` ->
``load_general_plugins``), so :func:`serve_apps.engine_faults.register` calls :func:`install` there too, which wraps:

- ``WorkerProc.worker_busy_loop``: entering it installs the SIGUSR1 handler (the worker's main thread; only workers
  run it: the engine process and the replica's keep their own handlers);
- ``WorkerWrapperBase.execute_model``: once armed, the next step takes the rig's request (:func:`take_request` of the
  worker's pid) and, for a ``wedge``, wedges the step (:func:`serve_apps.engine_faults.wedge`: its mark, the rank's
  hang mark, written naming the run, then blocked or spinning while it exists). Anything else does nothing in a rank.

The other ranks then block in the step's all-reduce (a collective hang: NCCL on GPUs, vLLM's CPU communicator on CPU)
and the engine waits for the step's answer: with vLLM 0.32 for ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`` (300 s by
default), after which the RPC raises ``TimeoutError`` and the engine dies (``EngineDeadError``); NCCL's own watchdog
(10-30 min) may end it first on GPUs. A rank's death needs no hook: vLLM's ``MultiprocWorkerMonitor`` notices it.
"""

from __future__ import annotations

import functools
import logging
import os

from serve_apps import engine_faults

_WRAPPED = "__availproof_rank_fault__"
TRIGGER = engine_faults.Trigger()  # a rank's own (the engine's is engine_faults.TRIGGER)

logger = logging.getLogger(__name__)


def _hanging_step(execute_model, trigger: engine_faults.Trigger):
    @functools.wraps(execute_model)
    def wrapper(self, *args, **kwargs):
        if trigger.take():
            request = engine_faults.take_request()  # none (or unreadable) reads as an error request
            if request.get("fault") == engine_faults.WEDGE:
                engine_faults.wedge(request)  # returns only once the rig removed the mark (the run's end)
            elif request.get("fault") != engine_faults.VOID:  # void: the run's end took back its signal, nothing to say
                logger.warning("availproof: a rank takes only a wedge (rank-hang); %r ignored (a signal with no "
                               "request reads as 'error')", request.get("fault"))
        return execute_model(self, *args, **kwargs)
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _arming_loop(worker_busy_loop, trigger: engine_faults.Trigger):
    @functools.wraps(worker_busy_loop)
    def wrapper(self, *args, **kwargs):
        if engine_faults.install_handler(trigger):
            logger.info("availproof: rank fault hook armed by SIGUSR1 in pid %d", os.getpid())
        return worker_busy_loop(self, *args, **kwargs)
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def install(wrapper_cls, loop_classes, trigger: engine_faults.Trigger | None = None) -> list[str]:
    """Wrap ``wrapper_cls.execute_model`` and each of ``loop_classes``' own ``worker_busy_loop`` (idempotent). Returns
    what it wrapped, as ``Class.method``."""
    trigger = trigger or TRIGGER
    done = []
    fn = wrapper_cls.__dict__.get("execute_model")
    if fn is not None and not getattr(fn, _WRAPPED, False):
        setattr(wrapper_cls, "execute_model", _hanging_step(fn, trigger))
        done.append(f"{wrapper_cls.__name__}.execute_model")
    for cls in loop_classes:
        fn = cls.__dict__.get("worker_busy_loop")
        if fn is not None and not getattr(fn, _WRAPPED, False):
            setattr(cls, "worker_busy_loop", _arming_loop(fn, trigger))
            done.append(f"{cls.__name__}.worker_busy_loop")
    return done


def register_vllm() -> list[str]:
    """vLLM's worker classes wrapped (:func:`install`); what was wrapped. Raises what the import raises (the caller,
    :func:`serve_apps.engine_faults.register`, logs it: the engine must start anyway)."""
    from vllm.v1.executor import multiproc_executor
    from vllm.v1.worker import worker_base

    return install(worker_base.WorkerWrapperBase, [multiproc_executor.WorkerProc])
