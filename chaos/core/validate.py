"""What `availproof validate`, `run` and `suite` check of input files before anything runs: every problem
of an experiment, topology or capacity file (told apart by content), one line each; and an experiment's
utilization against the run's app. What is no error but can be told from the file alone is a warning
(:func:`experiment_warnings`, one line each): a ``load.timeout_s`` too short for the load's longest planned
output at the stream target's configured token rate (:func:`chaos.load.timeout_fit.from_file`). Kept apart
from :mod:`chaos.schemas` (the schemas alone) so that the schemas, the experiment, the topology and the
utilization import no circle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.core import experiment, run_spec as run_spec_mod
from chaos import schemas
from chaos.load import timeout_fit, utilization
from chaos.system import topology
from chaos.base.errors import UsageError, read_input, yaml_problem
from chaos.core.options import Options
from chaos.core.run_spec import RunSpec


def check_file(file: str | Path, capacity: str | Path | None = None, warn: list[str] | None = None,
               app: str | None = None) -> list[str]:
    """Every problem of an experiment, topology or capacity file (told apart by content), one line each
    starting with the file; an empty list when the file is good. ``capacity``: the capacity file an
    experiment's ``load.utilization`` takes its share of, over its ``load.capacity`` (``--capacity``).
    ``warn``: a list that gets the warnings of a good experiment file (:func:`experiment_warnings`, for
    the run's ``app`` when known); they are not problems (``validate`` exits 0 on them)."""
    import yaml

    source = str(file)
    try:
        text = read_input(file, "file")
    except UsageError as e:
        return [str(e)]
    json_error = None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        json_error = f"{source}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        if Path(source).suffix == ".json":
            return [json_error]
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as ye:
            return [schemas.one_line(yaml_problem(source, ye))]
    if isinstance(doc, dict) and any(k in doc for k in ("method", "extensions", "steady-state-hypothesis")):
        if json_error:  # availproof and Chaos Toolkit read experiment files as JSON
            return [json_error]
        found = experiment.problems(doc, source, capacity=capacity, experiment_file=Path(source))
        if not found and warn is not None:
            warn.extend(experiment_warnings(doc, source, capacity=capacity, experiment_file=Path(source), app=app))
        return found
    if isinstance(doc, dict) and doc.get("kind") == schemas.CAPACITY and not json_error:
        return [f"{source}: {line}" for line in schemas.errors(doc, schemas.CAPACITY)]
    if (isinstance(doc, dict) and "regions" in doc) or Path(source).suffix in (".yaml", ".yml"):
        return topology.problems(doc, source)  # topology files are YAML
    return [f"{source}: neither an experiment (no method, no extensions) nor a topology (no regions)"]


def experiment_warnings(doc: dict[str, Any], source: str = "experiment", capacity: str | Path | None = None,
                        experiment_file: str | Path | None = None, app: str | None = None) -> list[str]:
    """What the file alone tells that will go wrong although it is valid, one line each starting with
    ``source: warning:`` (``doc``: an experiment without problems, :func:`chaos.core.experiment.problems`).

    The timeout: when the load's longest planned output (its own seeded plan, a trace's lengths included)
    cannot finish within ``load.timeout_s`` at the stream target's configured token rate, the line says
    what would fit (:func:`chaos.load.timeout_fit.from_file`); the run would refuse it at its baseline gate.
    The app is the run's (``app``), else the one the experiment's capacity file was measured for, else
    ``stream`` (``--app``'s default). On ``llm`` nothing is said: vLLM's token rate is only known
    measured (a capacity file records none), so the run judges the timeout on its baseline."""
    shape = experiment.load_shape(doc, source, "stream")  # llm overrides: vLLM's
    cap = utilization.capacity_file(shape, capacity, experiment_file)
    try:
        measured_for = utilization.read(cap)["app"] if cap is not None else None
    except UsageError:  # a load.capacity without utilization is read by nothing else: no app learnt from it
        measured_for = None
    if (app or measured_for or "stream") != "stream":
        return []
    if cap is None and utilization.stage_utilizations(shape):  # a load step's rates are known at its run only
        return []
    rate_from = utilization.derive(shape, None, capacity, experiment_file, source)  # problems() passed it
    if rate_from is not None:  # the plan at the run's rate: utilization x sustained_rps
        shape = utilization.applied(shape, rate_from)
    fit = timeout_fit.from_file(shape, "stream")
    return [f"{source}: warning: {fit['why']}"] if fit["fits"] is False else []


def run_spec(experiment_path: str | Path, options: Options) -> RunSpec:
    """What `run` and `suite` check of an experiment file before anything runs, as the run's spec
    (:mod:`chaos.core.run_spec`, built once: the runner runs this very object): the file (with the capacity
    file), then its utilization against the run's app; a problem raises one line."""
    return run_spec_mod.build(experiment_path, options)


def run_inputs(experiment_path: str | Path, app: str, capacity: str | Path | None = None) -> dict[str, Any] | None:
    """:func:`run_spec` with only the app and the capacity file: what the rate would be derived from (None:
    the experiment states its rate)."""
    spec = run_spec(experiment_path, Options(app=app, capacity=capacity))
    return None if spec.rate_from is None else dict(spec.rate_from)
