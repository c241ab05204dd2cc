"""A synthetic run in the rig's record format, of any size, with known answers: what ``bench/analyse.py``
times and what the unit tests compare the column reader and the figures on.

Three zones' targets (``zone-a``, ``zone-b``, ``zone-c``) take the requests in turn (round robin) at ``rate``
req/s, every TTFT 40-80 ms, end-to-end 0.40-0.80 s. One fault, scope ``zone`` on ``zone-a``, is injected at
``inject_at`` of the run's measured span and lasts ``outage_s`` (25 s): every request sent to zone-a in it is
refused at once (``connect_refused``, 1 ms), and those in flight at the injection on zone-a break mid-stream. A
control-plane sample every second (zone-a's nodes and replica gone during the outage); a warm-up of 2 s; the
run header carries the definitions and bounds (``availproof analyse`` derives the summary from the file alone).

The known answers (:func:`expected`): requests, failed, the affected population's first success (the first
zone-a request after the outage), and every zone-b/zone-c request ok.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

NS = 1_000_000_000
T0 = 1_780_000_000 * NS
ZONES = ("zone-a", "zone-b", "zone-c")
WARMUP_S = 2.0
DEFINITIONS = {"format_version": 2,
               "steady_state": {"window_s": 5.0, "min_success_ratio": 0.99, "max_p95_ttft_s": 2.0, "min_requests": 3,
                                "warm_factor": 1.2},
               "slo": {"ttft_s": 2.0, "itl_s": 0.5, "e2e_s": None}, "population": "affected"}
BOUNDS = {"max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 60, "must_recover": True}


def _request(i: int, sent: int, zone: str, rng: random.Random, phase: str) -> dict[str, Any]:
    ttft = round(rng.uniform(0.04, 0.08), 6)
    e2e = round(ttft + rng.uniform(0.36, 0.72), 6)
    return {"id": i, "target": f"worker-{zone[-1]}", "url": f"http://10.0.{ord(zone[-1]) - 96}.2:8000",
            "zone": zone, "route": "/v1/chat/completions", "phase": phase, "planned_ns": sent - rng.randrange(50_000),
            "sent_ns": sent, "sent_offset_s": round((sent - T0) / NS, 6), "ok": True, "status": 200, "failure": None,
            "detail": None, "ttft_s": ttft, "e2e_s": e2e, "itl_mean_s": round(rng.uniform(0.01, 0.02), 6),
            "itl_p95_s": round(rng.uniform(0.02, 0.04), 6), "itl_max_s": round(rng.uniform(0.04, 0.06), 6),
            "output_tokens": 32, "prompt_tokens": 24, "chunks": 32, "max_tokens": 32, "prompt_chars": 120,
            "stream": True, "region": "region-1", "served_replica": f"SERVE_REPLICA::stream#Model#{zone[-1]}1",
            "served_zone": zone, "served_region": "region-1", "served_version": "v1", "engine": None,
            "session": None, "turn": None, "prefix_group": None, "cached_tokens": None, "worker": 0,
            "prompt_len": None, "clipped": None, "kind": "request"}


def _sample(t_ns: int, zone_a_up: bool) -> dict[str, Any]:
    per_zone = {z: 1 for z in ZONES if zone_a_up or z != "zone-a"}
    return {"t_ns": t_ns, "took_s": 0.012, "gcs_ok": True, "gcs_latency_s": 0.003, "controller_ok": True,
            "app_status": "RUNNING", "replicas": {"Model": dict(per_zone)}, "nodes_alive": dict(per_zone),
            "errors": {}, "conditions": None, "replica_ids": None, "starting_ids": None, "front": None,
            "kind": "sample"}


def timeline(requests: int, rate: float = 300.0, inject_at: float = 0.5, outage_s: float = 25.0
             ) -> tuple[int, int, int]:
    """(measure start, injection, heal) instants of a run of ``requests`` requests, in ns."""
    measure = T0 + int(WARMUP_S * NS)
    span = int(requests / rate * NS)
    inject = measure + int(span * inject_at)
    return measure, inject, inject + int(outage_s * NS)


def write(path: str | Path, requests: int, rate: float = 300.0, inject_at: float = 0.5, outage_s: float = 25.0,
          seed: int = 1) -> Path:
    """Write the run's ``records.ndjson`` (``requests`` requests, warm-up included) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    measure, inject, heal = timeline(requests, rate, inject_at, outage_s)
    step = NS / rate
    header = {"kind": "run", "format_version": 2, "run_id": f"synthetic-{requests}", "started_ns": T0,
              "load": {"mode": "open", "arrival": "constant", "rate": rate}, "targets": list(ZONES),
              "definitions": DEFINITIONS,
              "experiment": {"title": "synthetic zone loss", "scope": "zone", "app": "stream", "bounds": BOUNDS,
                             "bounds_source": "bench/synthetic_run.py"}}
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    marks = [("inject_start", inject), ("inject_end", inject + NS // 100), ("heal_start", heal),
             ("heal_end", heal + NS // 10)]
    next_sample = T0
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(header) + "\n")
        buf: list[str] = []
        for i in range(requests):
            sent = T0 + int(i * step)
            while marks and marks[0][1] <= sent:
                event, t = marks.pop(0)
                buf.append(dumps({"event": event, "fault_id": "f1", "scope": "zone", "target": "zone-a", "t_ns": t,
                                  "zones": ["zone-a"], "detail": {}, "kind": "mark"}))
            while next_sample <= sent:
                buf.append(dumps(_sample(next_sample, not inject <= next_sample < heal)))
                next_sample += NS
            zone = ZONES[i % 3]
            r = _request(i, sent, zone, rng, "warmup" if sent < measure else "measure")
            if zone == "zone-a" and inject <= sent < heal:
                r.update(ok=False, status=None, failure="connect_refused", detail="ConnectError: refused",
                         ttft_s=None, e2e_s=0.001, itl_mean_s=None, itl_p95_s=None, itl_max_s=None,
                         output_tokens=None, chunks=0, served_replica=None, served_zone=None, served_region=None,
                         served_version=None)
            elif zone == "zone-a" and sent < inject < sent + int(r["e2e_s"] * NS):
                r.update(ok=False, failure="stream_broken", detail="RemoteProtocolError",
                         e2e_s=round((inject - sent) / NS + 0.002, 6), chunks=3, output_tokens=3)
            buf.append(dumps(r))
            if len(buf) >= 4096:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        end = T0 + int(requests * step) + NS
        f.write("".join(x + "\n" for x in buf))
        f.write(dumps({"kind": "end", "stopped_ns": end, "counts": {"request": requests}}) + "\n")
    return path


def expected(requests: int, rate: float = 300.0, inject_at: float = 0.5, outage_s: float = 25.0) -> dict[str, Any]:
    """What the figures must be: measured requests, those refused in the outage (zone-a's sent in it)."""
    step = NS / rate
    measure, inject, heal = timeline(requests, rate, inject_at, outage_s)
    sends = [(T0 + int(i * step), ZONES[i % 3]) for i in range(requests)]
    refused = sum(1 for t, z in sends if z == "zone-a" and inject <= t < heal)
    first_after = min(t for t, z in sends if z == "zone-a" and t >= heal)
    return {"total": requests, "measured": sum(1 for t, _ in sends if t >= measure), "refused": refused,
            "affected_first_success_s": round((first_after - inject) / NS, 4)}
