"""scorecard.json and scorecard.md: every cell's figures (:mod:`chaos.scorecard.cells`), the cells not run with
their reasons, the fault-free run, and the issue's targets read against them.

Targets (issue 44, on the stream target): every fault detected by the watchdog v2 at p99 <= 30 s at Serve LLM's
default periods; <= 1 % of requests to the bad replica after detection; 0 false replacements in the fault-free
run. Each is ``met`` true, false, or null (unmeasured: no cell of it was run), with the cells that decide it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.scorecard.plan import FAULT_FREE, Spec

TARGET_P99_S = 30.0
TARGET_TO_BAD_SHARE = 0.01
TARGET_FALSE_REPLACEMENTS = 0


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's three targets against the rows (module doc); the first two for v2, and again for v2-exit when
    the plan has its cells (the same rules, its own lines)."""
    out = _detector_targets(rows, "v2")
    exit_cells = any(r["detector"] == "v2-exit" for r in rows)
    if exit_cells:
        out += _detector_targets(rows, "v2-exit")
    ff = next((r for r in rows if r["fault"] == FAULT_FREE), None)
    if ff is None or ff.get("false_replacements") is None or ff.get("trials_found", 0) < ff.get("trials_planned", 1):
        why = ("no fault-free run in the plan" if ff is None else
               "the fault-free run has no trial yet" if not ff.get("trials_found") else
               (ff.get("why") or {}).get("false_replacements") or
               f"{ff['trials_found']} of {ff['trials_planned']} planned fault-free trials run")
        out.append({"target": "0 false replacements in the fault-free run", "met": None, "why": why})
    else:
        out.append({"target": "0 false replacements in the fault-free run",
                    "met": ff["false_replacements"] <= TARGET_FALSE_REPLACEMENTS, "cells": [ff["id"]]})
    if exit_cells and (ff is None or ff["detector"] != "v2-exit"):
        # one failed check ends a v2-exit replica (Serve waits for three of v2's): v2's count does not stand for it
        out.append({"target": "0 false replacements in the fault-free run (v2-exit)", "met": None,
                    "why": ("no fault-free run in the plan" if ff is None else
                            f"the fault-free run's detector is {ff['detector']}; one failed check ends a v2-exit "
                            "replica where Serve waits for three: fault_free.detector v2-exit measures it")})
    return out


def _detector_targets(rows: list[dict[str, Any]], detector: str) -> list[dict[str, Any]]:
    """The detection and to-bad targets on ``detector``'s cells at the default periods."""
    v2 = [r for r in rows if r["detector"] == detector and r["period"] == "default" and r["fault"] != FAULT_FREE
          and r.get("status") == "run"]
    judged = [r for r in v2 if r.get("detected") is not None]
    miss = [r["id"] for r in judged if r["detected"] != 1 or r["time_to_detect_p99_s"] is None
            or r["time_to_detect_p99_s"] > TARGET_P99_S]
    name = f"every fault detected by {detector} at p99 <= {TARGET_P99_S:g} s at the default periods"
    if miss:
        out = [{"target": name, "met": False, "cells": [r["id"] for r in v2], "missed_by": miss}]
    elif judged and len(judged) == len(v2):
        out = [{"target": name, "met": True, "cells": [r["id"] for r in v2], "missed_by": []}]
    else:
        out = [{"target": name, "met": None, "cells": [r["id"] for r in v2],
                "why": (f"{len(v2) - len(judged)} of {len(v2)} {detector} cells at the default periods without a "
                        "trial that could tell" if v2 else f"no {detector} cell at the default periods in the plan")}]
    # the share on the target's own cells (the detector, the default periods) where detected, read on its upper bound
    # (a failed request that names no replica may have gone to the bad one); unmeasured while any of them cannot tell
    name = f"<= {TARGET_TO_BAD_SHARE:.0%} of requests to the bad replica after detection" + (
        "" if detector == "v2" else f" ({detector})")
    detected = [r for r in v2 if r.get("detected")]
    told = [r for r in detected if r.get("to_bad_share_upper") is not None]
    miss = [r["id"] for r in told if r["to_bad_share_upper"] > TARGET_TO_BAD_SHARE]
    if miss:
        out.append({"target": name, "met": False, "cells": [r["id"] for r in detected], "missed_by": miss})
    elif told and len(told) == len(detected):
        out.append({"target": name, "met": True, "cells": [r["id"] for r in detected], "missed_by": []})
    else:
        out.append({"target": name, "met": None, "cells": [r["id"] for r in detected],
                    "why": (f"{len(detected) - len(told)} of {len(detected)} detected {detector} cells at the default "
                            "periods without requests after their detection" if detected
                            else f"no {detector} cell at the default periods detected its fault")})
    return out


