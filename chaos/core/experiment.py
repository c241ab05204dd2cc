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
      "load": {...},                      # chaos.load.workload.LoadShape fields
      "baseline_s": 10,                   # measured load before the first injection
      "recovery_window_s": 40,            # load kept on after the method, before analysis (at most)
      "recovery_settle_s": 10,            # ...ending once every plane has been back this long (0: never early)
      "steady_state": {...},              # chaos.analysis.SteadyState fields
      "slo": {...},                       # chaos.analysis.SLO fields
      "bounds": {...},                    # chaos.core.bounds names -> limits
      "bounds_source": "where the defaults come from",
      "kubernetes": {...}                 # with --backend kuberay: context, namespace, ray_cluster,
    }]                                    #   serve_url, dashboard_url, max_pods (blast radius), ...

The fields, their types, ranges and defaults are those of ``chaos/schemas/experiment-extension.schema.json``
(the single source of validation; editors can use it). What a schema cannot say (the load's
cross-field rules) is checked here after it. Every problem is one line naming the file and the
field's path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.core import bounds
from chaos.system import orphan_watch, secret_env
from chaos import schemas, scopes
from chaos.analysis import SLO, SteadyState, device as device_figures
from chaos.base.errors import UsageError, read_input
from chaos.load.workload import LoadShape
from chaos.base.readonly import freeze

EXTENSION = "availproof"
_PROPS = schemas.schema(schemas.EXTENSION)["properties"]
TARGET_SETS = tuple(_PROPS["targets"]["enum"])
NETWORKS = tuple(_PROPS["network"]["enum"])


@dataclass(frozen=True)
class Settings:
    """An experiment's ``availproof`` extension as one app runs it: frozen, its objects (``app``, ``bounds``, ...)
    read-only (:mod:`chaos.base.readonly`; a derived value, such as the rate a utilization gives or the ``--front``
    flag, is a new Settings: :mod:`chaos.core.run_spec`)."""

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
    recovery_settle_s: float = 10.0  # the window ends once every plane has been back this long (chaos.core.settle)
    steady_state: SteadyState = field(default_factory=SteadyState)
    slo: SLO = field(default_factory=SLO)
    bounds: dict[str, Any] = field(default_factory=dict)
    bounds_source: str = ""
    allow_hosts: tuple[str, ...] = ()
    max_wall_s: float = 900.0  # stop condition: abort the method past this wall time
    stop_when: dict[str, Any] = field(default_factory=dict)  # stop condition on the failure ratio
    kubernetes: dict[str, Any] = field(default_factory=dict)  # the KubeRay target and its blast radius
    front: str = "direct"  # direct | lb | zonal-lb: what stands between the client and the proxies
    front_door: dict[str, Any] = field(default_factory=dict)  # chaos.system.frontdoor.FrontSettings fields
    ca_bundle: str | None = None  # the CA the client trusts for an https front door of the user's
    auth_token_env: str | None = None  # where the client reads its bearer token (never recorded)
    population: str = "affected"  # affected | service: which requests the bounds are checked on
    sample_period_s: float = 0.5  # the health sampler's period

    def __post_init__(self) -> None:  # the objects read-only too (chaos.base.readonly): a change is a new Settings
        for name in READ_ONLY_FIELDS:
            object.__setattr__(self, name, freeze(getattr(self, name)))


READ_ONLY_FIELDS = ("app", "bounds", "stop_when", "kubernetes", "front_door")


def load(path: str | Path, capacity: str | Path | None = None) -> dict[str, Any]:
    """Read and validate an experiment file; a bad one raises a one-line :class:`UsageError`.
    ``capacity``: the capacity file ``load.utilization`` takes its share of (``--capacity``), over ``load.capacity``."""
    path = Path(path)
    text = read_input(path, "experiment")
    try:
        exp = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    found = problems(exp, path.name, capacity=capacity, experiment_file=path)
    if found:
        raise UsageError(found[0])
    return exp


