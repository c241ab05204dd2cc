"""How to run an experiment, beside what its file says: one object, made by the CLI from its flags
or by the Chaos Toolkit control from the experiment's ``configuration`` (keys ``availproof_*``),
and passed as it is to :func:`chaos.core.run.open_run` and :mod:`chaos.core.provision`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.backends.local.cluster import default_cluster_dir
from chaos.base.errors import UsageError, parse_bool
from chaos.system.frontdoor import FRONTS
from chaos.base.readonly import thaw

BACKENDS = ("local", "kuberay")
KUBE_FLAGS = {"context": "--kube-context", "namespace": "--kube-namespace", "serve_url": "--serve-url",
              "dashboard_url": "--dashboard-url"}


def backend_kind(kind: str | None) -> str:
    kind = kind or "local"
    if kind not in BACKENDS:
        raise UsageError(f"backend must be local or kuberay, got {kind!r}")
    return kind


@dataclass
class Options:
    app: str = "stream"  # stream | llm
    out_dir: Path | None = None  # default: runs/<time>-<title>
    cluster_dir: Path = field(default_factory=default_cluster_dir)
    backend: str = "local"  # local | kuberay
    kubernetes: dict[str, Any] = field(default_factory=dict)  # flags over the experiment's kubernetes section
    model_path: str = ""  # the llm app's checkpoint (default: the tiny one, built offline)
    model: str | None = None  # the model name the load asks for (default: the load shape's)
    deploy_timeout_s: float = 600.0
    replace_cluster: bool = False  # a running local cluster of another kind is replaced, not refused
    front: str | None = None  # direct | lb | zonal-lb over the experiment's ``front`` (--front)
    capacity: Path | None = None  # the capacity file load.utilization takes its share of (--capacity; chaos.load.utilization)
    experiment_file: Path | None = None  # the file run (its load.capacity is relative to it; None: the working dir)
    inject_anyway: bool = False  # a baseline out of steady state does not stop the run (chaos.core.baseline_gate)
    prometheus_url: str | None = None  # the run's Prometheus server, for the promql probe (--prometheus)

    def __post_init__(self) -> None:
        self.backend = backend_kind(self.backend)
        if self.app not in ("stream", "llm"):
            raise UsageError(f"app must be stream or llm, got {self.app!r}")
        if self.front is not None and self.front not in FRONTS:
            raise UsageError(f"front must be one of {', '.join(FRONTS)}, got {self.front!r}")
        self.replace_cluster = parse_bool(self.replace_cluster, "replace_cluster")
        self.inject_anyway = parse_bool(self.inject_anyway, "inject_anyway")
        self.cluster_dir = Path(self.cluster_dir)
        self.out_dir = Path(self.out_dir) if self.out_dir else None
        self.capacity = Path(self.capacity) if self.capacity else None
        self.experiment_file = Path(self.experiment_file) if self.experiment_file else None

    @classmethod
    def from_configuration(cls, configuration: dict[str, Any] | None) -> Options:
        """Under plain ``chaos run``: the experiment's ``configuration`` (strings from the environment)."""
        c = configuration or {}
        return cls(app=c.get("availproof_app") or "stream",
                   out_dir=Path(c["availproof_out"]) if c.get("availproof_out") else None,
                   cluster_dir=Path(c["availproof_cluster_dir"]) if c.get("availproof_cluster_dir")
                   else default_cluster_dir(),
                   backend=c.get("availproof_backend") or "local",
                   kubernetes=dict(c.get("availproof_kubernetes") or {}),
                   model_path=c.get("availproof_model_path") or "",
                   model=c.get("availproof_model"),
                   deploy_timeout_s=_seconds(c.get("availproof_deploy_timeout_s", 600), "availproof_deploy_timeout_s"),
                   replace_cluster=parse_bool(c.get("availproof_replace_cluster"), "availproof_replace_cluster"),
                   front=c.get("availproof_front") or None,
                   capacity=c.get("availproof_capacity") or None,
                   inject_anyway=parse_bool(c.get("availproof_inject_anyway"), "availproof_inject_anyway"),
                   prometheus_url=c.get("availproof_prometheus_url") or None)


def _seconds(value: Any, name: str) -> float:
    """A number of seconds as the configuration gives it (a number or its text); anything else is a one-line error."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number of seconds, got {value!r}") from None


def kube_settings(flags: dict | None, from_file: dict | None = None) -> dict:
    """The KubeRay target: the experiment's ``kubernetes`` section, overridden by the CLI's flags (None: not given)."""
    merged = {**thaw(from_file or {}), **{k: v for k, v in (flags or {}).items() if v is not None}}  # its own
    missing = [k for k in KUBE_FLAGS if not merged.get(k)]
    if missing:
        raise UsageError(f"the kuberay backend needs {', '.join(missing)} (experiment extensions.kubernetes or "
                         f"{' '.join(KUBE_FLAGS[k] for k in missing)})")
    return merged
