#!/usr/bin/env python3
"""Write a synthetic request trace in the open Mooncake format (one JSON object a line:
timestamp ms, input_length, output_length, hash_ids), for ``load.trace``.

    python scripts/make_trace.py --out experiments/traces/example.jsonl --requests 600 --rate 10 \\
        --burstiness 0.5 --seed 25

Arrivals are gamma (``--burstiness`` as vllm bench serve's: 1 Poisson, smaller burstier); lengths
log-normal (median and sigma of the log, capped); a share of the requests start with one of a few
shared prefixes (``hash_ids`` blocks of ``--block-tokens``). See ``chaos.load.trace.generate``.
A production trace in this format replays as it is; see the README (*Traffic like production*).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from chaos.load import trace  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the JSONL file to write")
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--rate", type=float, default=10.0, help="mean requests per second")
    ap.add_argument("--burstiness", type=float, default=1.0, help="gamma shape k (1: Poisson)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input-median", type=float, default=200)
    ap.add_argument("--input-sigma", type=float, default=0.8)
    ap.add_argument("--input-max", type=int, default=4096)
    ap.add_argument("--output-median", type=float, default=60)
    ap.add_argument("--output-sigma", type=float, default=0.7)
    ap.add_argument("--output-max", type=int, default=1024)
    ap.add_argument("--prefixes", type=int, default=8, help="how many shared prefixes")
    ap.add_argument("--prefix-share", type=float, default=0.6, help="the share of requests that start with one")
    ap.add_argument("--prefix-blocks", type=int, default=1, help="blocks in a shared prefix")
    ap.add_argument("--block-tokens", type=int, default=512, help="tokens per hash_ids block (Mooncake's 512)")
    ap.add_argument("--granularity-ms", type=int, default=0,
                    help="floor the timestamps to multiples of this (a production log's 3000 ms: bursts); 0: exact")
    a = ap.parse_args(argv)
    try:
        rows = trace.generate(a.requests, a.rate, a.seed, a.burstiness, a.input_median, a.input_sigma, a.input_max,
                              a.output_median, a.output_sigma, a.output_max, a.prefixes, a.prefix_share,
                              a.prefix_blocks, a.block_tokens, a.granularity_ms)
    except ValueError as e:
        print(f"make_trace: {e}", file=sys.stderr)
        return 2
    p = trace.write(rows, a.out)
    span = rows[-1]["timestamp"] / 1000
    clipped = sum(1 for r in rows if r["input_length"] + r["output_length"] > 504)
    burst = max(sum(1 for r in rows if r["timestamp"] == t) for t in {r["timestamp"] for r in rows})
    print(f"wrote {p}: {len(rows)} requests over {span:.1f} s, at most {burst} at one instant; {clipped} exceed 504 "
          "tokens (the tiny model's 512 less the chat template): clipped when replayed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
