"""`availproof report RUN_DIR`: the recovery figures of a run, as Markdown or JSON.

Reads ``summary.json`` when the run finished; otherwise recomputes the analysis from
``records.ndjson`` (a run that was killed) and says the run is partial. Every number comes
from the summary, unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import analysis, records as rec
from chaos.errors import UsageError
from chaos.suite import _fmt


def load_summary(run_dir: Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    summary_path, records_path = run_dir / "summary.json", run_dir / "records.ndjson"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        summary.setdefault("partial", False)
        return summary
    if records_path.exists():
        summary = analysis.analyse(rec.read(records_path))
        summary["partial"] = True
        summary["note"] = "no summary.json: the run did not finish; figures recomputed from the records taken"
        return summary
    raise UsageError(f"{run_dir}: no summary.json or records.ndjson: not a run directory")


def markdown(summary: dict[str, Any], title: str = "") -> str:
    lines = [f"# {title or summary.get('experiment') or 'availproof run'}", ""]
    if summary.get("partial"):
        lines += ["**PARTIAL RUN**: " + summary.get("note", "the run did not stop cleanly") + ".", ""]
    req = summary["requests"]
    lines += [f"Requests: {req['measured']} measured ({req['warmup']} warm-up excluded), {req['ok']} ok, "
              f"{req['failed']} failed ({req['failed_before_first_fault']} before the first fault).", ""]
    lines += ["| scope | target | failed | mid-stream | in flight at injection | unaffected zones | detect s | "
              "first success s | steady state s | goodput before/during/after rps | resolution s |",
              "|" + "---|" * 11]
    for f in summary["faults"]:
        g = f["goodput_rps"]
        lines.append(f"| {f['scope']} | {f['target']} | {f['failed']['total']} | {f['failed']['mid_stream']} | "
                     f"{f['failed'].get('in_flight_at_injection', 0)} | {f['failed']['unaffected_zones']} | "
                     f"{_fmt(f['time_to_detect_s'])} | {_fmt(f['time_to_first_success_s'])} | "
                     f"{_fmt(f['time_to_steady_state_s'])} | {_fmt(g['before'])}/{_fmt(g['during'])}/{_fmt(g['after'])} | "
                     f"{_fmt(f['resolution_s'])} |")
    b = summary.get("bounds")
    if b:
        lines += ["", f"Bounds ({'all met' if b['all_met'] else 'VIOLATED'}):", ""]
        lines += [f"- {r['bound']}: {_fmt(r['value'])} (limit {r['limit']}) {'ok' if r['met'] else 'VIOLATED'}"
                  for r in b["results"]]
        if b.get("source"):
            lines += ["", f"Where the bounds come from: {b['source']}"]
    if summary.get("stop_reason"):
        lines += ["", f"Stopped by a stop condition: {summary['stop_reason']}"]
    where = ("network namespaces on one bridge" if (summary.get("cluster") or {}).get("network") == "netns"
             else "loopback addresses")
    lines += ["", f"Not covered: one machine; zones are processes on {where}, not facilities."]
    return "\n".join(lines) + "\n"
