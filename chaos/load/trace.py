"""Trace replay: request traces in the open Mooncake format, read, replayed and generated.

A trace is a JSONL file, one request a line (the format of the Mooncake FAST'25 traces, which
AIPerf and NVIDIA Dynamo replay too)::

    {"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}

- ``timestamp``: when the request arrives, in ms (from the first request; the first timestamp is
  taken as the start whatever it is);
- ``input_length``, ``output_length``: prompt and output tokens;
- ``hash_ids`` (optional): one id per block of ``block_tokens`` prompt tokens (512 in Mooncake's
  traces); two requests whose lists start with the same ids share that prefix.

Replay (``load.trace``): request ``i`` is sent at ``(timestamp_i - timestamp_0) / 1000 /
trace_speed`` seconds after the run's start, on the run's own clock; at the trace's end the
replay stops (``trace_end: "stop"``) or starts again one period later (``"loop"``: the period is
the trace's span plus one mean gap, ``span * n / (n - 1)``), bounded by ``duration_s`` and
``max_requests`` either way. The lengths are the trace's, clipped to the model's context
(:func:`chaos.load.lengths.clip`). Prompts are built so that shared ``hash_ids`` are shared text:
each block id is ``block_tokens`` words drawn from a generator seeded by (seed, id).

:func:`generate` writes a synthetic trace (``scripts/make_trace.py``), :func:`bursts` one of simultaneous
arrivals (``bench/harness.py --bursts``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from chaos.load import arrivals
from chaos.load.lengths import TOKEN_WORDS, resolve

ENDS = ("stop", "loop")


@dataclass(frozen=True)
class TraceRow:
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    path: str
    rows: tuple[TraceRow, ...]
    sha256: str

    @property
    def span_s(self) -> float:
        return (self.rows[-1].timestamp_ms - self.rows[0].timestamp_ms) / 1000.0

    def describe(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "requests": len(self.rows), "span_s": round(self.span_s, 3)}


def _int(v, name: str, where: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < minimum:
        raise ValueError(f"{where}: {name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def parse(text: str, source: str = "trace") -> tuple[TraceRow, ...]:
    """The rows of a trace, in arrival order (a stable sort: equal timestamps keep their order)."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source} line {n}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise ValueError(f"{where}: not JSON") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: not a JSON object")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise ValueError(f"{where}: needs {', '.join(missing)}")
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
            raise ValueError(f"{where}: timestamp must be a number of ms >= 0, got {ts!r}")
        hashes = obj.get("hash_ids") or []
        if not isinstance(hashes, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hashes):
            raise ValueError(f"{where}: hash_ids must be a list of integers")
        rows.append(TraceRow(float(ts), _int(obj["input_length"], "input_length", where, 1),
                             _int(obj["output_length"], "output_length", where, 1), tuple(hashes)))
    if not rows:
        raise ValueError(f"{source}: no requests in it")
    return tuple(sorted(rows, key=lambda r: r.timestamp_ms))


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> Trace:
    data = Path(path).read_bytes()
    return Trace(path, parse(data.decode("utf-8", errors="replace"), path), hashlib.sha256(data).hexdigest())


def load(path: str) -> Trace:
    """The trace a load names (resolved as :func:`chaos.load.lengths.resolve` does); ValueError if bad."""
    p = resolve(path)
    try:
        return _load(str(p), p.stat().st_mtime_ns)
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror or e})") from None


def shared_first_blocks(trace: Trace) -> set[int]:
    """The first prefix blocks (``hash_ids[0]``) that two rows or more of the trace begin with."""
    seen: dict[int, int] = {}
    for row in trace.rows:
        if row.hash_ids:
            seen[row.hash_ids[0]] = seen.get(row.hash_ids[0], 0) + 1
    return {h for h, n in seen.items() if n > 1}


def replay(trace: Trace, speed: float = 1.0, end: str = "stop") -> Iterator[tuple[float, TraceRow]]:
    """(offset in seconds, row) in send order; unbounded when looping (the caller bounds it)."""
    rows = trace.rows
    t0 = rows[0].timestamp_ms
    n = len(rows)
    period_ms = (rows[-1].timestamp_ms - t0) * n / (n - 1) if n > 1 else 0.0
    k = 0
    while True:
        base = k * period_ms
        for r in rows:
            yield (base + r.timestamp_ms - t0) / 1000.0 / speed, r
        if end != "loop" or period_ms <= 0:
            return
        k += 1


def check(path: str | None, speed: float, end: str) -> list[str]:
    if path is None:
        return []
    out = []
    if end not in ENDS:
        out.append(f"trace_end must be stop or loop, got {end!r}")
    if not (isinstance(speed, (int, float)) and 0 < speed <= 1000):
        out.append(f"trace_speed must be in (0, 1000], got {speed!r}")
    try:
        t = load(path)
        if end == "loop" and t.span_s <= 0:
            out.append("trace: a trace whose requests all come at one instant cannot loop")
    except ValueError as e:
        out.append(f"trace: {e}")
    return out


