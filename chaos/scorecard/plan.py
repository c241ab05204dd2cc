"""The scorecard's plan: its spec (a small YAML or JSON file, every key defaulted), the matrix of cells, each
cell's :class:`chaos.core.run_spec.RunSpec` derived from its fault's shipped experiment, the fault-free run, and the
estimated time. Nothing here starts anything.

The spec (``experiments/scorecard.yaml`` is the full one)::

    app: stream                   # stream | llm: one app per scorecard (the vLLM row is a second one)
    faults: [wedge, stall, garbage, straggler, sigstop, rank-hang]
    detectors: [none, serve, vllm, v1, v2, v2-exit]
    loads: [steady, long-prefill, sparse, none]
    periods: [default, apps]      # Serve LLM's 10 s / 10 s, and the apps' 2 s / 5 s
    trials: 3                     # N per cell
    stall_s: 5                    # the watchdogs' stall_s (v1, v2, v2-exit)
    fault_free:                   # false: none
      detector: v2
      period: default
      duration_s: 3600            # the hour, in load time
      speedup: 1                  # k > 1: the rate x k for duration_s / k (accelerated: the same requests,
      trials: 1                   #   not the same hour: said in the table)

A cell is (fault, detector, load, period); it is run unless its fault, detector or load does not apply to the
app (:mod:`chaos.scorecard.dimensions`: the reason is kept in the cell and printed). Each trial of a cell is a
run directory ``<out>/<cell id>/trial-N``; the fault-free run's ``<out>/fault-free/trial-N``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.base.errors import UsageError, read_input
from chaos.scorecard import dimensions as dim

SETUP_S = {"stream": 90.0, "llm": 300.0}  # per trial: cluster and deploy checks, hypothesis probes, analysis
FAULT_FREE = "fault-free"
FAULT_FREE_DEFAULTS = {"detector": "v2", "period": "default", "load": "steady", "duration_s": 3600.0,
                       "speedup": 1.0, "trials": 1}
KEYS = ("app", "faults", "detectors", "loads", "periods", "trials", "stall_s", "fault_free")


@dataclass(frozen=True)
class Spec:
    app: str = "stream"
    faults: tuple[str, ...] = tuple(dim.FAULTS)
    detectors: tuple[str, ...] = dim.DETECTORS
    loads: tuple[str, ...] = dim.LOADS
    periods: tuple[str, ...] = tuple(dim.PERIODS)
    trials: int = 3
    stall_s: float = 5.0
    fault_free: dict[str, Any] | None = field(default_factory=lambda: dict(FAULT_FREE_DEFAULTS))


@dataclass(frozen=True)
class Cell:
    fault: str
    detector: str
    load: str
    period: str
    trials: int
    reason: str | None = None  # why it is not run (None: it is)
    alias: str | None = None  # the cell whose figures it shares (a detector with the same deployment)
    horizon_s: float | None = None  # how long after the injection detection is looked for
    experiment: str | None = None  # the fault's shipped experiment
    duration_s: float | None = None  # the fault-free run's load time
    speedup: float | None = None

    @property
    def id(self) -> str:
        if self.fault == FAULT_FREE:
            return FAULT_FREE
        return f"{self.fault}.{self.detector}.{self.load}.{self.period}"

    @property
    def runs(self) -> bool:
        return self.reason is None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **dataclasses.asdict(self)}


def _names(doc: dict, key: str, allowed, source: str) -> tuple[str, ...]:
    value = doc.get(key, list(allowed))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{source}: {key} must be a non-empty list of {', '.join(allowed)}")
    bad = [v for v in value if v not in allowed]
    if bad or len(set(value)) != len(value):
        raise UsageError(f"{source}: {key}: {bad[0] if bad else 'a repeated name'!r} is not one of "
                         f"{', '.join(allowed)} (each once)")
    return tuple(value)


def _number(doc: dict, key: str, default: float, source: str, lo: float, integer: bool = False) -> float:
    v = doc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)) or v < lo:
        kind = "an integer" if integer else "a number"
        raise UsageError(f"{source}: {key} must be {kind} >= {lo:g}, got {v!r}")
    return v


def parse(doc: Any, source: str = "scorecard spec") -> Spec:
    """The spec of a document; a bad one is one line naming ``source`` and the key."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise UsageError(f"{source}: a scorecard spec is a mapping of {', '.join(KEYS)}")
    unknown = sorted(set(doc) - set(KEYS))
    if unknown:
        raise UsageError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    app = doc.get("app", "stream")
    if app not in ("stream", "llm"):
        raise UsageError(f"{source}: app must be stream or llm, got {app!r}")
    ff = doc.get("fault_free", True)
    if ff is False or ff is None:
        fault_free = None
    elif ff is True or isinstance(ff, dict):
        ff = {} if ff is True else ff
        unknown = sorted(set(ff) - set(FAULT_FREE_DEFAULTS))
        if unknown:
            raise UsageError(f"{source}: fault_free: unknown key {unknown[0]!r} (known: {', '.join(FAULT_FREE_DEFAULTS)})")
        fault_free = {**FAULT_FREE_DEFAULTS, **ff}
        sub = f"{source}: fault_free"
        _names({"detector": [fault_free["detector"]]}, "detector", dim.DETECTORS, sub)
        _names({"period": [fault_free["period"]]}, "period", tuple(dim.PERIODS), sub)
        _names({"load": [fault_free["load"]]}, "load", ("steady", "sparse"), sub)
        fault_free["duration_s"] = float(_number(fault_free, "duration_s", 3600, sub, 60))
        fault_free["speedup"] = float(_number(fault_free, "speedup", 1, sub, 1))
        fault_free["trials"] = int(_number(fault_free, "trials", 1, sub, 1, integer=True))
    else:
        raise UsageError(f"{source}: fault_free must be false or a mapping of {', '.join(FAULT_FREE_DEFAULTS)}")
    return Spec(app=app, faults=_names(doc, "faults", tuple(dim.FAULTS), source),
                detectors=_names(doc, "detectors", dim.DETECTORS, source),
                loads=_names(doc, "loads", dim.LOADS, source),
                periods=_names(doc, "periods", tuple(dim.PERIODS), source),
                trials=int(_number(doc, "trials", 3, source, 1, integer=True)),
                stall_s=float(_number(doc, "stall_s", 5.0, source, 0.1)), fault_free=fault_free)


