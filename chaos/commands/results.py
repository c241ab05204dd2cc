"""The commands that read what runs left: ``report``, ``analyse``, ``claim``, ``validate``."""

from __future__ import annotations

import functools
from pathlib import Path

from chaos.commands.common import say
from chaos.base.errors import UsageError


def reads_records_once(command):
    """Within the command, each run's records.ndjson is parsed once, whoever reads it (the analysis, the report,
    the timeline, the claim): :func:`chaos.recording.record_columns.shared`."""
    @functools.wraps(command)
    def wrapped(args) -> int:
        from chaos.recording import record_columns

        with record_columns.shared():
            return command(args)
    return wrapped


@reads_records_once
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
        say(f"wrote {p}")
    return 0


@reads_records_once
def cmd_analyse(args) -> int:
    """Derive summary.json again from each run's records.ndjson (a run, its trials, or a suite), then the report."""
    import json as _json

    from chaos.core import evidence, summary as summary_mod
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
        say(f"{run_dir}: summary.json derived from the records with the definitions of {origin}")
        if soak:
            soak_report.write(run_dir, summary)
            for line in soak_report.comparison_lines(summary["soak"]):
                say(line)
        for f in summary["faults"]:
            a = f["affected"]
            say(f"  {f['scope']:<9} {f['target']:<12} affected: failed {a['failed_total']}/{a['requests']}  "
                 f"detect {a['time_to_detect_s']}  first success {a['time_to_first_success_s']}  "
                 f"steady {a['time_to_steady_state_s']}  relapses {a['relapses']}")
    for p in report.write(root).values():
        say(f"wrote {p}")
    return 0


@reads_records_once
def cmd_claim(args) -> int:
    """An availability claim from a suite's runs and a RATES file: claim.json (+ .md / .html) in the suite
    directory; exit 0 when supported, 1 otherwise, 2 on bad input (nothing written)."""
    from chaos import claim
    from chaos.reports import claim as claim_report

    from chaos.base.errors import UsageError

    credibility = claim.credibility_value(args.credibility)
    if args.calibrate:
        from chaos.claim import calibrate

        return calibrate.command(args.calibrate, args.worlds, args.seed, credibility, claim.risk_value(args.risk))
    if args.suite_dir is None or args.faults is None:
        raise UsageError("claim: SUITE_DIR and --faults RATES are required (or --calibrate)")
    target = claim.target_fraction(args.target)  # every input checked before anything is read or written
    risk = claim.risk_value(args.risk)
    slo_target = None if args.slo_target is None else claim.target_fraction(args.slo_target, "--slo-target")
    rates = claim.load_rates(args.faults)
    soak_events = soak_quiet = None
    if args.with_soak:
        from chaos.soak import check as soak_check

        soak_events = soak_check.soak_events(Path(args.with_soak), args.population)
        soak_quiet = soak_check.soak_quiet(Path(args.with_soak))
    doc = claim.claim(Path(args.suite_dir), rates, target, risk, args.population, args.seed, slo_target,
                      credibility=credibility, pool=args.pool_scopes, soak_events=soak_events,
                      soak_quiet=soak_quiet if args.with_soak else None)
    formats = ("md", "html") if args.format == "all" else (args.format,)
    paths = claim_report.write(Path(args.suite_dir), doc, formats)
    if args.plan:
        print(claim_report.plan_text(doc), end="")
    elif args.format == "json":
        print(paths["json"].read_text(), end="")
    elif "md" in paths:
        print(paths["md"].read_text(), end="")
    for p in paths.values():
        say(f"wrote {p}")
    return 0 if doc["verdict"]["word"] == claim.SUPPORTED else 1


def cmd_validate(args) -> int:
    """Every problem of each file on its own line (file, field path, message); `ok FILE` for a good one."""
    from chaos.core.validate import check_file

    bad = False
    from chaos.soak.spec import check_file as soak_problems

    for f in args.files:
        warned: list[str] = []  # what the file alone shows will go wrong (a timeout too short): said, exit 0
        found = soak_problems(f)  # a soak definition (kind: soak), else None
        found = check_file(f, capacity=args.capacity, warn=warned, app=args.app) if found is None else found
        print("\n".join(found) if found else "\n".join([*warned, f"ok {f}"]))
        bad = bad or bool(found)
    return 2 if bad else 0
