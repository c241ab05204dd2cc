"""The one reader of a run's evidence: which runs a directory holds, their summaries and their records.
The report, the claim, ``analyse`` and the suite read runs through it, so they find the same runs and apply
the same version rule.

- **Runs** (:func:`find_runs`): a run directory (``summary.json`` or ``records.ndjson``:
  :func:`chaos.recording.records.is_run_dir`; a capacity sweep's directory is not one), an experiment's ``trial-N/``
  runs, or a suite (one folder per experiment, each a run or its trials).
- **The version rule** (:func:`load_summary`): a ``summary.json`` of the current format
  (:data:`chaos.analysis.FORMAT_VERSION`) is read as it is; an older one is derived again from its
  ``records.ndjson`` (the run's context kept, its bounds checked again, and said in ``note`` and
  ``rederived``); a newer one is refused (written by a newer availproof); a run without ``summary.json``
  (killed) is derived from its records and marked ``partial``. A damaged file is one line naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import analysis
from chaos.recording import record_columns, records as rec
from chaos.base.errors import UsageError


def trial_dirs(d: Path) -> list[tuple[int, Path]]:
    """(N, path) of each ``trial-N/`` run under ``d``, in N's order."""
    out = []
    for p in Path(d).glob("trial-*"):
        n = p.name.split("-", 1)[1]
        if p.is_dir() and n.isdigit() and rec.is_run_dir(p):
            out.append((int(n), p))
    return sorted(out)


def find_runs(root: str | Path, what: str = "run directory") -> list[tuple[str, int | None, Path]]:
    """(experiment, trial number or None, run directory) of every run under ``root``, experiments in name
    order. One line naming ``root`` when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: no such {what}")
    if rec.is_run_dir(root):
        return [(root.name, None, root)]
    if trial_dirs(root):
        return [(root.name, n, p) for n, p in trial_dirs(root)]
    out: list[tuple[str, int | None, Path]] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if rec.is_run_dir(sub):
            out.append((sub.name, None, sub))
        else:
            out += [(sub.name, n, p) for n, p in trial_dirs(sub)]
    return out


def experiments(root: str | Path) -> dict[str, list[Path]]:
    """The runs under ``root`` grouped by experiment (trials in order)."""
    out: dict[str, list[Path]] = {}
    for name, _, d in find_runs(root):
        out.setdefault(name, []).append(d)
    return out


def run_dirs(root: str | Path) -> list[Path]:
    """Every run directory at any depth under ``root`` (what ``analyse`` derives again)."""
    root = Path(root)
    return sorted({p.parent for p in root.rglob("records.ndjson") if rec.is_run_dir(p.parent)})


def summary_version(summary: dict[str, Any]) -> int:
    """The summary's format version; a summary without one is format 1."""
    v = summary.get("format_version")
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def _derive(run_dir: Path) -> tuple[dict[str, Any], str]:
    from chaos.core import summary as summary_mod

    return summary_mod.reanalyse(run_dir)


def recorded_summary(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``summary.json`` as it was written, without the version rule (what only the file knows, such as
    the machine's load during a soak); None when the run has none. A damaged file is one line naming it."""
    summary_path = Path(run_dir) / "summary.json"
    if not summary_path.exists():
        return None
    try:
        summary = json.loads(summary_path.read_text())
    except (ValueError, OSError) as e:
        raise UsageError(f"{summary_path}: not valid JSON ({e})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("requests"), dict) \
            or not isinstance(summary.get("faults"), list):
        raise UsageError(f"{summary_path}: not an availproof summary (no requests/faults)")
    return summary


def load_summary(run_dir: str | Path) -> dict[str, Any]:
    """The summary of one run under the version rule (see the module docstring)."""
    run_dir = Path(run_dir)
    summary_path, records_path = run_dir / "summary.json", run_dir / "records.ndjson"
    summary = recorded_summary(run_dir)
    if summary is not None:
        summary.setdefault("partial", False)
        version = summary_version(summary)
        if version == analysis.FORMAT_VERSION:
            return summary
        if version > analysis.FORMAT_VERSION:
            raise UsageError(f"{summary_path}: a format {version} summary, written by a newer availproof than this "
                             f"one (format {analysis.FORMAT_VERSION}): upgrade to read it")
        if not records_path.exists():
            raise UsageError(f"{summary_path}: a format {version} summary (before format "
                             f"{analysis.FORMAT_VERSION}) and no records.ndjson to re-derive it from")
        new, origin = _derive(run_dir)
        new["partial"] = bool(summary.get("partial")) or bool(new.get("partial"))
        new["rederived"] = {"from_format": version, "definitions": origin}
        new["note"] = (f"summary.json is of format {version}, older than format {analysis.FORMAT_VERSION}: the "
                       f"figures and bound results are re-derived from records.ndjson with the definitions of {origin}")
        return new
    if records_path.exists():
        summary, origin = _derive(run_dir)
        summary["partial"] = True
        summary["note"] = (f"no summary.json: the run did not finish; figures recomputed from the records taken, "
                           f"with the definitions of {origin}")
        return summary
    raise UsageError(f"{run_dir}: no summary.json or records.ndjson: not a run directory")


def read_records(run_dir: str | Path) -> rec.RunRecords | None:
    """The run's records, by the column reader (read once within a command: :func:`chaos.recording.record_columns.shared`)."""
    path = Path(run_dir) / "records.ndjson"
    return record_columns.read(path) if path.is_file() else None
