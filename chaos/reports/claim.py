"""`availproof claim`: the claim document (:mod:`chaos.claim`) as Markdown, self-contained HTML and one
picture (each scope's expected loss and its 90 % interval against the error budget, SVG), written into the
suite directory as ``claim.json`` / ``claim.md`` / ``claim.html`` / ``claim.svg``. Every number is the
document's, unchanged; a null reads ``unmeasurable`` with its reason, never 0."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from chaos.reports.render import CSS, escape_html, html_list, html_table, md_table

FIGURE_COLUMNS = ("figure", "value", "90 % interval", "95 % interval", "note")
SCOPE_COLUMNS = ("scope", "rate / period", "duration s", "source", "runs", "trials", "unrecovered",
                 "mean lost s", "expected lost s / period", "90 % interval", "budget share", "outage length covered by",
                 "longest outage tested s")
RUN_COLUMNS = ("run", "scope", "verdict", "counted", "failed / requests", "window s", "baseline failed / requests",
               "model", "lost s", "SLO-lost s", "lower bound, or why not counted")
PLAN_COLUMNS = ("scope", "trials", "expected lost upper 95 % s", "after one more", "lowers by s", "suggested trials",
                "command")


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{round(v, digits):g}"
    return str(v)


def _pct(v: float | None, digits: int = 5) -> str:
    return "n/a" if v is None else f"{v * 100:.{digits}f} %"


def _interval(ci, fmt=_num) -> str:
    return "-" if not ci else f"{fmt(ci[0])} .. {fmt(ci[1])}"


def _unm(doc: dict[str, Any], key: str, value: str) -> str:
    why = doc["unmeasurable"].get(key)
    return f"unmeasurable: {why}" if why and value in ("n/a", "-") else value


def headline(doc: dict[str, Any]) -> str:
    slo = doc["target"].get("slo_percent")
    return (f"{doc['verdict']['word']}: {doc['target']['percent']:g} % over {doc['period']['days']:g} days for the "
            f"{doc['population']} population, risk {doc['risk']:g}"
            + (f", SLO attainment {slo:g} %" if slo is not None else ""))


def _predictive_row(doc: dict[str, Any], key: str, note: str) -> list[str]:
    a = doc[key]
    pm = a.get("p_miss")
    p = "" if not pm else (f"; P(at least the target) {a['p_at_least_target']:.4f}, miss share {_num(pm['value'])} "
                           f"(upper 95 % {_num(pm['upper95'])}, {pm['periods']} periods)")
    return [f"{key} (predictive mean)", _unm(doc, f"{key}.mean", _pct(a.get("mean"))),
            _interval(a.get("interval90"), _pct), _interval(a.get("interval95"), _pct), note + p]


def figure_rows(doc: dict[str, Any]) -> list[list[str]]:
    b, ov = doc["error_budget"], doc["overlap"]
    dom, wz = doc["dominant_scope"], doc["worst_zone"]
    a = doc["availability"]
    cred, bg = doc.get("credibility"), doc.get("background") or {}
    rows = []
    if cred:
        ca = cred["availability"]
        rows.append(["credibility", _num(ca["value"]), _interval(ca["interval"]), "-",
                     cred["statement"] + f" (Monte Carlo: {ca['outer']} x {ca['inner']} draws"
                     + ("" if ca["resolved"] else ", not resolved") + ")"
                     + ("" if cred["default_prior"] is None else
                        f"; with the default prior {_num(cred['default_prior']['value'])}, so "
                        f"{_num(cred['from_prior'])} of it comes from the prior")])
    if bg.get("share"):
        rows.append(["background lost s", _num(bg["lost_s"]["mean"]), _interval(bg["lost_s"]["interval90"]), "-",
                     f"{bg['failed']} of {bg['requests']} baseline requests failed ({bg['runs']} runs), charged to "
                     f"the period: {_pct(bg['budget_share'], 2)} of the budget"])
    rows += [
        _predictive_row(doc, "availability", "a period's availability under the tested faults (an upper bound: "
                                             "untested causes are not in it)"),
        ["availability (point)", _pct(a["point"]), "-", "-",
         "1 - sum(mean events x mean lost s) / period over " + (", ".join(a["scopes"]) or "no scope")
         + ("; left out: " + ", ".join(f"{k} ({v})" for k, v in a["left_out"].items()) if a["left_out"] else "")],
        _predictive_row(doc, "slo_attainment", "the same with requests outside the SLO counted"),
        ["error budget s", _num(b["seconds"]), "-", "-",
         f"(1 - target) x period; expected lost {_num(b['expected_lost_s'])} s = {_pct(b['used'], 2)} of it"
         if b["expected_lost_s"] is not None else "(1 - target) x period"],
        ["dominant scope", _unm(doc, "dominant_scope", dom["scope"] if dom else "n/a"), "-", "-",
         f"{_num(dom['expected_lost_s'])} s per period, {_pct(dom['budget_share'], 2)} of the budget" if dom else ""],
        ["overlap probability", _num(ov["probability"]), "-", "-",
         f"two events at once in a period, roughly ({_num(ov['expected'])} overlaps expected)"],
    ]
    if doc["population"] == "affected":
        note = f"availability {_pct(wz['availability'])} for its users ({', '.join(wz['scopes'])})" if wz else ""
        rows.append(["worst zone", _unm(doc, "worst_zone", wz["zone"] if wz else "n/a"), "-", "-", note])
    return rows


def rate_text(r: dict[str, Any]) -> str:
    if r["kind"] == "point":
        return f"{_num(r['events'])} (point)"
    iv = r.get("interval90_events")
    return (f"{r['count']} in {_num(r['exposure_days'])} days: {_num(r.get('mean_events'))}"
            + (f" [{_num(iv[0])} .. {_num(iv[1])}]" if iv else ""))


def _covered_by(e: dict[str, Any]) -> str:
    c = e["coverage"]
    if c["duration_s"] is None:
        return "no length stated"
    if not c["covered"]:
        return "not covered"
    if c["by"] == "runs":
        return f"{c['runs_at_or_beyond']} runs at or beyond it"
    f = c["fit"]
    return f"fit: b {_num(f['b'])} [{_num(f['b_ci90'][0])} .. {_num(f['b_ci90'][1])}] s per s"


def scope_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    names = list(doc["rates"]["scopes"]) + [n for n in doc["scopes"] if n not in doc["rates"]["scopes"]]
    for n in names:
        rate = doc["rates"]["scopes"].get(n)
        e = doc["scopes"].get(n)
        r = [n, rate_text(rate) if rate else "no rate", _num(rate["duration_s"]) if rate else "-",
             rate["basis"] if rate else "-"]
        if e is None:
            rows.append(r + ["0", "0", "-", "not covered"] + ["-"] * 5)
            continue
        lost, exp = e["lost_service_s"], e["expected_lost_s"]
        unrec = e["unrecovered"]
        r += [str(e["runs"]), str(e["trials"]), f"{unrec['runs']} of {unrec['of']}",
              _num(lost["mean"]) + (" (a lower bound in some)" if lost["lower_bound"] else ""),
              _num(exp["mean"]) if exp else "n/a", _interval(exp["interval90"]) if exp else "-",
              _pct(e.get("budget_share"), 2), _covered_by(e), _num(e["outage_tested_s"])]
        rows.append(r)
    return rows


def _run_name(r: dict[str, Any]) -> str:
    return r["experiment"] + (f"/trial-{r['trial']}" if r["trial"] is not None else "")


def _model(m: dict[str, Any] | None) -> str:
    if not m:
        return "n/a"
    if m["name"] == "closed":
        return f"closed, {_num(m.get('users'))} users" if "users" in m else "closed"
    if "width_s" not in m:
        return "open"
    return f"open, {_num(m['width_s'])} s buckets" + (f", {m['empty_buckets']} empty" if m["empty_buckets"] else "")


def run_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in doc["runs"]:
        for i, f in enumerate(r["faults"]):
            base = f["baseline"]
            lost = (_num(f["lost_service_s"]) + (f" (clipped from {_num(f['clipped_from'])})"
                                                if f["clipped_from"] is not None else "")
                    if f["lost_service_s"] is not None
                    else "unmeasurable: " + f["unmeasurable"].get("lost_service_s", ""))
            rows.append([
                _run_name(r) + (f" fault {i + 1}" if len(r["faults"]) > 1 else ""), f["scope"], str(r["verdict"]),
                "yes" if r["counted"] else "no",
                f"{_num(f['failed'])} / {_num(f['requests'])}"
                + (f" logical ({_num(f['attempts'])} attempts)" if "attempts" in f else ""), _num(f["window_s"]),
                f"{base['failed']} / {base['requests']}" if base else "n/a", _model(f["model"]), lost,
                _num(f["slo_lost_service_s"]) if f["slo_lost_service_s"] is not None else "unmeasurable",
                (r["not_counted"] or r["lower_bound"] or "-") if i == len(r["faults"]) - 1 else "",
            ])
    return rows


def counted_lines(doc: dict[str, Any]) -> list[str]:
    """Per scope whose runs' client retried, what its costs are counted in (none when no run retried)."""
    return [f"{n}: {e['counted_in']['statement']}" for n, e in doc["scopes"].items() if e.get("counted_in")]


