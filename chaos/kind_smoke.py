"""The kind smoke run: the harness and the analysis against a KubeRay cluster, faults through
the Kubernetes backend. Called by ``kuberay/kind-smoke.sh`` (needs Docker and kind; it does
not run on the project's own CI machines).

For each scope (head pod delete, redis pod delete, zone loss): steady load on the serve
Service, one fault, a recovery window, then the same recovery summary and bounds as the local
experiments, in ``OUT/<scope>/summary.json`` and one table in ``OUT/suite.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from chaos import analysis, bounds, records as rec
from chaos.backends.kuberay import KubeRayBackend
from chaos.faults import Marker
from chaos.harness import LoadRun
from chaos.suite import table
from chaos.workload import LoadShape, Target

SCOPES = {
    # scope: (bounds, the fault)
    "head": ({"max_failed_requests": 0, "must_recover": True}, lambda b: b.kill_head()),
    "redis": ({"max_failed_requests": 0, "must_recover": True}, lambda b: b.kill_redis()),
    "zone": ({"max_time_to_steady_state_s": 120, "must_recover": True}, lambda b: b.kill_zone("zone-a")),
}


def run_scope(scope: str, backend: KubeRayBackend, url: str, out: Path, recovery_s: float) -> dict:
    limits, inject = SCOPES[scope]
    out.mkdir(parents=True, exist_ok=True)
    events = rec.Events()
    writer = rec.RecordWriter(out / "records.ndjson").attach(events)
    marker = Marker(events, log=print)
    shape = LoadShape(rate=5, duration_s=recovery_s + 60, warmup_s=5, timeout_s=15, seed=5)
    load = LoadRun([Target("serve-svc", url)], shape, events, routing="single").start()
    try:
        time.sleep(20)
        with marker.inject(scope, scope, ["zone-a"] if scope == "zone" else []) as f:
            f["pods"] = inject(backend)
        time.sleep(recovery_s)
        if scope == "zone":
            with marker.heal(f):
                backend.heal_zone_nodes("zone-a")
    finally:
        load.stop()
        load.join(timeout=60)
        writer.close()
    summary = analysis.analyse(rec.read(out / "records.ndjson"))
    results = bounds.check(summary, limits)
    summary["bounds"] = {"stated": limits, "results": results, "all_met": bounds.all_met(results)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return {"experiment": f"kind-{scope}", "verdict": 0 if summary["bounds"]["all_met"] else 1, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--cluster", required=True, help="the RayCluster name prefix (ray.io/cluster label)")
    ap.add_argument("--url", required=True, help="the serve Service, port-forwarded to loopback")
    ap.add_argument("--out", required=True)
    ap.add_argument("--recovery-s", type=float, default=90.0)
    ap.add_argument("--max-pods", type=int, default=3, help="blast-radius limit per fault")
    args = ap.parse_args(argv)
    backend = KubeRayBackend(args.namespace, args.context, cluster=args.cluster, max_pods=args.max_pods)
    pods = backend._pods()
    clusters = sorted({(p["metadata"].get("labels") or {}).get("ray.io/cluster", "") for p in pods} - {""})
    backend.cluster = next((c for c in clusters if c.startswith(args.cluster)), args.cluster)
    results = [run_scope(s, backend, args.url, Path(args.out) / s, args.recovery_s) for s in SCOPES]
    text = table(results)
    (Path(args.out) / "suite.md").write_text(text)
    print(text)
    return max(r["verdict"] for r in results)


if __name__ == "__main__":
    raise SystemExit(main())