def problems(experiment: Any, source: str = "experiment", capacity: str | Path | None = None,
             experiment_file: str | Path | None = None) -> list[str]:
    """Every problem of an experiment document, one line each naming ``source`` and the field:
    the Chaos Toolkit keys the rig relies on, the extension against its schema, then (when the
    schema passes) the load's cross-field rules with and without the ``llm`` overrides, and the
    capacity file a ``load.utilization`` takes its share of (:mod:`chaos.load.utilization`; ``capacity``
    over ``load.capacity``, which is relative to ``experiment_file``; the app is checked by the run). A load step's
    stages stating utilizations (``overload``) without any capacity file is no problem of the file: that capacity is
    the machine's, given when it runs (``--capacity FILE``), and the run refuses it missing."""
    return parse(experiment, source, capacity, experiment_file, step_capacity_at_run=True).problems


@dataclass(frozen=True)
class Parsed:
    """One reading of an experiment document (:func:`parse`): its problems, one line each, and, where it has
    none, the :class:`Settings` of each app and what each app's rate is derived from (``rate_from``,
    :func:`chaos.load.utilization.derive`; None: the load states its rate). Nothing read twice."""

    problems: list[str]
    settings: dict[str, Settings] = field(default_factory=dict)
    rate_from: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def parse(experiment: Any, source: str = "experiment", capacity: str | Path | None = None,
          experiment_file: str | Path | None = None, rates: bool = True, apps: tuple[str, ...] | None = None,
          step_capacity_at_run: bool = False) -> Parsed:
    """The experiment document read once (:func:`problems` says what it checks): the extension against its
    schema once, the Settings of both apps once each (``apps``: only those, a run's case: `availproof validate`
    checks both), each app's capacity file once (``rates`` False: no ``load.utilization`` is taken a share of,
    ``availproof capacity``'s case; ``step_capacity_at_run``: a load step without a capacity file is left to the
    run, :func:`problems`). Without an ``llm`` block the llm app's Settings are the stream target's. The
    Settings of a document with problems are not given."""
    if not isinstance(experiment, dict):
        return Parsed([f"{source}: an experiment is a JSON object"])
    out = [f"{source}: {key}: is required" for key in ("title", "method") if key not in experiment]
    method = experiment.get("method", [{}])
    if not isinstance(method, list) or not method:
        out.append(f"{source}: method: must be a non-empty list of activities")
    try:
        ext = _extension(experiment, source)
    except UsageError as e:
        return Parsed(out + [str(e)])
    found = [f"{source}: {line}" for line in schemas.errors(ext, schemas.EXTENSION, _prefix())]
    if found:
        return Parsed(out + found)
    from chaos.load import utilization

    by_app: dict[str, Settings] = {}
    wanted = ("stream", "llm") if apps is None else apps
    wanted = tuple(dict.fromkeys("stream" if a == "llm" and "llm" not in ext else a for a in wanted))
    for app in wanted:  # no llm block: the llm app's are the same
        try:
            by_app[app] = _settings(ext, source, app)
        except UsageError as e:
            if str(e) not in out:
                out.append(str(e))
    rate_from: dict[str, dict[str, Any] | None] = {}
    for app, s in by_app.items() if rates else ():
        if (step_capacity_at_run and s.load.utilization is None and utilization.stage_utilizations(s.load)
                and utilization.capacity_file(s.load, capacity, experiment_file) is None):
            continue  # a load step's capacity is the run's machine's (--capacity FILE): checked when it runs
        try:
            rate_from[app] = utilization.derive(s.load, None, capacity, experiment_file, source)
        except UsageError as e:
            if str(e) not in out:
                out.append(str(e))
    if out:
        return Parsed(out)
    if "llm" not in ext:
        by_app.setdefault("llm", by_app["stream"])
    return Parsed(out, by_app, {app: rate_from.get(app, rate_from.get("stream")) for app in by_app})


