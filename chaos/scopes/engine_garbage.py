"""engine-garbage: a replica's engine keeps producing tokens at full speed, and they are wrong, the way operators
report a corrupted device or kernel: serving is fine for a while, then answers turn into gibberish (vllm-project/
vllm #35718, garbled text after serving for some time; #14126, every answer ``!!!!!!``, the argmax of NaN logits),
the class of silent data corruption on a faulty GPU. Nothing fails: the health check passes, the latency is
normal, only the content is wrong. :func:`garble_engine`: the rig leaves the engine a request naming ``garbage`` and
the run, and sends SIGUSR1 to its fault hook (:mod:`serve_apps.engine_faults`, :mod:`serve_apps.held_faults`); from
its next step on the engine's tokens are wrong (vLLM: the step's output token ids shifted by one; the stream
target: its engine child says its steps are corrupted, and every token they let out is ``!``), for as long as its
garbage mark exists. **The rig never ends it during the run**: the replica keeps its share of requests and every
answer it gives is wrong (the stream target's exact check, ``chaos.load.integrity`` and ``chaos.load.continuity``,
counts them: failure class ``corrupted``; on vLLM the golden answers recorded in the warm-up do,
``chaos.load.golden``, and a prompt without one is null with the reason). The run's end releases it, only while its mark still names the run."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope
from chaos.scopes.engine_signal import signal_one_engine


def garble_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """One replica's engine producing wrong tokens for the rest of the run. The engine is found and checked to take
    the signal before the mark; the proof: each engine's garbage mark naming this run (the engine's own word,
    written as the fault begins), each engine alive and not stopped, the replica's process alive. No heal here:
    the run's end releases it."""
    return signal_one_engine(backend, marker, SCOPE.name, backend.garble_engine, zone)


SCOPE = Scope(
    "engine-garbage", "engine garbage", fault=garble_engine, backend_methods=("garble_engine",),  # release_engine
    zoned=True, every_target_affected=True,
    orphan_check=True,  # were the replica replaced, its engine must go too (chaos.system.orphan_watch)
    # the hook takes it at the engine's next step: at once under load, at the next request when idle
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep, the signal masks, the request written, kill -USR1; the marks read and removed
    conflict_class="replica-level",  # no heal of its own: held for its recovery window in a soak
)