class Prompts:
    """Prompt text for a row: its ``hash_ids`` blocks (shared text for shared ids) cut to its input
    length, padded with words of the request's own when the blocks are shorter."""

    def __init__(self, seed: int, block_tokens: int = 512, cache: int = 4096):
        self.seed, self.block_tokens, self.cache = seed, block_tokens, cache
        self._blocks: dict[int, list[str]] = {}

    def block(self, h: int) -> list[str]:
        b = self._blocks.get(h)
        if b is None:
            if len(self._blocks) >= self.cache:
                self._blocks.clear()
            b = self._blocks[h] = random.Random(f"{self.seed}:{h}").choices(TOKEN_WORDS, k=self.block_tokens)
        return b

    def text(self, row: TraceRow, n: int, rng: random.Random) -> str:
        words: list[str] = []
        for h in row.hash_ids:
            if len(words) >= n:
                break
            words.extend(self.block(h))
        del words[n:]
        if len(words) < n:
            words.extend(rng.choices(TOKEN_WORDS, k=n - len(words)))
        return " ".join(words)


# ---------------------------------------------------------------- synthetic traces
def generate(n: int, rate: float, seed: int = 0, burstiness: float = 1.0, input_median: float = 200,
             input_sigma: float = 0.8, input_max: int = 4096, output_median: float = 60, output_sigma: float = 0.7,
             output_max: int = 1024, prefixes: int = 8, prefix_share: float = 0.6, prefix_blocks: int = 1,
             block_tokens: int = 512, granularity_ms: int = 0) -> list[dict]:
    """A synthetic trace of ``n`` requests: gamma arrivals at ``rate`` (``burstiness`` as vllm bench's),
    log-normal input and output lengths (median, sigma of the log, capped), and shared prefixes: a
    ``prefix_share`` of the requests start with one of ``prefixes`` shared prefixes of
    ``prefix_blocks`` blocks (Zipf-like popularity), the rest of each prompt its own blocks.
    ``granularity_ms`` > 0 floors every timestamp to a multiple of it, as a production log kept at that
    granularity does (a Mooncake trace's 3000 ms): the requests of one step arrive as one burst."""
    if n < 1 or rate <= 0 or granularity_ms < 0:
        raise ValueError("n >= 1, rate > 0 and granularity_ms >= 0")
    rng = random.Random(seed + 1)  # the lengths' own stream (the arrivals draw from seed)
    times = arrivals.offsets("gamma", rate, math.inf, seed, burstiness)
    weights = [1.0 / (i + 1) for i in range(prefixes)]
    next_id = prefixes * prefix_blocks  # ids 0.. are the shared prefixes' blocks
    out = []
    for _ in range(n):
        t = next(times)
        inp = max(1, min(input_max, round(rng.lognormvariate(math.log(input_median), input_sigma))))
        outp = max(1, min(output_max, round(rng.lognormvariate(math.log(output_median), output_sigma))))
        blocks = math.ceil(inp / block_tokens)
        ids: list[int] = []
        if prefixes and rng.random() < prefix_share:
            p = rng.choices(range(prefixes), weights)[0]
            ids = list(range(p * prefix_blocks, (p + 1) * prefix_blocks))[:blocks]
        while len(ids) < blocks:
            ids.append(next_id)
            next_id += 1
        ms = int(round(t * 1000))
        if granularity_ms:
            ms -= ms % granularity_ms
        out.append({"timestamp": ms, "input_length": inp, "output_length": outp, "hash_ids": ids})
    return out


def bursts(sizes: tuple[int, ...] = (16, 32), count: int = 3, gap_ms: int = 2000, input_length: int = 8,
           output_length: int = 16) -> list[dict]:
    """A trace of simultaneous arrivals: ``count`` bursts of each size in ``sizes``, taken in turn
    (16, 32, 16, 32, ...), one burst every ``gap_ms`` from 0; every request of a burst has the same
    timestamp. Each request has a block of its own (``hash_ids`` ``[i]``: vllm bench serve's
    ``timed_trace`` builds its prompt from the blocks, none would be an empty prompt)."""
    if count < 1 or gap_ms <= 0 or not sizes or min(sizes) < 1:
        raise ValueError("count >= 1, gap_ms > 0 and sizes >= 1")
    out: list[dict] = []
    for k in range(count * len(sizes)):
        for _ in range(sizes[k % len(sizes)]):
            out.append({"timestamp": k * gap_ms, "input_length": input_length, "output_length": output_length,
                        "hash_ids": [len(out)]})
    return out


def write(rows: list[dict], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in rows))
    return p
