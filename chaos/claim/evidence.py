"""The suite's evidence for a claim: which runs there are, their summaries and their records.

A suite directory holds one folder per experiment, each a run or ``trial-N/`` runs; an experiment's
trials, or one run, are accepted too. A capacity sweep's folder is not a run (:func:`chaos.records.is_run_dir`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos import analysis, records as rec
from chaos.errors import UsageError


def _trial_dirs(d: Path) -> list[tuple[int, Path]]:
    out = []
    for p in d.glob("trial-*"):
        n = p.name.split("-", 1)[1]
        if p.is_dir() and n.isdigit() and rec.is_run_dir(p):
            out.append((int(n), p))
    return sorted(out)


def find_runs(suite_dir: str | Path) -> list[tuple[str, int | None, Path]]:
    """(experiment, trial number or None, run directory) of every run under ``suite_dir``: a suite (one
    folder per experiment), one experiment's ``trial-N/`` runs, or one run."""
    root = Path(suite_dir)
    if not root.is_dir():
        raise UsageError(f"{root}: no such suite directory")
    if rec.is_run_dir(root):
        return [(root.name, None, root)]
    if _trial_dirs(root):
        return [(root.name, n, p) for n, p in _trial_dirs(root)]
    out: list[tuple[str, int | None, Path]] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if rec.is_run_dir(sub):
            out.append((sub.name, None, sub))
        else:
            out += [(sub.name, n, p) for n, p in _trial_dirs(sub)]
    if not out:
        raise UsageError(f"{root}: no summary.json or records.ndjson in it or its sub-directories: "
                         "no run to claim from")
    return out


def read_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json; derived again from the records when it is missing (PARTIAL) or of a format before 2."""
    import json

    from chaos import summary as summary_mod

    path = run_dir / "summary.json"
    if path.is_file():
        try:
            s = json.loads(path.read_text())
        except (ValueError, OSError) as e:
            raise UsageError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(s, dict) or not isinstance(s.get("faults"), list):
            raise UsageError(f"{path}: not an availproof summary (no faults)")
        if s.get("format_version") == analysis.FORMAT_VERSION:
            return s
        if not (run_dir / "records.ndjson").is_file():
            raise UsageError(f"{path}: a summary of format {s.get('format_version', 1)} and no records.ndjson "
                             f"to derive format {analysis.FORMAT_VERSION} from")
        new, origin = summary_mod.reanalyse(run_dir)
        new["note"] = f"summary.json of an older format: derived again from records.ndjson ({origin})"
        return new
    new, origin = summary_mod.reanalyse(run_dir)
    new["partial"] = True
    new["note"] = f"no summary.json (the run did not finish): derived from records.ndjson ({origin})"
    return new


def read_records(run_dir: Path) -> rec.RunRecords | None:
    path = run_dir / "records.ndjson"
    return rec.read(path) if path.is_file() else None


