"""One experiment run, start to end: the core of the rig (no Chaos Toolkit here).

One public function per step; a driver calls them in this order::

    run = open_run(experiment, options)   # the system ready (provision + deploy), records open
    start_load(run)                        # load and stop conditions on; warm-up and baseline waited out,
                                           #   the baseline judged (chaos.baseline_gate: unsteady, no method)
    ...                                    # the method: faults through run.backend, marks through run.marker
    keep_load_for_recovery(run)            # the recovery window, load still on
    finish(run)                            # load off; analyse, check the bounds, write summary.json
    close(run)                             # records and exporter closed; no run in progress

:mod:`chaos.ctk.control` is the driver for Chaos Toolkit (its controls call these steps);
:func:`current` is the run in progress in this process, where the Chaos Toolkit actions and
probes find the backend and the marker.

Stop conditions (as AWS FIS has them): the :class:`Guard` thread watches the failure ratio
(``stop_when``: ``max_failed_ratio`` for ``for_s`` seconds) and the wall clock
(``max_wall_s``) and calls :meth:`Run.stop`. The reason goes in the summary (the run is then
judged violated) and the driver's ``on_stop`` interrupts the method; a stop that the driver
did not take is raised as :class:`Stopped` by the next wait of this module.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from chaos import analysis, bounds, environment, faults, metrics, provision, records as rec, summary as summary_mod
from chaos import experiment as exp_mod
from chaos import baseline_gate as gate, plan, utilization
from chaos import verdict as verdict_mod
from chaos.faults import Marker
from chaos.options import Options
from chaos.backends import base
from chaos.backends.base import Backend
from chaos.errors import SetupError, UsageError
from chaos.load._transport import LeanTransport
from chaos.load import served
from chaos.load.harness import LoadRun
from chaos.sampler import Sampler
from chaos.load.workload import Target


def log(msg: str) -> None:
    print(f"availproof: {msg}", flush=True)


class Stopped(Exception):
    """A stop condition tripped while this module waited; the driver interrupts its method."""


@dataclass
class Run:
    """One experiment run in progress."""

    experiment_title: str
    settings: exp_mod.Settings
    options: Options
    out_dir: Path
    backend: Backend
    events: rec.Events
    writer: rec.RecordWriter
    marker: Marker
    load: LoadRun | None = None
    sampler: Sampler | None = None
    summary: dict[str, Any] | None = None
    bound_results: list[dict[str, Any]] | None = None
    started_mono: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None
    exporter: Any = None
    run_id: str = ""  # the backend acts under it (KubeRay: cordons and helpers carry it)
    # who drives the Chaos Toolkit call: "availproof" (the runner opened the run around it) or
    # "chaostoolkit" (plain `chaos run`: the control opened it)
    driver: str = "chaostoolkit"
    verdict: dict[str, Any] | None = None  # chaos.verdict, decided once after the experiment
    recovery_window: dict[str, Any] | None = None  # how long the recovery window was (keep_load_for_recovery)
    rate_from: dict[str, Any] | None = None  # the load's rate as a share of a measured capacity (chaos.utilization)
    rolled_back: bool = False  # heal_injected succeeded (the rollback, or the run's own)
    heal_error: str | None = None  # the last heal that failed (verdict ERROR: the run's faults not healed)
    error: str | None = None  # a step of the lifecycle that failed (start_load, finish: verdict ERROR)
    interrupted: bool = False  # Ctrl-C or SIGTERM (the runner's handler): no recovery window, heal at once
    baseline_gate: dict[str, Any] | None = None  # the baseline's steady state, judged before the method
    header_extra: dict[str, Any] | None = None  # what a driver adds to the run header (a soak: its schedule)
    # The driver's way to interrupt its method, called by the Guard's thread with the lock held;
    # True when it did (else the stop stays pending for take_stop()).
    on_stop: Callable[[str], bool] | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _stop_pending: bool = False
    _finishing: bool = False

    @property
    def app(self) -> str:
        return self.options.app

    @property
    def records_path(self) -> Path:
        return self.out_dir / "records.ndjson"

    def stop(self, reason: str) -> bool:
        """A stop condition tripped: record ``reason`` and interrupt the method (once; never once finishing)."""
        with self.lock:
            if self.stop_reason is not None or self._finishing:
                return False
            self.stop_reason = reason
            self.writer.write({"kind": "stop", "t_ns": rec.now_ns(), "reason": reason})  # the records say it too
            self._stop_pending = True  # until the driver says it interrupted the method
            try:
                log(f"STOP CONDITION: {reason}: aborting the method and rolling back")
                if self.on_stop is not None and self.on_stop(reason):
                    self._stop_pending = False
            except Exception as e:  # noqa: BLE001 - the stop stays pending for the driver's next hook or wait
                log(f"stop condition: the driver's interrupter failed ({type(e).__name__}: {e}); "
                    "the stop ends the method at its next step")
            return True

    def measuring(self) -> bool:
        """The load is on and records are taken: the only time a fault may be injected."""
        return (not self._finishing and self.load is not None and self.load.running
                and self.stop_reason is None and not gate.blocks(self.baseline_gate))

    def take_stop(self) -> str | None:
        """The stop reason if a stop is pending (nobody interrupted the method for it yet); then no longer pending."""
        with self.lock:
            if not self._stop_pending:
                return None
            self._stop_pending = False
            return self.stop_reason


_current: Run | None = None


def current() -> Run | None:
    """The run in progress in this process, if any."""
    return _current


def _set_current(run: Run | None) -> None:
    global _current
    _current = run


def default_out_dir(title: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40]
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}"


# ---------------------------------------------------------------- the steps
def open_run(experiment: dict[str, Any], options: Options) -> Run:
    """Make sure the system is up and the app deployed (idempotent), open the records file and
    the metrics exporter; the run becomes :func:`current`."""
    if current() is not None:
        raise UsageError("a run is already open in this process")
    title = experiment.get("title", "experiment")
    settings = exp_mod.settings(experiment, source=title, app=options.app)
    if options.front:
        settings.front = options.front
    # load.utilization: the rate as a share of a measured capacity, refused in one line before anything starts
    rate_from = utilization.derive(settings.load, options.app, options.capacity, options.experiment_file,
                                   source=str(options.experiment_file or title))
    if rate_from is not None:
        utilization.apply(settings.load, rate_from)
    # what the experiment asks of the backend, and the secrets it needs: refused before anything starts
    provision.check_capabilities(options.backend, settings)
    provision.front_token(settings)
    client_headers(settings)
    run_id = uuid.uuid4().hex[:12]
    backend = provision.ensure_system(settings, options, log=log, run_id=run_id,  # prepared for the run
                                      faults=plan.faults_of(experiment))
    missing = base.missing_members(backend)
    if missing:
        raise SetupError(f"backend {type(backend).__name__} lacks {', '.join(missing)} of the interface "
                         "(chaos.backends.base.Backend)")
    out = options.out_dir or default_out_dir(title)
    out.mkdir(parents=True, exist_ok=True)
    events = rec.Events()
    writer = rec.RecordWriter(out / "records.ndjson").attach(events)
    run = Run(experiment_title=experiment.get("title", ""), settings=settings, options=options, out_dir=out, run_id=run_id,
              backend=backend, events=events, writer=writer, marker=Marker(events, log=log), rate_from=rate_from)
    _set_current(run)
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
    warm-up and the baseline, then judge the baseline (:func:`chaos.baseline_gate.check`). Raises
    :class:`Stopped` when a stop condition trips meanwhile, :class:`chaos.baseline_gate.Unsteady` when
    the baseline is out of steady state (nothing may be injected)."""
    s = run.settings
    shape = s.load
    shape.model = run.options.model or shape.model
    run.sampler = Sampler(run.backend.observe, run.events, period_s=s.sample_period_s)
    run.sampler.start()
    header = summary_mod.header_block(run.experiment_title, s.scope, definitions(s), s.bounds, s.bounds_source,
                                      run.app)
    if run.rate_from is not None:
        header["rate_from"] = run.rate_from
    header.update(run.header_extra or {})
    run.load = new_load(run, shape, header).start()
    Guard(run).start()
    log(f"load on: {shape.mode} loop, {shape.rate if shape.mode == 'open' else shape.concurrency} "
        f"{'req/s' if shape.mode == 'open' else 'in flight'}"
        f"{f' ({shape.utilization:g} of the capacity measured)' if run.rate_from else ''}"
        f" over {len(run.load.targets)} targets"
        f"{f' from {shape.workers} worker processes' if shape.workers > 1 else ''}; "
        f"warm-up {shape.warmup_s:.0f} s + baseline {s.baseline_s:.0f} s before the method")
    wait(run, shape.warmup_s + s.baseline_s)
    gate.check(run, log=log)


