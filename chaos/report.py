"""`availproof report RUN_DIR`: the evidence of a run as Markdown, self-contained HTML or JSON.

A run directory is one of three things, and the report handles each:

- one experiment run (``summary.json`` and/or ``records.ndjson``);
- one experiment repeated (``trial-1/``, ``trial-2/``... from ``availproof run --trials N``);
- a suite (one sub-directory per experiment, each of the two kinds above).

For each experiment: the figures per fault (every number copied unchanged from the summary),
the bounds as stated and checked, the statistics over trials (median and p95 with bootstrap
intervals, failed fraction with a Wilson interval, and what N is too small to claim), the
timeline plot, the environment, and what the result does not cover. A run without
``summary.json`` (killed) is recomputed from its records and marked PARTIAL.

``--compare A B`` puts two runs side by side per experiment and says whether each difference
is larger than the intervals.
"""

from __future__ import annotations

import base64
import html as _html
import json
from pathlib import Path
from typing import Any

from chaos import analysis, bounds, records as rec, stats
from chaos.errors import UsageError
from chaos.suite import _fmt

FIGURES = {"time_to_detect_s": "time to detect s", "time_to_first_success_s": "time to first success s",
           "time_to_steady_state_s": "time to steady state s"}


# ---------------------------------------------------------------- loading
def _is_run(d: Path) -> bool:
    return (d / "summary.json").exists() or (d / "records.ndjson").exists()


def _trial_dirs(d: Path) -> list[Path]:
    trials = [p for p in d.glob("trial-*") if p.is_dir() and _is_run(p)]
    return sorted(trials, key=lambda p: int(p.name.split("-", 1)[1]) if p.name.split("-", 1)[1].isdigit() else 0)


def load_summary(run_dir: Path) -> dict[str, Any]:
    """The summary of one experiment run; recomputed from the records (PARTIAL) when missing."""
    run_dir = Path(run_dir)
    summary_path, records_path = run_dir / "summary.json", run_dir / "records.ndjson"
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
        except ValueError as e:
            raise UsageError(f"{summary_path}: not valid JSON ({e})") from None
        if not isinstance(summary, dict) or not isinstance(summary.get("requests"), dict) \
                or not isinstance(summary.get("faults"), list):
            raise UsageError(f"{summary_path}: not an availproof summary (no requests/faults)")
        summary.setdefault("partial", False)
        return summary
    if records_path.exists():
        summary = analysis.analyse(rec.read(records_path))
        summary["partial"] = True
        summary["note"] = "no summary.json: the run did not finish; figures recomputed from the records taken"
        return summary
    raise UsageError(f"{run_dir}: no summary.json or records.ndjson: not a run directory")


def _experiment(name: str, dirs: list[Path]) -> dict[str, Any]:
    try:
        exp = _experiment_unchecked(name, dirs)
        _md_experiment(exp)  # every field the report reads is there and of the right type
        return exp
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
        raise UsageError(f"{dirs[0]}: the summary is damaged ({type(e).__name__}: {e}); "
                         "remove summary.json to recompute it from records.ndjson") from None


def _experiment_unchecked(name: str, dirs: list[Path]) -> dict[str, Any]:
    trials = []
    for d in dirs:
        s = load_summary(d)
        trials.append({"dir": str(d), "summary": s})
    summaries = [t["summary"] for t in trials]
    first = summaries[0]
    return {
        "name": name,
        "title": first.get("experiment") or name,
        "scope": first.get("scope"),
        "partial": any(s.get("partial") for s in summaries),
        "trials": trials,
        "statistics": stats.trials(summaries),
        "bounds": (first.get("bounds") or {}).get("stated"),
        "bounds_source": (first.get("bounds") or {}).get("source"),
        "environment": environment(first, dirs[0]),
        "not_covered": not_covered(first),
    }


