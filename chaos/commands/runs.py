"""The commands that run experiments: ``run`` (and ``run --plan``), ``suite`` and ``demo``, ``capacity``, ``soak``."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from chaos.commands.cluster import cmd_cluster_down
from chaos.commands.common import cluster_dir, default_out, run_options, say, write_report
from chaos.commands.results import reads_records_once
from chaos.base.errors import AvailproofError, SetupError


def _run_one(path: str, out: Path, args, front: str | None = None, first: bool = False,
             prometheus_url: str | None = None, spec=None, options=None) -> dict:
    """One experiment run (``spec``: the file as the command parsed it, :mod:`chaos.core.run_spec`, and ``options``
    the ones it was parsed with; None: from the flags, parsed by the runner). A set-up error is its result (ERROR, exit 2), so that the runs before it
    keep their JUnit and report; on the ``first`` run of a command nothing is kept yet: it is raised
    (one line, exit 2)."""
    from chaos.core import runner, verdict

    try:
        code, result = runner.run_experiment(path, out, spec=spec,
                                             options=options or run_options(args, out, front, prometheus_url))
    except AvailproofError as e:
        if first:
            raise
        say(f"error: {e}")
        v = verdict.decide(None, setup_error=str(e))
        return {"experiment": str(path), "verdict": v["exit_code"], "verdict_detail": v, "error": str(e),
                "summary": None}
    result["verdict"] = code
    return result


@contextmanager
def _prometheus(args, out: Path):
    """With --prometheus: a real Prometheus server for the run, scraping the harness and Ray (None without);
    its URL goes to each run's options (``prometheus_url``: the promql probe's server)."""
    if not getattr(args, "prometheus", False):
        yield None
        return
    from chaos.system import metrics, prometheus
    from chaos.backends.local.cluster import default_cluster_dir

    server = prometheus.PrometheusServer(out / "prometheus", cluster_dir(args) or default_cluster_dir(),
                                         metrics.port_from_env(), log=say)
    try:
        server.start()
    except SetupError as e:
        if args.command != "demo":  # asked for explicitly: a set-up error
            raise
        say(f"demo without Prometheus: {e}")
        yield None
        return
    say(f"Prometheus: {server.url}/graph (Grafana dashboard: {prometheus.DASHBOARD})")
    try:
        yield server
    finally:
        server.stop()
        say(f"Prometheus stopped; its data stays in {out / 'prometheus'}")


def cmd_run(args) -> int:
    from chaos.core import runner, validate, verdict

    # one-line error on a bad file (or capacity file, for load.utilization), before anything starts: the run's
    # spec, parsed once (chaos.core.run_spec); every trial runs it
    options = run_options(args, None)  # the runner sets each trial's out_dir
    spec = validate.run_spec(args.experiment, options)
    if args.capacity and spec.rate_from is None:
        say(f"--capacity {args.capacity}: not used, {args.experiment} states no load.utilization "
             "(its rate is load.rate)")
    if getattr(args, "plan", False):
        return _print_plan(args)
    out = Path(args.out) if args.out else default_out(Path(args.experiment).stem)
    results = []
    with _prometheus(args, out) as server:
        options.prometheus_url = server and server.url
        for trial in range(1, args.trials + 1):
            trial_out = out if args.trials == 1 else out / f"trial-{trial}"
            say(f"{args.experiment}: trial {trial}/{args.trials} -> {trial_out}")
            results.append(_run_one(args.experiment, trial_out, args, first=trial == 1,
                                    spec=spec, options=options))
    (out / "junit.xml").write_text(runner.junit_xml(results))
    write_report(out)
    worst = max(r["verdict"] for r in results)
    for r in results:
        word = verdict.of_result(r)["word"]
        say(f"{word}: {r['experiment']}" + (f" ({r['error']})" if r.get("error") else ""))
    return worst


def _print_plan(args) -> int:
    """``run --plan``: every object each fault of the experiment would touch, read from the cluster and
    changing nothing (:mod:`chaos.core.plan`); exit 2 when a guard of a fault would refuse it."""
    from chaos.core import plan

    header, rows = plan.for_experiment(args.experiment, run_options(args, None), app=args.app)
    print(plan.render(rows, header=header), end="")
    for r in plan.refused(rows):
        say(f"the run would be refused at {r['activity']} ({r['scope']}): {r['does']}")
    return 2 if plan.refused(rows) else 0


def cmd_suite(args) -> int:
    from chaos.core import runner, suite
    from chaos.reports import cells

    out = Path(args.out) if args.out else default_out("suite")
    names = suite.selection(args.full, args.only)
    specs = _suite_specs(names, args)  # every file parsed once, before the first runs; each run runs its spec
    fronts = args.front or [None]  # several: each experiment once per front door, side by side
    runs = [(name, front, name if len(fronts) == 1 else f"{name}@{front}") for name in names for front in fronts]
    suite.write_order(out, [d for _, _, d in runs])  # the report's overview follows the run order
    results = []
    with _prometheus(args, out) as server:
        for name, front, dirname in runs:
            path = suite.experiment_path(name)
            say(f"suite: {dirname}")
            args.replace_cluster = True
            spec = specs[name] if front is None else specs[name].with_settings(front=front)  # as --front would
            results.append(_run_one(str(path), out / dirname, args, front=front, prometheus_url=server and server.url,
                                    spec=spec))
    (out / "junit.xml").write_text(runner.junit_xml(results))
    table = cells.table(results)
    (out / "suite.md").write_text(table)
    print(table)
    write_report(out)
    if args.command == "demo":
        _demo_claim(out)
    if not args.keep_cluster and getattr(args, "backend", "local") == "local":
        cmd_cluster_down(args)
    return max((r["verdict"] for r in results), default=0)


def _suite_specs(names: list[str], args) -> dict:
    """Each experiment of the suite read, validated and parsed once (:mod:`chaos.core.run_spec`), its rate as a share
    of a capacity (load.utilization) included, before the first runs: a bad file refuses the suite in one line.
    Parsed without a front door of the command's (``suite --front`` may name several: each run derives its own)."""
    from chaos.core import suite, validate

    options = run_options(args, None)  # the runner sets each run's out_dir
    return {name: validate.run_spec(suite.experiment_path(name), options) for name in names}


