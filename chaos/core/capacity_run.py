"""`availproof capacity EXPERIMENT`: the highest rate the experiment's deployment sustains within its SLO.

The deployment is brought up exactly as `availproof run` brings it up (:func:`chaos.core.run.open_run`: the
experiment's topology, app and front door, prepared and deployed; the records file), **no fault is
injected** (the method is not run), and :func:`chaos.load.capacity.sweep` offers the experiment's load shape
(arrivals, lengths, workers) at rising rates through the run's own load harness
(:func:`chaos.core.run.new_load`), judged against the experiment's SLO. Written in the out dir:

- ``capacity.json`` (``chaos/schemas/capacity.schema.json``): the steps, why the sweep stopped, the
  sustained rate (or null and why), what was measured and when;
- ``records.ndjson``: every request of every step, each step after a run header of its own
  (``capacity_step``: its index and rate).

The experiment's own ``load.utilization`` is not used here (the sweep sets the rates): the run's spec is
built without it (:func:`chaos.core.run_spec.build`, ``rates=False``), and without a method (no fault).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from chaos.load import capacity, utilization
from chaos.recording import records as rec
from chaos.core import run as core, run_spec, summary as summary_mod
from chaos.core.options import Options

PROGRESS_EVERY_S = 5.0


def measure(experiment_path: str | Path, options: Options, plan: dict[str, Any] | None = None,
            log: Callable[[str], None] = core.log) -> tuple[capacity.Decision, dict[str, Any]]:
    """Sweep the experiment's deployment (``plan``: :class:`chaos.load.capacity.SweepPlan` fields over the
    defaults, the warm-up the experiment's); returns the decision and the ``capacity.json`` written.
    Bad input is refused (one line) before anything starts."""
    path = Path(experiment_path)
    options.experiment_file = path
    spec = run_spec.build(path, options, rates=False)  # validated as `run` validates it, no utilization
    capacity.check_shape(spec.settings.load)
    sweep_plan = capacity.SweepPlan(**{"warmup_s": spec.settings.load.warmup_s, **(plan or {})})
    # no method, no rollbacks: the run is opened for the sweep alone, and a backend is asked for no fault's
    # permissions (chaos.core.plan.faults_of)
    run = core.open_run(spec.with_document(method=[], rollbacks=[]), options)
    try:
        s = run.settings
        shape = s.load  # the model the load asks for: the spec's
        header = summary_mod.header_block(run.experiment_title, s.scope, core.definitions(s), s.bounds,
                                          s.bounds_source, run.app)
        watch = ReplicaWatch(run.backend)
        steps, decision = capacity.sweep(shape, s.slo, sweep_plan, watch.around(step_runner(run, header, log)),
                                         log=log)
        context = {"app": run.app, "front": s.front,
                   "topology": utilization.topology_name(s.topology) or s.topology,
                   "experiment": {"title": run.experiment_title, "file": str(path)}, "cluster": _described(run),
                   "replicas": watch.figures((s.app or {}).get("stall_s"))}
    finally:
        core.close(run)
    if shape.workers > 1:
        rec.order_by_send_time(run.records_path)  # the workers' lines came as they finished
    doc = capacity.document(steps, decision, sweep_plan, s.slo, shape, context)
    core.write_json(run.out_dir / "capacity.json", doc)
    print(capacity.table(steps, decision), flush=True)
    reps = doc["replicas"]
    log(f"replicas Serve replaced during the sweep (no fault): {reps['replaced'] if reps['replaced'] is not None else 'unknown: ' + str(reps['replaced_reason'])}"
        + (f" (progress watchdog on, stall_s {reps['watchdog_stall_s']:g}: each one a false detection)"
           if reps["watchdog_stall_s"] else ""))
    log(f"capacity -> {run.out_dir / 'capacity.json'}; records -> {run.records_path}")
    return decision, doc


def step_runner(run: core.Run, header: dict[str, Any], log: Callable[[str], None] = core.log) -> capacity.StepRunner:
    """One step of the sweep on the run's load harness: started, waited for (at most
    :func:`chaos.load.capacity.step_bound_s`, with a progress line every 5 s), stopped and drained; returns
    the step's records (they also go to the run's records file)."""

    def run_step(shape, index: int) -> list[rec.RequestRecord]:
        got: list[rec.RequestRecord] = []
        hook = run.events.subscribe(run.events.request_done, got.append)
        load = core.new_load(run, shape, {**header, "capacity_step": {"index": index, "rate_rps": shape.rate}})
        try:
            load.start()
            deadline = time.monotonic() + capacity.step_bound_s(shape)
            last = time.monotonic()
            while load.running and time.monotonic() < deadline:
                time.sleep(0.2)
                if time.monotonic() - last >= PROGRESS_EVERY_S:
                    log(f"  step {index} at {shape.rate:g} req/s: {load.progress_line()}")
                    last = time.monotonic()
        finally:
            load.stop()
            try:
                load.join(timeout=max(shape.timeout_s, shape.drain_bound_s()) + 30)
            finally:
                run.events.unsubscribe(run.events.request_done, hook)
        return got

    return run_step


class ReplicaWatch:
    """The replicas Serve replaced during the sweep, with no fault injected: each one a health check failed (or a
    replica died) under load alone. With the progress watchdog on (the app's ``stall_s``), each is a false
    detection: the watchdog's cost when nothing is wrong. Looked at before the sweep and after each step (the
    backend's RUNNING replicas); a look that fails is said, never counted as none replaced."""

    def __init__(self, backend):
        self.backend = backend
        self.before = self._look()
        self.replaced: dict[int, list[str]] = {}
        self.unknown: str | None = None if self.before is not None else "the replicas could not be listed"

    def _look(self) -> set[str] | None:
        try:
            return {r.replica_id for r in self.backend.replicas()}
        except Exception:  # noqa: BLE001 - the figure becomes null with its reason, the sweep goes on
            return None

    def around(self, run_step: capacity.StepRunner) -> capacity.StepRunner:
        seen = set(self.before or ())

        def step(shape, index: int):
            got = run_step(shape, index)
            now = self._look()
            if now is None:
                self.unknown = f"the replicas could not be listed after step {index}"
            elif self.unknown is None:
                gone = sorted(seen - now)
                if gone:
                    self.replaced[index] = gone
                seen.clear()
                seen.update(now)
            return got

        return step

    def figures(self, stall_s: Any) -> dict[str, Any]:
        n = None if self.unknown else sum(len(v) for v in self.replaced.values())
        return {"running_before": len(self.before) if self.before is not None else None,
                "replaced": n, "replaced_by_step": {str(k): v for k, v in sorted(self.replaced.items())},
                "replaced_reason": self.unknown, "watchdog_stall_s": stall_s or None}


def _described(run: core.Run) -> dict[str, Any] | None:
    try:
        return run.backend.describe()
    except Exception as e:  # noqa: BLE001 - a description never costs the measurement its file
        return {"unknown": f"{type(e).__name__}: {e}"[:200]}
