"""Experiment files: Chaos Toolkit JSON with an ``availproof`` extension, loaded and validated.

The extension says what the rig needs around the Chaos Toolkit method::

    "extensions": [{
      "name": "availproof",
      "scope": "replica",                 # the failure scope this experiment measures
      "topology": "default",              # shipped name or a path
      "gcs_fault_tolerance": true,
      "network": "loopback",              # loopback | netns (per-zone namespaces, for partitions)
      "app": {"replicas_per_zone": 1},    # chaos deploy overrides (app kind comes from --app)
      "targets": "workers",               # whose Serve proxies get traffic: workers | head | all
      "routing": "round_robin",
      "load": {...},                      # chaos.workload.LoadShape fields
      "baseline_s": 10,                   # measured load before the first injection
      "recovery_window_s": 40,            # load kept on after the method, before analysis
      "steady_state": {...},              # chaos.analysis.SteadyState fields
      "slo": {...},                       # chaos.analysis.SLO fields
      "bounds": {...},                    # chaos.bounds names -> limits
      "bounds_source": "where the defaults come from",
      "kubernetes": {...}                 # with --backend kuberay: context, namespace, ray_cluster,
    }]                                    #   serve_url, dashboard_url, max_pods (blast radius)

Every problem is one line naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import bounds as bounds_mod
from chaos.analysis import SLO, SteadyState
from chaos.errors import UsageError, read_input
from chaos.records import SCOPES
from chaos.workload import LoadShape

EXTENSION = "availproof"
TARGET_SETS = ("workers", "head", "all")
NETWORKS = ("loopback", "netns")
_FIELDS = {"name", "scope", "topology", "gcs_fault_tolerance", "network", "app", "targets", "routing", "load", "baseline_s",
           "recovery_window_s", "steady_state", "slo", "bounds", "bounds_source", "allow_hosts", "max_wall_s",
           "stop_when", "llm", "kubernetes"}
KUBE_FIELDS = {"context", "namespace", "ray_cluster", "serve_url", "dashboard_url", "max_pods"}


@dataclass
class Settings:
    scope: str
    topology: str = "default"
    gcs_fault_tolerance: bool = True
    network: str = "loopback"
    app: dict[str, Any] = field(default_factory=dict)
    targets: str = "workers"
    routing: str = "round_robin"
    load: LoadShape = field(default_factory=LoadShape)
    baseline_s: float = 10.0
    recovery_window_s: float = 40.0
    steady_state: SteadyState = field(default_factory=SteadyState)
    slo: SLO = field(default_factory=SLO)
    bounds: dict[str, Any] = field(default_factory=dict)
    bounds_source: str = ""
    allow_hosts: tuple[str, ...] = ()
    max_wall_s: float = 900.0  # stop condition: abort the method past this wall time
    stop_when: dict[str, Any] = field(default_factory=dict)  # stop condition on the failure ratio
    kubernetes: dict[str, Any] = field(default_factory=dict)  # the KubeRay target and its blast radius


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    text = read_input(path, "experiment")
    try:
        exp = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(exp, dict):
        raise UsageError(f"{path}: an experiment is a JSON object")
    for key in ("title", "method"):
        if key not in exp:
            raise UsageError(f"{path}: {key}: is required")
    if not isinstance(exp["method"], list) or not exp["method"]:
        raise UsageError(f"{path}: method: must be a non-empty list of activities")
    settings(exp, source=path.name)  # validates the extension
    return exp


def settings(experiment: dict[str, Any], source: str = "experiment", app: str = "stream") -> Settings:
    """The validated ``availproof`` extension of an experiment.

    With ``app="llm"`` the extension's ``llm`` block (load, steady_state, slo) is merged over
    the defaults: a CPU vLLM replica serves far fewer tokens per second than the stream target.
    """
    exts = [e for e in experiment.get("extensions") or [] if isinstance(e, dict) and e.get("name") == EXTENSION]
    if not exts:
        raise UsageError(f"{source}: extensions: needs an entry named {EXTENSION!r} (scope, load, bounds)")
    ext = dict(exts[0])
    where = f"{source}: extensions[{EXTENSION}]"
    llm = ext.get("llm", {})
    if not isinstance(llm, dict) or set(llm) - {"load", "steady_state", "slo"}:
        raise UsageError(f"{where}.llm: a mapping with load, steady_state, slo")
    if app == "llm":
        for key, over in llm.items():
            if not isinstance(over, dict):
                raise UsageError(f"{where}.llm.{key}: must be a mapping")
            ext[key] = {**ext.get(key, {}), **over}
    unknown = set(ext) - _FIELDS
    if unknown:
        raise UsageError(f"{where}.{sorted(unknown)[0]}: unknown field")
    scope = ext.get("scope")
    if scope not in SCOPES:
        raise UsageError(f"{where}.scope: must be one of {', '.join(SCOPES)}, got {scope!r}")
    if ext.get("targets", "workers") not in TARGET_SETS:
        raise UsageError(f"{where}.targets: must be one of {', '.join(TARGET_SETS)}")
    for key in ("baseline_s", "recovery_window_s", "max_wall_s"):
        v = ext.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise UsageError(f"{where}.{key}: must be a number >= 0, got {v!r}")
    for key in ("app", "steady_state", "slo", "load", "stop_when"):
        if not isinstance(ext.get(key, {}), dict):
            raise UsageError(f"{where}.{key}: must be a mapping")
    stop = ext.get("stop_when", {})
    if set(stop) - {"max_failed_ratio", "for_s"}:
        raise UsageError(f"{where}.stop_when: only max_failed_ratio and for_s")
    r = stop.get("max_failed_ratio", 0.5)
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1:
        raise UsageError(f"{where}.stop_when.max_failed_ratio: must be a number in [0, 1], got {r!r}")
    f = stop.get("for_s", 10)
    if isinstance(f, bool) or not isinstance(f, (int, float)) or f <= 0:
        raise UsageError(f"{where}.stop_when.for_s: must be a number > 0, got {f!r}")
    kube = ext.get("kubernetes", {})
    if not isinstance(kube, dict):
        raise UsageError(f"{where}.kubernetes: must be a mapping")
    if set(kube) - KUBE_FIELDS:
        raise UsageError(f"{where}.kubernetes.{sorted(set(kube) - KUBE_FIELDS)[0]}: unknown field "
                         f"(known: {', '.join(sorted(KUBE_FIELDS))})")
    mp = kube.get("max_pods", 1)
    if isinstance(mp, bool) or not isinstance(mp, int) or mp < 1:
        raise UsageError(f"{where}.kubernetes.max_pods: must be an integer >= 1 (the blast-radius limit), got {mp!r}")
    for key in KUBE_FIELDS - {"max_pods"}:
        if key in kube and (not isinstance(kube[key], str) or not kube[key]):
            raise UsageError(f"{where}.kubernetes.{key}: must be a non-empty string")
    network = ext.get("network", "loopback")
    if network not in NETWORKS:
        raise UsageError(f"{where}.network: must be one of {', '.join(NETWORKS)}, got {network!r}")
    try:
        load_shape = LoadShape.from_dict(ext.get("load"))
    except UsageError as e:
        raise UsageError(f"{where}.{e}") from None
    try:
        steady = SteadyState(**ext.get("steady_state", {}))
        slo = SLO(**ext.get("slo", {}))
    except TypeError as e:
        raise UsageError(f"{where}: steady_state/slo: {e}") from None
    bounds_mod.validate(ext.get("bounds"), f"{where}.bounds")
    return Settings(
        scope=scope,
        topology=str(ext.get("topology", "default")),
        gcs_fault_tolerance=bool(ext.get("gcs_fault_tolerance", True)),
        network=network,
        app=dict(ext.get("app", {})),
        targets=ext.get("targets", "workers"),
        routing=ext.get("routing", "round_robin"),
        load=load_shape,
        baseline_s=float(ext.get("baseline_s", 10.0)),
        recovery_window_s=float(ext.get("recovery_window_s", 40.0)),
        steady_state=steady,
        slo=slo,
        bounds=dict(ext["bounds"]),
        bounds_source=str(ext.get("bounds_source", "")),
        allow_hosts=tuple(ext.get("allow_hosts", ())),
        max_wall_s=float(ext.get("max_wall_s", 900.0)),
        stop_when=dict(ext.get("stop_when", {})),
        kubernetes=dict(kube),
    )
