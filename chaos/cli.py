"""`availproof`: argument parsing and wiring only; the work is done by the modules it calls.

Exit codes: 0 success, 1 a bound was violated, 2 a usage or set-up error (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

from chaos.errors import AvailproofError, SetupError, UsageError
from chaos.frontdoor import FRONTS


def _say(msg: str) -> None:
    print(f"availproof: {msg}", file=sys.stderr, flush=True)


def _fronts(text: str) -> list[str]:
    """``lb,direct`` -> ["lb", "direct"]; anything else is a usage error (argparse: one line, exit 2)."""
    import argparse

    out = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in out if t not in FRONTS]
    if not out or bad or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of {', '.join(FRONTS)}, each once")
    return out


def _cluster_dir(args) -> Path | None:
    return Path(args.cluster_dir) if getattr(args, "cluster_dir", None) else None


# ---------------------------------------------------------------- cluster
def cmd_cluster_up(args) -> int:
    from chaos import topology
    from chaos.backends.local import LocalCluster

    topo = topology.load(args.topology)
    cluster = LocalCluster.up(topo, _cluster_dir(args), log=_say,
                              gcs_fault_tolerance=False if args.no_gcs_ft else None, netns_mode=args.netns)
    cluster.wait_healthy(timeout=120)
    print_status(cluster)
    return 0


def cmd_cluster_status(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.attach(_cluster_dir(args))
    print_status(cluster, replicas=not args.no_replicas)
    return 0


def cmd_cluster_down(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.find(_cluster_dir(args), log=_say)
    if cluster is None:
        _say("no local cluster is running: nothing to do")
        return 0
    cluster.down()
    return 0


def print_status(cluster, replicas: bool = True, out=sys.stdout) -> None:
    s = cluster.state
    gcs = "GCS fault tolerance on (Redis)" if s.gcs_fault_tolerance else "GCS fault tolerance OFF"
    net = f"  network namespaces on {s.bridge}" if s.netns_mode else ""
    print(f"cluster {s.cluster_id}  topology {s.topology.get('name')}  {gcs}{net}", file=out)
    if s.partitioned:
        print(f"  PARTITIONED: {', '.join(s.partitioned)}", file=out)
    print(f"  head GCS {s.gcs_address}  dashboard {s.dashboard_url}", file=out)
    redis = cluster.redis_status()
    print("  redis " + "  ".join(f"{k}={v}" for k, v in redis.items()), file=out)
    print(f"  {'NODE':<12} {'ROLE':<7} {'REGION':<12} {'ZONE':<10} {'ADDRESS':<16} {'PROCS':>5}  {'GCS':<8} SERVE", file=out)
    for n in cluster.status():
        print(f"  {n.name:<12} {n.role:<7} {n.region or '-':<12} {n.zone or '-':<10} {n.ip:<16} "
              f"{n.processes:>5}  {n.gcs_state:<8} :{n.serve_port}", file=out)
    if replicas:
        from chaos import placement

        try:
            rows = placement.replicas(cluster)
        except placement.PlacementUnknown:
            print("  replicas: unknown (the dashboard did not answer)", file=out)
            rows = []
        if rows:
            print(f"  {'APP':<10} {'DEPLOYMENT':<22} {'REPLICA':<12} {'STATE':<10} {'NODE':<10} {'ZONE':<8} REGION", file=out)
            for r in rows:
                print(f"  {r.app:<10} {r.deployment:<22} {r.replica_id[:12]:<12} {r.state:<10} "
                      f"{r.node or '?':<10} {r.zone or '?':<8} {r.region or '?'}", file=out)


# ---------------------------------------------------------------- deploy / run / suite
def cmd_deploy(args) -> int:
    from chaos import deploy
    from chaos.backends.local import LocalCluster
    from chaos.provision import app_spec
    from chaos.run import log

    cluster = LocalCluster.attach(_cluster_dir(args), log=_say)
    spec = app_spec(args.app, cluster, {"replicas_per_zone": args.replicas_per_zone}, args.model_path or "", log=log)
    deploy.deploy(cluster, spec, timeout=args.timeout, log=_say)
    print_status(cluster)
    return 0


def cmd_checkpoint(args) -> int:
    from serve_apps import checkpoint

    print(checkpoint.build(args.dir or checkpoint.DEFAULT_DIR, seed=args.seed))
    return 0


def _kube_flags(args) -> dict:
    return {"context": args.kube_context, "namespace": args.kube_namespace, "ray_cluster": args.ray_cluster,
            "serve_url": args.serve_url, "dashboard_url": args.dashboard_url, "max_pods": args.max_pods,
            "partition_method": args.partition_method,
            "allow_autoscaled_zone_loss": getattr(args, "allow_autoscaled_zone_loss", None),
            "load_in_cluster": getattr(args, "load_in_cluster", None), "load_image": getattr(args, "load_image", None)}


def _options(args, out: Path, front: str | None = None):
    """The run's options (:class:`chaos.options.Options`) from the flags."""
    from chaos.options import Options

    kw = {}
    if _cluster_dir(args):
        kw["cluster_dir"] = _cluster_dir(args)
    if getattr(args, "backend", "local") == "kuberay":
        kw["kubernetes"] = _kube_flags(args)
    return Options(app=args.app, out_dir=out, backend=getattr(args, "backend", "local"),
                   model_path=getattr(args, "model_path", None) or "",
                   replace_cluster=bool(getattr(args, "replace_cluster", False)),
                   front=front or (args.front if isinstance(getattr(args, "front", None), str) else None),
                   capacity=getattr(args, "capacity", None),
                   inject_anyway=bool(getattr(args, "inject_anyway", False)), **kw)


