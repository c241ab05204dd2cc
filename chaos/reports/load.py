"""Finding a run's experiments and trials (:mod:`chaos.core.evidence`: one reader, one version rule) and building
the report document from their summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import analysis
from chaos.core import evidence, suite
from chaos.recording import records as rec
from chaos.base import stats
from chaos.base.errors import UsageError
from chaos.reports.environment import environment, not_covered
from chaos.reports.render import md_experiment
from chaos.reports.rows import POPULATIONS, overview_row


load_summary = evidence.load_summary
summary_version = evidence.summary_version


def _experiment(name: str, dirs: list[Path]) -> dict[str, Any]:
    try:
        exp = _experiment_unchecked(name, dirs)
        md_experiment(exp)  # every field the report reads is there and of the right type
        overview_row(exp)
        return exp
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
        raise UsageError(f"{dirs[0]}: the summary is damaged ({type(e).__name__}: {e}); "
                         "remove summary.json to recompute it from records.ndjson") from None


def _population(summary: dict[str, Any]) -> str:
    """The population the bounds were checked on: their results', else the definitions', else affected."""
    for r in (summary.get("bounds") or {}).get("results") or []:
        if r.get("population") in POPULATIONS:
            return r["population"]
    pop = (summary.get("definitions") or {}).get("population")
    return pop if pop in POPULATIONS else "affected"


def _experiment_unchecked(name: str, dirs: list[Path]) -> dict[str, Any]:
    trials = []
    for d in dirs:
        s = load_summary(d)
        trials.append({"dir": str(d), "summary": s})
    summaries = [t["summary"] for t in trials]
    first = summaries[0]
    population = _population(first)
    by_pop = {p: stats.trials(summaries, p) for p in POPULATIONS}
    return {
        "name": name,
        "title": first.get("experiment") or name,
        "scope": first.get("scope"),
        "partial": any(s.get("partial") for s in summaries),
        "rederived": any(s.get("rederived") for s in summaries),
        "notes": sorted({s["note"] for s in summaries if s.get("note")}),
        "trials": trials,
        "population": population,
        "statistics": by_pop[population],
        "statistics_by_population": by_pop,
        "bounds": (first.get("bounds") or {}).get("stated"),
        "bounds_source": (first.get("bounds") or {}).get("source"),
        "environment": environment(first, dirs[0]),
        "not_covered": not_covered(first),
    }


def suite_order(run_dir: Path) -> tuple[list[str] | None, str]:
    """The experiments' order in a suite directory, and where it comes from: ``suite.json`` (a list
    of names or paths, or an object with ``experiments`` / ``results`` / ``order``, each entry a name,
    a path, or an object with ``name`` or ``experiment``), else the suite's own order (``FULL``)."""
    path = Path(run_dir) / "suite.json"
    if path.exists():
        try:
            data = json.loads(path.read_text())
            entries = data if isinstance(data, list) else next(
                (data[k] for k in ("experiments", "results", "order") if isinstance(data.get(k), list)), None)
            names = []
            for e in entries or []:
                if isinstance(e, dict):
                    e = e.get("name") or e.get("experiment")
                if isinstance(e, str) and e:
                    n = Path(e).name
                    names.append(n[:-5] if n.endswith(".json") else n)
            if names:
                return names, "suite.json"
        except (ValueError, AttributeError, TypeError):
            pass
    return list(suite.FULL), "the suite's order (chaos/core/suite.py)"


def build(run_dir: Path) -> dict[str, Any]:
    """The report document: the overview, then one entry per experiment found under ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    order_source = None
    found = evidence.experiments(run_dir)
    if not (rec.is_run_dir(run_dir) or evidence.trial_dirs(run_dir)):
        order, order_source = suite_order(run_dir)
        rank = {n: i for i, n in enumerate(order)}
        found = dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    experiments = [_experiment(name, dirs) for name, dirs in found.items()]
    if not experiments:
        raise UsageError(f"{run_dir}: no summary.json or records.ndjson in it or its sub-directories: not a run directory")
    return {"run_dir": str(run_dir), "format_version": analysis.FORMAT_VERSION,
            "suite": order_source is not None, "order": order_source,
            "overview": [overview_row(e) for e in experiments], "experiments": experiments}