def build(run_dir: Path) -> dict[str, Any]:
    """The report document: one entry per experiment found under ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    if _is_run(run_dir):
        experiments = [_experiment(run_dir.name, [run_dir])]
    elif _trial_dirs(run_dir):
        experiments = [_experiment(run_dir.name, _trial_dirs(run_dir))]
    else:
        experiments = []
        for sub in sorted(p for p in run_dir.iterdir() if p.is_dir()):
            if _is_run(sub):
                experiments.append(_experiment(sub.name, [sub]))
            elif _trial_dirs(sub):
                experiments.append(_experiment(sub.name, _trial_dirs(sub)))
    if not experiments:
        raise UsageError(f"{run_dir}: no summary.json or records.ndjson in it or its sub-directories: not a run directory")
    return {"run_dir": str(run_dir), "experiments": experiments}


def environment(summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Versions, topology, app and load shape: from the summary, completed from the records header."""
    env = dict(summary.get("environment") or {})
    env.setdefault("app", summary.get("app"))
    env.setdefault("cluster", summary.get("cluster"))
    if "load" not in env:
        records_path = Path(run_dir) / "records.ndjson"
        if records_path.exists():
            header = rec.read(records_path).header
            env["load"] = header.get("load")
            env["routing"] = header.get("routing")
    return env


def not_covered(summary: dict[str, Any]) -> list[str]:
    cluster = summary.get("cluster") or {}
    where = "network namespaces on one bridge" if cluster.get("network") == "netns" else "loopback addresses"
    out = []
    if cluster.get("backend", "local") == "local":
        out.append(f"One machine: zones are processes on {where}, not facilities; no real power, cooling or "
                   "network equipment fails.")
    out.append("The load generator runs beside the cluster and shares its CPUs; latencies include that contention.")
    out.append("No figure is finer than its resolution (the inter-arrival time of the load).")
    out.append("One workload shape (the load section); other prompt lengths, rates or models may recover differently.")
    if summary.get("partial"):
        out.append("The run did not finish: the figures cover only the records taken before it stopped.")
    return out


# ---------------------------------------------------------------- rows (shared by md and html)
FAULT_COLUMNS = ("trial", "scope", "target", "failed", "mid-stream", "in flight at injection", "unaffected zones",
                 "by class", "detect s", "first success s", "steady state s", "last failure s",
                 "goodput before/during/after rps",
                 "resolution s", "bounds met")


