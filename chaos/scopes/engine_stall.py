"""engine-stall: a replica's engine stops admitting: the requests it is running finish, new ones never start,
the way operators report schedulers that stop taking requests in while the engine reports healthy
(vllm-project/vllm #53130, the scheduler permanently stops admitting once its deferred queue fills, KV cache
mostly free, only a restart recovers; #45414, Running 0, Waiting 5-6 for 9+ minutes with the probes at 200;
#15996, new requests all pending under KV-cache pressure while the loop schedules nothing). :func:`stall_engine`:
the rig leaves the engine a request naming ``stall`` and the run, and sends SIGUSR1 to its fault hook
(:mod:`serve_apps.engine_faults`, :mod:`serve_apps.held_faults`); from its next step on the engine takes no new
request in (vLLM: its KV-cache manager refuses the blocks of every request not yet started, vLLM's own "no room"
path; the stream target: its engine child's steps admit nothing) while running ones step on, for as long as its
stall mark exists. **The rig never ends it during the run**: without a detector the replica keeps drawing requests
that wait for good (the run must read VIOLATED); a detector that looks at the age of the oldest request without a
first token (the watchdog's second version) can take it out. The run's end releases it, only while its mark still
names the run."""

from __future__ import annotations

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import EXEC
from chaos.base.scope_registry import Scope
from chaos.scopes.engine_signal import signal_one_engine


def stall_engine(backend, marker: faults.Marker, zone: str | None = None) -> dict:
    """One replica's engine admitting no new request for the rest of the run. The engine is found and checked to
    take the signal before the mark; the proof: each engine's stall mark naming this run (the engine's own word),
    counting steps since (it steps on: its running requests go on), each engine alive and not stopped, the
    replica's process alive. No heal here: a detector ends it, or the run's end does."""
    return signal_one_engine(backend, marker, SCOPE.name, backend.stall_engine, zone)  # a replacement takes it too


SCOPE = Scope(
    "engine-stall", "engine stall", fault=stall_engine, backend_methods=("stall_engine",),  # release_engine: the heal
    zoned=True, every_target_affected=True,
    orphan_check=True,  # a detector replaces the replica: its stalled engine must go too (chaos.system.orphan_watch)
    # the hook takes it at the engine's next step: at once under load, at the next request when idle
    effect_bound_s=15.0,
    kube_access=EXEC,  # pgrep, the signal masks, the request written, kill -USR1; the marks read and removed
    conflict_class="replica-level",  # no heal of its own: held for its recovery window in a soak
)
