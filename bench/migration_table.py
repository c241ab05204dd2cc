"""The request-migration table (issue 47): six scopes, each with migration off and on, on the stream target, one row
per scope and arm from the runs' records and summaries.

    python bench/migration_table.py --out DIR [--rate 8] [--only replica-kill ...] [--arms off on]
    python bench/migration_table.py --out DIR --table-only     # the table again from the runs in DIR
    python bench/migration_table.py --out DIR --app llm        # the vLLM rows: replica-kill, engine-crash
    python bench/migration_table.py --out DIR --trial 2 --only engine-crash   # one more trial, pooled in the table

Each run is a shipped experiment (experiments/<scope>.json; replica-kill's is replica-kill-migration's fault, its kill
made only once the replica serves, ``min_ongoing`` 1, in both arms) with its fault action repeated ``faults`` times,
``spacing_s`` apart (Chaos Toolkit pauses), under an open Poisson load of ``--rate`` requests a second (max_tokens
16-48, as shipped), so that one run of each arm sends about 5,000 streams: each fault is analysed in its own window
(from its injection to the next one), the records of the whole run are the table's. ``on``: ``app.migration``
``{"limit": 2}`` (the migrating ingress; :mod:`serve_apps.migrating_ingress`), ``off``: no ``app.migration``; every
other field as shipped. The variants are written to ``DIR/experiments``; nothing in experiments/ changes.

Per row: faults injected, the requests ongoing on the victims at the kills (Serve's count, ``ongoing_at_kill``:
replica-kill's only), streams (measure phase), failed (all of the run's; and in the faults' windows, the
summary's ``service.failed_total`` summed), streams migrated, tokens lost / duplicated / corrupted (over the streams
checked), refused migration, the migration gap p50 / p99 over every migration of the run, TTFT p50 and the streams'
worst inter-token gap p99 (``itl_max_s``) of migrated streams against the rest, and the faults whose bounds were
not all met. ``--trial N`` (N >= 2) writes its runs beside the first trial's (``<scope>-<arm>-tN``); the table
pools every trial of a scope and arm in one row (``trials`` says how many; its percentiles over the pooled records).
Starts clusters (through availproof): the main session runs it, by hand (~11 minutes a run, ~2 h 20 min for the twelve).
"""

from __future__ import annotations

import argparse
from bisect import bisect_left
from collections import Counter
import copy
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chaos.base.stats import percentile  # noqa: E402
from bench.common import markdown_table  # noqa: E402

# scope: (experiment, faults, spacing_s, the fault action's extra arguments)
SCOPES = {
    "replica-kill": ("replica-kill.json", 15, 40, {"min_ongoing": 1}),
    "engine-crash": ("engine-crash.json", 15, 40, {}),
    "engine-error": ("engine-error.json", 15, 40, {}),
    "engine-wedge-watchdog": ("engine-wedge-watchdog.json", 12, 50, {}),
    "worker-node-kill": ("worker-node-kill.json", 10, 60, {}),
    "zone-loss": ("zone-loss.json", 10, 60, {}),
}
# the vLLM rows (issue 47: replica-kill and engine-crash, --app llm): a replacement vLLM engine takes ~100 s to start
# on 2 cores (its shipped capacity bound is 264 s), so two faults 150 s apart, at the llm load's 2 req/s (~20 min a
# scope on 2 cores)
LLM_SCOPES = {
    "replica-kill": ("replica-kill.json", 2, 150, {"min_ongoing": 1}),
    "engine-crash": ("engine-crash.json", 2, 150, {}),
}
RATES = {"stream": 8.0, "llm": 2.0}
ARMS = ("off", "on")
MIGRATION = {"limit": 2}


def variant(doc: dict, arm: str, faults: int, spacing_s: float, rate: float, extra: dict) -> dict:
    """``doc`` with its fault action repeated ``faults`` times ``spacing_s`` apart, the load at ``rate`` (the llm
    block's load too, where the experiment has one: ``--app llm`` reads it), migration on or off (``arm``)."""
    out = copy.deepcopy(doc)
    ext = out["extensions"][0]
    ext["load"] = {**ext["load"], "rate": rate, "duration_s": max(ext["load"].get("duration_s", 0),
                                                                    faults * spacing_s + 300), "max_requests": 50000}
    if "load" in (ext.get("llm") or {}):
        ext["llm"]["load"] = {**ext["llm"]["load"], "rate": rate}
    app = {k: v for k, v in (ext.get("app") or {}).items() if k != "migration"}
    if arm == "on":
        app["migration"] = dict(MIGRATION)
    if app:
        ext["app"] = app
    else:
        ext.pop("app", None)
    (fault,) = out["method"]
    fault["provider"].setdefault("arguments", {}).update(extra)
    out["method"] = []
    for i in range(faults):
        step = copy.deepcopy(fault)
        step["name"] = f"{fault['name']}-{i + 1}"
        if i < faults - 1:
            step["pauses"] = {"after": spacing_s}
        out["method"].append(step)
    out["title"] = f"{doc['title']} (x{faults}, migration {arm})"
    return out