def fault_rows(exp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, t in enumerate(exp["trials"], 1):
        s = t["summary"]
        results = (s.get("bounds") or {}).get("results")
        for f in s.get("faults") or []:
            met = bounds.fault_met(results, f["fault_id"])
            g = f["goodput_rps"]
            by_class = ", ".join(f"{k} {v}" for k, v in f["failed"]["by_class"].items()) or "-"
            rows.append([str(i), f["scope"], f["target"], str(f["failed"]["total"]), str(f["failed"]["mid_stream"]),
                         str(f["failed"].get("in_flight_at_injection", 0)), str(f["failed"]["unaffected_zones"]),
                         by_class, _fmt(f["time_to_detect_s"]), _fmt(f["time_to_first_success_s"]),
                         _fmt(f["time_to_steady_state_s"]),
                         "-" if f.get("time_to_last_failure_s") is None else _fmt(f["time_to_last_failure_s"]),
                         f"{_fmt(g['before'])}/{_fmt(g['during'])}/{_fmt(g['after'])}", _fmt(f["resolution_s"]),
                         "-" if met is None else ("NO" if met == "no" else met)])
    return rows


def _ci(ci) -> str:
    return "-" if not ci else f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


STAT_COLUMNS = ("figure", "trials with a value", "never reached", "median", "median 95% CI", "p95", "p95 95% CI")


def stat_rows(exp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, label in FIGURES.items():
        d = exp["statistics"]["figures"][key]
        rows.append([label, str(d["n"]), str(d["missing"]), _fmt(d["median"]), _ci(d["median_ci95"]),
                     _fmt(d["p95"]), _ci(d["p95_ci95"])])
    return rows


def stat_lines(exp: dict[str, Any]) -> list[str]:
    st = exp["statistics"]
    fl = st["failed"]
    frac = "-" if fl["fraction"] is None else f"{fl['fraction']:.4f}"
    lines = [f"Failed fraction in the fault windows: {fl['failed']}/{fl['requests']} = {frac}, "
             f"95% Wilson interval {_ci(fl['wilson95'])}.",
             f"Bounds met in {st['bounds_met']['trials']} of {st['bounds_met']['of']} trial(s), "
             f"95% Wilson interval {_ci(st['bounds_met']['wilson95'])}."]
    flags = sorted({f for d in st["figures"].values() for f in d["flags"]})
    if flags:
        lines += ["N too small for some claims: " + "; ".join(flags) + "."]
    return lines


def _verdict(result: dict[str, Any]) -> str:
    if result["met"] is None:
        return f"n/a ({result.get('reason', 'not applicable')})"
    return "ok" if result["met"] else "VIOLATED"


def bound_rows(exp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, t in enumerate(exp["trials"], 1):
        for r in (t["summary"].get("bounds") or {}).get("results") or []:
            rows.append([str(i), r["bound"], _fmt(r["value"]), str(r["limit"]), _verdict(r)])
    return rows


def env_lines(env: dict[str, Any]) -> list[str]:
    out = []
    for k in ("availproof", "ray", "vllm", "python", "platform", "cpus"):
        if env.get(k) is not None:
            out.append(f"{k}: {env[k]}")
    if env.get("app"):
        out.append(f"app: {env['app']}")
    c = env.get("cluster") or {}
    if c:
        out.append("cluster: " + ", ".join(f"{k} {v}" for k, v in c.items() if v is not None))
    if env.get("nodes"):
        out.append("nodes: " + ", ".join(f"{n['name']} ({n.get('region')}/{n.get('zone')})" for n in env["nodes"]))
    load = env.get("load") if isinstance(env.get("load"), dict) else {}
    if load:
        shape = (f"{load.get('mode')} loop, {load.get('arrival')} arrivals at {load.get('rate')} req/s"
                 if load.get("mode") == "open" else f"closed loop, concurrency {load.get('concurrency')}")
        out.append(f"load: {shape}, {load.get('duration_s')} s, warm-up {load.get('warmup_s')} s (excluded), "
                   f"timeout {load.get('timeout_s')} s, {'streaming' if load.get('stream') else 'not streaming'} "
                   f"{load.get('route')}, prompt words {load.get('prompt_words')}, max tokens {load.get('max_tokens')}, "
                   f"seed {load.get('seed')}")
    if env.get("routing"):
        out.append(f"routing: {env['routing']}")
    return out


# ---------------------------------------------------------------- markdown
def _md_table(cols, rows) -> list[str]:
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# availproof report: {doc['run_dir']}", ""]
    for exp in doc["experiments"]:
        lines += _md_experiment(exp)
    return "\n".join(lines) + "\n"


def _md_experiment(exp: dict[str, Any]) -> list[str]:
    lines = [f"## {exp['title']} ({exp['name']}, scope {exp['scope']})", ""]
    if exp["partial"]:
        notes = {t["summary"].get("note") for t in exp["trials"] if t["summary"].get("partial")}
        lines += ["**PARTIAL RUN**: " + "; ".join(n for n in notes if n) + ".", ""]
    for t in exp["trials"]:
        req = t["summary"]["requests"]
        lines.append(f"- {Path(t['dir']).name}: {req['measured']} requests measured ({req['warmup']} warm-up "
                     f"excluded), {req['ok']} ok, {req['failed']} failed ({req['failed_before_first_fault']} "
                     "before the first fault)" + (f"; stopped: {t['summary']['stop_reason']}"
                                                  if t["summary"].get("stop_reason") else ""))
    lines += [""] + _md_table(FAULT_COLUMNS, fault_rows(exp)) + [""]
    lines += ["### Over trials", ""] + _md_table(STAT_COLUMNS, stat_rows(exp)) + [""]
    lines += [f"- {s}" for s in stat_lines(exp)] + [""]
    lines += ["### Bounds", "", "Stated: " + (json.dumps(exp["bounds"]) if exp["bounds"] else "none")]
    if exp["bounds_source"]:
        lines += ["", f"Where they come from: {exp['bounds_source']}"]
    lines += [""] + _md_table(("trial", "bound", "value", "limit", "result"), bound_rows(exp)) + [""]
    if exp.get("timeline"):
        lines += [f"![timeline]({exp['timeline']})", ""]
    lines += ["### Environment", ""] + [f"- {s}" for s in env_lines(exp["environment"])] + [""]
    lines += ["### Not covered", ""] + [f"- {s}" for s in exp["not_covered"]] + [""]
    return lines


# ---------------------------------------------------------------- html
CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}"
       "table{border-collapse:collapse;margin:.6em 0;font-size:.85em}"
       "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left}th{background:#eee}"
       ".partial{color:#a00;font-weight:bold}.bad{color:#a00;font-weight:bold}img{max-width:100%}")


def _h(s: Any) -> str:
    return _html.escape(str(s))


def _html_table(cols, rows, cls: str = "") -> str:
    head = "".join(f"<th>{_h(c)}</th>" for c in cols)
    bad = ' class="bad"'
    body = "".join("<tr>" + "".join(f"<td{bad if c in ('NO', 'VIOLATED') else ''}>{_h(c)}</td>"
                                    for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html(doc: dict[str, Any], images: dict[str, bytes] | None = None) -> str:
    """Self-contained HTML: styles inline, each timeline embedded as a data: URI."""
    images = images or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>availproof report</title>"
             f"<style>{CSS}</style></head><body><h1>availproof report</h1><p>{_h(doc['run_dir'])}</p>"]
    for exp in doc["experiments"]:
        parts.append(f"<section id='{_h(exp['name'])}'><h2>{_h(exp['title'])} "
                     f"<small>({_h(exp['name'])}, scope {_h(exp['scope'])})</small></h2>")
        if exp["partial"]:
            parts.append("<p class='partial'>PARTIAL RUN: the run did not finish; figures recomputed from the "
                         "records taken.</p>")
        parts.append(_html_table(FAULT_COLUMNS, fault_rows(exp), "faults"))
        if exp["name"] in images:
            b64 = base64.b64encode(images[exp["name"]]).decode()
            parts.append(f"<figure><img alt='timeline of {_h(exp['name'])}' src='data:image/png;base64,{b64}'>"
                         "<figcaption>Trial 1: request outcomes and TTFT against send time, with the fault marks "
                         "and the recovery points.</figcaption></figure>")
        parts.append("<h3>Over trials</h3>" + _html_table(STAT_COLUMNS, stat_rows(exp), "stats"))
        parts.append("<ul>" + "".join(f"<li>{_h(s)}</li>" for s in stat_lines(exp)) + "</ul>")
        parts.append(f"<h3>Bounds</h3><p>Stated: <code>{_h(json.dumps(exp['bounds']))}</code></p>")
        if exp["bounds_source"]:
            parts.append(f"<p>Where they come from: {_h(exp['bounds_source'])}</p>")
        parts.append(_html_table(("trial", "bound", "value", "limit", "result"), bound_rows(exp), "bounds"))
        parts.append("<h3>Environment</h3><ul>" + "".join(f"<li>{_h(s)}</li>" for s in env_lines(exp["environment"]))
                     + "</ul>")
        parts.append("<h3>Not covered</h3><ul>" + "".join(f"<li>{_h(s)}</li>" for s in exp["not_covered"])
                     + "</ul></section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------- writing
def timelines(doc: dict[str, Any]) -> dict[str, bytes]:
    """Render (and save as timeline.png beside it) the first trial's timeline of each experiment."""
    from chaos import timeline

    out = {}
    for exp in doc["experiments"]:
        first = Path(exp["trials"][0]["dir"])
        if not (first / "records.ndjson").exists():
            continue
        path = timeline.write(first, rec.read(first / "records.ndjson"), exp["trials"][0]["summary"])
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


# ---------------------------------------------------------------- comparison
def _overlap(a, b) -> bool | None:
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def compare(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> list[dict[str, Any]]:
    """Experiments side by side: by name in two suites, or the one experiment of each run."""
    a_by = {e["name"]: e for e in doc_a["experiments"]}
    b_by = {e["name"]: e for e in doc_b["experiments"]}
    if len(a_by) == 1 and len(b_by) == 1:
        pairs = [(next(iter(a_by.values())), next(iter(b_by.values())))]
    else:
        pairs = [(a_by[n], b_by[n]) for n in a_by if n in b_by]
        if not pairs:
            raise UsageError("the two runs have no experiment in common to compare")
    out = []
    for a, b in pairs:
        rows = []
        for key, label in FIGURES.items():
            fa, fb = a["statistics"]["figures"][key], b["statistics"]["figures"][key]
            diff = None if fa["median"] is None or fb["median"] is None else fb["median"] - fa["median"]
            ov = _overlap(fa["median_ci95"], fb["median_ci95"])
            small = fa["n"] < stats.MIN_TRIALS_MEDIAN or fb["n"] < stats.MIN_TRIALS_MEDIAN
            rows.append({"figure": label, "a": fa["median"], "a_ci95": fa["median_ci95"], "a_missing": fa["missing"],
                         "b": fb["median"], "b_ci95": fb["median_ci95"], "b_missing": fb["missing"], "diff": diff,
                         "exceeds_intervals": None if ov is None or small else not ov,
                         "note": "too few trials to tell" if small else ""})
        fa, fb = a["statistics"]["failed"], b["statistics"]["failed"]
        ov = _overlap(fa["wilson95"], fb["wilson95"])
        rows.append({"figure": "failed fraction", "a": fa["fraction"], "a_ci95": fa["wilson95"], "a_missing": 0,
                     "b": fb["fraction"], "b_ci95": fb["wilson95"], "b_missing": 0,
                     "diff": None if fa["fraction"] is None or fb["fraction"] is None else fb["fraction"] - fa["fraction"],
                     "exceeds_intervals": None if ov is None else not ov, "note": "Wilson 95% intervals"})
        out.append({"a": a["name"], "b": b["name"], "a_title": a["title"], "b_title": b["title"],
                    "a_trials": a["statistics"]["trials"], "b_trials": b["statistics"]["trials"], "rows": rows})
    return out


def _cmp_cell(v, missing=0) -> str:
    s = "-" if v is None else (f"{v:.4f}" if isinstance(v, float) and abs(v) < 1 else _fmt(v))
    return s + (f" ({missing} never)" if missing else "")


def compare_markdown(cmp: list[dict[str, Any]], a_dir: str, b_dir: str) -> str:
    lines = ["# availproof comparison", "", f"A: {a_dir}", f"B: {b_dir}", ""]
    for c in cmp:
        lines += [f"## {c['a']} ({c['a_trials']} trial(s)) vs {c['b']} ({c['b_trials']} trial(s))", ""]
        rows = []
        for r in c["rows"]:
            ex = {None: "cannot tell", True: "YES", False: "no"}[r["exceeds_intervals"]]
            rows.append([r["figure"], _cmp_cell(r["a"], r["a_missing"]), _ci(r["a_ci95"]),
                         _cmp_cell(r["b"], r["b_missing"]), _ci(r["b_ci95"]), _cmp_cell(r["diff"]), ex, r["note"]])
        lines += _md_table(("figure (median)", "A", "A 95% CI", "B", "B 95% CI", "B - A", "beyond the intervals",
                            "note"), rows) + [""]
    return "\n".join(lines) + "\n"
