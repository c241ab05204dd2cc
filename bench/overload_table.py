"""The overload table (issue 48): experiments/overload.json in its four variants, run one after the other with
`availproof run`, then one row each from their summaries.

    python bench/overload_table.py --capacity CAPACITY.json [--app stream|llm] [--out DIR] [--only NAME ...]

Variants (written to a temporary folder from experiments/overload.json; nothing in experiments/ changes):

- ``refuse``: as shipped: the app refuses a full queue at once (app.admission.max_queued_requests 8: a 503 with
  Retry-After 1), the client sends once;
- ``wait``: no queue limit (max_queued_requests -1): requests wait for a replica until their 10 s timeout;
- ``refuse-retry`` and ``wait-retry``: the same with a client that retries (3 attempts, full-jitter backoff from
  0.1 s, on connect errors, 5xx, refusals and timeouts, honouring Retry-After up to 5 s).

Measure the capacity first, with the shipped experiment's own admission limits:
``availproof capacity experiments/overload.json --app stream`` (it writes capacity.json in its run folder).
Starts clusters (through availproof): the main session runs it, by hand.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table  # noqa: E402

RETRY = {"attempts": 3, "backoff_base_s": 0.1, "backoff_cap_s": 2.0, "retry_on": ["connect", "5xx", "refused", "timeout"],
         "honour_retry_after": True, "retry_after_cap_s": 5.0}
VARIANTS = {"refuse": (True, False), "wait": (False, False), "refuse-retry": (True, True), "wait-retry": (False, True)}


def variant(doc: dict, refuse: bool, retries: bool) -> dict:
    """``doc`` (experiments/overload.json) with fast refusal on or off and the client's retries on or off."""
    out = copy.deepcopy(doc)
    ext = out["extensions"][0]
    if not refuse:
        ext["app"]["admission"]["max_queued_requests"] = -1
    if retries:
        ext["load"]["retry"] = dict(RETRY)
    return out


def row(name: str, summary: dict) -> list[str]:
    o = summary.get("overload") or {}
    ph = o.get("phases") or {}

    def fig(phase: str, key: str) -> str:
        v = (ph.get(phase) or {}).get(key)
        return "-" if v is None else f"{v:g}"

    rec = o.get("time_to_goodput_recovered_s")
    return [name, *(fig(p, "goodput_rps") for p in ("before", "during", "after")), str(o.get("refused", "-")),
            str(o.get("timed_out", "-")), *(fig(p, "ttft_p99_s") for p in ("before", "during", "after")),
            "never" if rec is None else f"{rec:g}", str(o.get("offered_above_capacity"))]


HEAD = ["variant", "goodput before", "during", "after", "refused", "timed out", "TTFT p99 before", "during", "after",
        "goodput back s", "above capacity"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--capacity", required=True, help="capacity.json of `availproof capacity experiments/overload.json`")
    p.add_argument("--app", default="stream", choices=("stream", "llm"))
    p.add_argument("--out", default=None, help="where the runs go (default: a temporary folder)")
    p.add_argument("--only", nargs="*", choices=sorted(VARIANTS), default=None)
    a = p.parse_args(argv)
    doc = json.loads((ROOT / "experiments" / "overload.json").read_text())
    work = Path(a.out or tempfile.mkdtemp(prefix="overload-table-"))
    rows = []
    for name, (refuse, retries) in VARIANTS.items():
        if a.only and name not in a.only:
            continue
        path = work / f"overload-{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(variant(doc, refuse, retries), indent=2) + "\n")
        out = work / name
        subprocess.run([sys.executable, "-m", "chaos.commands.cli", "run", str(path), "--app", a.app, "--capacity",
                        str(Path(a.capacity).resolve()), "--out", str(out)], cwd=ROOT, check=False)
        summary = out / "summary.json"
        rows.append(row(name, json.loads(summary.read_text())) if summary.is_file() else [name, "no summary.json"])
    print(markdown_table(HEAD, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
