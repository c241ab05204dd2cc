"""`availproof analyse`, `report` and `claim` at soak scale (issue 45): time and peak RSS on synthetic runs of
100k, 1M and 10M requests (:mod:`bench.synthetic_run`: three zones, round robin at 300 req/s, zone-a lost for
25 s), beside two floors measured in the same run on the same file: a bare columnar parse (Arrow's JSON
reader, the column reader's schema, every line) and a bare line-by-line ``json.loads`` pass.

Each command runs in a fresh process (``availproof`` as a user runs it); its peak RSS is the kernel's (wait4).
A process past ``--max-rss-gb`` (default 12) is stopped and said so. The runs are written once under
``--dir`` (default /tmp/availproof-bench-analyse) and kept for the next run of the benchmark.

    python bench/analyse.py [--sizes 100000 1000000 10000000] [--commands analyse claim ...] [--real RUN_DIR]

``--real RUN_DIR``: a real run (or suite) re-derived too, its figures compared with the summaries it holds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import synthetic_run  # noqa: E402

PY = sys.executable
AVAILPROOF = str(Path(PY).with_name("availproof"))
RATES = ROOT / "experiments" / "rates" / "example-rates.yaml"
BARE_LINES = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"
BARE_COLUMNS = ("import sys, pyarrow.json as j\nfrom chaos.recording.record_columns import SCHEMA\n"
                "j.read_json(sys.argv[1], parse_options=j.ParseOptions(explicit_schema=SCHEMA, "
                "unexpected_field_behavior='ignore'))\n")


def measure(argv: list[str], max_rss_gb: float) -> dict:
    """Wall time and peak RSS of one process (and the load average as it started); stopped past ``max_rss_gb``."""
    load = os.getloadavg()[0]
    t = time.monotonic()
    err_file = tempfile.TemporaryFile()  # not a pipe: a child writing more than a pipe holds would wait for us
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err_file)
    over = threading.Event()

    def watch() -> None:
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/status") as status:
                    rss_kb = int(next(ln for ln in status if ln.startswith("VmRSS")).split()[1])
            except (OSError, StopIteration, ValueError):
                return
            if rss_kb > max_rss_gb * 1024 * 1024:
                over.set()
                p.kill()
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    with err_file:
        err_file.seek(max(0, err_file.seek(0, os.SEEK_END) - 1200))
        err = err_file.read().decode(errors="replace")[-300:]
    return {"s": round(time.monotonic() - t, 2), "rss_mb": round(usage.ru_maxrss / 1024), "rc": p.returncode,
            "load": round(load, 2),
            "over": over.is_set(), "err": err if p.returncode and not over.is_set() else ""}


def run_dir(base: Path, n: int) -> Path:
    d = base / f"synthetic-{n}"
    path = d / "records.ndjson"
    if not path.is_file():
        t = time.monotonic()
        synthetic_run.write(path.with_suffix(".partial"), n)
        path.with_suffix(".partial").replace(path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {time.monotonic() - t:.0f} s)", file=sys.stderr)
    for name in ("summary.json", "summary.previous.json", "report.md", "report.html", "report.json", "timeline.png",
                 "claim.json", "claim.md", "claim.html", "claim.svg"):
        (d / name).unlink(missing_ok=True)  # every command reads the run as analyse found it
    return d


COMMANDS = ("json.loads", "arrow", "analyse", "report", "claim")


def bench(d: Path, max_rss_gb: float, commands: tuple[str, ...] = COMMANDS) -> dict:
    """Each of ``commands`` on the run ``d`` (report and claim read the summary analyse writes: analyse first)."""
    path = d / "records.ndjson"
    out = {"requests": None, "mb": round(path.stat().st_size / 1e6)}
    argv = {"json.loads": [PY, "-c", BARE_LINES, str(path)], "arrow": [PY, "-c", BARE_COLUMNS, str(path)],
            "analyse": [AVAILPROOF, "analyse", str(d)], "report": [AVAILPROOF, "report", str(d)],
            "claim": [AVAILPROOF, "claim", str(d), "--faults", str(RATES)]}
    for name in COMMANDS:
        if name in commands:
            out[name] = measure(argv[name], max_rss_gb)
    if (d / "summary.json").is_file():
        s = json.loads((d / "summary.json").read_text())
        out["requests"] = s["requests"]["total"]
        f = s["faults"][0]["affected"]
        out["figures"] = {k: f[k] for k in ("failed_total", "time_to_first_success_s", "time_to_steady_state_s")}
    return out


def cell(m: dict | None) -> str:
    if m is None:
        return "not run"
    if m["over"]:
        return "stopped over the memory limit"
    return f"{m['s']:.1f} s, {m['rss_mb']} MB" + (f" (exit {m['rc']})" if m["rc"] not in (0, 1) else "")


def table(rows: list[dict]) -> str:
    lines = ["| requests | file MB | json.loads pass | Arrow parse | analyse | x json.loads | x Arrow | report | claim |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, j, c = r.get("analyse"), r.get("json.loads"), r.get("arrow")
        xj = f"{a['s'] / j['s']:.2f}" if a and j else "-"
        xc = f"{a['s'] / c['s']:.1f}" if a and c else "-"
        lines.append(f"| {r['n']:,} | {r['mb']} | {cell(j)} | {cell(c)} | {cell(a)} | {xj} | {xc} | "
                     f"{cell(r.get('report'))} | {cell(r.get('claim'))} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--dir", default="/tmp/availproof-bench-analyse")
    ap.add_argument("--max-rss-gb", type=float, default=12.0)
    ap.add_argument("--real", help="a real run or suite directory, re-derived too")
    ap.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS),
                    help="what to measure (report and claim need analyse's summary: keep analyse)")
    args = ap.parse_args()
    base = Path(args.dir)
    rows = []
    for n in args.sizes:
        r = bench(run_dir(base, n), args.max_rss_gb, tuple(args.commands))
        r["n"] = n
        rows.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
    if args.real:
        m = measure([AVAILPROOF, "analyse", args.real], args.max_rss_gb)
        print(f"real run {args.real}: analyse {cell(m)}", file=sys.stderr)
    print(table(rows))
    print(f"\nmachine: {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
          f"load {os.getloadavg()[0]:.2f}; peak RSS by wait4 (ru_maxrss); {resource.getpagesize()} B pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