def plan_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [[p["scope"], str(p["trials"]), _num(p["expected_lost_upper95_s"]), _num(p["after_one_more_s"]),
             _num(p["lowers_by_s"]) if p["why"] is None else f"not covered: {p['why']}", str(p["suggested_trials"]),
             p["command"]] for p in doc["plan"]]


def env_lines(doc: dict[str, Any]) -> list[str]:
    out = [f"{k}: {', '.join('not recorded' if x is None else str(x) for x in v)}"
           for k, v in doc["environment"].items() if v]
    for n, e in doc["scopes"].items():
        load = e["load"]
        offered = "; ".join(", ".join(f"{k} {v}" for k, v in o.items() if v is not None) for o in load["offered"])
        out.append(f"{n} load: offered {offered or 'not recorded'}; measured {_num(load['measured_rps'])} requests/s "
                   f"in the fault windows; utilization not measured")
    return out


def rate_lines(doc: dict[str, Any]) -> list[str]:
    return [f"{n}: {rate_text(r)} per {doc['period']['days']:g} days"
            + (f", {r['duration_s']:g} s each" if r["duration_s"] else "")
            + f", unrecovered {r['unrecovered_cost_s']:g} s ({r['basis']}): {r['source'] or 'no source given'}"
            for n, r in doc["rates"]["scopes"].items()]


