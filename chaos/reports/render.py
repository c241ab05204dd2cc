"""The report document as Markdown and as self-contained HTML (the rows: :mod:`chaos.reports.rows`)."""

from __future__ import annotations

import base64
import html as _html
import json
from pathlib import Path
from typing import Any

from chaos.reports.environment import env_lines, front_door_of
from chaos.reports.plane_rows import PLANE_COLUMNS, plane_rows
from chaos.reports.rows import (BOUND_COLUMNS, FAULT_COLUMNS, FIGURE_COLUMNS, OVERVIEW_COLUMNS, STAT_COLUMNS,
                                bound_lines, bound_rows, definition_lines, fault_notes, fault_rows, fault_title,
                                figure_rows, overview_rows, scope_text, stat_lines, stat_rows, trial_faults)


# ---------------------------------------------------------------- markdown
def _md_cell(c: str) -> str:
    return str(c).replace("|", "\\|").replace("\n", " ")


def md_table(cols, rows) -> list[str]:
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + \
        ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]


def _order_line(doc: dict[str, Any]) -> str:
    if doc.get("suite"):
        return f"One row per experiment, in suite order (from {doc['order']}); figures of the incident (last fault)."
    return "Figures of the incident (the last fault)."


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# availproof report: {doc['run_dir']}", "", "## Overview", "", _order_line(doc), ""]
    lines += md_table(OVERVIEW_COLUMNS, overview_rows(doc)) + [""]
    for exp in doc["experiments"]:
        lines += md_experiment(exp)
    return "\n".join(lines) + "\n"


def md_experiment(exp: dict[str, Any]) -> list[str]:
    lines = [f"## {exp['title']} ({exp['name']}, scope {scope_text(exp['scope'])})", ""]
    if exp["partial"]:
        why = [n for n in exp["notes"] if "did not finish" in n] or ["the run did not finish; the figures cover "
                                                                     "only the records taken"]
        lines += ["**PARTIAL RUN**: " + "; ".join(why) + ".", ""]
    if exp["rederived"]:
        lines += ["**RE-DERIVED**: " + "; ".join(n for n in exp["notes"] if "re-derived" in n) + ".", ""]
    for t in exp["trials"]:
        req = t["summary"]["requests"]
        lines.append(f"- {Path(t['dir']).name}: {req['measured']} requests measured ({req['warmup']} warm-up "
                     f"excluded), {req['ok']} ok, {req['failed']} failed ({req['failed_before_first_fault']} "
                     "before the first fault)" + (f"; stopped: {t['summary']['stop_reason']}"
                                                  if t["summary"].get("stop_reason") else ""))
    lines += [f"- {s}" for s in definition_lines(exp)]
    lines += ["", "### Faults", ""] + md_table(FAULT_COLUMNS, fault_rows(exp)) + [""]
    for i, t, f in trial_faults(exp):
        lines += [f"#### {fault_title(i, f)}", ""] + md_table(FIGURE_COLUMNS, figure_rows(f)) + [""]
        lines += ["Control plane and capacity:", ""] + md_table(PLANE_COLUMNS, plane_rows(f, front_door_of(t))) + [""]
        lines += [f"- {s}" for s in fault_notes(f)] + [""]
    lines += ["### Over trials", ""] + md_table(STAT_COLUMNS, stat_rows(exp)) + [""]
    lines += [f"- {s}" for s in stat_lines(exp)] + [""]
    lines += ["### Bounds", "", "Stated: " + (json.dumps(exp["bounds"]) if exp["bounds"] else "none")]
    if exp["bounds_source"]:
        lines += ["", f"Where they come from: {exp['bounds_source']}"]
    lines += [""] + md_table(BOUND_COLUMNS, bound_rows(exp)) + [""]
    lines += [f"- {s}" for s in bound_lines(exp)] + ([""] if bound_lines(exp) else [])
    if exp.get("timeline"):
        lines += [f"![timeline]({exp['timeline']})", ""]
    lines += ["### Environment", ""] + [f"- {s}" for s in env_lines(exp["environment"])] + [""]
    lines += ["### Not covered", ""] + [f"- {s}" for s in exp["not_covered"]] + [""]
    return lines


