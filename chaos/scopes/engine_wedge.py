"""engine-wedge: a replica's engine stuck for good inside its step, the way operators report real wedges
(vllm-project/vllm #39863, #17972, #46811: the busy loop blocked in a ``future.result()`` without a timeout,
``/health`` answering 200 for hours while nothing decodes; a proxy kept such an engine in rotation for 85
minutes). :func:`wedge_engine`: the rig leaves the engine a request to wedge and sends SIGUSR1 to its fault hook
(the app's, ``AVAILPROOF_ENGINE_FAULTS=1``, :mod:`serve_apps.engine_faults`); the engine's next step blocks
(or, ``spin``, loops at 100 % of a core) while its I/O threads run on and its process stays out of state T, so
only a detector that looks at progress can tell. Unlike ``engine`` (SIGSTOP, resumed at ``duration_s``) **the
rig never ends it during the run**: without a detector the replica keeps its share of requests until the run's
end (the run must read VIOLATED); with one (the progress watchdog, ``app.stall_s``) Serve replaces the replica and
the wedged engine goes with it. The run's end (its heal) releases an engine still wedged, and only one whose
wedge mark still names the run."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope
from chaos.scopes.engine_signal import signal_one_engine


def wedge_engine(backend, marker: faults.Marker, zone: str | None = None, spin: bool = False) -> dict:
    """One replica's engine wedged in its step for the rest of the run (blocked; ``spin``: busy at 100 % of a
    core). The engine is found and checked to take the signal before the mark; the proof: each engine's wedge
    mark naming this run (the engine's own word, written as its step wedges), each engine alive and not stopped,
    the replica's process alive. No heal here: a detector ends it, or the run's end does."""
    return signal_one_engine(backend, marker, SCOPE.name, lambda r: backend.wedge_engine(r, spin=bool(spin)), zone,
                             {"spin": bool(spin)})  # a detector's replacement takes the wedged engine with it


SCOPE = Scope(
    "engine-wedge", "engine wedge", fault=wedge_engine, backend_methods=("wedge_engine",),  # release_engine: the heal
    zoned=True, every_target_affected=True,
    orphan_check=True,  # a detector replaces the replica: its wedged engine must go too (chaos.system.orphan_watch)
    # the hook wedges at the engine's next step: at once under load, at the next request when idle
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep, the signal masks, the request written, kill -USR1; the marks read and removed
    conflict_class="replica-level",  # no heal of its own: held for its recovery window in a soak
)
