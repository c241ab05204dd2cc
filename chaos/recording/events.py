"""The one registry of a run's record observers (:class:`Events`): who is told of each record, and how an
observer that fails is kept from the run.

The producers emit through it: the load harness and its worker pools (:mod:`chaos.load`; the in-cluster
pool, :mod:`chaos.backends.kuberay.kube.load_pool`) the run header, every finished request and the footer; the
control-plane sampler (:mod:`chaos.system.sampler`) each sample; the fault marker (:mod:`chaos.scopes.faults`) each mark.
The observers subscribe to it: the NDJSON writer (:class:`chaos.recording.records.RecordWriter`), the Prometheus
exporter (:mod:`chaos.system.metrics`), the stop conditions (:mod:`chaos.core.stop_conditions`), a capacity step's
collector (:mod:`chaos.core.capacity_run`) and a worker's own forwarders (:mod:`chaos.load.worker`)::

    events = Events()
    events.subscribe(events.request_done, writer.write)
    events.emit(events.request_done, record)   # writer.write(record), and every other subscriber

A hook is one of the lists below; subscribing and unsubscribing take the registry's lock, and an emit calls
the subscribers it finds under that lock, in the order they subscribed, outside it (an observer may
subscribe another, or emit, without a deadlock). Every call is guarded, as chaostoolkit-lib guards its
run event handlers (``chaoslib.run.EventHandlerRegistry``): an observer that raises is logged and counted
(:attr:`Events.failures`), the others are still called, and the producer (a request of the load, the
sampler's loop, a fault's mark) never sees the exception: an observer never stops the run. Its first
failure is logged with the traceback, then at its 10th, 100th, 1000th... failure a line with the count.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

logger = logging.getLogger(__name__)

HOOKS = ("run_started", "request_done", "fault_marked", "sample_taken", "run_stopped")


class Events:
    """Typed hooks (after locust's): subscribe a callable to each, emit calls every subscriber, guarded."""

    def __init__(self):
        self._lock = threading.Lock()
        self.run_started: list[Callable[[dict], None]] = []  # the run header (a dict)
        self.request_done: list[Callable[[Any], None]] = []  # a finished request (chaos.recording.records.RequestRecord)
        self.fault_marked: list[Callable[[Any], None]] = []  # a fault mark (chaos.recording.records.FaultMark)
        self.sample_taken: list[Callable[[Any], None]] = []  # a control-plane sample (chaos.recording.records.Sample)
        self.run_stopped: list[Callable[[dict], None]] = []  # the run footer (a dict)
        self.failures: dict[str, int] = {}  # "hook: observer" -> how many times it raised

    def subscribe(self, hook: list[Callable], fn: Callable) -> Callable:
        """``fn`` is called at every emit of ``hook`` from now on; returns ``fn`` (to unsubscribe it)."""
        with self._lock:
            hook.append(fn)
        return fn

    def unsubscribe(self, hook: list[Callable], fn: Callable) -> None:
        """``fn`` is no longer called by ``hook`` (nothing happens when it was not subscribed)."""
        with self._lock:
            if fn in hook:
                hook.remove(fn)

    def emit(self, hook: list[Callable], *args: Any) -> None:
        """Every subscriber of ``hook`` called with ``args``, each guarded: one that raises is logged, never raised."""
        with self._lock:
            observers = tuple(hook)
        for fn in observers:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - an observer never stops the run (nor the other observers)
                self._failed(hook, fn)

    def _failed(self, hook: list[Callable], fn: Callable) -> None:
        name = next((h for h in HOOKS if getattr(self, h) is hook), "a hook")
        who = f"{name}: {getattr(fn, '__qualname__', None) or type(fn).__name__}"
        with self._lock:
            n = self.failures[who] = self.failures.get(who, 0) + 1
        if n == 1:
            logger.error("availproof: the observer %s failed; the run goes on without it for this event", who,
                         exc_info=True)
        elif n in (10, 100, 1000) or n % 10000 == 0:
            logger.error("availproof: the observer %s has failed %d times", who, n)
