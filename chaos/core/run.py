"""One experiment run's lifecycle, start to end: the core of the rig (no Chaos Toolkit here).

One public function per step; a driver calls them in this order (:mod:`chaos.core.moments` does, for
every driver: Chaos Toolkit's control, :mod:`chaos.ctk.control`, hands it its moments)::

    run = open_run(experiment, options)   # the system ready (provision + deploy), records open
    start_load(run)                        # load and stop conditions on; warm-up and baseline waited out,
                                           #   the baseline judged (chaos.core.baseline_gate: unsteady, no method)
    ...                                    # the method: faults through run.backend, marks through run.marker
    keep_load_for_recovery(run)            # the recovery window, load still on
    finish(run)                            # load off; analyse, check the bounds, write summary.json
    end(run, journal)                      # what is still injected healed, the run closed, the one verdict

Each step takes the run :func:`open_run` returned: its opener holds it and hands it on (there is no
run "in progress in this process"; Chaos Toolkit's actions and probes find it in Chaos Toolkit's
configuration, :mod:`chaos.ctk.session`).

The concepts around the lifecycle have their own modules, re-exported here (``run.X`` keeps working):
the run's state (:mod:`chaos.core.run_state`: :class:`Run`, :func:`log`, :class:`Stopped`),
its stop conditions (:mod:`chaos.core.stop_conditions`: :class:`StopConditions`, :class:`Guard`) and its
client's security (:mod:`chaos.core.client_security`: the CA trusted, the bearer token).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from chaos import analysis
from chaos.core import bounds, environment, learnt, provision, summary as summary_mod
from chaos.scopes import faults
from chaos.system import metrics
from chaos.recording import records as rec
from chaos.core import experiment as exp_mod
from chaos.core import baseline_gate as gate, plan, run_spec
from chaos.system import orphan_watch
from chaos.load import utilization
from chaos.core import verdict as verdict_mod
from chaos.backends import base
from chaos.core.client_security import client_ca, client_headers, client_transport
from chaos.base.errors import SetupError
from chaos.scopes.faults import Marker
from chaos.load import golden, served
from chaos.load.harness import LoadRun
from chaos.load.workload import Target
from chaos.core.options import Options
from chaos.core.run_spec import RunSpec
from chaos.core.run_state import Run, Stopped, default_out_dir, log, write_json
from chaos.system import engine_metrics
from chaos.system.sampler import Sampler
from chaos.core.stop_conditions import Guard, StopConditions

__all__ = ["Run", "Stopped", "log", "write_json", "default_out_dir", "Guard", "StopConditions",
           "client_ca", "client_headers", "client_transport", "Options",
           "open_run", "load_targets", "definitions", "start_load", "new_load", "keep_load_for_recovery", "wait",
           "stop_load", "finish", "look_for_orphans", "log_figures", "close", "heal_injected", "heal_quietly", "conclude", "end",
           "failed", "attempt"]


def open_run(spec: RunSpec | dict[str, Any], options: Options) -> Run:
    """Make sure the system is up and the app deployed (idempotent), open the records file and
    the metrics exporter. ``spec``: the run's spec (:mod:`chaos.core.run_spec`), built once before; a document
    (plain ``chaos run``'s control hands Chaos Toolkit's) is built into one here. The run is the caller's to
    hand on and to end (:func:`end`, or :func:`close`)."""
    if not isinstance(spec, RunSpec):
        spec = run_spec.of_document(spec, options)
    title, settings, rate_from = spec.title or "experiment", spec.settings, spec.rate_from
    # what the experiment asks of the backend, and the secrets it needs: refused before anything starts
    provision.check_capabilities(options.backend, settings)
    provision.front_token(spec.front)
    client_headers(settings, spec.front)
    run_id = uuid.uuid4().hex[:12]
    backend = provision.ensure_system(spec, options, log=log, run_id=run_id,  # prepared for the run
                                      faults=plan.faults_of(spec.experiment))
    missing = base.missing_members(backend)
    if missing:
        raise SetupError(f"backend {type(backend).__name__} lacks {', '.join(missing)} of the interface "
                         "(chaos.backends.base.Backend)")
    out = options.out_dir or default_out_dir(title)
    out.mkdir(parents=True, exist_ok=True)
    events = rec.Events()
    writer = rec.RecordWriter(out / "records.ndjson").attach(events)
    run = Run(experiment_title=spec.title, settings=settings, options=options, out_dir=out, run_id=run_id,
              backend=backend, events=events, writer=writer, marker=Marker(events, log=log), spec=spec,
              rate_from=None if rate_from is None else dict(rate_from))
    log(f"records -> {run.records_path}")
    if rate_from is not None:
        log(f"rate: {utilization.describe(rate_from)}")
        unlike = utilization.differences(rate_from, settings)
        if unlike:
            log(f"note: the capacity was measured on another deployment: {'; '.join(unlike)}")
    port = metrics.port_from_env()
    if port:
        exporter = metrics.Exporter().attach(events)
        try:
            log(f"metrics -> http://127.0.0.1:{exporter.serve(port)}/metrics")
            run.exporter = exporter
        except OSError as e:
            log(f"metrics exporter not started ({e}); set AVAILPROOF_METRICS_PORT to a free port")
    return run


def load_targets(run: Run) -> list[Target]:
    """Where the load goes: the front door's listeners (``front`` lb / zonal-lb), else the Serve
    proxies of the workers, the head or all (the experiment's ``targets``)."""
    b = run.backend
    if run.settings.front != "direct":
        return [Target(name, url, zone, region) for name, url, zone, region in b.front_targets()]
    rows = []
    if run.settings.targets in ("workers", "all"):
        rows += b.targets()
    if run.settings.targets in ("head", "all"):
        rows.append(b.head_target())
    return [Target(name, url, zone, region) for name, url, zone, region in rows]


def definitions(settings: exp_mod.Settings) -> analysis.Definitions:
    """What the run's figures are computed with (recorded in the run header)."""
    return analysis.Definitions(settings.steady_state, settings.slo, settings.population)


def start_load(run: Run) -> None:
    """Start the control-plane sampler, the load harness and the stop conditions; wait out the
    warm-up and the baseline, then judge the baseline (:func:`chaos.core.baseline_gate.check`). Raises
    :class:`Stopped` when a stop condition trips meanwhile, :class:`chaos.core.baseline_gate.Unsteady` when
    the baseline is out of steady state (nothing may be injected)."""
    s = run.settings
    # the model the load asks for: the spec's (chaos.core.run_spec); on vLLM its answers constrained and checked
    # against golden answers recorded in the warm-up (chaos.load.golden)
    shape = golden.for_app(s.load, run.app, run.options.model_path, log=log)
    # the backend's observation; with a small vLLM KV cache, the engines' preemption counters too
    run.sampler = Sampler(engine_metrics.observer(run.backend, run.app, s.app), run.events,
                          period_s=s.sample_period_s)
    run.sampler.start()
    run.orphans = orphan_watch.OrphanWatch(run.backend, run.marker)  # follows the engines of replicas killed
    run.orphans.start()
    header = summary_mod.header_block(run.experiment_title, s.scope, definitions(s), s.bounds, s.bounds_source,
                                      run.app)
    if run.rate_from is not None:
        header["rate_from"] = run.rate_from
    header.update(run.header_extra or {})
    run.load = new_load(run, shape, header).start()
    run.marker.load_started_mono = getattr(run.load, "t0", None)  # the schedule's origin (a load step's marks)
    Guard(run).start()
    log(f"load on: {shape.mode} loop, {shape.rate if shape.mode == 'open' else shape.concurrency} "
        f"{'req/s' if shape.mode == 'open' else 'in flight'}"
        f"{capacity_share(shape) if run.rate_from else ''}"
        f" over {len(run.load.targets)} targets"
        f"{f' from {shape.workers} worker processes' if shape.workers > 1 else ''}; "
        f"warm-up {shape.warmup_s:.0f} s + baseline {s.baseline_s:.0f} s before the method")
    wait(run, shape.warmup_s)
    gate.check_timeout(run, log=log)  # a timeout the warm-up shows too short: refused now, not after the baseline
    wait(run, s.baseline_s)
    gate.check(run, log=log)


def capacity_share(shape) -> str:
    """What the load's rate is of the measured capacity, for the log: one share, or its stages' (a load step)."""
    if shape.utilization is not None:
        return f" ({shape.utilization:g} of the capacity measured)"
    return " (stages of the capacity measured: see rate_from.stages)"


def new_load(run: Run, shape, header: dict[str, Any]):
    """The run's load harness for ``shape`` (not started): one :class:`LoadRun` in this process, or
    ``workers`` harness processes (:class:`chaos.load.workers.WorkerPool`), sending to the run's targets
    with the run's client settings; ``header``: what the records' run header adds."""
    s = run.settings
    # KubeRay with kubernetes.load.in_cluster: the workers are pods of a Job, off the cluster's Ray nodes
    # (chaos.backends.kuberay.kube.load_pool); they send to the serve Service by its in-cluster name
    in_cluster = getattr(run.backend, "load_pool", lambda *a, **k: None)(
        shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts, header_extra=header,
        headers=client_headers(s, run.front))
    if in_cluster is not None:
        return in_cluster
    # Node addresses inside the cluster's own network namespaces are hosts the rig itself created.
    own = run.backend.own_hosts()
    targets = load_targets(run)
    if shape.workers > 1:  # N harness processes, one schedule dealt to them (chaos.load.workers)
        from chaos.load.workers import WorkerPool

        return WorkerPool(targets, shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts + own,
                          header_extra=header, headers=client_headers(s, run.front), ca_file=client_ca(run, targets),
                          records_dir=run.out_dir)
    return LoadRun(targets, shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts + own,
                   header_extra=header, transport=client_transport(run, targets), headers=client_headers(s, run.front))



def keep_load_for_recovery(run: Run, poll_s: float = 1.0) -> None:
    """After the method: the load stays on for the recovery window, or until every plane has been
    back for the settle time (:mod:`chaos.core.settle`; ``recovery_settle_s``, 0: the whole window),
    asked every ``poll_s`` (or five times as long as the last asking took: the records are analysed
    each time, and the machine is the one under test). Raises :class:`Stopped` when a stop condition
    trips meanwhile. The window as it was is recorded in the summary (``recovery_window``)."""
    s = run.settings
    planned, settle = s.recovery_window_s, s.recovery_settle_s
    log(f"method done; keeping the load on for the {planned:.0f} s recovery window"
        + (f" (or until every plane has been back for {settle:.0f} s)" if settle else ""))
    start = time.monotonic()
    end = start + planned
    run.recovery_window = {"planned_s": planned, "settle_s": settle, "length_s": None, "ended_early": False,
                           "recovered_at_s": None}
    every = poll_s
    while time.monotonic() < end:
        wait(run, max(0.0, min(every, end - time.monotonic())))
        if run.load is None or not run.load.running:
            break
        asked = time.monotonic()
        at = _settled(run) if settle else None
        every = max(poll_s, 5 * (time.monotonic() - asked))
        if at is not None:
            run.recovery_window.update(ended_early=True, recovered_at_s=round(at, 3))
            log(f"every plane back {at:.1f} s after the last injection and steady for {settle:.0f} s: "
                f"the recovery window ends after {time.monotonic() - start:.0f} s of {planned:.0f}")
            break
    run.recovery_window["length_s"] = round(time.monotonic() - start, 3)


def _settled(run: Run) -> float | None:
    """:func:`chaos.core.settle.settled` on the records taken so far (None when they cannot be read)."""
    from chaos.core import settle

    try:
        records = rec.read(run.records_path)
        summary = analysis.analyse(records, run.settings.steady_state, run.settings.slo, run.settings.population)
    except Exception as e:  # noqa: BLE001 - a read that fails only keeps the window open
        log(f"recovery window: the records could not be analysed yet ({type(e).__name__}: {e})")
        return None
    faults = summary["faults"]
    if not faults:
        return None
    end_s = (analysis.run_end_ns(records) - faults[-1]["inject_ns"]) / 1e9
    # a request is recorded when it ends: one still in flight (a hang up to the client's timeout) is not
    # in the records yet, so the settle time is at least the load's timeout
    settle_s = max(run.settings.recovery_settle_s, run.settings.load.timeout_s)
    return settle.settled(summary, end_s, settle_s, run.settings.steady_state.window_s)


def wait(run: Run, seconds: float) -> None:
    """Wait ``seconds`` while the load runs, with a progress line every 5 s; raises :class:`Stopped`
    as soon as a stop is pending."""
    end = time.monotonic() + seconds
    last = 0.0
    while time.monotonic() < end and run.load is not None and run.load.running:
        reason = run.take_stop()
        if reason is not None:
            raise Stopped(reason)
        time.sleep(min(0.25, max(0.0, end - time.monotonic())))
        if time.monotonic() - last >= 5:
            log(f"  {run.load.progress_line()}")  # one line for the whole run, every worker's rate in it
            last = time.monotonic()


def stop_load(run: Run) -> None:
    """Stop sending; give requests in flight their time to finish; then stop sampling."""
    if run.load is not None:
        run.load.stop()
        # every attempt of a request in flight (a retry policy: its retries and their waits), and a margin
        run.load.join(timeout=max(run.settings.load.timeout_s, run.settings.load.drain_bound_s()) + 30)
    if run.sampler is not None:
        run.sampler.stop()


def finish(run: Run) -> dict[str, Any]:
    """Stop the load, analyse the records, check the bounds, write summary.json. From here on
    the stop conditions no longer interrupt anything."""
    run.begin_finishing()
    stop_load(run)
    look_for_orphans(run)
    run.writer.close()
    if run.load is not None and run.settings.load.workers > 1:
        rec.order_by_send_time(run.records_path)  # the workers' lines came as they finished: now in send order
    records = rec.read(run.records_path)
    s = run.settings
    summary = summary_mod.derive(records, definitions(s), s.bounds, s.bounds_source, run.stop_reason)
    results = summary["bounds"]["results"]
    summary["experiment"] = run.experiment_title
    summary["scope"] = s.scope
    summary["app"] = run.app
    summary["cluster"] = run.backend.describe()
    summary["recovery_window"] = run.recovery_window
    summary["baseline_gate"] = gate.summary_field(run.baseline_gate)
    if run.rate_from is not None:
        summary["rate_from"] = run.rate_from  # the rate as a share of a measured capacity (chaos.load.utilization)
    # app and cluster are in the summary already; the report adds them to the environment
    summary["environment"] = {**environment.capture(run.backend.topology_doc()),
                              "load": records.header.get("load"), "routing": records.header.get("routing"),
                              "front_door": _quietly(lambda: run.backend.front_door()),
                              "serve": _quietly(lambda: run.backend.graceful_shutdown())}
    # what the engines resolved and the router, from the responses' headers; the sessions' KV footprint
    summary["environment"].update(served.environment(records.requests, s.load))
    run.summary, run.bound_results = summary, results
    write_json(run.out_dir / "summary.json", summary)
    log_figures(summary, results, run.stop_reason)
    return summary


def look_for_orphans(run: Run) -> None:
    """The orphan check's end (:meth:`chaos.system.orphan_watch.OrphanWatch.conclude`), before the records close: each
    followed fault's ``orphans`` on its timeline, waiting at most the bound (``max_orphan_s``, else 30 s) for an
    engine of a replica gone just before. A failure is said, not raised: the figure is then unmeasurable."""
    if run.orphans is None:
        return
    bound = run.settings.bounds.get("max_orphan_s", orphan_watch.DEFAULT_BOUND_S)
    try:
        for o in run.orphans.conclude(float(bound)):
            if o["status"] != orphan_watch.FREED:
                log(f"orphan check: {o['status']}: {o['why']}")
    except Exception as e:  # noqa: BLE001 - the summary is still owed
        log(f"orphan check failed ({type(e).__name__}: {e}): its figures are unmeasurable")


def _quietly(read: Callable[[], Any]) -> Any:
    """What a backend says about itself for the environment record; why not, when it cannot."""
    try:
        return read()
    except (AssertionError, AttributeError, TypeError):
        raise  # a defect (a backend without the interface, a wrong call), not the cluster's answer
    except Exception as e:  # noqa: BLE001 - the environment never costs the run its summary
        return {"unknown": f"{type(e).__name__}: {e}"[:200]}


def log_figures(summary: dict[str, Any], results: list[dict[str, Any]], stop_reason: str | None) -> None:
    """The load as sent, one line per fault, then the verdict on the bounds."""
    a = summary.get("arrivals") or {}
    if a.get("sent"):
        log(f"sent {a['sent']} requests at {a['rate_rps']} req/s, inter-arrival CV {a['interarrival_cv']}"
            + (f", per worker {a['per_worker']}" if len(a.get("per_worker") or {}) > 1 else "")
            + (f", {a['clipped']} clipped to max_model_len" if a.get("clipped") else ""))
    for f in summary["faults"]:
        e = f.get("effect") or {}
        log(f"{f['scope']:<9} {f['target']:<12} effect   " + (
            f"verified, in effect {e['time_to_effect_s']} s after the injection ("
            + "; ".join(c["check"] for c in e["checks"]) + ")" if e.get("verified") else
            "NOT VERIFIED: " + "; ".join(f"{c['check']}: {c['seen']}" for c in e.get("checks", []) if not c["ok"])
            if e else "not checked (no proof recorded)"))
        for name in ("affected", "service"):
            p = f[name]
            log(f"{f['scope']:<9} {f['target']:<12} {name:<8} failed {p['failed_total']:>4}/{p['requests']:<5} "
                f"impact {p['time_to_impact_s']}  detect {p['time_to_detect_s']}  "
                f"first success {p['time_to_first_success_s']}  steady {p['time_to_steady_state_s']}  "
                f"relapses {p['relapses']}")
        cp, cap = f["control_plane"], f["capacity"]
        log(f"{'':<22} control plane outage {cp['outage_s']} s (lost at {cp['time_to_loss_s']}, restored at "
            f"{cp['time_to_restored_s']}); capacity min {cap['min_replicas']}/{cap['target_replicas']} restored at "
            f"{cap['time_to_restored_s']}; resolution {f['resolution_s']} s / {cp['resolution_s']} s")
    failing = bounds.describe_failures(results)
    if summary["bounds"]["all_met"] is None and not failing and not stop_reason:
        log("no bounds stated: nothing checked")
        return
    log("bounds MET" if summary["bounds"]["all_met"] else f"bounds NOT MET: {'; '.join(failing) or stop_reason}")


def close(run: Run) -> None:
    """Close the records and the exporter (:attr:`Run.closed`)."""
    run.begin_finishing()
    try:
        if run.sampler is not None:
            run.sampler.stop()
        if run.orphans is not None:
            run.orphans.stop()
        run.writer.close()
        if run.exporter is not None:
            run.exporter.close()
    finally:
        run.closed = True


def heal_injected(run: Run, timeout_s: float = 240.0) -> dict[str, Any]:
    """Every experiment's rollback, and the run's own when Chaos Toolkit played none (plain ``chaos
    run`` interrupted by a stop condition): heal exactly the faults this run injected and has not
    healed (:func:`chaos.scopes.faults.heal`; those that healed themselves: wait for health), then, as
    after any fault, redeploy the app if the cluster lost it (a head restarted without GCS fault
    tolerance) or lost its placement (Serve does not move replicas back). Nothing injected:
    nothing is touched."""
    try:
        done = faults.heal(run.backend, run.marker, timeout=timeout_s)
        if run.marker.attempted:  # a fault healed by itself may still have cost the app (no GCS FT) or its placement
            o = run.options
            done["redeployed"] = provision.redeploy_if_gone(run.backend, app=o.app, overrides=run.settings.app,
                                                            model_path=o.model_path, timeout_s=o.deploy_timeout_s,
                                                            log=log)
    except Exception as e:
        run.heal_error = f"{type(e).__name__}: {e}"[:300]  # the run's end tries once more; else its verdict is ERROR
        raise
    run.rolled_back, run.heal_error = True, None
    return done


def heal_quietly(run: Run) -> None:
    """Heal what the run injected and nothing healed yet (a stop condition ended the method, or Chaos
    Toolkit played no rollback); a heal that fails is said, not raised: the records and the verdict
    are still owed."""
    if not run.marker.attempted or run.rolled_back:
        return
    log("no rollback healed this run's faults: healing them")
    try:
        heal_injected(run)
    except Exception as e:  # noqa: BLE001
        log(f"could not heal the run's faults ({type(e).__name__}: {e}); `availproof recover` restores the cluster")


def learnt_at_heal(run: Run) -> None:
    """What each fault's heal learnt after the records closed (a rollback's heal marks come after them: a wedge's
    look at its end, a device plugin's restore) into the summary's ``learnt_at_heal`` (fault id -> the keys of its
    detail the records did not carry, and its effect when the heal found the proof lost: :func:`chaos.core.learnt.
    learnt`); such an effect replaces the fault's (:func:`chaos.core.learnt.apply_learnt`: the verdict sees it)."""
    if run.summary is None or run.marker is None:
        return
    found = {}
    for f in run.summary.get("faults") or []:
        source = run.marker.attempted.get(f.get("fault_id"))
        if source is not None:
            new = learnt.learnt(f.get("detail") or {}, faults.detail_of(source))
            if new:
                found[f["fault_id"]] = new
    if found:
        run.summary["learnt_at_heal"] = found
        learnt.apply_learnt(run.summary)


def conclude(run: Run, journal: dict[str, Any] | None) -> dict[str, Any]:
    """After the experiment: the one verdict (:mod:`chaos.core.verdict`) from the summary and the final
    journal, written into ``summary.json`` (a write that fails: the verdict is ERROR, saying so), with what the
    heal learnt (:func:`learnt_at_heal`)."""
    learnt_at_heal(run)

    def decide() -> dict[str, Any]:
        run.verdict = verdict_mod.decide(run.summary, journal, run_error=run.error, heal_error=run.heal_error)
        if run.summary is not None:
            run.summary["verdict"] = run.verdict
        return run.verdict

    decide()
    if run.summary is not None and attempt(run, "writing summary.json",
                                           lambda: write_json(run.out_dir / "summary.json", run.summary)) is False:
        decide()
    log(f"verdict: {run.verdict['word']}" + (f" ({'; '.join(run.verdict['reasons'])})" if run.verdict["reasons"] else ""))
    return run.verdict


def end(run: Run, journal: dict[str, Any] | None) -> dict[str, Any]:
    """The end of every run, however the experiment ended: what is still injected healed, the
    summary derived (if the method did not get to it), the run closed, the verdict decided. Each step
    is guarded (:func:`attempt`): one that fails makes the verdict ERROR with its reason, and the end goes on."""
    attempt(run, "healing the run's faults", lambda: heal_quietly(run))
    if run.summary is None:
        attempt(run, "the analysis", lambda: finish(run))
    attempt(run, "closing the run", lambda: close(run))
    return conclude(run, journal)


def failed(run: Run, what: str, e: BaseException) -> str:
    """A step of the run failed: recorded on the run (the first one: its verdict is ERROR with it) and said."""
    error = f"{what}: {type(e).__name__}: {e}"[:300]
    log(f"error: {error}")
    if run.error is None:
        run.error = error
    return error


def attempt(run: Run, what: str, step: Callable[[], Any]) -> bool:
    """One step of a run's end: True when it went through; False when it failed (:func:`failed`)."""
    try:
        step()
    except Exception as e:  # noqa: BLE001 - every step of the end is owed its turn, and the verdict its reason
        failed(run, what, e)
        return False
    return True
