"""Running a scorecard's plan, and deriving its tables again from the runs a directory holds.

:func:`check` derives every runnable cell's RunSpec before anything starts (a bad combination is one line, exit
2); :func:`run` runs each trial of each runnable cell in turn with :func:`chaos.core.runner.run_experiment`, into
``<out>/<cell id>/trial-N`` (a trial whose directory already holds a summary.json is kept, not run again: a
scorecard interrupted is resumed by the same command), then writes scorecard.json/.md/.svg;
:func:`rederive` writes them from the runs already there (``availproof scorecard --from DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from chaos.base.errors import AvailproofError, UsageError
from chaos.scorecard import cells as cells_mod, plan as plan_mod, table


def check(spec: plan_mod.Spec, plan: list[plan_mod.Cell], options_of=None) -> dict[str, Any]:
    """Every runnable cell's RunSpec, by cell id, derived now (a problem: one line naming the cell)."""
    bases: dict[str, Any] = {}
    out = {}
    for cell in plan:
        if not cell.runs:
            continue
        try:
            if cell.experiment not in bases:
                bases[cell.experiment] = plan_mod.base_spec(cell, spec.app, options_of and options_of(None))
            out[cell.id] = (bases[cell.experiment], plan_mod.derive(cell, bases[cell.experiment], spec.stall_s))
        except UsageError as e:
            raise UsageError(f"scorecard cell {cell.id}: {e}") from None
        except ValueError as e:  # a load shape the harness refuses
            raise UsageError(f"scorecard cell {cell.id}: {e}") from None
    return out


def run(spec: plan_mod.Spec, plan: list[plan_mod.Cell], out: Path, options_of: Callable[[Path], Any],
        log: Callable[[str], None]) -> tuple[int, dict[str, Path]]:
    """Every trial of every runnable cell, then the tables; (trials that ended in a set-up error, the paths)."""
    from chaos.core import runner

    specs = check(spec, plan, options_of)
    plan_mod.write(out, spec, plan)
    todo = [(c, n) for c in plan if c.runs for n in range(1, c.trials + 1)]
    errors = 0
    for k, (cell, n) in enumerate(todo, 1):
        d = out / cell.id / f"trial-{n}"
        if (d / "summary.json").is_file():
            log(f"scorecard {k}/{len(todo)}: {cell.id} trial {n}: kept ({d} holds a summary)")
            continue
        log(f"scorecard {k}/{len(todo)}: {cell.id} trial {n} -> {d}")
        _, derived = specs[cell.id]
        try:
            runner.run_experiment(plan_mod.dim.EXPERIMENTS / cell.experiment, d, options=options_of(d), spec=derived)
        except AvailproofError as e:
            errors += 1
            log(f"scorecard {cell.id} trial {n}: error: {e}")
    return errors, rederive(out, spec, plan)


def rederive(out: Path, spec: plan_mod.Spec | None = None, plan: list[plan_mod.Cell] | None = None) -> dict[str, Path]:
    """scorecard.json/.md/.svg from the runs under ``out`` (its plan.json when no plan is given)."""
    out = Path(out)
    if spec is None or plan is None:
        spec, plan = plan_mod.load_written(out)
    rows = cells_mod.derive(out, plan)
    return table.write(out, table.document(spec, rows, out))


def describe(spec: plan_mod.Spec, plan: list[plan_mod.Cell]) -> str:
    """The dry run's text: each cell, run or why not, and the estimated time."""
    runnable = [c for c in plan if c.runs]
    lines = [f"scorecard plan ({spec.app} app): {len(plan)} cells, {len(runnable)} run "
             f"({sum(c.trials for c in runnable)} trials), {len(plan) - len(runnable)} not run"]
    for c in plan:
        if c.runs:
            extra = (f"{c.duration_s / c.speedup:.0f} s of load (x{c.speedup:g})" if c.fault == plan_mod.FAULT_FREE
                     else f"detection looked for {c.horizon_s:.0f} s")
            lines.append(f"  run   {c.id}: {c.trials} trial(s), {extra}")
        else:
            lines.append(f"  skip  {c.id}: {c.reason}")
    est = plan_mod.estimate_s(spec, plan)
    lines.append(f"estimated time: {est / 60:.0f} min ({est / 3600:.1f} h; per trial: warm-up + baseline + the "
                 f"detection window + ~{plan_mod.SETUP_S[spec.app]:.0f} s of set-up, probes and analysis)")
    return "\n".join(lines) + "\n"