def document(spec: Spec, rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    return {"kind": "scorecard", "app": spec.app, "spec": {k: getattr(spec, k) for k in spec.__dataclass_fields__},
            "directory": str(out), "cells": rows, "targets": targets(rows)}


def _f(v: Any, fmt: str = "{:.1f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def markdown(doc: dict[str, Any]) -> str:
    rows = doc["cells"]
    run = [r for r in rows if r.get("status") in ("run", "same_as") and r["fault"] != FAULT_FREE]
    lines = [f"# Detector scorecard ({doc['app']} app)", "",
             "Detected: share of the trials in which Serve took the faulted replica out within the window. "
             "Time to detect: from the injection to that instant, p50 / p99 over the detected trials. To bad: "
             "requests served by the faulted replica after detection over all sent after it (upper bound with "
             "the requests no replica named). False repl.: replicas other than the faulted one taken out. "
             "Definitions: docs/scorecard.md.", "",
             "| fault | detector | load | period | trials | detected | detect p50 s | detect p99 s | to bad | "
             "false repl. | note |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in run:
        note = f"figures of {r['alias']}" if r.get("alias") else ""
        why = r.get("why")
        if isinstance(why, str):
            note = why
        elif isinstance(why, dict) and r.get("detected") is None:
            note = why.get("detected", note)
        elif isinstance(why, dict) and r.get("detected") == 0:
            note = why.get("time_to_detect_p99_s", note)
        bad = _f(r.get("to_bad_share"), "{:.2%}")
        if r.get("to_bad_share_upper") not in (None, r.get("to_bad_share")):
            bad += f" (<= {r['to_bad_share_upper']:.2%})"
        lines.append(f"| {r['fault']} | {r['detector']} | {r['load']} | {r['period']} | {r.get('trials_found', 0)}"
                     f"/{r['trials_planned']} | {_f(r.get('detected'), '{:.0%}')} | "
                     f"{_f(r.get('time_to_detect_p50_s'))} | {_f(r.get('time_to_detect_p99_s'))} | {bad} | "
                     f"{_f(r.get('false_replacements'), '{:d}')} | {note} |")
    ff = next((r for r in rows if r["fault"] == FAULT_FREE), None)
    lines += ["", "## Fault-free run", ""]
    if ff is None:
        lines.append("Not in the plan.")
    else:
        acc = (f"accelerated: the rate x{ff['speedup']:g} for {ff['duration_s'] / ff['speedup']:.0f} s, the "
               f"requests of {ff['duration_s']:.0f} s, not the same hour of time" if ff.get("accelerated")
               else f"{ff.get('duration_s') or 0:.0f} s of load, not accelerated")
        lines.append(f"{ff['detector']} at the {ff['period']} periods, {ff['load']} load ({acc}): "
                     f"false replacements {_f(ff.get('false_replacements'), '{:d}')} over "
                     f"{_f(ff.get('observed_s'), '{:.0f}')} s observed, {ff.get('trials_found', 0)} trial(s)"
                     + ("" if ff.get("false_replacements") is not None else
                        f" ({(ff.get('why') or {}).get('false_replacements', '')})"))
    lines += ["", "## Targets (issue 44)", ""]
    for t in doc["targets"]:
        word = {True: "met", False: "NOT met", None: "unmeasured"}[t["met"]]
        lines.append(f"- {t['target']}: **{word}**" + (f" ({t['why']})" if t.get("why") else "")
                     + (f"; missed by {', '.join(t['missed_by'])}" if t.get("missed_by") else ""))
    skipped: dict[str, list[str]] = {}
    for r in rows:
        if r.get("status") == "not_applicable":
            skipped.setdefault(r["why"], []).append(r["id"])
    if skipped:
        lines += ["", "## Cells not run", ""]
        for why, ids in skipped.items():
            lines.append(f"- {len(ids)} cell(s): {why} ({', '.join(ids[:4])}{', ...' if len(ids) > 4 else ''})")
    return "\n".join(lines) + "\n"


def write(out: Path, doc: dict[str, Any]) -> dict[str, Path]:
    from chaos.scorecard import picture

    paths = {"json": out / "scorecard.json", "md": out / "scorecard.md", "svg": out / "scorecard.svg"}
    paths["json"].write_text(json.dumps(doc, indent=2, default=str))
    paths["md"].write_text(markdown(doc))
    paths["svg"].write_text(picture.svg(doc))
    return paths