def left_out_lines(doc: dict[str, Any]) -> list[str]:
    out = list(doc["warnings"])
    if doc["tested_without_rate"]:
        out.append("tested, with no rate in RATES (not in the figures): " + ", ".join(doc["tested_without_rate"]))
    if doc["not_considered"]:
        out.append("neither tested nor rated: " + ", ".join(doc["not_considered"]))
    for m in doc["multi_fault_runs"]:
        out.append(f"{_run_name(m)} ({' then '.join(m['scopes'])}): lost {_num(m['lost_service_s'])} s in all, "
                   "reported on its own, never pooled into a scope")
    return out


def svg(doc: dict[str, Any]) -> str:
    """Each scope's expected lost seconds per period (dot) and its 90 % interval (bar), log scale, against
    the error budget (red line)."""
    rows = [(n, e["expected_lost_s"]) for n, e in doc["scopes"].items() if e.get("expected_lost_s")]
    budget = doc["error_budget"]["seconds"]
    W, left, right, top, rh = 720, 110, 30, 40, 28
    H = top + rh * max(1, len(rows)) + 40
    vals = [budget] + [v for _, x in rows for v in (x["mean"], *x["interval90"]) if v > 0]
    lo = 10 ** math.floor(math.log10(max(min(vals), 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    if hi <= lo:
        hi = lo * 10

    def x(v: float) -> float:
        v = min(max(v, lo), hi)
        return left + (W - left - right) * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
             f'font-size="12"><text x="{left}" y="18">expected lost seconds per {doc["period"]["days"]:g} days (log scale), '
             f'90 % interval, against the error budget ({_num(budget)} s)</text>']
    d = lo
    while d <= hi:
        parts.append(f'<line x1="{x(d):.1f}" y1="{top - 6}" x2="{x(d):.1f}" y2="{H - 30}" stroke="#ddd"/>'
                     f'<text x="{x(d):.1f}" y="{H - 14}" text-anchor="middle">{_num(d)}</text>')
        d *= 10
    for i, (n, e) in enumerate(rows):
        y = top + rh * i + rh / 2
        a, b = e["interval90"]
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape_html(n)}</text>'
                     f'<line x1="{x(max(a, lo)):.1f}" y1="{y}" x2="{x(max(b, lo)):.1f}" y2="{y}" stroke="#36c" '
                     f'stroke-width="6"/><circle cx="{x(max(e["mean"], lo)):.1f}" cy="{y}" r="5" fill="#123"/>')
    parts.append(f'<line x1="{x(budget):.1f}" y1="{top - 10}" x2="{x(budget):.1f}" y2="{H - 30}" stroke="#c00" '
                 f'stroke-width="2"/><text x="{x(budget):.1f}" y="{top - 12}" fill="#c00" '
                 f'text-anchor="middle">budget</text></svg>')
    return "".join(parts)