def _run_one(path: str, out: Path, args, front: str | None = None, first: bool = False) -> dict:
    """One experiment run. A set-up error is its result (ERROR, exit 2), so that the runs before it
    keep their JUnit and report; on the ``first`` run of a command nothing is kept yet: it is raised
    (one line, exit 2)."""
    from chaos import runner, verdict

    try:
        code, result = runner.run_experiment(path, out, options=_options(args, out, front))
    except AvailproofError as e:
        if first:
            raise
        _say(f"error: {e}")
        v = verdict.decide(None, setup_error=str(e))
        return {"experiment": str(path), "verdict": v["exit_code"], "verdict_detail": v, "error": str(e),
                "summary": None}
    result["verdict"] = code
    return result


def _default_out(name: str) -> Path:
    import time

    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"


@contextmanager
def _prometheus(args, out: Path):
    """With --prometheus: a real Prometheus server for the run, scraping the harness and Ray."""
    if not getattr(args, "prometheus", False):
        yield None
        return
    import os

    from chaos import metrics, prometheus
    from chaos.backends.local.cluster import default_cluster_dir

    server = prometheus.PrometheusServer(out / "prometheus", _cluster_dir(args) or default_cluster_dir(),
                                         metrics.port_from_env(), log=_say)
    try:
        server.start()
    except SetupError as e:
        if args.command != "demo":  # asked for explicitly: a set-up error
            raise
        _say(f"demo without Prometheus: {e}")
        yield None
        return
    os.environ["AVAILPROOF_PROMETHEUS_URL"] = server.url
    _say(f"Prometheus: {server.url}/graph (Grafana dashboard: {prometheus.DASHBOARD})")
    try:
        yield server
    finally:
        os.environ.pop("AVAILPROOF_PROMETHEUS_URL", None)
        server.stop()
        _say(f"Prometheus stopped; its data stays in {out / 'prometheus'}")


def _write_report(out: Path) -> None:
    """report.md/.html/.json beside the results; a failure here never changes the verdict."""
    from chaos.reports import report

    try:
        paths = report.write(out)
        _say(f"report: {paths['html']}")
    except Exception as e:  # noqa: BLE001 - the run's own outputs are already written
        _say(f"could not write the report of {out}: {e}")