def new_load(run: Run, shape, header: dict[str, Any]):
    """The run's load harness for ``shape`` (not started): one :class:`LoadRun` in this process, or
    ``workers`` harness processes (:class:`chaos.load.workers.WorkerPool`), sending to the run's targets
    with the run's client settings; ``header``: what the records' run header adds."""
    s = run.settings
    # KubeRay with kubernetes.load.in_cluster: the workers are pods of a Job, off the cluster's Ray nodes
    # (chaos.backends.kube_load_pool); they send to the serve Service by its in-cluster name
    in_cluster = getattr(run.backend, "load_pool", lambda *a, **k: None)(
        shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts, header_extra=header,
        headers=client_headers(s))
    if in_cluster is not None:
        return in_cluster
    # Node addresses inside the cluster's own network namespaces are hosts the rig itself created.
    own = run.backend.own_hosts()
    targets = load_targets(run)
    if shape.workers > 1:  # N harness processes, one schedule dealt to them (chaos.load.workers)
        from chaos.load.workers import WorkerPool

        return WorkerPool(targets, shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts + own,
                          header_extra=header, headers=client_headers(s), ca_file=client_ca(run, targets),
                          records_dir=run.out_dir)
    return LoadRun(targets, shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts + own,
                   header_extra=header, transport=client_transport(run, targets), headers=client_headers(s))


