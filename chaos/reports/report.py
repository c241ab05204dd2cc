"""`availproof report RUN_DIR`: the evidence of a run as Markdown, self-contained HTML or JSON.

A run directory is one of three things, and the report handles each:

- one experiment run (``summary.json`` and/or ``records.ndjson``);
- one experiment repeated (``trial-1/``, ``trial-2/``... from ``availproof run --trials N``);
- a suite (one sub-directory per experiment, each of the two kinds above).

The report opens with an **overview**: one row per experiment, in suite order (the order of
the suite directory's ``suite.json`` when there is one, else the order of
:data:`chaos.core.suite.FULL`; experiments it does not name come last, by name): the verdict,
the affected population's failed requests, time to first success and steady state of the
incident (the last fault), the service's failed requests, the control plane's outage and the time
to capacity restored.

Then, for each experiment: per fault, the **affected** and **service** populations' figures
side by side (:mod:`chaos.analysis`; every number copied unchanged from the summary), then its
**control plane and capacity** (:mod:`chaos.analysis.planes`: loss, restored and outage of the control
plane, the worst GCS health latency, the samples and their period; the target placement per
deployment and zone, the fewest replicas and their ratio to the target, lost and restored, the
fewest nodes alive in all and per zone), who the affected population is and why, and the reason
of every figure that could not be measured (a null is printed as ``unmeasurable: <reason>``,
``n/a`` when it does not apply, and ``never`` only when it was not reached; never as 0; a 0
outage or restore says "never down" / "never lost"); the bounds as stated and as checked,
with the population each was checked on and its status; the statistics over trials, for
the incident and per fault position (median and p95 with bootstrap intervals, where N
supports them, else "—, N too small"; failed fraction with a Wilson interval); the timeline
(per-zone lanes, then the control plane and capacity lanes); the environment; and what the result does not cover.

A run without ``summary.json`` (killed) is recomputed from its records and marked PARTIAL.
A ``summary.json`` older than format :data:`chaos.analysis.FORMAT_VERSION` (one population,
no ``format_version``) is re-derived from its ``records.ndjson`` by :func:`chaos.core.summary.reanalyse`
(the definitions and bounds recorded in the run header, else the old summary's, else the
defaults), its stated bounds checked again, and the report says so.

``--compare A B`` puts two runs side by side per experiment (the incident's figures) and says
whether each difference is larger than the intervals.

The parts, by concept: :mod:`chaos.reports.load` (finding the runs, building the document),
:mod:`chaos.reports.rows` and :mod:`chaos.reports.plane_rows` (the tables' rows),
:mod:`chaos.reports.environment`, :mod:`chaos.reports.render` (Markdown, HTML) and
:mod:`chaos.reports.compare`; this module writes the files and re-exports their names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.recording import record_columns
from chaos.reports.cells import fmt
from chaos.reports.compare import compare, compare_markdown
from chaos.reports.environment import env_lines, environment, not_covered
from chaos.reports.load import build, load_summary, suite_order, summary_version
from chaos.reports.plane_rows import (CAPACITY_LABELS, CONTROL_PLANE_LABELS, PLANE_COLUMNS, front_door_rows,
                                      placement_text, plane_rows, replacement_rows, served_rows)
from chaos.reports.render import html, markdown
from chaos.reports.rows import (FIGURES, LABELS, OVERVIEW_COLUMNS, bound_rows, experiment_verdict, fault_rows,
                                figure_rows, overview_row, overview_rows, run_verdict, scope_text, stat_rows)

__all__ = ["CAPACITY_LABELS", "CONTROL_PLANE_LABELS", "FIGURES", "LABELS", "OVERVIEW_COLUMNS", "PLANE_COLUMNS",
           "bound_rows", "build", "compare", "compare_markdown", "env_lines", "environment", "experiment_verdict",
           "fault_rows", "figure_rows", "fmt", "front_door_rows", "html", "load_summary", "markdown", "not_covered",
           "overview_row", "overview_rows", "placement_text", "plane_rows", "replacement_rows", "run_verdict",
           "scope_text", "served_rows", "stat_rows", "suite_order", "summary_version", "timelines", "write"]


def timelines(doc: dict[str, Any]) -> dict[str, bytes]:
    """Render (and save as timeline.png beside it) the first trial's timeline of each experiment."""
    from chaos.reports import timeline

    out = {}
    for exp in doc["experiments"]:
        first = Path(exp["trials"][0]["dir"])
        if not (first / "records.ndjson").exists():
            continue
        path = timeline.write(first, record_columns.read(first / "records.ndjson"), exp["trials"][0]["summary"])
        exp["timeline"] = str(path.relative_to(doc["run_dir"])) if path.is_relative_to(doc["run_dir"]) else str(path)
        out[exp["name"]] = path.read_bytes()
    return out


def write(run_dir: Path, formats: tuple[str, ...] = ("md", "html", "json")) -> dict[str, Path]:
    """Write report.md / report.html / report.json into ``run_dir``; returns the paths."""
    run_dir = Path(run_dir)
    doc = build(run_dir)
    images = timelines(doc) if ("html" in formats or "md" in formats) else {}
    out = {}
    if "md" in formats:
        out["md"] = run_dir / "report.md"
        out["md"].write_text(markdown(doc))
    if "html" in formats:
        out["html"] = run_dir / "report.html"
        out["html"].write_text(html(doc, images))
    if "json" in formats:
        out["json"] = run_dir / "report.json"
        out["json"].write_text(json.dumps(doc, indent=2, default=str))
    return out
