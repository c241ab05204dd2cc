"""One vLLM CPU replica (Ray Serve LLM) on the tiny checkpoint: deploy-to-ready, memory, TTFT, tokens/s.

Brings up a one-zone cluster (head + one worker), deploys the llm app with one replica, then
drives closed-loop streaming load at concurrency 1 and 4 with the rig's own harness. Prints
the figures and takes the cluster down. ~5 minutes on 2 cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine, pss_kib, rss_kib  # noqa: E402
from chaos.base.stats import percentile  # noqa: E402
from chaos.system import deploy, topology  # noqa: E402
from chaos.recording import records as rec  # noqa: E402
from chaos.backends.local import LocalCluster, procs  # noqa: E402
from chaos.core.provision import app_spec  # noqa: E402
from chaos.load.harness import LoadRun  # noqa: E402
from chaos.load.workload import LoadShape, Target  # noqa: E402

ONE_ZONE = {"name": "one-zone", "head": {"cpus": 0},
            "regions": [{"name": "r1", "zones": [{"name": "zone-a", "nodes": [{"name": "worker-a", "cpus": 8}]}]}]}


def load(url: str, concurrency: int, seconds: float) -> dict:
    got: list[rec.RequestRecord] = []
    ev = rec.Events()
    ev.request_done.append(got.append)
    shape = LoadShape(mode="closed", concurrency=concurrency, duration_s=seconds, warmup_s=2, timeout_s=60,
                      route="completions", max_tokens=(64, 64), prompt_words=(16, 16), drain_s=60)
    t0 = time.monotonic()
    LoadRun([Target("w", url)], shape, ev).run()
    wall = time.monotonic() - t0
    ok = [r for r in got if r.ok and r.phase == "measure"]
    tokens = sum(r.output_tokens or 0 for r in ok)
    span = max(r.sent_offset_s + r.e2e_s for r in ok) - min(r.sent_offset_s for r in ok) if ok else wall
    return {"requests": len(ok), "failed": sum(1 for r in got if not r.ok),
            "ttft_p50": percentile([r.ttft_s for r in ok], 0.5), "ttft_p95": percentile([r.ttft_s for r in ok], 0.95),
            "tok_s": tokens / span if span else 0.0}


def main():
    root = Path(tempfile.mkdtemp(prefix="ap-bench-vllm-"))
    cluster = LocalCluster.up(topology.parse(ONE_ZONE, "one-zone"), root / "cluster", log=print)
    try:
        cluster.wait_healthy(120)
        spec = app_spec("llm", cluster)
        t0 = time.monotonic()
        rows = deploy.deploy(cluster, spec, timeout=900)
        ready_s = time.monotonic() - t0
        replica = next(r for r in rows if r.deployment.startswith("LLMServer"))
        sid = procs.session_of(replica.pid)
        tree = [p for p in procs.session_members(sid)
                if p == replica.pid or procs.parent(p) == replica.pid
                or procs.parent(procs.parent(p) or 0) == replica.pid]
        url = cluster.serve_url("worker-a")
        print(f"machine: {machine()}")
        print(f"deploy to ready: {ready_s:.1f} s (includes Ray Serve LLM's model 'download' task and the ingress)")
        print(f"replica process tree ({len(tree)} processes: replica actor, EngineCore, Worker): "
              f"RSS {rss_kib(tree) / 1024:.0f} MiB, PSS {pss_kib(tree) / 1024:.0f} MiB")
        for c in (1, 4):
            r = load(url, c, 25)
            print(f"concurrency {c}: {r['requests']} requests ({r['failed']} failed), TTFT p50 {r['ttft_p50']:.3f} s "
                  f"p95 {r['ttft_p95']:.3f} s, {r['tok_s']:.1f} output tokens/s")
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