def read(path: str | Path) -> Spec:
    """The spec in a YAML or JSON file (JSON is YAML)."""
    import yaml

    text = read_input(Path(path), "scorecard spec")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"{path}: not valid YAML or JSON: {str(e).splitlines()[0]}") from None
    return parse(doc, str(path))


def cells(spec: Spec) -> list[Cell]:
    """Every cell of the matrix, in the spec's order, each with the reason it is not run (None: it is); the
    fault-free run last."""
    out = []
    for fault in spec.faults:
        experiment, _ = dim.FAULTS[fault]
        not_run = dim.fault_reason(fault, spec.app)  # reads the fault's experiment: once per fault
        for detector in spec.detectors:
            for load in spec.loads:
                for period in spec.periods:
                    reason = not_run
                    if reason is None and load == "long-prefill":
                        reason = dim.long_prefill_reason(spec.app, spec.stall_s)
                    alias = None
                    if reason is None:
                        reason = dim.detector_reason(detector, spec.app)
                        alias = dim.alias_of(detector, spec.app)
                    out.append(Cell(fault, detector, load, period, spec.trials, reason=reason,
                                    alias=f"{fault}.{alias}.{load}.{period}" if alias else None,
                                    horizon_s=dim.detection_horizon_s(period, detector, spec.stall_s),
                                    experiment=experiment))
    if spec.fault_free:
        ff = spec.fault_free
        reason = dim.detector_reason(ff["detector"], spec.app)
        out.append(Cell(FAULT_FREE, ff["detector"], ff["load"], ff["period"], ff["trials"], reason=reason,
                        experiment=dim.FAULTS["wedge"][0], duration_s=ff["duration_s"], speedup=ff["speedup"]))
    return out


