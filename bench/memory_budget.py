"""Memory of the default 3-zone demo with three vLLM replicas (one per zone), all processes counted.

Runs the same deployment twice, side by side in one run: with Ray's default for idle workers
(a raylet keeps up to one idle worker per CPU) and with availproof's default
(``idle_workers_kept: 0``: idle workers are ended a second after their task). For each: total
PSS (shared pages split between the processes that map them) and summed RSS (shared pages
counted once per process) of every process of every node session plus Redis, by kind of
process. The target is 12 GiB for the whole demo. ~10 minutes on 2 cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine, pss_kib, rss_kib  # noqa: E402
from chaos.system import deploy, topology  # noqa: E402
from chaos.backends.local import LocalCluster, procs  # noqa: E402
from chaos.core.provision import app_spec  # noqa: E402

GIB = 1024 * 1024


def kind(pid: int) -> str:
    cmd = procs.cmdline(pid)
    comm = procs.comm(pid)
    for needle, label in (("gcs_server", "GCS"), ("raylet/raylet", "raylet"), ("redis-server", "Redis"),
                          ("EngineCore", "vLLM EngineCore"), ("LLMServer", "Serve LLMServer replica"),
                          ("OpenAiIngress", "Serve OpenAI ingress"), ("ServeController", "Serve controller"),
                          ("ProxyActor", "Serve proxy"), ("ray::IDLE", "idle Ray worker"),
                          ("dashboard", "dashboard + agents"), ("runtime_env", "dashboard + agents"),
                          ("log_monitor", "log monitor")):
        if needle in cmd or needle in comm:
            return label
    return f"other ({comm})"


def measure(cluster: LocalCluster) -> tuple[dict[str, tuple[int, int, int]], int, int]:
    pids = [p for n in cluster.state.nodes.values() if n.sid for p in procs.session_members(n.sid)]
    if cluster.state.redis and cluster.state.redis.pid:
        pids.append(cluster.state.redis.pid)
    groups: dict[str, list[int]] = defaultdict(list)
    for p in pids:
        groups[kind(p)].append(p)
    rows = {k: (len(v), pss_kib(v), rss_kib(v)) for k, v in groups.items()}
    return rows, pss_kib(pids), rss_kib(pids)


def variant(idle_kept, root: Path) -> tuple:
    doc = topology.load().to_doc()
    doc["idle_workers_kept"] = idle_kept
    cluster = LocalCluster.up(topology.parse(doc, "default"), root, log=lambda m: None)
    try:
        cluster.wait_healthy(180)
        spec = app_spec("llm", cluster)
        t0 = time.monotonic()
        deploy.deploy(cluster, spec, timeout=1200)
        ready = time.monotonic() - t0
        time.sleep(20)  # past Ray's idle-worker killing threshold (1 s) and the engines' warm-up
        return (ready, *measure(cluster))
    finally:
        cluster.down()


def main():
    root = Path(tempfile.mkdtemp(prefix="ap-bench-mem-"))
    print(f"machine: {machine()}")
    results = {}
    for label, idle in (("Ray default (idle workers kept: one per CPU)", None),
                        ("availproof default (idle_workers_kept: 0)", 0)):
        print(f"\n== {label}: deploying three vLLM replicas...", flush=True)
        ready, rows, pss, rss = variant(idle, root / ("ray" if idle is None else "ap"))
        results[label] = (pss, rss)
        print(f"deploy to ready {ready:.0f} s")
        print(f"{'process kind':<28} {'count':>5} {'PSS MiB':>9} {'RSS MiB':>9}")
        for k, (n, p, r) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<28} {n:5d} {p / 1024:9.0f} {r / 1024:9.0f}")
        print(f"{'total':<28} {'':5} {pss / 1024:9.0f} {rss / 1024:9.0f}   "
              f"(PSS {pss / GIB:.2f} GiB; budget 12 GiB)")
    (a_pss, a_rss), (b_pss, b_rss) = results.values()
    print(f"\navailproof/Ray-default total PSS ratio: {b_pss / a_pss:.2f} ({a_pss / GIB:.2f} -> {b_pss / GIB:.2f} GiB)")


if __name__ == "__main__":
    main()