def _sections(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    needed = doc.get("trials_needed") or {}
    need = []
    if needed.get("found"):
        need.append(", ".join(f"{k} more trial(s) of {n}" for n, k in needed["extra"].items())
                    + " would support the claim, if they recover, each costs the scope's typical recovered cost ("
                    + ", ".join(f"{n} {_num(v)} s" for n, v in (needed.get("each_costing_s") or {}).items())
                    + ") and brings a baseline like the runs' so far")
    elif needed:
        need.append(needed.get("why", ""))
    return [("Trials needed", need), ("Left out", left_out_lines(doc)), ("Rates", rate_lines(doc)),
            ("Load and environment", env_lines(doc)), ("Assumptions", doc["assumptions"]),
            ("Unmeasurable", [f"{k}: {v}" for k, v in doc["unmeasurable"].items()])]


RUNS_NOTE = ("lost s: the population's lost service-seconds net of its baseline: an open loop's failed fraction "
             "integrated over time buckets by send instant, a closed loop's failed requests' spans over its users "
             "(chaos.analysis.lost_service); never below 0.")


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# availproof claim: {doc['suite_dir']}", "", f"**{headline(doc)}**", ""]
    lines += [f"- {r}" for r in doc["verdict"]["reasons"]] + [""]
    oc = doc.get("operating_characteristic")
    lines += [f"Operating characteristic: {oc['statement']}", ""] if oc else []
    lines += ["## Figures", ""] + md_table(FIGURE_COLUMNS, figure_rows(doc)) + [""]
    if doc["scopes"]:
        lines += ["![expected loss per scope against the error budget](claim.svg)", ""]
    lines += ["## Per scope", ""] + md_table(SCOPE_COLUMNS, scope_rows(doc)) + [""]
    lines += [f"- {x}" for x in counted_lines(doc)] + ([""] if counted_lines(doc) else [])
    if doc["plan"]:
        lines += ["## Plan: the next trials", ""] + md_table(PLAN_COLUMNS, plan_rows(doc)) + [""]
    lines += ["## Runs", "", RUNS_NOTE + " Population: " + doc["population"] + ".", ""]
    lines += md_table(RUN_COLUMNS, run_rows(doc)) + [""]
    for title, items in _sections(doc):
        if items:
            lines += [f"## {title}", ""] + [f"- {s}" for s in items] + [""]
    return "\n".join(lines)


def html(doc: dict[str, Any]) -> str:
    bad = doc["verdict"]["word"] != "supported"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>availproof claim</title><style>{CSS}</style>"
             f"</head><body><h1>availproof claim</h1><p>{escape_html(doc['suite_dir'])}</p>",
             f"<p class='{'bad' if bad else ''}'>{escape_html(headline(doc))}</p>",
             html_list(doc["verdict"]["reasons"]),
             (f"<p>Operating characteristic: {escape_html(doc['operating_characteristic']['statement'])}</p>"
              if doc.get("operating_characteristic") else ""),
             "<h2>Figures</h2>" + html_table(FIGURE_COLUMNS, figure_rows(doc), "figures")]
    if doc["scopes"]:
        parts.append(svg(doc))
    parts.append("<h2>Per scope</h2>" + html_table(SCOPE_COLUMNS, scope_rows(doc), "scopes")
                 + (html_list(counted_lines(doc)) if counted_lines(doc) else ""))
    if doc["plan"]:
        parts.append("<h2>Plan: the next trials</h2>" + html_table(PLAN_COLUMNS, plan_rows(doc), "plan"))
    parts.append(f"<h2>Runs</h2><p>{escape_html(RUNS_NOTE)} Population: {escape_html(doc['population'])}.</p>"
                 + html_table(RUN_COLUMNS, run_rows(doc), "runs"))
    for title, items in _sections(doc):
        if items:
            parts.append(f"<h2>{escape_html(title)}</h2>" + html_list(items))
    parts.append("</body></html>")
    return "\n".join(parts)


def plan_text(doc: dict[str, Any]) -> str:
    """``availproof claim --plan``: the verdict and the next trials, one per line, with their commands."""
    lines = [headline(doc)] + [f"  {r}" for r in doc["verdict"]["reasons"]]
    if not doc["plan"]:
        lines.append("no plan: nothing is rated")
    for i, p in enumerate(doc["plan"], 1):
        if p["why"] is not None:
            lines.append(f"{i}. {p['scope']}: not covered: {p['why']}: {p['command']}")
            continue
        lines.append(f"{i}. {p['scope']}: {p['trials']} trial(s); one more lowers the expected loss's upper 95 % bound "
                     f"by {_num(p['lowers_by_s'])} s (from {_num(p['expected_lost_upper95_s'])} s); "
                     f"suggested {p['suggested_trials']}: {p['command']}")
    return "\n".join(lines) + "\n"


def write(suite_dir: Path, doc: dict[str, Any], formats: tuple[str, ...] = ("md",)) -> dict[str, Path]:
    """claim.json always, claim.md / claim.html as asked (claim.svg with either), into ``suite_dir``."""
    suite_dir = Path(suite_dir)
    out = {"json": suite_dir / "claim.json"}
    out["json"].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if ("md" in formats or "html" in formats) and doc["scopes"]:
        out["svg"] = suite_dir / "claim.svg"
        out["svg"].write_text(svg(doc))
    if "md" in formats:
        out["md"] = suite_dir / "claim.md"
        out["md"].write_text(markdown(doc))
    if "html" in formats:
        out["html"] = suite_dir / "claim.html"
        out["html"].write_text(html(doc))
    return out