def cmd_run(args) -> int:
    from chaos import runner, validate, verdict

    # one-line error on a bad file (or capacity file, for load.utilization), before anything starts
    rate_from = validate.run_inputs(args.experiment, args.app, args.capacity)
    if args.capacity and rate_from is None:
        _say(f"--capacity {args.capacity}: not used, {args.experiment} states no load.utilization "
             "(its rate is load.rate)")
    if getattr(args, "plan", False):
        return _print_plan(args)
    out = Path(args.out) if args.out else _default_out(Path(args.experiment).stem)
    results = []
    with _prometheus(args, out):
        for trial in range(1, args.trials + 1):
            trial_out = out if args.trials == 1 else out / f"trial-{trial}"
            _say(f"{args.experiment}: trial {trial}/{args.trials} -> {trial_out}")
            results.append(_run_one(args.experiment, trial_out, args, first=trial == 1))
    (out / "junit.xml").write_text(runner.junit_xml(results))
    _write_report(out)
    worst = max(r["verdict"] for r in results)
    for r in results:
        word = verdict.of_result(r)["word"]
        _say(f"{word}: {r['experiment']}" + (f" ({r['error']})" if r.get("error") else ""))
    return worst


def _print_plan(args) -> int:
    """``run --plan``: every object each fault of the experiment would touch, read from the cluster and
    changing nothing (:mod:`chaos.plan`); exit 2 when a guard of a fault would refuse it."""
    from chaos import plan

    header, rows = plan.for_experiment(args.experiment, _options(args, None), app=args.app)
    print(plan.render(rows, header=header), end="")
    for r in plan.refused(rows):
        _say(f"the run would be refused at {r['activity']} ({r['scope']}): {r['does']}")
    return 2 if plan.refused(rows) else 0


def cmd_suite(args) -> int:
    from chaos import runner, suite
    from chaos.reports import cells

    out = Path(args.out) if args.out else _default_out("suite")
    names = suite.selection(args.full, args.only)
    _check_utilization([suite.experiment_path(name) for name in names], args)
    fronts = args.front or [None]  # several: each experiment once per front door, side by side
    runs = [(name, front, name if len(fronts) == 1 else f"{name}@{front}") for name in names for front in fronts]
    suite.write_order(out, [d for _, _, d in runs])  # the report's overview follows the run order
    results = []
    with _prometheus(args, out):
        for name, front, dirname in runs:
            path = suite.experiment_path(name)
            _say(f"suite: {dirname}")
            args.replace_cluster = True
            results.append(_run_one(str(path), out / dirname, args, front=front))
    (out / "junit.xml").write_text(runner.junit_xml(results))
    table = cells.table(results)
    (out / "suite.md").write_text(table)
    print(table)
    _write_report(out)
    if args.command == "demo":
        _demo_claim(out)
    if not args.keep_cluster and getattr(args, "backend", "local") == "local":
        cmd_cluster_down(args)
    return max((r["verdict"] for r in results), default=0)


def _check_utilization(paths: list[Path], args) -> None:
    """Every experiment's rate as a share of a capacity (load.utilization) checked before the first runs."""
    from chaos import validate

    for path in paths:
        validate.run_inputs(path, args.app, getattr(args, "capacity", None))


def cmd_capacity(args) -> int:
    """The highest rate the experiment's deployment sustains within its SLO (chaos.capacity_run): capacity.json;
    exit 0 when a rate was sustained, 1 when none was."""
    from chaos import capacity, capacity_run

    out = Path(args.out) if args.out else _default_out(f"{Path(args.experiment).stem}-capacity")
    plan = {k: v for k, v in (("start_rps", args.start_rate), ("factor", args.factor), ("max_rps", args.max_rate),
                              ("max_steps", args.max_steps), ("step_s", args.step_s), ("warmup_s", args.warmup_s),
                              ("target_attainment", args.target_attainment),
                              ("max_failed_share", args.max_failed_share)) if v is not None}
    decision, doc = capacity_run.measure(args.experiment, _options(args, out), plan, log=_say)
    if not args.keep_cluster:
        cmd_cluster_down(args)
    if decision.stop == capacity.INTERRUPTED:
        return 130
    if decision.stop == capacity.STEP_ERROR:  # capacity.json holds the steps measured and why it stopped
        return 2
    return 0 if doc["sustained_rps"] is not None else 1


