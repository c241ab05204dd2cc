"""`availproof`: argument parsing and wiring only; the work is done by the modules it calls.

Exit codes: 0 success, 1 a bound was violated, 2 a usage or set-up error (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.errors import AvailproofError


def _say(msg: str) -> None:
    print(f"availproof: {msg}", file=sys.stderr, flush=True)


def _cluster_dir(args) -> Path | None:
    return Path(args.cluster_dir) if getattr(args, "cluster_dir", None) else None


# ---------------------------------------------------------------- cluster
def cmd_cluster_up(args) -> int:
    from chaos import topology
    from chaos.backends.local import LocalCluster

    topo = topology.load(args.topology)
    cluster = LocalCluster.up(topo, _cluster_dir(args), log=_say,
                              gcs_fault_tolerance=False if args.no_gcs_ft else None)
    cluster.wait_healthy(timeout=120)
    print_status(cluster)
    return 0


def cmd_cluster_status(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.attach(_cluster_dir(args))
    print_status(cluster, replicas=not args.no_replicas)
    return 0


def cmd_cluster_down(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.find(_cluster_dir(args), log=_say)
    if cluster is None:
        _say("no local cluster is running: nothing to do")
        return 0
    cluster.down()
    return 0


def print_status(cluster, replicas: bool = True, out=sys.stdout) -> None:
    s = cluster.state
    gcs = "GCS fault tolerance on (Redis)" if s.gcs_fault_tolerance else "GCS fault tolerance OFF"
    print(f"cluster {s.cluster_id}  topology {s.topology.get('name')}  {gcs}", file=out)
    print(f"  head GCS {s.gcs_address}  dashboard {s.dashboard_url}", file=out)
    redis = cluster.redis_status()
    print("  redis " + "  ".join(f"{k}={v}" for k, v in redis.items()), file=out)
    print(f"  {'NODE':<12} {'ROLE':<7} {'REGION':<12} {'ZONE':<10} {'ADDRESS':<16} {'PROCS':>5}  {'GCS':<8} SERVE", file=out)
    for n in cluster.status():
        print(f"  {n.name:<12} {n.role:<7} {n.region or '-':<12} {n.zone or '-':<10} {n.ip:<16} "
              f"{n.processes:>5}  {n.gcs_state:<8} :{n.serve_port}", file=out)
    if replicas:
        from chaos import placement

        rows = placement.replicas(cluster)
        if rows:
            print(f"  {'APP':<10} {'DEPLOYMENT':<22} {'REPLICA':<12} {'STATE':<10} {'NODE':<10} {'ZONE':<8} REGION", file=out)
            for r in rows:
                print(f"  {r.app:<10} {r.deployment:<22} {r.replica_id[:12]:<12} {r.state:<10} "
                      f"{r.node or '?':<10} {r.zone or '?':<8} {r.region or '?'}", file=out)


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="availproof", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="a local multi-zone Ray cluster with GCS state in Redis")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start Redis, the head and one raylet per topology node")
    up.add_argument("--topology", default=None, help="topology YAML, or a shipped name: default, two-regions")
    up.add_argument("--no-gcs-ft", action="store_true", help="start the head without external Redis (contrast case)")
    up.set_defaults(func=cmd_cluster_up)
    status = csub.add_parser("status", help="every node with its domain and liveness, Redis, Serve replicas")
    status.add_argument("--no-replicas", action="store_true", help="skip the Serve replica table")
    status.set_defaults(func=cmd_cluster_status)
    down = csub.add_parser("down", help="stop everything the cluster started (idempotent)")
    down.set_defaults(func=cmd_cluster_down)
    for c in (up, status, down):
        c.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse prints its own one-line usage error
        return 2 if e.code else 0
    try:
        return args.func(args)
    except AvailproofError as e:
        _say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