def client_transport(run: Run, targets: list[Target]) -> LeanTransport | None:
    """The client's transport: for an https front door, trusting the experiment's ``ca_bundle``, else
    the run's own CA (the rig's balancer terminating TLS), else the system's."""
    if not any(t.url.startswith("https://") for t in targets):
        return None
    import ssl

    ca = client_ca(run, targets)
    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as e:
        raise UsageError(f"ca_bundle {ca}: cannot be loaded ({e})") from None
    return LeanTransport(ssl_context=ctx)


def client_ca(run: Run, targets: list[Target]) -> str | None:
    """The CA file the client trusts for an https front door (None: the system's, or plain http)."""
    if not any(t.url.startswith("https://") for t in targets):
        return None
    return run.settings.ca_bundle or (run.backend.front_door() or {}).get("ca_bundle")


def client_headers(s: exp_mod.Settings) -> dict[str, str]:
    """``Authorization: Bearer`` from the environment variable the experiment names (``auth_token_env``,
    else the front door's ``token_env``); the token is never written anywhere."""
    import os

    from chaos.frontdoor import FrontSettings

    name = s.auth_token_env or FrontSettings.from_dict(s.front_door).token_env
    if not name:
        return {}
    token = os.environ.get(name)
    if not token:
        raise UsageError(f"the client's bearer token: set ${name}")
    return {"Authorization": f"Bearer {token}"}


def keep_load_for_recovery(run: Run, poll_s: float = 2.0) -> None:
    """After the method: the load stays on for the recovery window, or until every plane has been
    back for the settle time (:mod:`chaos.settle`; ``recovery_settle_s``, 0: the whole window).
    Raises :class:`Stopped` when a stop condition trips meanwhile. The window as it was is recorded
    in the summary (``recovery_window``)."""
    s = run.settings
    planned, settle = s.recovery_window_s, s.recovery_settle_s
    log(f"method done; keeping the load on for the {planned:.0f} s recovery window"
        + (f" (or until every plane has been back for {settle:.0f} s)" if settle else ""))
    start = time.monotonic()
    end = start + planned
    run.recovery_window = {"planned_s": planned, "settle_s": settle, "length_s": None, "ended_early": False,
                           "recovered_at_s": None}
    while time.monotonic() < end:
        wait(run, min(poll_s, end - time.monotonic()))
        if run.load is None or not run.load.running:
            break
        at = _settled(run) if settle else None
        if at is not None:
            run.recovery_window.update(ended_early=True, recovered_at_s=round(at, 3))
            log(f"every plane back {at:.1f} s after the last injection and steady for {settle:.0f} s: "
                f"the recovery window ends after {time.monotonic() - start:.0f} s of {planned:.0f}")
            break
    run.recovery_window["length_s"] = round(time.monotonic() - start, 3)


def _settled(run: Run) -> float | None:
    """:func:`chaos.settle.settled` on the records taken so far (None when they cannot be read)."""
    from chaos import settle

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
        run.load.join(timeout=run.settings.load.timeout_s + 30)
    if run.sampler is not None:
        run.sampler.stop()


def finish(run: Run) -> dict[str, Any]:
    """Stop the load, analyse the records, check the bounds, write summary.json. From here on
    the stop conditions no longer interrupt anything."""
    with run.lock:
        run._finishing = True
        run._stop_pending = False
    stop_load(run)
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
        summary["rate_from"] = run.rate_from  # the rate as a share of a measured capacity (chaos.utilization)
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
    """Close the records and the exporter; no run is in progress any more."""
    with run.lock:
        run._finishing = True
        run._stop_pending = False
    try:
        if run.sampler is not None:
            run.sampler.stop()
        run.writer.close()
        if run.exporter is not None:
            run.exporter.close()
    finally:
        if current() is run:
            _set_current(None)


