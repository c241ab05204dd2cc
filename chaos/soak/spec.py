"""What a soak is asked to do, checked before any cluster is touched: ``availproof soak`` from its flags or a
definition file (``experiments/soak.yaml``, schema ``chaos/schemas/soak.schema.json``), made into one prepared
soak (:class:`Prepared`): the drawn schedule (:func:`chaos.soak.schedule.draw`), the one experiment the run
executes (the first listed experiment's load, topology and steady state; its method every listed experiment's
fault action; no per-fault bounds: a soak's figure is compared with the claim), each scope's fault action with
its arguments, and, with ``claim_from``, the claim computed from that suite under the same RATES.

**The definition file** (YAML), paths relative to the file::

    kind: soak
    experiments: [replica-kill.json, worker-node-kill.json]
    faults: rates/soak-rates.yaml      # RATES (chaos.claim.rates)
    speedup: 8000                      # K: the rates x K
    duration_s: 480                    # the soak's length (the load runs on to the last heal's recovery window)
    seed: 3                            # the schedule's seed
    app: stream                        # optional: stream | llm
    front: lb                          # optional: the front door over the experiments'
    claim_from: ../runs/SUITE          # optional: the suite whose claim predicts the soak's lost service

Flags given beside a definition file override its fields. Every problem is one line (a
:class:`~chaos.base.errors.UsageError`, exit 2): the schema's first, then the schedule's checks (rates for a scope no
listed experiment injects, a speed-up that puts two faults of a scope closer than one holds, a duration too short
for one fault, experiments whose loads or topologies differ), then the claim's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.claim.rates import DEFAULT_RISK, DEFAULT_TARGET_PCT
from chaos.core import run_spec
from chaos.base.errors import UsageError
from chaos.load.workload import LoadShape
from chaos.core.options import Options
from chaos.core.run_spec import RunSpec
from chaos.soak import schedule as sch

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "soak.schema.json"
KIND = "soak"
# the claim the prediction comes from: chaos.claim.claim's defaults (the soak compares lost seconds, not a verdict)
CLAIM_ARGS = {"target_pct": DEFAULT_TARGET_PCT, "risk": DEFAULT_RISK, "population": "service", "seed": 0}


@dataclass
class SoakInput:
    experiments: list[str]
    faults: str  # the RATES file
    speedup: float
    duration_s: float
    seed: int = 0
    app: str = "stream"
    front: str | None = None
    claim_from: str | None = None
    source: str = "flags"  # the definition file, or "flags"


@dataclass
class Prepared:
    inp: SoakInput
    schedule: sch.Schedule
    spec: RunSpec  # what chaos.core.run.open_run executes (soak_spec)
    actions: dict[str, tuple[str, dict[str, Any]]]  # scope -> (chaos.ctk.actions function, its arguments)
    claim_doc: dict[str, Any] | None = None
    header: dict[str, Any] = field(default_factory=dict)  # the run header's "soak" block


def is_definition(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == KIND


def problems(doc: Any, source: str) -> list[str]:
    """Every schema problem of a soak definition, one line each (``SOURCE: PATH: message``)."""
    from chaos import schemas

    v = schemas.Validator(json.loads(SCHEMA.read_text()))
    found = [pm for e in v.iter_errors(doc) for pm in schemas.explain(e)]
    out: list[str] = []
    for parts, message in sorted(found, key=lambda pm: [str(p) for p in pm[0]]):
        line = f"{source}: {schemas.format_path('', parts)}: {message}"
        if line not in out:
            out.append(line)
    return out


def from_definition(path: str | Path, **overrides: Any) -> SoakInput:
    """A definition file read and checked (the first problem raised, one line); ``overrides``: flags given."""
    from chaos.base.errors import read_input
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(read_input(path, "the soak definition"))
    except yaml.YAMLError as e:
        raise UsageError(f"{path}: not valid YAML: {' '.join(str(e).split())[:200]}") from None
    found = problems(doc, str(path))
    if found:
        raise UsageError(found[0])
    here = path.parent

    def rel(p: str) -> str:
        return str(p) if Path(p).is_absolute() else str(here / p)

    inp = SoakInput([rel(e) for e in doc["experiments"]], rel(doc["faults"]), doc["speedup"], doc["duration_s"],
                    doc.get("seed", 0), doc.get("app", "stream"), doc.get("front"),
                    rel(doc["claim_from"]) if doc.get("claim_from") else None, str(path))
    for k, v in overrides.items():
        if v is not None:
            setattr(inp, k, v)
    return inp


def from_flags(experiments: list[str] | None, faults: str | None, speedup: float | None, duration_s: float | None,
               seed: int | None = None, app: str | None = None, front: str | None = None,
               claim_from: str | None = None) -> SoakInput:
    """The soak from the command's flags alone (no definition file): the four it cannot go without, one line each."""
    for flag, v in (("--experiments", experiments), ("--faults", faults), ("--speedup", speedup),
                    ("--duration", duration_s)):
        if v is None or v == []:
            raise UsageError(f"{flag}: needed (or give a soak definition file, e.g. experiments/soak.yaml)")
    return SoakInput(list(experiments), faults, speedup, duration_s, 0 if seed is None else seed, app or "stream",
                     front, claim_from)


