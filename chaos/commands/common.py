"""What every command shares: the one-line messages, the flags made into a run's options, the default
output directory, the report written at the end."""

from __future__ import annotations

import sys
from pathlib import Path


def say(msg: str) -> None:
    print(f"availproof: {msg}", file=sys.stderr, flush=True)


def cluster_dir(args) -> Path | None:
    return Path(args.cluster_dir) if getattr(args, "cluster_dir", None) else None


def kube_flags(args) -> dict:
    return {"context": args.kube_context, "namespace": args.kube_namespace, "ray_cluster": args.ray_cluster,
            "serve_url": args.serve_url, "dashboard_url": args.dashboard_url, "max_pods": args.max_pods,
            "partition_method": args.partition_method,
            "allow_autoscaled_zone_loss": getattr(args, "allow_autoscaled_zone_loss", None),
            "load_in_cluster": getattr(args, "load_in_cluster", None), "load_image": getattr(args, "load_image", None)}


def run_options(args, out: Path, front: str | None = None, prometheus_url: str | None = None):
    """The run's options (:class:`chaos.core.options.Options`) from the flags (and the URL of the Prometheus server
    the command started)."""
    from chaos.core.options import Options

    kw = {}
    if cluster_dir(args):
        kw["cluster_dir"] = cluster_dir(args)
    if getattr(args, "backend", "local") == "kuberay":
        kw["kubernetes"] = kube_flags(args)
    return Options(app=args.app, out_dir=out, backend=getattr(args, "backend", "local"),
                   model_path=getattr(args, "model_path", None) or "",
                   replace_cluster=bool(getattr(args, "replace_cluster", False)),
                   front=front or (args.front if isinstance(getattr(args, "front", None), str) else None),
                   capacity=getattr(args, "capacity", None),
                   inject_anyway=bool(getattr(args, "inject_anyway", False)), prometheus_url=prometheus_url, **kw)


def default_out(name: str) -> Path:
    import time

    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"


def write_report(out: Path) -> None:
    """report.md/.html/.json beside the results; a failure here never changes the verdict."""
    from chaos.reports import report

    try:
        paths = report.write(out)
        say(f"report: {paths['html']}")
    except Exception as e:  # noqa: BLE001 - the run's own outputs are already written
        say(f"could not write the report of {out}: {e}")