EXAMPLE_RATES = Path(__file__).resolve().parent.parent / "experiments" / "rates" / "example-rates.yaml"


def _demo_claim(out: Path) -> None:
    """The demo ends with the claim its suite supports under the shipped example rates (claim.md, .html,
    .json in the suite directory): with one trial per scope it says not_covered or insufficient_evidence,
    and why. It does not change the demo's exit code (the bounds' verdicts)."""
    from chaos import claim
    from chaos.reports import claim as claim_report

    doc = claim.claim(out, claim.load_rates(str(EXAMPLE_RATES)), claim.target_fraction(claim.DEFAULT_TARGET_PCT),
                      claim.risk_value(claim.DEFAULT_RISK), "service", 0)
    paths = claim_report.write(out, doc, ("md", "html"))
    a = doc["availability"]
    figure = ("unmeasured" if a.get("mean") is None else
              f"{a['mean'] * 100:.4f} % (90 % interval {a['interval90'][0] * 100:.4f} .. {a['interval90'][1] * 100:.4f} %)")
    _say(f"claim (example rates, {claim.DEFAULT_TARGET_PCT:g} % a month): {doc['verdict']['word']}; predicted "
         f"availability under the tested faults {figure}; {paths['md']}")
    for reason in doc["verdict"]["reasons"][:6]:
        _say(f"  {reason}")


def cmd_recover(args) -> int:
    """Restore a cluster a killed run left broken: resume, heal, restart, redeploy (KubeRay: remove every
    object of the rig left on the cluster, whatever run left it)."""
    if getattr(args, "backend", "local") == "kuberay":
        from chaos import provision

        backend = provision.kuberay_backend(provision.kube_settings(_kube_flags(args)))
        done = backend.heal_all(timeout=300)
        _say(f"recovered: {done}")
        return 0
    from chaos.backends.local import LocalCluster
    from chaos.backends.local.backend import LocalBackend
    from chaos.provision import redeploy_if_gone
    from chaos.run import log

    cluster = LocalCluster.find(_cluster_dir(args), log=_say)
    if cluster is None:
        _say("no local cluster: nothing to recover")
        return 0
    backend = LocalBackend(cluster)
    had_front = cluster.front is not None
    cluster.stop_front()  # a killed run's balancer goes; the next run starts the one it needs
    done = backend.heal_all(timeout=240)
    done["redeployed"] = redeploy_if_gone(backend, app=args.app, log=log)
    done["front_door_removed"] = had_front
    _say(f"recovered: {done}")
    print_status(cluster)
    return 0


def cmd_report(args) -> int:
    import json as _json

    from chaos.reports import report

    if args.compare:
        a, b = (Path(p) for p in args.compare)
        cmp = report.compare(report.build(a), report.build(b))
        if args.format == "json":
            print(_json.dumps(cmp, indent=2, default=str))
        else:
            print(report.compare_markdown(cmp, str(a), str(b)))
        return 0
    if not args.run_dir:
        raise UsageError("report needs a RUN_DIR (or --compare A B)")
    formats = ("md", "html", "json") if args.format == "all" else (args.format,)
    paths = report.write(Path(args.run_dir), formats)
    if args.format == "md":
        print(paths["md"].read_text())
    elif args.format == "json":
        print(paths["json"].read_text())
    for p in paths.values():
        _say(f"wrote {p}")
    return 0


def cmd_analyse(args) -> int:
    """Derive summary.json again from each run's records.ndjson (a run, its trials, or a suite), then the report."""
    import json as _json

    from chaos import evidence, summary as summary_mod
    from chaos.reports import report
    from chaos.soak import report as soak_report, run as soak_run

    root = Path(args.run_dir)
    runs = evidence.run_dirs(root)
    if not runs:
        raise UsageError(f"{root}: no records.ndjson below it (not a run directory)")
    for run_dir in runs:
        summary, origin = summary_mod.reanalyse(run_dir, args.experiment)
        soak = soak_run.reanalyse(run_dir, summary)  # a soak: its figures again, the claim computed again
        old = run_dir / "summary.json"
        if old.is_file() and not (run_dir / "summary.previous.json").exists():
            old.replace(run_dir / "summary.previous.json")  # the first summary is kept beside the new one
        old.write_text(_json.dumps(summary, indent=2, default=str))
        _say(f"{run_dir}: summary.json derived from the records with the definitions of {origin}")
        if soak:
            soak_report.write(run_dir, summary)
            for line in soak_report.comparison_lines(summary["soak"]):
                _say(line)
        for f in summary["faults"]:
            a = f["affected"]
            _say(f"  {f['scope']:<9} {f['target']:<12} affected: failed {a['failed_total']}/{a['requests']}  "
                 f"detect {a['time_to_detect_s']}  first success {a['time_to_first_success_s']}  "
                 f"steady {a['time_to_steady_state_s']}  relapses {a['relapses']}")
    for p in report.write(root).values():
        _say(f"wrote {p}")
    return 0