def settings(experiment: dict[str, Any], source: str = "experiment", app: str = "stream") -> Settings:
    """The validated ``availproof`` extension of an experiment.

    With ``app="llm"`` the extension's ``llm`` block (load, steady_state, slo, bounds key by key;
    recovery_window_s, recovery_settle_s and bounds_source in place) is merged over the defaults: a CPU vLLM replica
    serves far fewer tokens per second than the stream target, and a replacement engine takes
    minutes to start.
    The block is validated as written (``...llm.load.rate``) and the merged result again.

    The variables its tokens are read from (``auth_token_env``, ``front_door.token_env``) are
    declared secrets for the rest of the process (:mod:`chaos.system.secret_env`): no process the rig
    starts for the experiment (a Ray node, Redis, HAProxy) inherits them.
    """
    ext = _extension(experiment, source)
    _raise_first(ext, source, _prefix())
    s = _settings(ext, source, app)
    check_app_options(s, app, source)
    secret_env.declare(s.auth_token_env, s.front_door.get("token_env"))
    return s


def load_shape(experiment: dict[str, Any], source: str = "experiment", app: str = "stream") -> LoadShape:
    """The load of an experiment without problems (:func:`problems`) as ``app`` would run it, read without
    declaring its token variables secret (:func:`settings` does): what a check of the file alone needs."""
    return _settings(_extension(experiment, source), source, app).load


def check_app_options(s: Settings, app: str, source: str, backend: str | None = None) -> None:
    """What the chosen app cannot do, refused in one line before anything starts: ``app.on_stall`` exit without the
    watchdog v2 on; ``app.kv_cache`` with the stream
    target (it has no KV cache: serve_apps/kv_cache.py); a scope that needs a rank group (its ``min_ranks``) without one
    (``app.ranks`` 2 or more: on vLLM its tensor_parallel_size, serve_apps/stream_ranks.py). ``backend``: the run's
    (None: not known, the local backend's rules); on ``kuberay`` ``app.ranks`` does nothing (the RayService's manifests
    make the app), so a rank fault is not refused here: its injection refuses a replica whose engine has no rank."""
    if s.app.get("on_stall") == "exit" and not (s.app.get("stall_s") and s.app.get("watchdog") == 2):
        raise UsageError(f"{source}: {_prefix()}.app.on_stall: exit needs the watchdog v2 on (app.watchdog: 2 and "
                         "app.stall_s)")
    if app != "llm" and s.app.get("kv_cache"):
        raise UsageError(f"{source}: {_prefix()}.app.kv_cache: the stream target has no KV cache (KV pressure is "
                         "vLLM's): run it with --app llm")
    need = scopes.get(s.scope).min_ranks
    if backend != "kuberay" and int(s.app.get("ranks", 1)) < need:
        raise UsageError(f"{source}: {_prefix()}.app.ranks: scope {s.scope} needs a rank group of at least {need} "
                         f"ranks, and the {app} app has {int(s.app.get('ranks', 1))}: " + (
                             "vLLM's ranks are its MultiprocExecutor's workers, which exist only with "
                             f"tensor_parallel_size >= 2 (app.ranks: {need}, a core or more per worker)" if app == "llm" else
                             f"set app.ranks: {need} (serve_apps/stream_ranks.py)"))


