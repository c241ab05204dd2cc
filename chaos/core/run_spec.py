"""One run's spec: the experiment and the command's choices read, validated and parsed once, then frozen.

A :class:`RunSpec` is built once per run, before anything starts, from the experiment file (or the document
a driver hands over) and the run's :class:`chaos.core.options.Options` (the app, ``--front``, ``--capacity``,
the model, the KubeRay flags): :func:`build` reads the file, :func:`of_document` takes a document.
It holds the validated document (read-only; :meth:`RunSpec.document` gives Chaos Toolkit a copy of its
own), the :class:`chaos.core.experiment.Settings` of the run's app, the front door's settings
(:class:`chaos.system.frontdoor.FrontSettings`), the KubeRay target (``kubernetes``, with ``--backend kuberay``)
and what the rate is derived from (``rate_from``, :mod:`chaos.load.utilization`).

What a run derives is computed here, into the spec, never written back later: the rate a
``load.utilization`` gives, the ``--front`` flag over the experiment's ``front``, the model the load asks
for. A tool that runs something else than the file says (``availproof capacity``: no fault, its own
rates; the soak: no per-fault bounds) derives a new spec (:meth:`RunSpec.with_settings`,
:meth:`RunSpec.with_load`, :meth:`RunSpec.with_document`); the spec it came from is unchanged.

Who builds it: ``availproof run`` and ``suite`` through :func:`chaos.core.validate.run_spec` (the runner runs that
very object), plain ``chaos run``'s control from the document Chaos Toolkit hands it
(:func:`chaos.core.run.open_run`), ``availproof capacity`` and the soak from theirs. Who reads it:
:func:`chaos.core.run.open_run` (it is ``Run.spec``; ``Run.settings`` is its Settings) and :mod:`chaos.core.provision`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from chaos.core import experiment as exp_mod
from chaos.system import secret_env
from chaos.load import utilization
from chaos.base.errors import UsageError, read_input
from chaos.system.frontdoor import FrontSettings
from chaos.core.options import Options, kube_settings
from chaos.base.readonly import freeze, thaw  # run_spec.freeze / thaw: the spec's own words for them

__all__ = ["RunSpec", "build", "of_document", "freeze", "thaw"]


@dataclass(frozen=True)
class RunSpec:
    """One run's experiment as parsed once (module docstring); every field read-only."""

    source: str  # what its one-line errors name: the file's name, or the document's title
    title: str  # the document's title ("" without one)
    experiment: Mapping[str, Any]  # the validated document, read-only (:func:`freeze`)
    app: str  # stream | llm
    settings: exp_mod.Settings  # the run's app's, with what the run derives (rate, front, model)
    front: FrontSettings  # the front door's settings (the experiment's front_door)
    rate_from: Mapping[str, Any] | None = None  # the rate as a share of a measured capacity (None: load.rate)
    kubernetes: Mapping[str, Any] | None = None  # the KubeRay target, flags over the file (None: local backend)
    experiment_file: Path | None = None  # the file read (None: a document handed over)

    def document(self) -> dict[str, Any]:
        """A mutable copy of the document, for whoever needs one of its own (Chaos Toolkit's run)."""
        return thaw(self.experiment)

    def kube_target(self) -> dict[str, Any] | None:
        """A mutable copy of the KubeRay target (None: the local backend)."""
        return None if self.kubernetes is None else thaw(self.kubernetes)

    def with_settings(self, **changes: Any) -> RunSpec:
        """A new spec whose Settings have ``changes`` (e.g. the soak's ``bounds={}``)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, **changes))

    def with_load(self, **changes: Any) -> RunSpec:
        """A new spec whose load has ``changes`` (e.g. ``rate=``)."""
        return self.with_settings(load=dataclasses.replace(self.settings.load, **changes))

    def with_document(self, **keys: Any) -> RunSpec:
        """A new spec whose document has these top-level ``keys`` replaced (e.g. ``method=[]``); the Settings
        are the extension's, which this does not change."""
        doc = {**thaw(self.experiment), **keys}
        return dataclasses.replace(self, experiment=freeze(doc), title=doc.get("title", ""))


def build(path: str | Path, options: Options, rates: bool = True) -> RunSpec:
    """The spec of the experiment file ``path`` run with ``options``; a bad file (or capacity file, KubeRay
    target, secret) raises a one-line :class:`UsageError` before anything starts. ``rates`` False: the load's
    ``utilization`` and ``capacity`` are left out, not read (``availproof capacity`` sets the rates itself)."""
    path = Path(path)
    text = read_input(path, "experiment")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return of_document(doc, options, source=str(path), experiment_file=path, rates=rates)  # as validate names it


def of_document(doc: Any, options: Options, source: str | None = None,
                experiment_file: str | Path | None = None, rates: bool = True) -> RunSpec:
    """The spec of an experiment document run with ``options`` (``source``: what errors name, by default its
    title; ``experiment_file``: where its ``load.capacity`` is relative to, by default ``options``'; ``rates``:
    :func:`build`'s)."""
    if source is None:
        source = doc.get("title", "experiment") if isinstance(doc, dict) else "experiment"
    experiment_file = Path(experiment_file) if experiment_file else options.experiment_file
    # the app this run runs, only (`availproof validate` checks both apps' settings)
    parsed = exp_mod.parse(doc, source, capacity=options.capacity, experiment_file=experiment_file, rates=rates,
                           apps=(options.app,))
    if parsed.problems:
        raise UsageError(parsed.problems[0])
    s, rate_from = parsed.settings[options.app], parsed.rate_from[options.app]
    exp_mod.check_app_options(s, options.app, source, options.backend)  # KubeRay: app.ranks is the RayService's
    changes: dict[str, Any] = {}
    load_changes: dict[str, Any] = {}
    if rate_from is not None:  # load.utilization: the rate a share of a measured capacity, for this app
        utilization.check_app(rate_from, options.app)
        load_changes.update(rate=rate_from["rate_rps"], capacity=rate_from["capacity"])
        if rate_from.get("stages"):  # a load step: the stages stating their utilization at their rates
            load_changes["stages"] = utilization.resolved_stages(rate_from)
    elif not rates and (s.load.utilization is not None or s.load.capacity or utilization.stage_utilizations(s.load)):
        load_changes.update(utilization=None, capacity=None)
        if utilization.stage_utilizations(s.load):  # `availproof capacity` sets its own rates, no stages
            load_changes["stages"] = ()
    if options.model:
        load_changes["model"] = options.model
    if load_changes:
        changes["load"] = dataclasses.replace(s.load, **load_changes)
    if options.front:
        changes["front"] = options.front
    s = dataclasses.replace(s, **changes) if changes else s
    # the variables its tokens are read from are secrets for the rest of the process (chaos.system.secret_env)
    secret_env.declare(s.auth_token_env, s.front_door.get("token_env"))
    kubernetes = None
    if options.backend == "kuberay":
        kubernetes = freeze(kube_settings(options.kubernetes, s.kubernetes))
    return RunSpec(source=source, title=doc.get("title", ""), experiment=freeze(doc), app=options.app, settings=s,
                   front=FrontSettings.from_dict(s.front_door), rate_from=freeze(rate_from),
                   kubernetes=kubernetes, experiment_file=experiment_file)