def cmd_capacity(args) -> int:
    """The highest rate the experiment's deployment sustains within its SLO (chaos.core.capacity_run): capacity.json;
    exit 0 when a rate was sustained, 1 when none was."""
    from chaos.load import capacity
    from chaos.core import capacity_run

    out = Path(args.out) if args.out else default_out(f"{Path(args.experiment).stem}-capacity")
    plan = {k: v for k, v in (("start_rps", args.start_rate), ("factor", args.factor), ("max_rps", args.max_rate),
                              ("max_steps", args.max_steps), ("step_s", args.step_s), ("warmup_s", args.warmup_s),
                              ("target_attainment", args.target_attainment),
                              ("max_failed_share", args.max_failed_share)) if v is not None}
    decision, doc = capacity_run.measure(args.experiment, run_options(args, out), plan, log=say)
    if not args.keep_cluster:
        cmd_cluster_down(args)
    if decision.stop == capacity.INTERRUPTED:
        return 130
    if decision.stop == capacity.STEP_ERROR:  # capacity.json holds the steps measured and why it stopped
        return 2
    return 0 if doc["sustained_rps"] is not None else 1


EXAMPLE_RATES = Path(__file__).resolve().parents[2] / "experiments" / "rates" / "example-rates.yaml"


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
    say(f"claim (example rates, {claim.DEFAULT_TARGET_PCT:g} % a month): {doc['verdict']['word']}; predicted "
         f"availability under the tested faults {figure}; {paths['md']}")
    for reason in doc["verdict"]["reasons"][:6]:
        say(f"  {reason}")


@reads_records_once
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
    say(f"soak: {len(s.injected)} faults to inject, {len(s.skipped)} skipped by the rules, {len(s.overlaps)} "
         f"overlaps, load on for {s.end_s:.0f} s after the baseline")
    if args.plan:
        import json as _json

        print(_json.dumps(s.to_dict(), indent=2))
        return 0
    args.app, args.front = inp.app, inp.front
    out = Path(args.out) if args.out else default_out("soak")
    code, summary = soak_run.execute(prep, run_options(args, out))
    try:
        paths = soak_report.write(out)
        say(f"soak report: {paths['md']}, {paths['png']}")
    except Exception as e:  # noqa: BLE001 - the run's own outputs are written
        say(f"could not write the soak report of {out}: {e}")
    write_report(out)
    for line in soak_report.comparison_lines(summary.get("soak") or {}):
        say(line)
    return code