def _records(path: Path) -> list[dict]:
    out = []
    with path.open() as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind", "request") == "request" and r.get("phase") == "measure":
                out.append(r)
    return out


def _p(values: list[float], q: float, scale: float = 1.0, digits: int = 3) -> str:
    if not values:
        return "-"
    v = percentile(values, q) * scale
    return f"{v:.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"  # 6655, never 6.66e+03


def trial_dir(work: Path, name: str, trial: int) -> Path:
    """Where trial ``trial`` of a scope and arm (``name``) runs: the first trial's directory is ``name`` itself."""
    if trial < 1:
        raise ValueError(f"trial {trial}: trials count from 1")
    return work / (name if trial == 1 else f"{name}-t{trial}")


def trials(work: Path, name: str) -> list[Path]:
    """Every finished trial of ``name`` in ``work`` (a directory with a summary.json), in trial order."""
    found = [(1, work / name)] + [(int(d.name.rsplit("-t", 1)[1]), d) for d in work.glob(f"{name}-t*")
                                  if d.name.rsplit("-t", 1)[1].isdigit()]
    return [d for _, d in sorted(found) if (d / "summary.json").is_file()]


def row(scope: str, arm: str, *runs: Path) -> list[str]:
    """One row over ``runs`` (the trials of one scope and arm), their records and faults pooled."""
    summaries = [json.loads((run / "summary.json").read_text()) for run in runs]
    recs = [r for run in runs for r in _records(run / "records.ndjson")]
    faults = [f for s in summaries for f in s["faults"]]
    # a fault id is its run's: a bound's fault_id matched within its own summary only
    bad = [(i, f["fault_id"]) for i, s in enumerate(summaries) for f in s["faults"]
           if any(b.get("fault_id") == f["fault_id"] and b["status"] == "violated" for b in s["bounds"]["results"])]
    verdicts = sorted({str((s.get("verdict") or {}).get("word")) for s in summaries})
    migrated = [r for r in recs if (r.get("migrations") or 0) > 0]
    rest = [r for r in recs if not (r.get("migrations") or 0) and r.get("ok")]
    gaps = [g for r in migrated for g in (r.get("migration_gaps_ms") or [])]

    def total(name: str) -> str:
        checked = [r[name] for r in recs if r.get(name) is not None]
        return f"{sum(checked)}" if checked else "-"

    ongoing = [f.get("detail", {}).get("ongoing_at_kill") for f in faults]
    at_kill = str(sum(ongoing)) if ongoing and None not in ongoing else "-"
    return [scope, arm, str(len(runs)), str(len(faults)), at_kill, str(len(recs)), str(sum(1 for r in recs if r.get("failure"))),
            str(sum(f["service"]["failed_total"] for f in faults)), str(len(migrated)), total("tokens_lost"),
            total("tokens_duplicated"), total("tokens_corrupted"),
            str(sum(1 for r in recs if r.get("migration_refused"))),
            _p(gaps, 0.5), _p(gaps, 0.99),
            _p([r["ttft_s"] for r in migrated if r.get("ttft_s") is not None], 0.5, 1000),
            _p([r["ttft_s"] for r in rest if r.get("ttft_s") is not None], 0.5, 1000),
            _p([r["itl_max_s"] for r in migrated if r.get("itl_max_s") is not None], 0.99, 1000),
            _p([r["itl_max_s"] for r in rest if r.get("itl_max_s") is not None], 0.99, 1000),
            "/".join(verdicts), str(len(set(bad)))]


HEAD = ["scope", "migration", "trials", "faults", "ongoing on the victims at the kills", "streams", "failed", "failed in fault windows", "migrated", "tokens lost",
        "duplicated", "corrupted", "refused", "gap p50 ms", "gap p99 ms", "TTFT p50 ms migrated", "rest",
        "worst ITL p99 ms migrated", "rest", "verdict", "faults with a bound violated"]


