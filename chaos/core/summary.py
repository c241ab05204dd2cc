"""A run's evidence, derived from its records: ``summary.json`` = recovery figures + bound results.

One function derives it for both paths, so they cannot disagree:

- at the end of a run (:mod:`chaos.core.run`), with the experiment's definitions and bounds;
- afterwards, from ``records.ndjson`` alone (``availproof analyse RUN_DIR``), with the
  definitions and bounds the run header recorded, an experiment file given instead, or the
  defaults. Runs recorded before the header held them (format 1) take their bounds from the
  old ``summary.json`` when it is there.

The published format is ``chaos/schemas/summary.schema.json``. Plain Python: no Ray, no
Kubernetes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import analysis
from chaos.core import bounds, learnt, verdict
from chaos.recording import record_columns, records as rec
from chaos.base.errors import UsageError

# what a run adds around the derived figures, kept as they were when a run is analysed again
CONTEXT_KEYS = ("experiment", "scope", "app", "cluster", "environment", "recovery_window", "rate_from",
                "baseline_gate", "learnt_at_heal")  # the last: after the records closed, not in them


def header_block(title: str, scope: str, definitions: analysis.Definitions, bounds_spec: dict[str, Any],
                 bounds_source: str, app: str) -> dict[str, Any]:
    """What the run header records so that the records alone suffice to derive the summary."""
    return {"definitions": definitions.to_dict(),
            "experiment": {"title": title, "scope": scope, "app": app, "bounds": bounds_spec,
                           "bounds_source": bounds_source}}


def derive(records: rec.RunRecords, definitions: analysis.Definitions, bounds_spec: dict[str, Any] | None,
           bounds_source: str = "", stop_reason: str | None = None) -> dict[str, Any]:
    """The figures, then the bounds checked on the definitions' population."""
    summary = analysis.analyse(records, definitions.steady_state, definitions.slo, definitions.population)
    if bounds_spec:
        results = bounds.check(summary, bounds_spec, definitions.population)
        met: bool | None = bounds.all_met(results) and stop_reason is None
    else:
        results, met = [], None  # nothing was claimed: nothing is met or violated
    summary["bounds"] = {"stated": bounds_spec or {}, "source": bounds_source, "population": definitions.population,
                         "results": results, "all_met": met}
    summary["stop_reason"] = stop_reason
    return summary


def reanalyse(run_dir: str | Path, experiment: str | Path | None = None) -> tuple[dict[str, Any], str]:
    """Derive ``summary.json`` again from the run's records; returns it and where its definitions
    came from. Nothing is written here."""
    run_dir = Path(run_dir)
    path = run_dir / "records.ndjson"
    if not path.is_file():
        raise UsageError(f"{run_dir}: no records.ndjson (not a run directory)")
    records = record_columns.read(path)  # in columns; read once within a command (record_columns.shared)
    old = _old_summary(run_dir)
    recorded = records.header.get("experiment") or {}
    if experiment is not None:
        from chaos.core import experiment as exp_mod

        doc = exp_mod.load(experiment)
        s = exp_mod.settings(doc, source=str(experiment), app=recorded.get("app") or old.get("app") or "stream")
        definitions = analysis.Definitions(s.steady_state, s.slo, getattr(s, "population", "affected"))
        spec, source, origin = s.bounds, s.bounds_source, f"experiment file {experiment}"
    elif records.header.get("definitions"):
        definitions = analysis.Definitions.from_dict(records.header["definitions"])
        spec, source = recorded.get("bounds"), recorded.get("bounds_source", "")
        origin = "the run header (as recorded)"
    else:
        old_defs = old.get("definitions") or {}
        definitions = analysis.Definitions.from_dict(old_defs)
        spec = (old.get("bounds") or {}).get("stated")
        source = (old.get("bounds") or {}).get("source", "")
        origin = ("the old summary.json (format 1 records hold no definitions)" if old_defs
                  else "the defaults (neither the records nor a summary hold definitions)")
    summary = derive(records, definitions, spec, source, stop_reason=records.stop_reason or old.get("stop_reason"))
    for key in CONTEXT_KEYS:
        if key in old:
            summary[key] = old[key]
    if "experiment" not in summary and recorded.get("title"):
        summary["experiment"], summary["scope"] = recorded["title"], recorded.get("scope")
    summary["derived_from"] = {"records": str(path), "definitions": origin}
    learnt.apply_learnt(summary)  # a proof the heal found lost (came_back) stays lost: the records end before it
    # the verdict decided again, from the new figures and the journal the run left (chaos.core.verdict);
    # the run's own error and failed heal, known only at its end (after its records were closed), are
    # in the verdicts it recorded (summary.json's, the journal's): a run that ended ERROR stays ERROR
    journal = _json_file(run_dir / "journal.json")
    errors = verdict.recorded_errors(old.get("verdict"), ((journal or {}).get("availproof") or {}).get("verdict"))
    summary["verdict"] = verdict.decide(summary, journal, **errors)
    return summary, origin


def _json_file(p: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(p.read_text()) if p.is_file() else None
    except (ValueError, OSError):
        return None
    return data if isinstance(data, dict) else None


def _old_summary(run_dir: Path) -> dict[str, Any]:
    return _json_file(run_dir / "summary.json") or {}

