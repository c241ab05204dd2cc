"""The run in progress: what the control, the actions and the probes share within one process."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import records as rec
from chaos.backends.local import LocalCluster, default_cluster_dir
from chaos.backends.local.backend import LocalBackend
from chaos.experiment import Settings
from chaos.faults import Marker
from chaos.harness import LoadRun
from chaos.errors import UsageError


def log(msg: str) -> None:
    print(f"availproof: {msg}", flush=True)


@dataclass
class ActiveRun:
    experiment_title: str
    settings: Settings
    out_dir: Path
    backend: LocalBackend
    app: str
    events: rec.Events
    writer: rec.RecordWriter
    marker: Marker
    load: LoadRun | None = None
    summary: dict[str, Any] | None = None
    bound_results: list[dict[str, Any]] | None = None
    started_mono: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None
    exporter: Any = None

    @property
    def records_path(self) -> Path:
        return self.out_dir / "records.ndjson"


_current: ActiveRun | None = None


def current() -> ActiveRun | None:
    return _current


def set_current(run: ActiveRun | None) -> None:
    global _current
    _current = run


def cluster_dir(configuration: dict | None) -> Path:
    value = (configuration or {}).get("availproof_cluster_dir")
    return Path(value) if value else default_cluster_dir()


def out_dir(configuration: dict | None, title: str) -> Path:
    value = (configuration or {}).get("availproof_out")
    if value:
        return Path(value)
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40]
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}"


def kube_settings(configuration: dict | None, from_file: dict | None = None) -> dict:
    """The KubeRay target: the experiment's ``kubernetes`` section, overridden by the CLI's flags."""
    merged = {**(from_file or {}), **{k: v for k, v in ((configuration or {}).get("availproof_kubernetes") or {}).items()
                                      if v is not None}}
    missing = [k for k in ("context", "namespace", "serve_url", "dashboard_url") if not merged.get(k)]
    if missing:
        flags = {"context": "--kube-context", "namespace": "--kube-namespace", "serve_url": "--serve-url",
                 "dashboard_url": "--dashboard-url"}
        raise UsageError(f"the kuberay backend needs {', '.join(missing)} (experiment extensions.kubernetes or "
                         f"{' '.join(flags[k] for k in missing)})")
    return merged


def kuberay_backend(configuration: dict | None, from_file: dict | None = None):
    from chaos.backends.kuberay import KubeRayBackend

    k = kube_settings(configuration, from_file)
    b = KubeRayBackend(k["namespace"], k["context"], k.get("ray_cluster", "availproof"),
                       max_pods=int(k.get("max_pods", 1)), serve_url=k["serve_url"], dashboard_url=k["dashboard_url"])
    b.resolve_cluster()
    return b


def backend_kind(configuration: dict | None) -> str:
    kind = (configuration or {}).get("availproof_backend", "local")
    if kind not in ("local", "kuberay"):
        raise UsageError(f"backend must be local or kuberay, got {kind!r}")
    return kind


def backend_for(configuration: dict | None):
    """The backend of the current run, or one attached from the configuration."""
    run = current()
    if run is not None:
        return run.backend
    if backend_kind(configuration) == "kuberay":
        return kuberay_backend(configuration)
    return LocalBackend(LocalCluster.attach(cluster_dir(configuration), log=log))


def marker_for() -> Marker:
    run = current()
    return run.marker if run is not None else Marker(log=log)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)
