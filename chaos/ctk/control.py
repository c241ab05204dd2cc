"""The Chaos Toolkit control that turns an experiment into a measurement.

- before the experiment: make sure the cluster is up and the app deployed (idempotent), open
  the records file;
- before the method: start the load harness, wait out the warm-up and the baseline;
- after the method: keep the load on for the recovery window, stop it, analyse the records,
  check the bounds, write ``summary.json``;
- after the experiment: put the summary and the bound results into the journal.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from chaos import analysis, bounds, deploy, environment, experiment as exp_mod, metrics, records as rec
from chaos.backends.local import LocalCluster
from chaos.backends.local.backend import LocalBackend
from chaos.ctk import session
from chaos.ctk.session import ActiveRun, log
from chaos.errors import SetupError
from chaos.faults import Marker
from chaos.harness import LoadRun
from chaos.workload import Target
from serve_apps.config import AppSpec, LLMOptions


def _app_spec(app: str, cluster: LocalCluster, overrides: dict[str, Any], configuration: dict) -> AppSpec:
    spec = AppSpec(app=app, zones=cluster.topology.zones,
                   replicas_per_zone=int(overrides.get("replicas_per_zone", 1)))
    for key in ("health_check_period_s", "health_check_timeout_s", "max_ongoing_requests"):
        if key in overrides:
            setattr(spec, key, overrides[key])
    if app == "llm":
        from serve_apps import checkpoint

        path = configuration.get("availproof_model_path") or ""
        if path:
            checkpoint.check(path)
        else:
            log(f"building the tiny offline checkpoint in {checkpoint.DEFAULT_DIR} (if not built yet)")
            path = str(checkpoint.build(checkpoint.DEFAULT_DIR))
        spec.llm = LLMOptions(model_path=str(path))
        spec.max_ongoing_requests = min(spec.max_ongoing_requests, 16)
    return spec


def _deploy_timeout(configuration: dict) -> float:
    return float(configuration.get("availproof_deploy_timeout_s", 600))


def ensure_system(settings: exp_mod.Settings, configuration: dict):
    """The backend the experiment runs on, ready: local (cluster up, app deployed) or KubeRay."""
    if session.backend_kind(configuration) == "kuberay":
        return ensure_kuberay(settings, configuration)
    return ensure_local(settings, configuration)


def ensure_kuberay(settings: exp_mod.Settings, configuration: dict):
    """Attach to the KubeRay cluster named in the experiment/CLI; the RayService deploys the app."""
    if not settings.gcs_fault_tolerance:
        raise SetupError("this experiment needs a cluster without GCS fault tolerance: the KubeRay manifests "
                         "always set gcsFaultToleranceOptions (run it on the local backend)")
    if settings.targets != "workers":
        raise SetupError("on KubeRay the load goes to the serve Service (targets: workers), not to the head")
    backend = session.kuberay_backend(configuration, settings.kubernetes)
    log(f"KubeRay: RayCluster {backend.cluster} in {backend.namespace} (context {backend.context}), "
        f"blast radius {backend.max_pods} pod(s)")
    backend.wait_healthy(timeout=_deploy_timeout(configuration))
    _wait_app_running(backend, _deploy_timeout(configuration))
    return backend


def _wait_app_running(backend, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while backend.app_status() != "RUNNING":
        if time.monotonic() > deadline:
            raise SetupError(f"the Serve app on {backend.cluster} is not RUNNING after {timeout:.0f} s "
                             f"(status {backend.app_status()})")
        time.sleep(3)


def ensure_local(settings: exp_mod.Settings, configuration: dict) -> LocalBackend:
    """Bring the cluster up if needed and deploy the app unless it is already RUNNING."""
    from chaos import topology

    cdir = session.cluster_dir(configuration)
    cluster = LocalCluster.find(cdir, log=log)
    wanted = topology.load(settings.topology)
    netns_mode = settings.network == "netns"
    if cluster is not None and cluster.running():
        have, need = _cluster_kind(cluster.topology.name, cluster.state.gcs_fault_tolerance, cluster.state.netns_mode), \
            _cluster_kind(wanted.name, settings.gcs_fault_tolerance, netns_mode)
        if have != need and configuration.get("availproof_replace_cluster"):
            log("the running cluster differs from what this experiment needs: replacing it")
            cluster.down()
            cluster = None
        elif have != need:
            raise SetupError(f"the running cluster ({have}) is not what the experiment needs ({need}): "
                             f"run `availproof cluster down` first")
    if cluster is None or not cluster.running():
        cluster = LocalCluster.up(wanted, cdir, log=log, gcs_fault_tolerance=settings.gcs_fault_tolerance,
                                  netns_mode=netns_mode)
    cluster.wait_healthy(timeout=180)
    app = configuration.get("availproof_app", "stream")
    spec = _app_spec(app, cluster, settings.app, configuration)
    if deploy.app_status(cluster.state.dashboard_url) == "RUNNING" and deploy.deployed_app(cluster) == app:
        deploy.wait_running(cluster, spec, timeout=30)  # placement check only
    else:
        deploy.deploy(cluster, spec, timeout=_deploy_timeout(configuration), log=log)
    return LocalBackend(cluster)


def _cluster_kind(topology_name: str, gcs_ft: bool, netns_mode: bool) -> str:
    return (f"{topology_name}, GCS fault tolerance {'on' if gcs_ft else 'off'}, "
            f"{'per-zone network namespaces' if netns_mode else 'loopback addresses'}")


def redeploy_if_gone(backend, configuration: dict) -> bool:
    """Deploy the app again when it is not there; wait until every zone serves again.
    On KubeRay the RayService controller redeploys: wait for the app to be RUNNING."""
    if backend.name == "kuberay":
        _wait_app_running(backend, _deploy_timeout(configuration))
        return False
    cluster = backend.cluster
    run = session.current()
    overrides = run.settings.app if run else {}
    spec = _app_spec(configuration.get("availproof_app", "stream"), cluster, overrides, configuration)
    status = deploy.app_status(cluster.state.dashboard_url)
    timeout = _deploy_timeout(configuration)
    if status is None:
        log("the Serve app is gone: deploying it again")
        deploy.deploy(cluster, spec, timeout=timeout, log=log)
        return True
    deploy.wait_running(cluster, spec, timeout=timeout, log=log)
    return False


def before_experiment_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    configuration = configuration or {}
    settings = exp_mod.settings(context, source=context.get("title", "experiment"),
                                app=configuration.get("availproof_app", "stream"))
    backend = ensure_system(settings, configuration)
    out = session.out_dir(configuration, context.get("title", "experiment"))
    out.mkdir(parents=True, exist_ok=True)
    events = rec.Events()
    writer = rec.RecordWriter(out / "records.ndjson").attach(events)
    run = ActiveRun(experiment_title=context.get("title", ""), settings=settings, out_dir=out, backend=backend,
                    app=configuration.get("availproof_app", "stream"), events=events, writer=writer,
                    marker=Marker(events, log=log))
    session.set_current(run)
    log(f"records -> {run.records_path}")
    port = metrics.port_from_env()
    if port:
        exporter = metrics.Exporter().attach(events)
        try:
            log(f"metrics -> http://127.0.0.1:{exporter.serve(port)}/metrics")
            run.exporter = exporter
        except OSError as e:
            log(f"metrics exporter not started ({e}); set AVAILPROOF_METRICS_PORT to a free port")


def _targets(run: ActiveRun) -> list[Target]:
    b = run.backend
    rows = []
    if run.settings.targets in ("workers", "all"):
        rows += b.targets()
    if run.settings.targets in ("head", "all"):
        rows.append(b.head_target())
    return [Target(name, url, zone, region) for name, url, zone, region in rows]


def before_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    run = session.current()
    if run is None:
        return
    s = run.settings
    shape = s.load
    shape.model = (configuration or {}).get("availproof_model", shape.model)
    # Node addresses inside the cluster's own network namespaces are hosts the rig itself created.
    own = run.backend.own_hosts()
    run.load = LoadRun(_targets(run), shape, run.events, routing=s.routing, allow_hosts=s.allow_hosts + own).start()
    Guard(run).start()
    wait = shape.warmup_s + s.baseline_s
    log(f"load on: {shape.mode} loop, {shape.rate if shape.mode == 'open' else shape.concurrency} "
        f"{'req/s' if shape.mode == 'open' else 'in flight'} over {len(run.load.targets)} targets; "
        f"warm-up {shape.warmup_s:.0f} s + baseline {s.baseline_s:.0f} s before the method")
    _wait(run, wait)


class Guard(threading.Thread):
    """Stop conditions (like AWS FIS): abort the method, and so run the rollbacks, when the
    failure ratio stays above ``stop_when.max_failed_ratio`` for ``stop_when.for_s`` seconds,
    or when the experiment runs past ``max_wall_s``. Aborting is a SIGINT to this process,
    which Chaos Toolkit turns into an interrupted run with rollbacks."""

    def __init__(self, run: ActiveRun):
        super().__init__(name="availproof-guard", daemon=True)
        self.run_ = run
        self.window: list[tuple[float, bool]] = []
        run.events.request_done.append(self._seen)

    def _seen(self, r: rec.RequestRecord) -> None:
        if r.phase == rec.MEASURE:
            self.window.append((time.monotonic(), r.ok))

    def trip(self, reason: str) -> None:
        run = self.run_
        if run.stop_reason is None:
            run.stop_reason = reason
            log(f"STOP CONDITION: {reason}: aborting the method and rolling back")
            os.kill(os.getpid(), signal.SIGINT)

    def run(self) -> None:
        run = self.run_
        s = run.settings
        ratio = s.stop_when.get("max_failed_ratio")
        for_s = float(s.stop_when.get("for_s", 10.0))
        above_since = None
        while run.load is not None and run.load.running and run.stop_reason is None:
            time.sleep(0.5)
            now = time.monotonic()
            if now - run.started_mono > s.max_wall_s:
                self.trip(f"wall-clock limit of {s.max_wall_s:.0f} s exceeded")
                return
            if ratio is None:
                continue
            self.window = [(t, ok) for t, ok in self.window if now - t <= for_s]
            if len(self.window) >= 5:
                failed = sum(1 for _, ok in self.window if not ok) / len(self.window)
                if failed > ratio:
                    above_since = above_since or now
                    if now - above_since >= for_s:
                        self.trip(f"failure ratio {failed:.2f} above {ratio} for {for_s:.0f} s")
                        return
                else:
                    above_since = None


def _wait(run: ActiveRun, seconds: float) -> None:
    end = time.monotonic() + seconds
    last = 0.0
    while time.monotonic() < end and run.load is not None and run.load.running:
        time.sleep(min(0.25, max(0.0, end - time.monotonic())))
        if time.monotonic() - last >= 5:
            c = run.load.counts
            log(f"  t+{run.load.elapsed_s():5.0f} s  sent {c['sent']}  ok {c['ok']}  failed {c['failed']}")
            last = time.monotonic()


def after_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    run = session.current()
    if run is None or run.load is None:
        return
    log(f"method done; keeping the load on for the {run.settings.recovery_window_s:.0f} s recovery window")
    _wait(run, run.settings.recovery_window_s)
    finish(run)


def finish(run: ActiveRun) -> dict:
    """Stop the load, analyse the records, check the bounds, write summary.json."""
    if run.load is not None:
        run.load.stop()
        run.load.join(timeout=run.settings.load.timeout_s + 30)
    run.writer.close()
    records = rec.read(run.records_path)
    summary = analysis.analyse(records, run.settings.steady_state, run.settings.slo)
    results = bounds.check(summary, run.settings.bounds)
    summary["experiment"] = run.experiment_title
    summary["scope"] = run.settings.scope
    summary["app"] = run.app
    summary["cluster"] = run.backend.describe()
    summary["bounds"] = {"stated": run.settings.bounds, "source": run.settings.bounds_source,
                         "results": results, "all_met": bounds.all_met(results) and run.stop_reason is None}
    summary["stop_reason"] = run.stop_reason
    # app and cluster are in the summary already; the report adds them to the environment
    summary["environment"] = {**environment.capture(run.backend.topology_doc()),
                              "load": records.header.get("load"), "routing": records.header.get("routing")}
    run.summary, run.bound_results = summary, results
    session.write_json(run.out_dir / "summary.json", summary)
    for f in summary["faults"]:
        log(f"{f['scope']:<9} {f['target']:<12} failed {f['failed']['total']:>4} "
            f"(mid-stream {f['failed']['mid_stream']})  detect {f['time_to_detect_s']}  "
            f"first success {f['time_to_first_success_s']}  steady {f['time_to_steady_state_s']}  "
            f"resolution {f['resolution_s']} s")
    violated = [f"{r['bound']}={r['value']} (limit {r['limit']})" for r in bounds.violated(results)]
    log("bounds MET" if summary["bounds"]["all_met"] else f"bounds VIOLATED: {', '.join(violated) or run.stop_reason}")
    return summary


def after_experiment_control(context: dict, state: dict | None = None, configuration: dict | None = None,
                             **kwargs) -> None:
    run = session.current()
    if run is None:
        return
    try:
        if run.summary is None:  # the method never ran to its end (interrupted, aborted)
            finish(run)
        if isinstance(state, dict):
            state["availproof"] = {"out_dir": str(run.out_dir), "summary": run.summary}
    finally:
        run.writer.close()
        if run.exporter is not None:
            run.exporter.close()
        session.set_current(None)
