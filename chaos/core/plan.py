"""An experiment's faults before they happen: what each would touch, and nothing changed.

- :func:`faults_of`: the faults an experiment's method injects, in order, each as its scope and the
  arguments of its Chaos Toolkit action (``chaos.ctk.actions``): what the run's set-up hands the
  backend (``Backend.prepare``: permissions, refusals) and what ``--plan`` looks up;
- :func:`objects`: per fault, every object it would touch on the backend's cluster, from the
  backend's read-only ``plan(scope, arguments)`` (KubeRay: pods, nodes, NetworkPolicies, helper
  pods, the RayService; local: processes and nodes by name); what a guard of the fault would refuse
  (the blast radius, an autoscaled zone, an upgrade KubeRay would not roll out) is a row of its own;
- :func:`render`: the table ``availproof run --plan EXPERIMENT`` prints.

The fault functions (:mod:`chaos.scopes.faults`) decide the victims at their injection (a replica is picked
then, from where Serve placed it): a plan names what they would pick now.
"""

from __future__ import annotations

from typing import Any

from chaos import scopes
from chaos.base.errors import AvailproofError

ACTIONS_MODULE = "chaos.ctk.actions"
COLUMNS = ("activity", "scope", "kind", "name", "where", "does", "after")
REFUSED = "refused"  # the kind of a row that says what a guard of the fault would refuse


def faults_of(experiment: dict[str, Any]) -> list[dict[str, Any]]:
    """Each fault the experiment's method injects, in order: ``{"activity", "action", "scope",
    "arguments"}``. An action is a fault when it is the Chaos Toolkit action of a registered scope's
    fault function (:func:`chaos.scopes.actions`); one that injects more than one (the head's
    ``head_outage_second_fault``: the head, then a replica or a node) is split as its scope says
    (:attr:`chaos.scopes.Scope.splits`). Probes, waits and the rollbacks are not faults."""
    by_function = scopes.actions()
    out: list[dict[str, Any]] = []
    for activity in experiment.get("method") or []:
        provider = activity.get("provider") or {}
        if provider.get("module") != ACTIONS_MODULE:
            continue
        func, name = provider.get("func"), activity.get("name", provider.get("func"))
        if func not in by_function:
            continue
        args = {k: v for k, v in (provider.get("arguments") or {}).items() if k != "configuration"}
        scope = by_function[func][0]
        for each, arguments in (scope.splits(func, args) if scope.splits else [(scope.name, args)]):
            out.append({"activity": name, "action": func, "scope": each, "arguments": arguments})
    return out


def objects(backend, faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every object each fault would touch, one row each (:data:`COLUMNS`), from ``backend.plan``; a
    fault the backend would refuse is a row of kind :data:`REFUSED` saying why."""
    rows = []
    for f in faults:
        try:
            touched = backend.plan(f["scope"], f["arguments"])
        except AvailproofError as e:
            touched = [{"kind": REFUSED, "name": "-", "where": "-", "does": str(e), "after": "-"}]
        for row in touched:
            rows.append({"activity": f["activity"], "scope": f["scope"],
                         **{k: row.get(k, "-") for k in COLUMNS[2:]}})
    return rows


def refused(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == REFUSED]


def render(rows: list[dict[str, Any]], header: str = "") -> str:
    """The plan as a Markdown table, one row per object."""
    lines = [header] if header else []
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "-")).replace("|", "/") for c in COLUMNS) + " |")
    if not rows:
        lines.append("(no fault in the experiment's method)")
    return "\n".join(lines) + "\n"


def for_experiment(path: str, options, app: str = "stream") -> tuple[str, list[dict[str, Any]]]:
    """The plan of the experiment file ``path`` on the backend ``options`` names (its cluster attached,
    read-only: KubeRay's target from the experiment's ``kubernetes`` section and the flags; local: the
    running cluster): a header line and the rows of :func:`objects`."""
    import dataclasses

    from chaos.core import provision, run_spec

    spec = run_spec.build(path, dataclasses.replace(options, app=app))
    provision.check_capabilities(options.backend, spec.settings)  # what the run would refuse first
    if options.backend == "kuberay":
        backend = provision.kuberay_backend(spec.kube_target())
        where = f"KubeRay RayCluster {backend.cluster} in {backend.namespace} (context {backend.context})"
    else:
        backend = provision.attach(options)
        where = f"the local cluster {backend.cluster.state.cluster_id}"
    header = f"plan of {path} on {where}: what each fault would touch now; nothing was changed"
    return header, objects(backend, faults_of(spec.experiment))