def cmd_claim(args) -> int:
    """An availability claim from a suite's runs and a RATES file: claim.json (+ .md / .html) in the suite
    directory; exit 0 when supported, 1 otherwise, 2 on bad input (nothing written)."""
    from chaos import claim
    from chaos.reports import claim as claim_report

    target = claim.target_fraction(args.target)  # every input checked before anything is read or written
    risk = claim.risk_value(args.risk)
    slo_target = None if args.slo_target is None else claim.target_fraction(args.slo_target, "--slo-target")
    rates = claim.load_rates(args.faults)
    doc = claim.claim(Path(args.suite_dir), rates, target, risk, args.population, args.seed, slo_target)
    formats = ("md", "html") if args.format == "all" else (args.format,)
    paths = claim_report.write(Path(args.suite_dir), doc, formats)
    if args.plan:
        print(claim_report.plan_text(doc), end="")
    elif args.format == "json":
        print(paths["json"].read_text(), end="")
    elif "md" in paths:
        print(paths["md"].read_text(), end="")
    for p in paths.values():
        _say(f"wrote {p}")
    return 0 if doc["verdict"]["word"] == claim.SUPPORTED else 1


def cmd_soak(args) -> int:
    """A soak (chaos.soak): the faults of several experiments at RATES x a speed-up in one long run, its lost
    service set against the claim's prediction; exit as a run's verdict (2: bad input, nothing started)."""
    from chaos.soak import report as soak_report, run as soak_run, spec

    flags = {"experiments": args.experiments, "faults": args.faults, "speedup": args.speedup,
             "duration_s": args.duration, "seed": args.seed, "app": args.app, "front": args.front,
             "claim_from": args.claim_from}
    inp = spec.from_definition(args.definition, **flags) if args.definition else spec.from_flags(**flags)
    prep = spec.prepare(inp)  # every input checked and the schedule drawn before any cluster is touched
    s = prep.schedule
    _say(f"soak: {len(s.injected)} faults to inject, {len(s.skipped)} skipped by the rules, {len(s.overlaps)} "
         f"overlaps, load on for {s.end_s:.0f} s after the baseline")
    if args.plan:
        import json as _json

        print(_json.dumps(s.to_dict(), indent=2))
        return 0
    args.app, args.front = inp.app, inp.front
    out = Path(args.out) if args.out else _default_out("soak")
    code, summary = soak_run.execute(prep, _options(args, out))
    try:
        paths = soak_report.write(out)
        _say(f"soak report: {paths['md']}, {paths['png']}")
    except Exception as e:  # noqa: BLE001 - the run's own outputs are written
        _say(f"could not write the soak report of {out}: {e}")
    _write_report(out)
    for line in soak_report.comparison_lines(summary.get("soak") or {}):
        _say(line)
    return code


