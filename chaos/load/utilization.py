"""``load.utilization``: an experiment's rate as a share of the capacity `availproof capacity` measured.

The rate becomes ``utilization x sustained_rps`` of a capacity file (``capacity.json``,
:mod:`chaos.load.capacity`): the experiment's ``load.capacity`` (relative to the experiment file), or
``--capacity FILE`` on ``run``, ``suite`` and ``validate``, which wins. So a fault's cost is measured
at the utilization production runs at, whatever the deployment's capacity on this machine.

Refused with one line naming the file and the field (exit 2), before anything runs:

- ``utilization`` without a capacity file;
- a capacity file that cannot be read, is not JSON, or breaks ``chaos/schemas/capacity.schema.json``;
- a capacity file whose ``sustained_rps`` is null (nothing was sustained);
- a capacity measured for another app than the run's (checked when the run's app is known: ``run``
  and ``suite``, not ``validate``);
- (:mod:`chaos.load.workload`) ``utilization`` with a closed loop, a trace or stages.

What the rate was derived from (:func:`derive`: utilization, capacity file, sustained_rps,
measured_at, the rate) is recorded in the run header and the summary as ``rate_from``.

**A load step** (issue 48, the ``overload`` experiment): a stage of ``load.stages`` may state its
``utilization`` (a share of the same capacity, up to :data:`MAX_STAGE_UTILIZATION`: 2 is twice the capacity)
instead of its ``rate``; :func:`derive` then needs the capacity file as above, and resolves each such stage to
``rate = utilization x sustained_rps`` (:func:`applied`). ``rate_from`` then says the first stage's utilization and
rate, and every stage's (``stages``: ``{utilization, rate_rps, duration_s}``, utilization null for a stage that
stated its rate). The schedule is the stages' (:mod:`chaos.load.arrivals`): deterministic, from the load's seed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from chaos import schemas
from chaos.base.errors import UsageError, read_input
from chaos.load import arrivals
from chaos.load.workload import LoadShape

FIELD = "extensions[availproof].load.utilization"
STAGES_FIELD = "extensions[availproof].load.stages[].utilization"
MAX_STAGE_UTILIZATION = arrivals.MAX_STAGE_UTILIZATION


def stage_utilizations(shape: LoadShape) -> bool:
    """Whether a stage of the load states its utilization (a load step as a share of the capacity)."""
    return any(isinstance(st, dict) and st.get("utilization") is not None for st in shape.stages or ())


def capacity_file(shape: LoadShape, capacity: str | Path | None = None,
                  experiment_file: str | Path | None = None) -> Path | None:
    """The capacity file a run takes its rate from: ``capacity`` (``--capacity``) as given, else the
    load's ``capacity`` relative to the experiment file's folder (the working directory when unknown)."""
    if capacity:
        return Path(capacity)
    if not shape.capacity:
        return None
    path = Path(shape.capacity)
    if not path.is_absolute() and experiment_file is not None:
        path = Path(experiment_file).parent / path
    return path


def read(path: str | Path) -> dict[str, Any]:
    """A capacity file, checked against its schema; a bad one raises a one-line :class:`UsageError`
    naming the file and the field."""
    text = read_input(path, "capacity file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    found = schemas.errors(doc, schemas.CAPACITY)
    if found:
        raise UsageError(f"{path}: not a capacity file of `availproof capacity`: {found[0]}")
    return doc


def derive(shape: LoadShape, app: str | None = None, capacity: str | Path | None = None,
           experiment_file: str | Path | None = None, source: str = "experiment") -> dict[str, Any] | None:
    """What the run's rate is derived from (None when the load states no utilization): the utilization,
    the capacity file, its sustained_rps, app and measured_at, and the rate. ``app``: the run's (None:
    not checked). Raises a one-line :class:`UsageError` for each refusal of the module's docstring."""
    stepped = stage_utilizations(shape)
    if shape.utilization is None and not stepped:
        return None
    path = capacity_file(shape, capacity, experiment_file)
    if path is None:
        raise UsageError(f"{source}: {STAGES_FIELD if stepped else FIELD}: needs a capacity file to take its share of: load.capacity (a "
                         "capacity.json of `availproof capacity`, relative to the experiment file) or --capacity FILE")
    doc = read(path)
    if doc["sustained_rps"] is None:
        raise UsageError(f"{path}: sustained_rps: null, nothing was sustained ({doc['sustained_reason']}); "
                         "no rate to take a share of: measure again or state load.rate")
    rate_from = {"utilization": shape.utilization, "capacity": str(path), "sustained_rps": doc["sustained_rps"],
                 "measured_at": doc["measured_at"],
                 "rate_rps": None if stepped else shape.utilization * doc["sustained_rps"],
                 "app": doc["app"], "front": doc["front"], "topology": doc["topology"],
                 "capacity_is_lower_bound": bool(doc.get("sustained_is_lower_bound"))}
    if stepped:
        rate_from["stages"] = stages = [
            {"utilization": st.get("utilization"), "duration_s": st["duration_s"],
             "rate_rps": (st["utilization"] * doc["sustained_rps"] if st.get("utilization") is not None
                          else st["rate"])} for st in shape.stages]
        rate_from["utilization"], rate_from["rate_rps"] = stages[0]["utilization"], stages[0]["rate_rps"]
        if rate_from["utilization"] is None:  # the first stage stated its rate: its share said all the same
            rate_from["utilization"] = stages[0]["rate_rps"] / doc["sustained_rps"]
    if app is not None:
        check_app(rate_from, app)
    return rate_from