def heal_injected(run: Run, timeout_s: float = 240.0) -> dict[str, Any]:
    """Every experiment's rollback, and the run's own when Chaos Toolkit played none (plain ``chaos
    run`` interrupted by a stop condition): heal exactly the faults this run injected and has not
    healed (:func:`chaos.faults.heal`; those that healed themselves: wait for health), then, as
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


def conclude(run: Run, journal: dict[str, Any] | None) -> dict[str, Any]:
    """After the experiment: the one verdict (:mod:`chaos.verdict`) from the summary and the final
    journal, written into ``summary.json``."""
    run.verdict = verdict_mod.decide(run.summary, journal, run_error=run.error, heal_error=run.heal_error)
    if run.summary is not None:
        run.summary["verdict"] = run.verdict
        write_json(run.out_dir / "summary.json", run.summary)
    log(f"verdict: {run.verdict['word']}" + (f" ({'; '.join(run.verdict['reasons'])})" if run.verdict["reasons"] else ""))
    return run.verdict


def end(run: Run, journal: dict[str, Any] | None) -> dict[str, Any]:
    """The end of every run, however the experiment ended: what is still injected healed, the
    summary derived (if the method did not get to it), the verdict decided, the run closed."""
    try:
        heal_quietly(run)
        if run.summary is None:
            finish(run)
        return conclude(run, journal)
    finally:
        close(run)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


# ---------------------------------------------------------------- stop conditions
class StopConditions:
    """Whether to stop, from what was seen: the failed fraction of the measured requests of the
    last ``for_s`` seconds above ``max_failed_ratio`` (at least 5 of them) for ``for_s`` seconds
    on end, or ``max_wall_s`` past ``started``. Times are the caller's clock (seconds)."""

    MIN_REQUESTS = 5

    def __init__(self, max_failed_ratio: float | None, for_s: float, max_wall_s: float, started: float):
        self.max_failed_ratio, self.for_s, self.max_wall_s, self.started = max_failed_ratio, for_s, max_wall_s, started
        self._seen: deque[tuple[float, bool]] = deque()
        self._lock = threading.Lock()
        self._above_since: float | None = None

    @classmethod
    def of(cls, settings: exp_mod.Settings, started: float) -> StopConditions:
        return cls(settings.stop_when.get("max_failed_ratio"), float(settings.stop_when.get("for_s", 10.0)),
                   settings.max_wall_s, started)

    def seen(self, t: float, ok: bool) -> None:
        """A measured request ended at ``t`` (called from the harness' thread)."""
        with self._lock:
            self._seen.append((t, ok))

    def check(self, now: float) -> str | None:
        """The reason to stop now, or None."""
        if now - self.started > self.max_wall_s:
            return f"wall-clock limit of {self.max_wall_s:.0f} s exceeded"
        ratio = self.max_failed_ratio
        if ratio is None:
            return None
        with self._lock:
            while self._seen and now - self._seen[0][0] > self.for_s:
                self._seen.popleft()
            n, failed = len(self._seen), sum(1 for _, ok in self._seen if not ok)
        if n >= self.MIN_REQUESTS:
            fraction = failed / n
            if fraction > ratio:
                if self._above_since is None:
                    self._above_since = now
                if now - self._above_since >= self.for_s:
                    return f"failure ratio {fraction:.2f} above {ratio} for {self.for_s:.0f} s"
            else:
                self._above_since = None
        return None


class Guard(threading.Thread):
    """The stop conditions' watch: every ``poll_s`` until the run stops or finishes,
    :meth:`StopConditions.check`; when it says stop, :meth:`Run.stop` (which interrupts the
    method through the driver). It watches whether or not the load still runs: a harness that
    ended early (or died) must not take the wall-clock limit with it."""

    def __init__(self, run: Run, poll_s: float = 0.5, clock: Callable[[], float] = time.monotonic):
        super().__init__(name="availproof-guard", daemon=True)
        self.run_, self.poll_s, self.clock = run, poll_s, clock
        self.conditions = StopConditions.of(run.settings, run.started_mono)
        run.events.request_done.append(self._seen)

    def _seen(self, r: rec.RequestRecord) -> None:
        if r.phase == rec.MEASURE:
            self.conditions.seen(self.clock(), r.ok)

    def done(self) -> bool:
        """Nothing left to watch: the run stopped, or it is finishing."""
        run = self.run_
        return run.stop_reason is not None or run._finishing

    def poll(self) -> bool:
        """One check of the stop conditions (the thread's step); True when nothing is left to watch."""
        if self.done():
            return True
        reason = self.conditions.check(self.clock())
        if reason is not None:
            self.run_.stop(reason)
            return True
        return False

    def run(self) -> None:
        while not self.done():
            time.sleep(self.poll_s)
            try:
                if self.poll():
                    return
            except Exception as e:  # noqa: BLE001 - a watch that dies silently is no stop condition
                log(f"stop conditions: check failed ({type(e).__name__}: {e}); still watching")
