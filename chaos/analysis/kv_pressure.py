"""KV pressure (issue 48): a fault's ``kv_pressure`` entry when the vLLM app ran a small KV cache (``app.kv_cache``,
:mod:`serve_apps.kv_cache`), from the records alone: the requests, and the engines' preemption counters the sampler
read into its samples (``engine.preemptions``, :mod:`chaos.system.engine_metrics`).

- ``preemptions``: the engines' preemptions in the fault's window (injection to the window's end), the **sum of the
  increases of every series** (one per replica's engine): a value below the series' previous one is a counter that
  started again (a replacement reusing the series) and counts from 0; a series first seen in the window (a
  replacement's engine) counts from 0; a series no sample reads any more (a killed replica) counts what was read
  before it went. The baseline of each series is its last value read before the window. What an engine counted after
  Ray's last export of it (a killed replica's last seconds) is never read: a lower bound. Null with its reason when
  no sample in the window read a counter (no endpoint answered, the backend is not local, or the run recorded none).
- ``preemptions_before``: the same from the first measured request to the injection (the cache's pressure alone).
- ``requests``, ``failed``: the window's requests (in flight at the injection, and sent in the window) and how many
  failed (whatever the class).
- ``ttft_p50_s``, ``ttft_p99_s``: over the window's requests that got a first token; ``itl_p50_s``, ``itl_p99_s``:
  over the same requests' mean inter-token latency (each request's ``itl_mean_s``); null with its reason when none.
- ``before``: ``requests``, ``failed`` and the four latencies of the requests sent from the first measured one to the
  injection: the pressure without the fault.
- ``resolution_s``: the median gap between two reads of the counters (a preemption is placed no finer).

The entry is there when a sample of the run tried to read the counters (``engine`` not absent): the runs with
``app.kv_cache`` on the vLLM app, as nothing else asks for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.analysis import planes
from chaos.recording import records as rec, request_columns as rc

NO_READ = "no sample read the engines' preemption counters (the sampler reads them for the vLLM app with app.kv_cache)"


def applies(samples: list[rec.Sample]) -> bool:
    """Whether the run tried to read the engines' counters (a small KV cache on the vLLM app)."""
    return any(getattr(s, "engine", None) is not None for s in samples)


def _reads(samples: list[rec.Sample]) -> list[tuple[int, dict[str, float]]]:
    return [(s.t_ns, s.engine["preemptions"]) for s in samples
            if isinstance(s.engine, dict) and isinstance(s.engine.get("preemptions"), dict)]


def _why_not_read(samples: list[rec.Sample], start_ns: int, end_ns: int) -> str:
    tried = [s for s in samples if s.engine is not None and start_ns <= s.t_ns < end_ns]
    if not tried:
        return "no sample in the window read the engines' preemption counters"
    return "no read of the engines' counters answered in the window (" + \
        (tried[-1].errors.get("engine") or "no reason recorded") + ")"


def preemptions(samples: list[rec.Sample], start_ns: int, end_ns: int) -> tuple[int | None, str | None]:
    """(preemptions counted in [start, end), None) or (None, why): the sum of each series' increases (module doc)."""
    if not applies(samples):
        return None, NO_READ
    reads = _reads(samples)
    inside = [(t, v) for t, v in reads if start_ns <= t < end_ns]
    if not inside:
        return None, _why_not_read(samples, start_ns, end_ns)
    last: dict[str, float] = {}
    for t, values in reads:
        if t >= start_ns:
            break
        last.update(values)  # each series' last value read before the window (a node that did not answer: kept)
    if not last and not any(values for _, values in inside):
        return None, "no engine exported a preemption counter (the endpoints answered without vllm:num_preemptions)"
    answered = {series.split("/", 1)[0] for series in last}  # nodes whose counters were read before the window
    total = 0.0
    for _, values in inside:
        for series, value in values.items():
            if series not in last and series.split("/", 1)[0] not in answered:
                last[series] = value  # its node never read before: what it counted before is unknown (a lower bound)
                continue
            before = last.get(series, 0.0)  # a series first seen on a node read before: a new engine, from 0
            total += value - before if value >= before else value  # below: the counter started again
            last[series] = value
    return int(round(total)), None


def _latencies(cols: rc.RequestColumns, rows: np.ndarray, out: dict[str, Any], why: dict[str, str]) -> None:
    ttft = cols.ttft[rows]
    ttft = ttft[~np.isnan(ttft)]
    itl = cols.itl_mean[rows]
    itl = itl[~np.isnan(itl)]
    for name, values, reason in (("ttft", ttft, "no request got a first token"),
                                 ("itl", itl, "no request streamed two tokens")):
        for q, key in ((0.5, f"{name}_p50_s"), (0.99, f"{name}_p99_s")):
            v = rc.percentile(values, q)
            out[key] = None if v is None else round(v, 4)
            if v is None:
                why[key] = reason


def kv_pressure(inject_ns: int, cols: rc.RequestColumns, rows: np.ndarray, samples: list[rec.Sample],
                measure_start_ns: int, window_end_ns: int, unmeasurable: dict[str, str]) -> dict[str, Any]:
    """The fault's ``kv_pressure`` entry (module doc); ``rows``: its requests (in flight at the injection, then sent
    in the window) in ``cols``; each null figure's reason in ``unmeasurable`` (``kv_pressure.<name>``)."""
    out: dict[str, Any] = {}
    count, why = preemptions(samples, inject_ns, window_end_ns)
    out["preemptions"] = count
    if why:
        unmeasurable["kv_pressure.preemptions"] = why
    count, why = preemptions(samples, measure_start_ns, inject_ns)
    out["preemptions_before"] = count
    if why:
        unmeasurable["kv_pressure.preemptions_before"] = why
    out["requests"] = int(len(rows))
    out["failed"] = int(np.count_nonzero(~cols.ok[rows]))
    reasons: dict[str, str] = {}
    _latencies(cols, rows, out, reasons)
    unmeasurable.update({f"kv_pressure.{k}": v for k, v in reasons.items()})
    a, b = np.searchsorted(cols.sent_ns, [measure_start_ns, inject_ns], "left")
    # the pressure without the fault: sent before the injection and not in flight at it (those are the fault's rows)
    before_rows = np.setdiff1d(np.arange(a, max(a, b)), rows)
    before = {"requests": int(len(before_rows)), "failed": int(np.count_nonzero(~cols.ok[before_rows]))}
    _latencies(cols, before_rows, before, {})
    out["before"] = before
    reads = [s for s in samples if isinstance(s.engine, dict) and inject_ns <= s.t_ns < window_end_ns]
    out["resolution_s"] = planes.resolution(reads)
    return out
