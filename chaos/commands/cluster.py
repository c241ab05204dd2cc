"""The local cluster's commands: ``cluster up|status|down``, ``deploy``, ``checkpoint``, ``recover``."""

from __future__ import annotations

import sys

from chaos.commands.common import cluster_dir, kube_flags, say


def cmd_cluster_up(args) -> int:
    from chaos.system import topology
    from chaos.backends.local import LocalCluster

    topo = topology.load(args.topology)
    cluster = LocalCluster.up(topo, cluster_dir(args), log=say,
                              gcs_fault_tolerance=False if args.no_gcs_ft else None, netns_mode=args.netns)
    cluster.wait_healthy(timeout=120)
    print_status(cluster)
    return 0


def cmd_cluster_status(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.attach(cluster_dir(args))
    print_status(cluster, replicas=not args.no_replicas)
    return 0


def cmd_cluster_down(args) -> int:
    from chaos.backends.local import LocalCluster

    cluster = LocalCluster.find(cluster_dir(args), log=say)
    if cluster is None:
        say("no local cluster is running: nothing to do")
        return 0
    cluster.down()
    return 0


def print_status(cluster, replicas: bool = True, out=sys.stdout) -> None:
    s = cluster.state
    gcs = "GCS fault tolerance on (Redis)" if s.gcs_fault_tolerance else "GCS fault tolerance OFF"
    net = f"  network namespaces on {s.bridge}" if s.netns_mode else ""
    print(f"cluster {s.cluster_id}  topology {s.topology.get('name')}  {gcs}{net}", file=out)
    if s.partitioned:
        print(f"  PARTITIONED: {', '.join(s.partitioned)}", file=out)
    print(f"  head GCS {s.gcs_address}  dashboard {s.dashboard_url}", file=out)
    redis = cluster.redis_status()
    print("  redis " + "  ".join(f"{k}={v}" for k, v in redis.items()), file=out)
    print(f"  {'NODE':<12} {'ROLE':<7} {'REGION':<12} {'ZONE':<10} {'ADDRESS':<16} {'PROCS':>5}  {'GCS':<8} SERVE", file=out)
    for n in cluster.status():
        print(f"  {n.name:<12} {n.role:<7} {n.region or '-':<12} {n.zone or '-':<10} {n.ip:<16} "
              f"{n.processes:>5}  {n.gcs_state:<8} :{n.serve_port}", file=out)
    if replicas:
        from chaos.system import placement

        try:
            rows = placement.replicas(cluster)
        except placement.PlacementUnknown:
            print("  replicas: unknown (the dashboard did not answer)", file=out)
            rows = []
        if rows:
            print(f"  {'APP':<10} {'DEPLOYMENT':<22} {'REPLICA':<12} {'STATE':<10} {'NODE':<10} {'ZONE':<8} REGION", file=out)
            for r in rows:
                print(f"  {r.app:<10} {r.deployment:<22} {r.replica_id[:12]:<12} {r.state:<10} "
                      f"{r.node or '?':<10} {r.zone or '?':<8} {r.region or '?'}", file=out)


def cmd_deploy(args) -> int:
    from chaos.system import deploy
    from chaos.backends.local import LocalCluster
    from chaos.core.provision import app_spec
    from chaos.core.run import log

    cluster = LocalCluster.attach(cluster_dir(args), log=say)
    spec = app_spec(args.app, cluster, {"replicas_per_zone": args.replicas_per_zone}, args.model_path or "", log=log)
    deploy.deploy(cluster, spec, timeout=args.timeout, log=say)
    print_status(cluster)
    return 0


def cmd_checkpoint(args) -> int:
    from serve_apps import checkpoint

    print(checkpoint.build(args.dir or checkpoint.DEFAULT_DIR, seed=args.seed))
    return 0


def cmd_recover(args) -> int:
    """Restore a cluster a killed run left broken: resume, heal, restart, redeploy (KubeRay: remove every
    object of the rig left on the cluster, whatever run left it)."""
    if getattr(args, "backend", "local") == "kuberay":
        from chaos.core import provision

        backend = provision.kuberay_backend(provision.kube_settings(kube_flags(args)))
        done = backend.heal_all(timeout=300)
        for line in done.get("cannot") or []:  # one line per verb this context may not do
            say(line)
        for line in done.get("failed") or []:  # every removal that failed, the others done
            say(f"recover failed: {line}")
        say(f"recovered: {done}")
        return 1 if done.get("failed") else 0
    from chaos.backends.local import LocalCluster
    from chaos.backends.local.backend import LocalBackend
    from chaos.core.provision import redeploy_if_gone
    from chaos.core.run import log

    cluster = LocalCluster.find(cluster_dir(args), log=say)
    if cluster is None:
        say("no local cluster: nothing to recover")
        return 0
    backend = LocalBackend(cluster)
    had_front = cluster.front is not None
    cluster.stop_front()  # a killed run's balancer goes; the next run starts the one it needs
    done = backend.heal_all(timeout=240)
    done["redeployed"] = redeploy_if_gone(backend, app=args.app, log=log)
    done["front_door_removed"] = had_front
    say(f"recovered: {done}")
    print_status(cluster)
    return 0