def cmd_validate(args) -> int:
    """Every problem of each file on its own line (file, field path, message); `ok FILE` for a good one."""
    from chaos.validate import check_file

    bad = False
    from chaos.soak.spec import check_file as soak_problems

    for f in args.files:
        found = soak_problems(f)  # a soak definition (kind: soak), else None
        found = check_file(f, capacity=args.capacity) if found is None else found
        print("\n".join(found) if found else f"ok {f}")
        bad = bad or bool(found)
    return 2 if bad else 0


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="availproof", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="a local multi-zone Ray cluster with GCS state in Redis")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start Redis, the head and one raylet per topology node")
    up.add_argument("--topology", default=None, help="topology YAML, or a shipped name: default, two-regions")
    up.add_argument("--no-gcs-ft", action="store_true", help="start the head without external Redis (contrast case)")
    up.add_argument("--netns", action="store_true",
                    help="one network namespace per zone on a bridge, so zones can be partitioned (needs root)")
    up.set_defaults(func=cmd_cluster_up)
    status = csub.add_parser("status", help="every node with its domain and liveness, Redis, Serve replicas")
    status.add_argument("--no-replicas", action="store_true", help="skip the Serve replica table")
    status.set_defaults(func=cmd_cluster_status)
    down = csub.add_parser("down", help="stop everything the cluster started (idempotent)")
    down.set_defaults(func=cmd_cluster_down)
    dep = sub.add_parser("deploy", help="deploy the Serve app on the running local cluster")
    dep.add_argument("--app", choices=("stream", "llm"), default="stream")
    dep.add_argument("--replicas-per-zone", type=int, default=1)
    dep.add_argument("--model-path", default=None, help="checkpoint directory for --app llm (default: the tiny one)")
    dep.add_argument("--timeout", type=float, default=600.0)
    dep.set_defaults(func=cmd_deploy)

    ck = sub.add_parser("checkpoint", help="build the tiny offline checkpoint (random weights, local tokenizer)")
    ck.add_argument("dir", nargs="?", default=None)
    ck.add_argument("--seed", type=int, default=0)
    ck.set_defaults(func=cmd_checkpoint)

    run = sub.add_parser("run", help="run one experiment file (brings the cluster up and deploys if needed)")
    run.add_argument("experiment")
    run.add_argument("--trials", type=int, default=1)
    run.add_argument("--plan", action="store_true",
                     help="list every object each fault would touch (pods, nodes, policies, helper pods, the "
                          "RayService; locally processes and nodes) and change nothing")
    run.set_defaults(func=cmd_run)

    su = sub.add_parser("suite", help="run the experiments in turn and print one summary table")
    su.add_argument("--full", action="store_true", help="every experiment, not just the quick default set")
    su.add_argument("--only", nargs="*", default=None, help="experiment names to run")
    su.add_argument("--keep-cluster", action="store_true", help="leave the cluster up at the end")
    su.set_defaults(func=cmd_suite)
    demo = sub.add_parser("demo", help="the main job on the embedded default: the quick suite, then down")
    demo.add_argument("--full", action="store_true")
    demo.add_argument("--no-prometheus", dest="prometheus", action="store_false",
                      help="do not start the Prometheus server the demo runs by default")
    demo.set_defaults(func=cmd_suite, only=None, keep_cluster=False, prometheus=True)

    rec_ = sub.add_parser("recover", help="restore the local cluster after a killed run (idempotent)")
    rec_.add_argument("--app", choices=("stream", "llm"), default="stream")
    rec_.set_defaults(func=cmd_recover)
    rep = sub.add_parser("report", help="the evidence of a run: figures, bounds, trials statistics, timeline, environment (md, html, json)")
    rep.add_argument("run_dir", nargs="?", default=None, help="a run, a run with trials, or a suite directory")
    rep.add_argument("--format", choices=("md", "html", "json", "all"), default="md",
                     help="md and json are printed too; html is self-contained (timeline embedded); all writes the three")
    rep.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None,
                     help="two run directories side by side, with whether each difference exceeds the intervals")
    rep.set_defaults(func=cmd_report)
    ana = sub.add_parser("analyse", help="derive summary.json (and the report) again from the records alone, with the "
                                         "definitions the run recorded, an experiment file's, or the defaults")
    ana.add_argument("run_dir", help="a run, a run with trials, or a suite directory")
    ana.add_argument("--experiment", default=None, help="take the definitions and bounds from this experiment file")
    ana.set_defaults(func=cmd_analyse)
    from chaos.claim.rates import DEFAULT_TARGET_PCT

    cl = sub.add_parser("claim", help="an availability claim from a suite's runs and expected fault rates: "
                                      "claim.json (+ md/html) in the suite directory; exit 0 only when supported")
    cl.add_argument("suite_dir", metavar="SUITE_DIR", help="a suite, an experiment's trials, or one run")
    cl.add_argument("--faults", required=True, metavar="RATES",
                    help="YAML: period_days and, per scope, events (per period) or count and exposure_days, "
                         "duration_s, unrecovered_cost_s, source "
                         "(experiments/rates/example-rates.yaml)")
    cl.add_argument("--target", default=str(DEFAULT_TARGET_PCT), metavar="PCT",
                    help=f"the availability claimed, in percent ({DEFAULT_TARGET_PCT:g})")
    cl.add_argument("--slo-target", default=None, metavar="PCT",
                    help="also claim this share of a period's service within the SLO, in percent (latency included)")
    cl.add_argument("--plan", action="store_true",
                    help="print which trials to run next (the one that narrows the expected loss most first), with "
                         "their commands, instead of the claim")
    cl.add_argument("--risk", default="0.05", help="the largest acceptable chance that a period misses the target")
    cl.add_argument("--population", choices=("service", "affected"), default="service",
                    help="whose requests count: every target's, or the lost domain's users (needs zonal-lb or direct runs)")
    cl.add_argument("--format", choices=("md", "html", "json", "all"), default="md",
                    help="claim.json is always written; md and json are printed too")
    cl.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the simulation")
    cl.set_defaults(func=cmd_claim)
    so = sub.add_parser("soak", help="faults of several experiments at RATES x a speed-up in one long run, its lost "
                                     "service-seconds set against the claim's prediction (summary.json's soak)")
    so.add_argument("definition", nargs="?", default=None, help="a soak definition (experiments/soak.yaml); flags "
                                                                 "given override its fields")
    so.add_argument("--experiments", nargs="+", default=None, metavar="E", help="experiment files, one per scope")
    so.add_argument("--faults", default=None, metavar="RATES", help="the RATES file (chaos.claim.rates)")
    so.add_argument("--speedup", type=float, default=None, metavar="K", help="each scope's rate x K")
    so.add_argument("--duration", type=float, default=None, metavar="D", help="the soak's length in seconds")
    so.add_argument("--seed", type=int, default=None, help="the schedule's seed (0)")
    so.add_argument("--claim-from", default=None, metavar="SUITE_DIR",
                    help="a suite: its claim under the same RATES predicts the soak's lost service")
    so.add_argument("--app", choices=("stream", "llm"), default=None)
    so.add_argument("--front", choices=FRONTS, default=None, help="the front door over the experiments'")
    so.add_argument("--out", default=None, help="run directory (default: runs/<time>-soak)")
    so.add_argument("--plan", action="store_true", help="print the drawn schedule and start nothing")
    so.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    so.set_defaults(func=cmd_soak)
    val = sub.add_parser("validate", help="check experiment and topology files against their schemas "
                                          "(chaos/schemas/): one line per problem, exit 2 if any")
    val.add_argument("files", nargs="+", metavar="FILE")
    val.set_defaults(func=cmd_validate)
    cap = sub.add_parser("capacity", help="the highest rate the experiment's deployment sustains within its SLO: a "
                                          "stepped sweep with no fault; capacity.json (exit 1 when none is sustained)")
    cap.add_argument("experiment")
    cap.add_argument("--start-rate", type=float, default=None, metavar="R", help="the first step's rate, req/s (1)")
    cap.add_argument("--factor", type=float, default=None, metavar="F", help="each step's rate over the last's (1.5)")
    cap.add_argument("--max-rate", type=float, default=None, metavar="R", help="no step above this rate, req/s (200)")
    cap.add_argument("--max-steps", type=int, default=None, metavar="N", help="steps at most (12)")
    cap.add_argument("--step-s", type=float, default=None, metavar="S", help="seconds measured per step (20)")
    cap.add_argument("--warmup-s", type=float, default=None, metavar="S",
                     help="seconds sent before each step's measurement, not counted (the experiment's load.warmup_s)")
    cap.add_argument("--target-attainment", type=float, default=None, metavar="A",
                     help="the share of a step's requests that must meet the SLO (0.99)")
    cap.add_argument("--max-failed-share", type=float, default=None, metavar="SHARE",
                     help="failed requests beyond this share of a step's break the SLO (0.01)")
    cap.add_argument("--keep-cluster", action="store_true", help="leave the cluster up at the end")
    cap.set_defaults(func=cmd_capacity)

    for c in (run, su, val):
        c.add_argument("--capacity", default=None, metavar="FILE",
                       help="the capacity.json (availproof capacity) an experiment's load.utilization takes its share "
                            "of, over its load.capacity")
    for c in (run, su, demo, cap):
        c.add_argument("--app", choices=("stream", "llm"), default="stream")
        c.add_argument("--model-path", default=None)
        c.add_argument("--out", default=None, help="run directory (default: runs/<time>-<name>)")
        front_help = ("what stands between the client and the Serve proxies, over the experiment's front: direct "
                      "(the client round-robins over the proxies), lb (the rig's HAProxy over every zone), zonal-lb "
                      "(one HAProxy per zone, the others as backup)")
        if c in (run, cap):
            c.add_argument("--front", choices=FRONTS, default=None, help=front_help)
        else:
            c.add_argument("--front", type=_fronts, default=None, metavar="FRONT[,FRONT...]",
                           help=front_help + "; several (e.g. lb,direct) run each experiment once per front door, "
                                             "side by side in the table and the report (NAME@FRONT)")
    for c in (run, su):
        c.add_argument("--prometheus", action="store_true",
                       help="run a Prometheus server (Debian's) scraping the harness and every Ray node meanwhile")
        c.add_argument("--inject-anyway", action="store_true",
                       help="inject the faults even when the baseline is out of steady state (the run is marked so in "
                            "summary.json's baseline_gate; by default such a run stops before any fault, ERROR)")
    for c in (run, su, rec_):
        k = c.add_argument_group("KubeRay backend (flags override the experiment's kubernetes section)")
        k.add_argument("--backend", choices=("local", "kuberay"), default="local")
        k.add_argument("--kube-context", default=None, help="the one kube context to act in")
        k.add_argument("--kube-namespace", default=None, help="the one namespace to act in")
        k.add_argument("--ray-cluster", default=None, help="RayService or RayCluster name (default: availproof)")
        k.add_argument("--serve-url", default=None,
                       help="the serve Service as reachable from here (a NodePort or load balancer that follows the "
                            "active cluster; not a kubectl port-forward, which dies with its pod): see kuberay/README.md")
        k.add_argument("--dashboard-url", default=None,
                       help="the head's dashboard as reachable from here (a NodePort or load balancer; not a "
                            "kubectl port-forward, which dies with the head pod)")
        k.add_argument("--max-pods", type=int, default=None, help="blast-radius limit: pods one fault may hit")
        k.add_argument("--allow-autoscaled-zone-loss", action="store_true", default=None,
                       help="run a zone or region loss although the cluster autoscales (refused otherwise: an "
                            "autoscaler adds nodes in the lost zone for KubeRay's Pending replacements)")
        k.add_argument("--partition-method", choices=("networkpolicy", "node-filter"), default=None,
                       help="how a zone partition cuts a zone off (default node-filter: a helper pod with hostNetwork "
                            "and NET_ADMIN, checked with a dry-run create first; networkpolicy where admission refuses "
                            "it, its effect checked; see kuberay/README.md)")
        k.add_argument("--load-in-cluster", action="store_true", default=None,
                       help="run the load workers as a Kubernetes Job off the Ray cluster's nodes, where no fault "
                            "reaches them (kubernetes.load.in_cluster; default: processes of the rig)")
        k.add_argument("--load-image", default=None,
                       help="the load pods' image, with the rig's package installed (kubernetes.load.image; "
                            "default availproof:dev, kuberay/Dockerfile)")
    for c in (up, status, down, dep, run, su, demo, rec_, cap):
        c.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse prints its own one-line usage error
        return 2 if e.code else 0
    try:
        return args.func(args)
    except AvailproofError as e:
        _say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