def _settings(ext: dict[str, Any], source: str, app: str) -> Settings:
    """Settings from an extension that passed the schema: the llm merge, then the load's cross-field rules."""
    where = f"{source}: {_prefix()}"
    if app == "llm":
        ext = {**ext}
        for key, over in ext.get("llm", {}).items():  # objects key by key, numbers and text in place
            ext[key] = {**ext.get(key, {}), **over} if isinstance(over, dict) else over
        where = f"{source}: {_prefix()} (with its llm overrides)"
        _raise_first(ext, source, f"{_prefix()} (with its llm overrides)")
    try:
        load_shape = LoadShape.from_dict(ext.get("load"))
    except UsageError as e:  # the cross-field rules, e.g. warmup_s < duration_s
        raise UsageError(f"{where}.{e}") from None
    # a bound the experiment implies: a client that retries is held to an amplification (chaos.core.bounds)
    bounds_spec, added = bounds.with_defaults(dict(ext["bounds"]), load_shape.retry is not None)
    with_orphans = default_bounds(ext["scope"], bounds_spec)
    if "max_orphan_s" in with_orphans and "max_orphan_s" not in bounds_spec:  # said, as the amplification's is
        added = " ".join(x for x in (added, f"max_orphan_s {with_orphans['max_orphan_s']:g} by default: the "
                                            "fault kills or replaces a replica, whose engines must go "
                                            "(chaos.system.orphan_watch).") if x)
    if "max_device_crashloop_s" in with_orphans and "max_device_crashloop_s" not in bounds_spec:
        added = " ".join(x for x in (added, f"max_device_crashloop_s {with_orphans['max_device_crashloop_s']:g} by "
                                            "default: the fault leaves a node whose device stays bad, where "
                                            "replacements must not crash-loop for longer (chaos.analysis.device).") if x)
    return Settings(
        scope=ext["scope"],
        topology=ext.get("topology", "default"),
        gcs_fault_tolerance=ext.get("gcs_fault_tolerance", True),
        network=ext.get("network", "loopback"),
        app=dict(ext.get("app", {})),
        targets=ext.get("targets", "workers"),
        routing=ext.get("routing", "round_robin"),
        load=load_shape,
        baseline_s=float(ext.get("baseline_s", 10.0)),
        recovery_window_s=float(ext.get("recovery_window_s", 40.0)),
        recovery_settle_s=float(ext.get("recovery_settle_s", 10.0)),
        steady_state=SteadyState(**ext.get("steady_state", {})),
        slo=SLO(**ext.get("slo", {})),
        bounds=with_orphans,
        bounds_source=" ".join(x for x in (ext.get("bounds_source", ""), added) if x),
        allow_hosts=tuple(ext.get("allow_hosts", ())),
        max_wall_s=float(ext.get("max_wall_s", 900.0)),
        stop_when=dict(ext.get("stop_when", {})),
        kubernetes=dict(ext.get("kubernetes", {})),
        front=ext.get("front", "direct"),
        front_door=dict(ext.get("front_door", {})),
        ca_bundle=ext.get("ca_bundle"),
        auth_token_env=ext.get("auth_token_env"),
        population=ext.get("population", "affected"),
        sample_period_s=float(ext.get("sample_period_s", 0.5)),
    )


def default_bounds(scope: str, stated: dict[str, Any]) -> dict[str, Any]:
    """The experiment's bounds, with the ones the rig applies by default to its scope: ``max_orphan_s``
    (:data:`chaos.system.orphan_watch.DEFAULT_BOUND_S`) where the scope's fault kills or replaces a replica or its engine
    (:attr:`chaos.scopes.Scope.orphan_check`), ``max_device_crashloop_s``
    (:data:`chaos.analysis.device.DEFAULT_MAX_CRASHLOOP_S`) where it leaves a node whose device stays bad
    (:attr:`chaos.scopes.Scope.bad_device`), unless stated."""
    out = dict(stated)
    if scopes.get(scope).orphan_check:
        out.setdefault("max_orphan_s", orphan_watch.DEFAULT_BOUND_S)
    if scopes.get(scope).bad_device:
        out.setdefault("max_device_crashloop_s", device_figures.DEFAULT_MAX_CRASHLOOP_S)
    return out


def _prefix() -> str:
    return f"extensions[{EXTENSION}]"


def _extension(experiment: dict[str, Any], source: str) -> dict[str, Any]:
    exts = experiment.get("extensions", [])
    if not isinstance(exts, list):
        raise UsageError(f"{source}: extensions: must be a list, got {type(exts).__name__}")
    mine = [e for e in exts if isinstance(e, dict) and e.get("name") == EXTENSION]
    if not mine:
        raise UsageError(f"{source}: extensions: needs an entry named {EXTENSION!r} (scope, load, bounds)")
    if len(mine) > 1:
        raise UsageError(f"{source}: extensions: more than one entry named {EXTENSION!r}")
    return mine[0]


def _raise_first(ext: dict[str, Any], source: str, prefix: str) -> None:
    found = schemas.errors(ext, schemas.EXTENSION, prefix)
    if found:
        raise UsageError(f"{source}: {found[0]}")
