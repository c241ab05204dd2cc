"""A cell's figures over its trials (each trial's from :mod:`chaos.scorecard.figures`).

- ``detected``: the share of the trials in which the faulted replica was taken out within the window, over the
  trials where that could be told (``trials_judged``), with its Wilson 95 % interval; null when none could.
- ``time_to_detect_s``: p50 and p99 (nearest rank, :func:`chaos.base.stats.percentile`) of the detected trials';
  null when none was detected (with N trials p99 is their maximum below 100).
- ``to_bad_after_detection``: the requests served by the faulted replica after detection over all sent after
  it, pooled over the detected trials (``share``), and its upper bound counting the requests no replica named
  (``share_upper``).
- ``false_replacements``: the sum over the trials (null when no trial could tell).

A cell not run (its reason) has every figure null with that reason; one that shares another's deployment
(``alias``) takes that cell's figures, said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.core import evidence
from chaos.scorecard import figures
from chaos.scorecard.plan import FAULT_FREE, Cell
from chaos.base.stats import percentile, wilson

FIGURES = ("detected", "time_to_detect_p50_s", "time_to_detect_p99_s", "to_bad_share", "false_replacements")


def empty(cell: Cell, why: str) -> dict[str, Any]:
    return {"id": cell.id, "fault": cell.fault, "detector": cell.detector, "load": cell.load, "period": cell.period,
            "trials_planned": cell.trials, "trials_found": 0, **{k: None for k in FIGURES}, "why": why}


def aggregate(cell: Cell, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of a fault cell from its trials' figures (module doc)."""
    if not trials:
        return empty(cell, "no trial run yet")
    out = empty(cell, "")
    out.pop("why")
    out["trials_found"] = len(trials)
    judged = [t for t in trials if t.get("detected") is not None]
    hits = [t for t in judged if t["detected"]]
    why: dict[str, str] = {}
    out["trials_judged"] = len(judged)
    if judged:
        out["detected"] = round(len(hits) / len(judged), 4)
        lo_hi = wilson(len(hits), len(judged))
        out["detected_interval95"] = [round(lo_hi[0], 4), round(lo_hi[1], 4)] if lo_hi else None
    else:
        why["detected"] = "no trial could tell: " + "; ".join(sorted({(t.get("why") or {}).get("detected", "")
                                                                       for t in trials}))
    times = sorted(t["time_to_detect_s"] for t in hits if t.get("time_to_detect_s") is not None)
    if times:
        out["time_to_detect_p50_s"] = percentile(times, 0.50)
        out["time_to_detect_p99_s"] = percentile(times, 0.99)
    else:
        horizon = min((t.get("horizon_s") or 0) for t in trials) if trials else None
        why["time_to_detect_p50_s"] = why["time_to_detect_p99_s"] = (
            f"never detected within the window ({horizon:.0f} s after the injection)" if judged and horizon
            else "not detected")
    sent = sum((t.get("after_detection") or {}).get("requests") or 0 for t in hits)
    bad = sum((t.get("after_detection") or {}).get("to_bad") or 0 for t in hits)
    unnamed = sum((t.get("after_detection") or {}).get("unnamed") or 0 for t in hits)
    out["to_bad_after_detection"] = {"requests": sent, "to_bad": bad, "unnamed": unnamed}
    if sent:
        out["to_bad_share"] = round(bad / sent, 6)
        out["to_bad_share_upper"] = round((bad + unnamed) / sent, 6)
    else:
        why["to_bad_share"] = "not detected" if not hits else "no request sent after detection (sparse or no load)"
    counted = [t["false_replacements"] for t in trials if t.get("false_replacements") is not None]
    out["false_replacements_trials"] = len(counted)
    if counted and len(counted) == len(trials):
        out["false_replacements"] = sum(counted)
    else:  # a sum over some of the trials would be shown as the whole cell's: null, said
        why["false_replacements"] = (f"only {len(counted)} of {len(trials)} trials' samples carried the replicas' ids"
                                     if counted else "no trial's samples carried the replicas' ids")
    out["trials"] = trials
    if why:
        out["why"] = why
    return out


def fault_free(cell: Cell, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The fault-free cell: false replacements summed over its trials, and the time and requests observed."""
    out = empty(cell, "")
    out.pop("why")
    out.update(trials_found=len(trials), trials=trials, duration_s=cell.duration_s, speedup=cell.speedup,
               accelerated=bool(cell.speedup and cell.speedup > 1))
    counted = [t["false_replacements"] for t in trials if t.get("false_replacements") is not None]
    out["observed_s"] = sum(t.get("observed_s") or 0 for t in trials) or None
    out["requests"] = sum(t.get("requests") or 0 for t in trials) or None
    out["false_replacements_trials"] = len(counted)
    if counted and len(counted) == len(trials):
        out["false_replacements"] = sum(counted)
    else:
        out["why"] = {"false_replacements": "no trial run yet" if not trials else
                      f"only {len(counted)} of {len(trials)} trials' samples carried the replicas' ids" if counted
                      else "no trial's samples carried the replicas' ids"}
    for k in ("detected", "time_to_detect_p50_s", "time_to_detect_p99_s", "to_bad_share"):
        out.setdefault("why", {})[k] = "not applicable: no fault injected"
    return out


def trial_dirs(out: Path, cell: Cell) -> list[Path]:
    """The cell's trial run directories under the scorecard's ``out`` (``<cell id>/trial-N``, or the cell's
    directory itself when it is one run)."""
    d = Path(out) / cell.id
    if not d.is_dir():
        return []
    return [p for _, _, p in evidence.find_runs(d)]


def derive(out: Path, plan: list[Cell]) -> list[dict[str, Any]]:
    """Every cell's figures from the runs under ``out`` (cells not run keep their reason; an alias takes the
    figures of the cell it shares a deployment with)."""
    by_id: dict[str, dict[str, Any]] = {}
    for cell in plan:
        if cell.alias or not cell.runs:
            continue
        dirs = trial_dirs(out, cell)
        if cell.fault == FAULT_FREE:
            by_id[cell.id] = fault_free(cell, [figures.fault_free_trial(d) for d in dirs])
        else:
            by_id[cell.id] = aggregate(cell, [figures.fault_trial(d) for d in dirs])
    rows = []
    for cell in plan:
        status = "run" if cell.runs else ("same_as" if cell.alias else "not_applicable")
        if cell.id in by_id:
            row = by_id[cell.id]
        elif cell.alias in by_id:
            row = {**by_id[cell.alias], "id": cell.id, "detector": cell.detector, "alias": cell.alias,
                   "note": cell.reason}
            row.pop("trials", None)
        else:
            row = empty(cell, cell.reason or "no trial run yet")
        rows.append({**row, "status": status})
    return rows