def check_app(rate_from: dict[str, Any], app: str) -> None:
    """A capacity measured for another app than the run's ``app`` is refused (one line)."""
    if rate_from["app"] != app:
        raise UsageError(f"{rate_from['capacity']}: app: measured for the {rate_from['app']} app, this run's app is "
                         f"{app}: measure it with `availproof capacity EXPERIMENT --app {app}` or run with "
                         f"--app {rate_from['app']}")


def applied(shape: LoadShape, rate_from: dict[str, Any]) -> LoadShape:
    """A new load shape at the derived rate, naming the capacity file it was derived from (``shape`` unchanged);
    stages stating their utilization at their derived rates (:func:`resolved_stages`)."""
    changes: dict[str, Any] = {"rate": rate_from["rate_rps"], "capacity": rate_from["capacity"]}
    if rate_from.get("stages"):
        changes["stages"] = resolved_stages(rate_from)
    return dataclasses.replace(shape, **changes)


def resolved_stages(rate_from: dict[str, Any]) -> tuple[dict[str, float], ...]:
    """The load's stages as the arrivals play them, ``{rate, duration_s}`` each, from ``rate_from["stages"]``."""
    return tuple({"rate": st["rate_rps"], "duration_s": st["duration_s"]} for st in rate_from.get("stages") or ())


def describe(rate_from: dict[str, Any]) -> str:
    """One line: ``8.4 req/s = 0.7 x 12 req/s sustained (runs/x/capacity.json, measured 2026-12-05T10:00:00Z)``."""
    def num(key: str) -> str:
        v = rate_from.get(key)
        return f"{v:.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"

    bound = " (a lower bound: the sweep stopped at its own limit)" if rate_from.get("capacity_is_lower_bound") else ""
    if rate_from.get("stages"):
        steps = ", then ".join(f"{st['rate_rps']:.4g} req/s" + (f" ({st['utilization']:g} x)" if st["utilization"]
                                                                   is not None else "") + f" for {st['duration_s']:g} s"
                               for st in rate_from["stages"])
        return (f"stages {steps}, of {num('sustained_rps')} req/s sustained{bound} ({rate_from.get('capacity')}, "
                f"measured {rate_from.get('measured_at')})")
    return (f"{num('rate_rps')} req/s = {num('utilization')} x {num('sustained_rps')} req/s sustained{bound} "
            f"({rate_from.get('capacity')}, measured {rate_from.get('measured_at')})")


def differences(rate_from: dict[str, Any], settings) -> list[str]:
    """Where the capacity was measured on another deployment than the run's (``settings``: the
    experiment's, :class:`chaos.core.experiment.Settings`): said, not refused."""
    out = []
    if rate_from.get("front") != settings.front:
        out.append(f"front {rate_from.get('front')} (the run's: {settings.front})")
    name = topology_name(settings.topology)
    if name is not None and rate_from.get("topology") not in (None, name):
        out.append(f"topology {rate_from.get('topology')} (the run's: {name})")
    return out


def topology_name(topology: str) -> str | None:
    """The name of an experiment's topology (a shipped name or a file); None when it cannot be read."""
    from chaos.system import topology as topology_mod

    try:
        return topology_mod.load(topology).name
    except Exception:  # noqa: BLE001 - a name for a note only: the run reads the topology itself
        return None
