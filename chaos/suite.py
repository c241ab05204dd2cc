"""`availproof suite`: the experiments in turn, one summary table.

The quick set (the default, and what `availproof demo` runs) fits in about 15 minutes on a
2-core machine with the streaming target; ``--full`` adds the experiments that need a
cluster of their own (no GCS fault tolerance, the two-region topology) or network namespaces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos import bounds
from chaos.errors import UsageError

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"
QUICK = ("replica-kill", "engine-hang", "worker-node-kill", "head-kill-gcs-ft", "zone-loss", "redis-loss")
FULL = QUICK + ("head-outage-second-fault", "head-kill-no-ft", "region-loss", "zone-partition")


def experiment_path(name: str) -> Path:
    path = EXPERIMENTS_DIR / f"{name}.json"
    if not path.exists():
        raise UsageError(f"no experiment named {name!r} in {EXPERIMENTS_DIR}")
    return path


def selection(full: bool, only: list[str] | None) -> list[str]:
    if only:
        for name in only:
            experiment_path(name)
        return list(only)
    return list(FULL if full else QUICK)


def _fmt(v: Any) -> str:
    if v is None:
        return "never"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _fault_met(summary: dict[str, Any], fault: dict[str, Any]) -> str:
    b = summary.get("bounds") or {}
    return bounds.fault_met(b.get("results"), fault["fault_id"]) or ("yes" if b.get("all_met") else "no")


def table(results: list[dict[str, Any]]) -> str:
    head = ("| experiment | scope | requests | failed (mid-stream) | unaffected zones failed | time to detect s | "
            "time to first success s | time to steady state s | bounds met | verdict |")
    rows = [head, "|" + "---|" * 10]
    for r in results:
        name = Path(r["experiment"]).stem
        s = r.get("summary") or {}
        faults = s.get("faults") or []
        verdict = {0: "PASS", 1: "VIOLATED", 2: "ERROR"}[r["verdict"]]
        if not faults:
            rows.append(f"| {name} | - | - | - | - | - | - | - | no | {verdict}: {(r.get('error') or '')[:80]} |")
            continue
        for f in faults:
            rows.append(
                f"| {name} | {f['scope']} | {f['requests_in_window']} | {f['failed']['total']} "
                f"({f['failed']['mid_stream']}) | {f['failed']['unaffected_zones']} | {_fmt(f['time_to_detect_s'])} | "
                f"{_fmt(f['time_to_first_success_s'])} | {_fmt(f['time_to_steady_state_s'])} | "
                f"{_fault_met(s, f)} | {verdict} |")
    return "\n".join(rows) + "\n"