# ---------------------------------------------------------------- html
CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}"
       "table{border-collapse:collapse;margin:.6em 0;font-size:.85em}"
       "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#eee}"
       "table.figures td:first-child{white-space:nowrap}"
       ".partial{color:#a00;font-weight:bold}.bad{color:#a00;font-weight:bold}.unm{color:#666;font-style:italic}"
       "img{max-width:100%}")
BAD_CELLS = ("NO", "VIOLATED", "UNMEASURABLE")


def escape_html(s: Any) -> str:
    return _html.escape(str(s))


def _cell_class(c: str) -> str:
    c = str(c)
    if c in BAD_CELLS or c.startswith(("VIOLATED", "PARTIAL", "UNMEASURED")):
        return ' class="bad"'
    if c.startswith(("unmeasurable", "n/a", "never")):
        return ' class="unm"'
    return ""


def html_table(cols, rows, cls: str = "") -> str:
    head = "".join(f"<th>{escape_html(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td{_cell_class(c)}>{escape_html(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape_html(s)}</li>" for s in items) + "</ul>" if items else ""


def html(doc: dict[str, Any], images: dict[str, bytes] | None = None) -> str:
    """Self-contained HTML: styles inline, each timeline embedded as a data: URI."""
    images = images or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>availproof report</title>"
             f"<style>{CSS}</style></head><body><h1>availproof report</h1><p>{escape_html(doc['run_dir'])}</p>",
             f"<section id='overview'><h2>Overview</h2><p>{escape_html(_order_line(doc))}</p>"
             + html_table(OVERVIEW_COLUMNS, overview_rows(doc), "overview") + "</section>"]
    for exp in doc["experiments"]:
        parts.append(f"<section id='{escape_html(exp['name'])}'><h2>{escape_html(exp['title'])} "
                     f"<small>({escape_html(exp['name'])}, scope {escape_html(scope_text(exp['scope']))})</small></h2>")
        if exp["partial"]:
            parts.append("<p class='partial'>PARTIAL RUN: the run did not finish; figures recomputed from the "
                         "records taken.</p>")
        if exp["rederived"]:
            parts.append("<p class='partial'>RE-DERIVED: "
                         + escape_html("; ".join(n for n in exp["notes"] if "re-derived" in n)) + ".</p>")
        parts.append(html_list(definition_lines(exp)))
        parts.append("<h3>Faults</h3>" + html_table(FAULT_COLUMNS, fault_rows(exp), "faults"))
        for i, t, f in trial_faults(exp):
            parts.append(f"<h4>{escape_html(fault_title(i, f))}</h4>"
                         + html_table(FIGURE_COLUMNS, figure_rows(f), "figures")
                         + "<h5>Control plane and capacity</h5>"
                         + html_table(PLANE_COLUMNS, plane_rows(f, front_door_of(t)), "planes")
                         + html_list(fault_notes(f)))
        if exp["name"] in images:
            b64 = base64.b64encode(images[exp["name"]]).decode()
            parts.append(f"<figure><img alt='timeline of {escape_html(exp['name'])}' src='data:image/png;base64,{b64}'>"
                         "<figcaption>Trial 1: every request on its zone's lane at its send time (red crosses "
                         "failed), the latency of the successful ones, the fault marks, and the recovery points of "
                         "the affected population (dashed) and the service (dotted); under them the control plane "
                         "sample by sample, RUNNING model replicas and worker nodes alive per zone."
                         "</figcaption></figure>")
        parts.append("<h3>Over trials</h3>" + html_table(STAT_COLUMNS, stat_rows(exp), "stats"))
        parts.append(html_list(stat_lines(exp)))
        parts.append(f"<h3>Bounds</h3><p>Stated: <code>{escape_html(json.dumps(exp['bounds']))}</code></p>")
        if exp["bounds_source"]:
            parts.append(f"<p>Where they come from: {escape_html(exp['bounds_source'])}</p>")
        parts.append(html_table(BOUND_COLUMNS, bound_rows(exp), "bounds") + html_list(bound_lines(exp)))
        parts.append("<h3>Environment</h3>" + html_list(env_lines(exp["environment"])))
        parts.append("<h3>Not covered</h3>" + html_list(exp["not_covered"]) + "</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
