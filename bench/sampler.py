"""The control-plane sampler's cost: the same load with and without it, side by side in one run.

A default three-zone cluster with the stream target; open-loop load on the worker proxies.
Phases alternate without and with the sampler (A B A B: the machine drifts, so each figure is
given per phase): data-plane TTFT p50/p99, the rig process' CPU per second, the head's
processes' CPU per second (dashboard, GCS, Serve controller answer the sampler), samples taken.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine  # noqa: E402
from chaos.system import deploy, topology  # noqa: E402
from chaos.recording import records as rec  # noqa: E402
from chaos.base import stats  # noqa: E402
from chaos.backends.local import LocalCluster  # noqa: E402
from chaos.backends.local.backend import LocalBackend  # noqa: E402
from chaos.backends.local.cluster import HEAD  # noqa: E402
from chaos.load.harness import LoadRun  # noqa: E402
from chaos.system.sampler import Sampler  # noqa: E402
from chaos.load.workload import LoadShape, Target  # noqa: E402
from serve_apps.config import AppSpec  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def phase(backend: LocalBackend, cluster: LocalCluster, seconds: float, rate: float, period: float | None):
    events = rec.Events()
    done: list[rec.RequestRecord] = []
    samples: list[rec.Sample] = []
    events.request_done.append(done.append)
    events.sample_taken.append(samples.append)
    targets = [Target(n, u, z, r) for n, u, z, r in backend.targets()]
    shape = LoadShape(mode="open", rate=rate, duration_s=seconds, warmup_s=0, timeout_s=10, max_tokens=[16, 48])
    head = cluster.node_processes(HEAD)
    h0, p0, t0 = cpu_s(head), time.process_time(), time.monotonic()
    sampler = Sampler(backend.observe, events, period_s=period) if period else None
    if sampler:
        sampler.start()
    load = LoadRun(targets, shape, events, allow_hosts=backend.own_hosts()).start()
    load.join(timeout=seconds + 60)
    if sampler:
        sampler.stop()
    wall = time.monotonic() - t0
    ttft = [r.ttft_s for r in done if r.ok and r.ttft_s is not None]
    return {"sampler": f"{period} s" if period else "off", "requests": len(done),
            "failed": sum(1 for r in done if not r.ok),
            "ttft_p50_ms": 1000 * (stats.percentile(ttft, 0.5) or 0),
            "ttft_p99_ms": 1000 * (stats.percentile(ttft, 0.99) or 0),
            "rig_cpu_per_s": (time.process_time() - p0) / wall, "head_cpu_per_s": (cpu_s(head) - h0) / wall,
            "samples": len(samples), "sample_took_p99_ms": 1000 * (stats.percentile([s.took_s for s in samples], 0.99) or 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rate", type=float, default=8)
    ap.add_argument("--period", type=float, default=0.5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ap-bench-sampler-"))
    print(f"machine: {machine()}")
    cluster = LocalCluster.up(topology.load(), root / "cluster")
    try:
        cluster.wait_healthy(120)
        deploy.deploy(cluster, AppSpec(app="stream", zones=cluster.topology.zones), timeout=300)
        backend = LocalBackend(cluster)
        rows = [phase(backend, cluster, args.seconds, args.rate, p)
                for p in (None, args.period, None, args.period)]
    finally:
        cluster.down()
    cols = list(rows[0])
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()))
    off = [r for r in rows if r["sampler"] == "off"]
    on = [r for r in rows if r["sampler"] != "off"]
    mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
    print(f"sampler cost: rig CPU +{mean(on, 'rig_cpu_per_s') - mean(off, 'rig_cpu_per_s'):.4f} s/s, head CPU "
          f"+{mean(on, 'head_cpu_per_s') - mean(off, 'head_cpu_per_s'):.4f} s/s; TTFT p50 "
          f"{mean(off, 'ttft_p50_ms'):.1f} -> {mean(on, 'ttft_p50_ms'):.1f} ms, p99 "
          f"{mean(off, 'ttft_p99_ms'):.1f} -> {mean(on, 'ttft_p99_ms'):.1f} ms")


if __name__ == "__main__":
    main()
