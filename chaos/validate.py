"""What `availproof validate`, `run` and `suite` check of input files before anything runs: every problem
of an experiment, topology or capacity file (told apart by content), one line each; and an experiment's
utilization against the run's app. Kept apart from :mod:`chaos.schemas` (the schemas alone) so that the
schemas, the experiment, the topology and the utilization import no circle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import experiment, schemas, topology, utilization
from chaos.errors import UsageError, read_input, yaml_problem


def check_file(file: str | Path, capacity: str | Path | None = None) -> list[str]:
    """Every problem of an experiment, topology or capacity file (told apart by content), one line each
    starting with the file; an empty list when the file is good. ``capacity``: the capacity file an
    experiment's ``load.utilization`` takes its share of, over its ``load.capacity`` (``--capacity``)."""
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
        return experiment.problems(doc, source, capacity=capacity, experiment_file=Path(source))
    if isinstance(doc, dict) and doc.get("kind") == schemas.CAPACITY and not json_error:
        return [f"{source}: {line}" for line in schemas.errors(doc, schemas.CAPACITY)]
    if (isinstance(doc, dict) and "regions" in doc) or Path(source).suffix in (".yaml", ".yml"):
        return topology.problems(doc, source)  # topology files are YAML
    return [f"{source}: neither an experiment (no method, no extensions) nor a topology (no regions)"]


def run_inputs(experiment_path: str | Path, app: str, capacity: str | Path | None = None) -> dict[str, Any] | None:
    """What `run` and `suite` check of an experiment file before anything runs: the file (with the
    capacity file, :func:`chaos.experiment.load`), then its utilization against the run's app.
    Returns what the rate would be derived from (None: the experiment states its rate)."""
    doc = experiment.load(experiment_path, capacity=capacity)
    settings = experiment.settings(doc, source=str(experiment_path), app=app)
    return utilization.derive(settings.load, app, capacity, experiment_path, source=str(experiment_path))
