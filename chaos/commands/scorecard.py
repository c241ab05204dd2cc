"""``availproof scorecard``: the detector scorecard (:mod:`chaos.scorecard`): plan, run, or derive again."""

from __future__ import annotations

from pathlib import Path

from chaos.commands.common import cluster_dir, default_out, say
from chaos.base.errors import UsageError


def cmd_scorecard(args) -> int:
    """SPEC --dry-run: the cells and the estimated time, nothing run; SPEC --out DIR: every trial, then
    scorecard.json/.md/.svg; --from DIR: those from the runs DIR holds. Bad input: one line, exit 2, first."""
    from chaos.scorecard import execute, plan

    if args.from_dir:
        if args.spec or args.dry_run:
            raise UsageError("--from DIR derives the tables from existing runs: give no SPEC and no --dry-run")
        paths = execute.rederive(Path(args.from_dir))
        print(paths["md"].read_text(), end="")
        say(f"scorecard: {paths['md']}, {paths['svg']}, {paths['json']}")
        return 0
    if not args.spec:
        raise UsageError("give a scorecard SPEC (experiments/scorecard.yaml), or --from DIR")
    spec = plan.read(args.spec)
    cells = plan.cells(spec)

    def options_of(out: Path | None):
        from chaos.core.options import Options

        kw = {"cluster_dir": cluster_dir(args)} if cluster_dir(args) else {}
        return Options(app=spec.app, out_dir=out, model_path=args.model_path or "", replace_cluster=True, **kw)

    execute.check(spec, cells, options_of)  # every runnable cell derived before anything runs
    if args.dry_run:
        print(execute.describe(spec, cells), end="")
        return 0
    out = Path(args.out) if args.out else default_out("scorecard")
    say(f"scorecard: {sum(c.trials for c in cells if c.runs)} trials into {out}")
    errors, paths = execute.run(spec, cells, out, options_of, say)
    print(paths["md"].read_text(), end="")
    say(f"scorecard: {paths['md']}, {paths['svg']}, {paths['json']}"
        + (f"; {errors} trial(s) ended in a set-up error (run the same command again to retry them)" if errors else ""))
    return 2 if errors else 0
