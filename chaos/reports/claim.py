"""`availproof claim`: the claim document (:mod:`chaos.claim`) as Markdown and self-contained HTML, and
``claim.json`` / ``claim.md`` / ``claim.html`` written into the suite directory. Every number is the
document's, unchanged; a null reads ``unmeasurable`` with its reason, never 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.reports.report import CSS, _h, _html_table, _md_table, _ul

FIGURE_COLUMNS = ("figure", "value", "95 % interval", "note")
SCOPE_COLUMNS = ("scope", "events / period", "duration s", "source", "runs", "trials", "mean lost s",
                 "95 % interval", "mean SLO-lost s", "expected lost s", "budget share", "max events",
                 "max events alone", "longest outage tested s")
RUN_COLUMNS = ("run", "scope", "verdict", "counted", "failed / requests", "window s", "baseline failed / requests",
               "lost s", "SLO-lost s", "lower bound, or why not counted")


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
    return (f"{doc['verdict']['word']}: {doc['target']['percent']:g} % over {doc['period']['days']:g} days for the "
            f"{doc['population']} population, risk {doc['risk']:g}")


def figure_rows(doc: dict[str, Any]) -> list[list[str]]:
    a, s, b, pm, ov = doc["availability"], doc["slo_attainment"], doc["error_budget"], doc["p_miss"], doc["overlap"]
    dom, wz = doc["dominant_scope"], doc["worst_zone"]
    rows = [
        ["availability", _unm(doc, "availability.value", _pct(a["value"])),
         _unm(doc, "availability.ci95", _interval(a["ci95"], _pct)),
         "an upper bound: 1 - sum(events x mean lost s) / period over " + (", ".join(a["scopes"]) or "no scope")
         + ("; left out: " + ", ".join(f"{k} ({v})" for k, v in a["left_out"].items()) if a["left_out"] else "")],
        ["slo_attainment", _unm(doc, "slo_attainment.value", _pct(s["value"])),
         _unm(doc, "slo_attainment.ci95", _interval(s["ci95"], _pct)),
         "the same with requests outside the SLO counted"],
        ["error budget s", _num(b["seconds"]), "-",
         f"(1 - target) x period; expected lost {_num(b['expected_lost_s'])} s = {_pct(b['used'], 2)} of it"],
        ["p_miss", _unm(doc, "p_miss.value", _num(pm.get("value"))), "-",
         f"{pm['simulations']} simulated periods, seed {pm['seed']}, standard error {_num(pm['stderr'])}"
         if pm.get("value") is not None else ""],
        ["dominant scope", _unm(doc, "dominant_scope", dom["scope"] if dom else "n/a"), "-",
         f"{_num(dom['expected_lost_s'])} s per period, {_pct(dom['budget_share'], 2)} of the budget" if dom else ""],
        ["overlap probability", _num(ov["probability"]), "-",
         f"two events at once in a period, roughly ({_num(ov['expected'])} overlaps expected)"],
    ]
    if doc["population"] == "affected":
        note = f"availability {_pct(wz['availability'])} for its users ({', '.join(wz['scopes'])})" if wz else ""
        rows.append(["worst zone", _unm(doc, "worst_zone", wz["zone"] if wz else "n/a"), "-", note])
    return rows


def scope_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    names = list(doc["rates"]["scopes"]) + [n for n in doc["scopes"] if n not in doc["rates"]["scopes"]]
    for n in names:
        rate = doc["rates"]["scopes"].get(n)
        e = doc["scopes"].get(n)
        r = [n, _num(rate["events"]) if rate else "no rate", _num(rate["duration_s"]) if rate else "-",
             rate["basis"] if rate else "-"]
        if e is None:
            rows.append(r + ["0", "0"] + ["not covered"] + ["-"] * 7)
            continue
        lost, slo = e["lost_service_s"], e["slo_lost_service_s"]
        r += [str(e["runs"]), str(e["trials"]),
              _num(lost["mean"]) + (" (lower bound)" if lost["lower_bound"] else ""),
              _interval(lost["ci95"]), _num(slo["mean"]), _num(e.get("expected_lost_s")),
              _pct(e.get("budget_share"), 2), _num(e.get("max_events")), _num(e.get("max_events_alone")),
              _num(e["outage_tested_s"])]
        rows.append(r)
    return rows


def _run_name(r: dict[str, Any]) -> str:
    return r["experiment"] + (f"/trial-{r['trial']}" if r["trial"] is not None else "")


def run_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in doc["runs"]:
        for i, f in enumerate(r["faults"]):
            base = f["baseline"]
            rows.append([
                _run_name(r) + (f" fault {i + 1}" if len(r["faults"]) > 1 else ""), f["scope"], str(r["verdict"]),
                "yes" if r["counted"] else "no",
                f"{f['failed']} / {f['requests']}", _num(f["window_s"]),
                f"{base['failed']} / {base['requests']}" if base else "n/a",
                _num(f["lost_service_s"]) if f["lost_service_s"] is not None
                else "unmeasurable: " + f["unmeasurable"].get("lost_service_s", ""),
                _num(f["slo_lost_service_s"]) if f["slo_lost_service_s"] is not None else "unmeasurable",
                (r["not_counted"] or r["lower_bound"] or "-") if i == len(r["faults"]) - 1 else "",
            ])
    return rows


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
    return [f"{n}: {r['events']:g} per {doc['period']['days']:g} days"
            + (f", {r['duration_s']:g} s each" if r["duration_s"] else "")
            + f" ({r['basis']}): {r['source'] or 'no source given'}" for n, r in doc["rates"]["scopes"].items()]


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


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# availproof claim: {doc['suite_dir']}", "", f"**{headline(doc)}**", ""]
    lines += [f"- {r}" for r in doc["verdict"]["reasons"]] + [""]
    lines += ["## Figures", ""] + _md_table(FIGURE_COLUMNS, figure_rows(doc)) + [""]
    lines += ["## Per scope", ""] + _md_table(SCOPE_COLUMNS, scope_rows(doc)) + [""]
    lines += ["## Runs", "", "lost s = failed x window s / requests, minus baseline failed x window s / baseline "
              "requests (population: " + doc["population"] + ").", ""]
    lines += _md_table(RUN_COLUMNS, run_rows(doc)) + [""]
    for title, items in (("Left out", left_out_lines(doc)), ("Rates", rate_lines(doc)),
                         ("Load and environment", env_lines(doc)), ("Assumptions", doc["assumptions"]),
                         ("Derived from records.ndjson", doc["derived_from_records"]),
                         ("Unmeasurable", [f"{k}: {v}" for k, v in doc["unmeasurable"].items()])):
        if items:
            lines += [f"## {title}", ""] + [f"- {s}" for s in items] + [""]
    return "\n".join(lines)


def html(doc: dict[str, Any]) -> str:
    bad = doc["verdict"]["word"] != "supported"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>availproof claim</title><style>{CSS}</style>"
             f"</head><body><h1>availproof claim</h1><p>{_h(doc['suite_dir'])}</p>",
             f"<p class='{'bad' if bad else ''}'>{_h(headline(doc))}</p>", _ul(doc["verdict"]["reasons"]),
             "<h2>Figures</h2>" + _html_table(FIGURE_COLUMNS, figure_rows(doc), "figures"),
             "<h2>Per scope</h2>" + _html_table(SCOPE_COLUMNS, scope_rows(doc), "scopes"),
             f"<h2>Runs</h2><p>lost s = failed x window s / requests, minus baseline failed x window s / baseline "
             f"requests (population: {_h(doc['population'])}).</p>" + _html_table(RUN_COLUMNS, run_rows(doc), "runs")]
    for title, items in (("Left out", left_out_lines(doc)), ("Rates", rate_lines(doc)),
                         ("Load and environment", env_lines(doc)), ("Assumptions", doc["assumptions"]),
                         ("Derived from records.ndjson", doc["derived_from_records"]),
                         ("Unmeasurable", [f"{k}: {v}" for k, v in doc["unmeasurable"].items()])):
        if items:
            parts.append(f"<h2>{_h(title)}</h2>" + _ul(items))
    parts.append("</body></html>")
    return "\n".join(parts)


def write(suite_dir: Path, doc: dict[str, Any], formats: tuple[str, ...] = ("md",)) -> dict[str, Path]:
    """claim.json always, and claim.md / claim.html as asked, into ``suite_dir``; returns the paths."""
    suite_dir = Path(suite_dir)
    out = {"json": suite_dir / "claim.json"}
    out["json"].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if "md" in formats:
        out["md"] = suite_dir / "claim.md"
        out["md"].write_text(markdown(doc))
    if "html" in formats:
        out["html"] = suite_dir / "claim.html"
        out["html"].write_text(html(doc))
    return out