def check_file(path: str | Path) -> list[str] | None:
    """``availproof validate``'s look at a soak definition: None when the file is not one; else every schema
    problem, or the first problem of its experiments, RATES and schedule (one line each; the claim not computed)."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not is_definition(doc):
        return None
    found = problems(doc, str(path))
    if found:
        return found
    try:
        inp = from_definition(path)
        if inp.claim_from and not Path(inp.claim_from).is_dir():
            return [f"{path}: claim_from: {inp.claim_from}: no such suite directory"]
        inp.claim_from = None
        prepare(inp)
    except UsageError as e:
        return [f"{path}: {e}" if not str(e).startswith(str(path)) else str(e)]
    return []


def prepare(inp: SoakInput) -> Prepared:
    """Every check and the draw, touching no cluster: the soak as it will run, or a one-line UsageError."""
    from chaos.claim.rates import load_rates

    if not inp.experiments:
        raise UsageError("--experiments: list the experiments whose faults the soak injects")
    for e in inp.experiments:
        if not Path(e).is_file():
            raise UsageError(f"{e}: no such experiment file")
    rates = load_rates(inp.faults)
    faults = sch.faults_from_experiments(inp.experiments, inp.app)
    schedule = sch.draw(rates, faults, inp.speedup, inp.duration_s, inp.seed)
    specs = [run_spec.build(p, Options(app=inp.app, front=inp.front)) for p in inp.experiments]  # parsed once each
    docs = [s.document() for s in specs]  # copies of their own
    actions: dict[str, tuple[str, dict[str, Any]]] = {}
    method = []
    for f, doc in zip(faults, docs):
        act = next(a for a in doc["method"] if isinstance(a, dict)
                   and (a.get("provider") or {}).get("func") in sch.heal_args())
        args = {k: v for k, v in (act["provider"].get("arguments") or {}).items() if k != "configuration"}
        actions[f.scope] = (act["provider"]["func"], args)
        method.append(act)
    claim_doc = compute_claim(inp.claim_from, inp.faults) if inp.claim_from else None
    spec = soak_spec(specs[0], method, schedule, [Path(p).stem for p in inp.experiments])
    header = {"schedule": schedule.to_dict(), "experiments": list(inp.experiments), "faults": inp.faults,
              "rates": {"period_days": rates.period_days}, "claim_from": inp.claim_from, "claim": dict(CLAIM_ARGS),
              "app": inp.app, "source": inp.source, "actions": {s: {"func": a, "arguments": args}
                                                               for s, (a, args) in actions.items()}}
    return Prepared(inp, schedule, spec, actions, claim_doc, header)


def compute_claim(suite_dir: str, rates_path: str, claim_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The claim from ``suite_dir`` under the RATES at ``rates_path`` (:func:`chaos.claim.claim`; nothing written)."""
    from chaos import claim

    a = {**CLAIM_ARGS, **(claim_args or {})}
    if not Path(suite_dir).is_dir():
        raise UsageError(f"--claim-from {suite_dir}: no such suite directory")
    return claim.claim(Path(suite_dir), claim.load_rates(rates_path), claim.target_fraction(a["target_pct"]),
                       claim.risk_value(a["risk"]), a["population"], a["seed"])


def soak_spec(first: RunSpec, method: list[dict[str, Any]], schedule: sch.Schedule, names: list[str]) -> RunSpec:
    """The spec the soak runs, derived from the first listed experiment's (its load, topology, steady state and
    SLO: they all agree, :func:`chaos.soak.schedule.check_same_setup`): every listed experiment's fault action as
    its method (what the cluster is prepared for), no rollbacks, no per-fault bounds (the soak is compared with
    the claim), a load and a wall-clock limit long enough for the schedule. ``first`` is unchanged."""
    s = first.settings
    warm, base = s.load.warmup_s, s.baseline_s
    return (first
            .with_load(duration_s=round(warm + base + schedule.end_s + 600, 3),  # finish() ends it before then
                       max_requests=LoadShape().max_requests)
            .with_settings(max_wall_s=round(warm + base + schedule.end_s + 900, 3), bounds={},
                           bounds_source="a soak states no per-fault bounds: its observed lost service-seconds are "
                                         "set against the claim's prediction (summary.json's soak)")
            .with_document(title=f"soak: {' + '.join(names)} at x{schedule.speedup:g}, seed {schedule.seed}",
                           method=method, rollbacks=[]))
