"""`availproof suite`: the experiments in turn, one summary table.

The quick set (the default, and what `availproof demo` runs) fits in about 15 minutes on a
2-core machine with the streaming target; ``--full`` adds the experiments that need a
cluster of their own (no GCS fault tolerance, the two-region topology) or network namespaces, and
the planned disruptions (a rolling upgrade, a drain).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.base.errors import UsageError

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent.parent / "experiments"
QUICK = ("replica-kill", "engine-hang", "worker-node-kill", "head-kill-gcs-ft", "zone-loss", "redis-loss")
FULL = QUICK + ("engine-crash", "engine-error", "engine-slow", "engine-stutter", "engine-wedge",
                "engine-wedge-watchdog", "engine-garbage", "engine-stall", "restart-fails",
                "head-outage-second-fault", "upgrade", "drain", "head-kill-no-ft", "region-loss", "zone-partition",
                "device-loss", "device-loss-remedy", "rank-death", "rank-hang", "rank-hang-watchdog")


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


def write_order(out: Path, names: list[str]) -> Path:
    """``suite.json`` in the suite directory: ``{"experiments": [names in run order]}``, the order the
    report's overview follows (:func:`chaos.reports.report.suite_order`). Written before the first experiment
    runs, so a suite that is killed half-way keeps it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "suite.json"
    path.write_text(json.dumps({"experiments": list(names)}, indent=2) + "\n")
    return path