def base_spec(cell: Cell, app: str, options=None):
    """The shipped experiment of ``cell``'s fault, parsed as ``app`` runs it (no cluster touched)."""
    from chaos.core import run_spec
    from chaos.core.options import Options

    return run_spec.build(dim.EXPERIMENTS / cell.experiment, options or Options(app=app))


def derive(cell: Cell, base, stall_s: float):
    """``cell``'s RunSpec from its fault's shipped one (``base``): the detector and period in the app block,
    the load, the recovery window as long as the detection horizon and never ended early (so a late detection
    is seen and a missing one is a censored one), the load and wall-clock limits to match. ``base`` unchanged."""
    s = base.settings
    app = {k: v for k, v in s.app.items()
           if k not in ("stall_s", "watchdog", "on_stall", "health_check_period_s", "health_check_timeout_s")}
    app.update(dim.period_settings(cell.period), **dim.detector_settings(cell.detector, stall_s))
    if cell.fault == FAULT_FREE:
        window = cell.duration_s / cell.speedup
        rate = s.load.rate * cell.speedup if cell.load == "steady" else dim.SPARSE_RATE * cell.speedup
        title = (f"scorecard fault-free: {cell.detector} at the {cell.period} periods, {window:.0f} s at "
                 f"{rate:g} req/s (x{cell.speedup:g})")
        spec = base.with_document(method=[], rollbacks=[], title=title)
        load = {"rate": rate, "max_requests": min(10_000_000, int(rate * (window + 600) * 2) + 100)}
        bounds = {}
    else:
        window = max(s.recovery_window_s, cell.horizon_s)
        spec = base.with_document(title=f"scorecard {cell.id}: {base.title}")
        load = {"steady": {}, "sparse": {"rate": dim.SPARSE_RATE},
                "none": {"arrival": "constant", "rate": 1.0 / (2 * max(s.load.duration_s, window + 600))}}[cell.load]
        bounds = dict(s.bounds)
    run_s = s.load.warmup_s + s.baseline_s + window
    load["duration_s"] = max(s.load.duration_s, run_s + 300)
    if cell.load == "none" and cell.fault != FAULT_FREE:
        load["rate"] = 1.0 / (2 * load["duration_s"])
    return (spec.with_load(**load)
            .with_settings(app=app, recovery_window_s=window, recovery_settle_s=0.0, bounds=bounds,
                           max_wall_s=max(s.max_wall_s, run_s + 900)))


def trial_s(cell: Cell, base, app: str) -> float:
    """One trial's estimated wall time: warm-up, baseline, the window, and the set-up (:data:`SETUP_S`)."""
    s = base.settings
    window = cell.duration_s / cell.speedup if cell.fault == FAULT_FREE else max(s.recovery_window_s, cell.horizon_s)
    return s.load.warmup_s + s.baseline_s + window + SETUP_S[app]


def estimate_s(spec: Spec, plan: list[Cell]) -> float:
    bases: dict[str, Any] = {}
    total = 0.0
    for c in plan:
        if not c.runs:
            continue
        if c.experiment not in bases:
            bases[c.experiment] = base_spec(c, spec.app)
        total += c.trials * trial_s(c, bases[c.experiment], spec.app)
    return total


def write(out: Path, spec: Spec, plan: list[Cell]) -> Path:
    """plan.json in ``out``: the spec and every cell (what ``--from`` reads back)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "plan.json"
    path.write_text(json.dumps({"spec": dataclasses.asdict(spec), "cells": [c.to_dict() for c in plan]}, indent=2))
    return path


def load_written(out: Path) -> tuple[Spec, list[Cell]]:
    """The spec and cells ``write`` left in ``out`` (a missing or damaged plan.json: one line)."""
    path = Path(out) / "plan.json"
    if not path.is_file():
        raise UsageError(f"{out}: no plan.json: not a scorecard directory (availproof scorecard SPEC --out DIR)")
    try:
        doc = json.loads(path.read_text())
        spec = parse({k: v for k, v in doc["spec"].items()}, str(path))
        plan = [Cell(**{k: v for k, v in c.items() if k != "id"}) for c in doc["cells"]]
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a scorecard plan ({e})") from None
    return spec, plan