UNSAVED_HEAD = ["scope", "migration", "failed", "by failure class", "tokens received before the break",
                "none received", "answered of those sent in the 2 s after each failure"]
AFTER_S = 2.0


def unsaved(scope: str, arm: str, *runs: Path) -> list[str]:
    """What the run's failed streams were (issue 47's "what migration cannot save"): their failure classes, how
    many had tokens before the break (a client that resumes, sending the text so far as a continuation, would go on
    from there) or none (a client's plain retry would send them again), and whether the service answered right after:
    of the requests sent within ``AFTER_S`` after each failure's end, how many succeeded (pooled; a request near
    several failures counted once per failure). A resume or retry then meets that service. Over several trials
(``runs``) each failure is matched with the requests of its own run only."""
    failed, ok, sent = [], 0, 0
    for run in runs:
        recs = _records(run / "records.ndjson")
        own = [r for r in recs if r.get("failure")]
        failed += own
        starts = sorted((r["sent_ns"], bool(r.get("ok"))) for r in recs if r.get("sent_ns") is not None)
        times = [t for t, _ in starts]
        for r in own:
            end = r["sent_ns"] + int((r.get("e2e_s") or 0) * 1e9)
            near = starts[bisect_left(times, end):bisect_left(times, end + int(AFTER_S * 1e9))]
            sent += len(near)
            ok += sum(good for _, good in near)
    classes = Counter(r["failure"] for r in failed)
    with_tokens = sum(1 for r in failed if (r.get("output_tokens") or 0) > 0 or (r.get("chunks") or 0) > 0)
    after = f"{ok} of {sent}" if sent else "-"
    return [scope, arm, str(len(failed)), ", ".join(f"{k} {v}" for k, v in sorted(classes.items())) or "-",
            str(with_tokens), str(len(failed) - with_tokens), after]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where the variants and the runs go")
    p.add_argument("--app", choices=sorted(RATES), default="stream",
                   help="stream (six scopes) or llm (vLLM: replica-kill and engine-crash)")
    p.add_argument("--rate", type=float, default=None,
                   help="requests a second (default the shipped experiments': 8 stream, 2 llm)")
    p.add_argument("--only", nargs="*", choices=sorted(SCOPES), default=None)
    p.add_argument("--arms", nargs="*", choices=ARMS, default=list(ARMS))
    p.add_argument("--table-only", action="store_true", help="no run: the table from the runs already in --out")
    p.add_argument("--trial", type=int, default=1,
                   help="which trial to run (default 1; N >= 2 runs beside the first, the table pools them)")
    a = p.parse_args(argv)
    if a.trial < 1:
        p.error(f"--trial {a.trial}: trials count from 1")
    scopes = SCOPES if a.app == "stream" else LLM_SCOPES
    unknown = sorted(set(a.only or ()) - set(scopes))
    if unknown:
        p.error(f"--only {' '.join(unknown)}: not a scope of the {a.app} rows ({', '.join(scopes)})")
    rate = RATES[a.app] if a.rate is None else a.rate
    prefix, label = ("", "") if a.app == "stream" else ("llm-", " (vLLM)")
    work = Path(a.out).resolve()
    rows, lost = [], []
    for scope, (file, faults, spacing, extra) in scopes.items():
        if a.only and scope not in a.only:
            continue
        doc = json.loads((ROOT / "experiments" / file).read_text())
        for arm in a.arms:
            name = f"{prefix}{scope}-{arm}"
            run = trial_dir(work, name, a.trial)
            if not a.table_only:
                path = work / "experiments" / f"{run.name}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(variant(doc, arm, faults, spacing, rate, extra), indent=2) + "\n")
                subprocess.run([sys.executable, "-m", "chaos.commands.cli", "run", str(path), "--app", a.app,
                                "--out", str(run)], cwd=ROOT, check=False)
            runs = trials(work, name)
            if runs:
                rows.append(row(scope + label, arm, *runs))
                lost.append(unsaved(scope + label, arm, *runs))
            else:
                rows.append([scope + label, arm, "no summary.json"])
    print(markdown_table(HEAD, rows))
    if lost:
        print("\nThe failed streams: what migration did not save, and what a client could have done\n")
        print(markdown_table(UNSAVED_HEAD, lost))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
