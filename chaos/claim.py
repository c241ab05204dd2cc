"""From evidence to an availability claim: ``availproof claim SUITE_DIR --faults RATES``. Plain Python (no Ray):
it reads a suite's summaries (and, for the two figures a summary does not hold, its records) and returns
one document; :mod:`chaos.reports.claim` renders and writes it (``claim.json``, ``claim.md``, ``claim.html``).

What a claim is made of
-----------------------
- **RATES** (YAML, :func:`load_rates`): ``period_days`` and, per scope, ``events`` (expected events per
  period), optionally ``duration_s`` (how long such an outage lasts) and ``source``. A figure whose source
  names no URL or DOI is labelled ``guess``.
- **The runs** (:func:`find_runs`): a suite directory (one folder per experiment, each a run or
  ``trial-N/`` runs), one experiment's trials, or one run. A run with one fault is a trial of its fault's
  scope; a run with several (head-outage-second-fault) is reported under its own name and never pooled.
  A run whose verdict is ERROR (set-up failed, the fault not seen in effect, interrupted) is no
  measurement and is not counted, nor is a run whose cost could not be measured; both are listed.
- **The cost of one event** (:func:`cost`), per run, on the chosen population (``service``, or
  ``affected``: the lost domain's users): ``lost_service_s`` = failed x ``window_s`` / requests (the
  fault's analysis window, :mod:`chaos.analysis`): the failed requests as seconds of full outage at the
  rate the test ran at, minus the same figure for the **baseline** (the population's requests before the
  injection, over the same ``window_s``). ``slo_lost_service_s``: the same with every request that did
  not meet the SLO counted (failed, or succeeded outside it), so it is never below ``lost_service_s``.
  A run that never reached steady state (``recovered`` not true), was stopped or did not finish costs at
  least that much: its cost is a **lower bound**, and the claim says so.
- **Where the figures come from**: failed, requests and ``window_s`` are the summary's (``faults[i]``,
  per population). The summary has no baseline count (``requests.failed_before_first_fault`` also counts
  the requests in flight at the injection, which are the fault's, and has no denominator) and no count of
  requests outside the SLO: both are derived from ``records.ndjson`` with :mod:`chaos.records` and
  :mod:`chaos.analysis` (the baseline: measured requests of the population that ended by the first
  injection; the SLO misses: the same analysis run on the records with each request outside the run's
  SLO counted as failed). Without records both are null, with the reason.
- **Per scope**: the **mean** cost over its counted runs (expected downtime needs the mean; a median
  hides the rare bad run), with a 95 % percentile-bootstrap interval (seeded, 2000 resamples, nearest
  rank) from :data:`MIN_TRIALS` trials on.
- ``availability`` = 1 - sum over scopes (events x mean lost_service_s) / period_s: the expected
  availability lost to the tested faults, an upper bound (untested causes are not in it);
  ``slo_attainment`` the same with ``slo_lost_service_s``. The **error budget** = (1 - target) x
  period_s; each scope's share of it; the **dominant** scope; ``max_events``: the most events per period
  of a scope that keep the target, the other scopes at their stated rates (``max_events_alone``: alone).
- ``p_miss``: the chance a period misses the target, by a seeded compound-Poisson simulation (each
  scope's event count per period drawn from Poisson(events), each event's cost resampled from the
  scope's measured costs).
- ``verdict``, the first that holds: ``not_covered`` (a scope with events in RATES has no single-fault run
  in the suite, or its ``duration_s`` exceeds the longest outage tested: the claim never extrapolates),
  ``insufficient_trials`` (a scope with events has fewer than :data:`MIN_TRIALS` counted runs),
  ``not_supported`` (``p_miss`` above the risk or not computable, the expected availability below the
  target, or a cost that is only a lower bound), else ``supported``. Every reason is listed, not only the
  first word's; the measured figures are reported in every case.

Honest nulls: a figure that cannot be measured is null and its reason is in the ``unmeasurable`` map of
the object holding it (the claim's, a run's), never 0.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from chaos import analysis, records as rec, scopes, stats
from chaos.errors import UsageError, read_yaml

FORMAT_VERSION = 1
NOT_COVERED, INSUFFICIENT_TRIALS, NOT_SUPPORTED, SUPPORTED = (
    "not_covered", "insufficient_trials", "not_supported", "supported")
VERDICTS = (NOT_COVERED, INSUFFICIENT_TRIALS, NOT_SUPPORTED, SUPPORTED)  # the order they are decided in
MIN_TRIALS = stats.MIN_TRIALS_MEDIAN  # 5: fewer trials of a scope support no claim (and no interval)
POPULATIONS = ("service", "affected")
DEFAULT_TARGET_PCT = 99.9
DEFAULT_RISK = 0.05
RESAMPLES = 2000
SIMULATIONS = 100_000
MAX_DRAWS = 20_000_000  # events drawn in all by the simulation; fewer periods beyond it (said in p_miss)
DAY_S = 86_400
NS = analysis.NS
UTILIZATION_REASON = ("not measured: the rig records the offered load and every request, not how busy the "
                      "replicas were")


# ---------------------------------------------------------------- RATES
_CHECKABLE = re.compile(r"https?://\S+|\bdoi:\s*\S+|\b10\.\d{4,9}/\S+", re.IGNORECASE)
RATE_KEYS = ("events", "duration_s", "source")


def checkable(source: str | None) -> bool:
    """A source names a URL or a DOI: someone can check the figure."""
    return bool(source and _CHECKABLE.search(source))


@dataclass(frozen=True)
class Rate:
    scope: str
    events: float  # expected events per period
    duration_s: float | None = None  # how long one such outage lasts (None: not stated)
    source: str | None = None

    @property
    def basis(self) -> str:
        return "checkable" if checkable(self.source) else "guess"

    def to_dict(self) -> dict[str, Any]:
        return {"events": self.events, "duration_s": self.duration_s, "source": self.source, "basis": self.basis}


@dataclass(frozen=True)
class Rates:
    period_days: float
    scopes: dict[str, Rate]
    path: str = "RATES"

    @property
    def period_s(self) -> float:
        return self.period_days * DAY_S


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_rates(doc: Any, where: str = "RATES") -> Rates:
    """A RATES document checked; the first problem is a one-line :class:`UsageError` ``WHERE: path: what``."""
    def bad(path: str, what: str) -> UsageError:
        return UsageError(f"{where}: {path}: {what}")

    if not isinstance(doc, dict):
        raise bad("<document>", f"must be a mapping with period_days and scopes, got {type(doc).__name__}")
    for k in doc:
        if k not in ("period_days", "scopes"):
            raise bad(str(k), "unknown field (known: period_days, scopes)")
    period = doc.get("period_days")
    if period is None:
        raise bad("period_days", "is required (days in the period the events are counted over, e.g. 30)")
    if not _number(period) or period <= 0:
        raise bad("period_days", f"must be a number above 0, got {period!r}")
    entries = doc.get("scopes")
    if not isinstance(entries, dict) or not entries:
        raise bad("scopes", f"must be a non-empty mapping of scope to its rate, got {entries!r}")
    out: dict[str, Rate] = {}
    for name, entry in entries.items():
        path = f"scopes.{name}"
        if not scopes.known(name):
            raise bad(path, f"unknown scope (known: {', '.join(scopes.names())})")
        if not isinstance(entry, dict):
            raise bad(path, f"must be a mapping with events (and duration_s, source), got {entry!r}")
        for k in entry:
            if k not in RATE_KEYS:
                raise bad(f"{path}.{k}", f"unknown field (known: {', '.join(RATE_KEYS)})")
        events, duration, source = entry.get("events"), entry.get("duration_s"), entry.get("source")
        if events is None:
            raise bad(f"{path}.events", "is required (expected events per period)")
        if not _number(events) or events < 0:
            raise bad(f"{path}.events", f"must be a number of at least 0, got {events!r}")
        if duration is not None and (not _number(duration) or duration <= 0):
            raise bad(f"{path}.duration_s", f"must be a number of seconds above 0, got {duration!r}")
        if source is not None and not isinstance(source, str):
            raise bad(f"{path}.source", f"must be a string (a URL or DOI makes it checkable), got {source!r}")
        out[name] = Rate(name, float(events), None if duration is None else float(duration), source)
    return Rates(float(period), out, where)


def load_rates(path: str | Path) -> Rates:
    """The RATES file read and checked: every problem is one line naming the file."""
    return parse_rates(read_yaml(path, "the rates file"), str(path))


def _strictly_between(value: Any, flag: str, what: str, hi: float, example: str) -> float:
    """``value`` as a number strictly between 0 and ``hi``; a one-line error naming ``flag`` otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}: {what} between 0 and {hi:g}, e.g. {example}, got {value!r}") from None
    if not math.isfinite(v) or not 0 < v < hi:
        raise UsageError(f"{flag}: {what} between 0 and {hi:g} (exclusive), e.g. {example}, got {value!r}")
    return v


def target_fraction(pct: Any) -> float:
    """``--target`` in percent (99.9) as a fraction; a one-line error otherwise."""
    return _strictly_between(pct, "--target", "a percentage", 100, "99.9") / 100


def risk_value(risk: Any) -> float:
    return _strictly_between(risk, "--risk", "a probability", 1, "0.05")


# ---------------------------------------------------------------- the suite's runs
def _trial_dirs(d: Path) -> list[tuple[int, Path]]:
    out = []
    for p in d.glob("trial-*"):
        n = p.name.split("-", 1)[1]
        if p.is_dir() and n.isdigit() and rec.is_run_dir(p):
            out.append((int(n), p))
    return sorted(out)


def find_runs(suite_dir: str | Path) -> list[tuple[str, int | None, Path]]:
    """(experiment, trial number or None, run directory) of every run under ``suite_dir``: a suite (one
    folder per experiment), one experiment's ``trial-N/`` runs, or one run."""
    root = Path(suite_dir)
    if not root.is_dir():
        raise UsageError(f"{root}: no such suite directory")
    if rec.is_run_dir(root):
        return [(root.name, None, root)]
    if _trial_dirs(root):
        return [(root.name, n, p) for n, p in _trial_dirs(root)]
    out: list[tuple[str, int | None, Path]] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if rec.is_run_dir(sub):
            out.append((sub.name, None, sub))
        else:
            out += [(sub.name, n, p) for n, p in _trial_dirs(sub)]
    if not out:
        raise UsageError(f"{root}: no summary.json or records.ndjson in it or its sub-directories: "
                         "no run to claim from")
    return out


def read_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json; derived again from the records when it is missing (PARTIAL) or of a format before 2."""
    import json

    from chaos import summary as summary_mod

    path = run_dir / "summary.json"
    if path.is_file():
        try:
            s = json.loads(path.read_text())
        except (ValueError, OSError) as e:
            raise UsageError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(s, dict) or not isinstance(s.get("faults"), list):
            raise UsageError(f"{path}: not an availproof summary (no faults)")
        if s.get("format_version") == analysis.FORMAT_VERSION:
            return s
        if not (run_dir / "records.ndjson").is_file():
            raise UsageError(f"{path}: a summary of format {s.get('format_version', 1)} and no records.ndjson "
                             f"to derive format {analysis.FORMAT_VERSION} from")
        new, origin = summary_mod.reanalyse(run_dir)
        new["note"] = f"summary.json of an older format: derived again from records.ndjson ({origin})"
        return new
    new, origin = summary_mod.reanalyse(run_dir)
    new["partial"] = True
    new["note"] = f"no summary.json (the run did not finish): derived from records.ndjson ({origin})"
    return new


def read_records(run_dir: Path) -> rec.RunRecords | None:
    path = run_dir / "records.ndjson"
    return rec.read(path) if path.is_file() else None


# ---------------------------------------------------------------- the cost of one event
def lost_seconds(bad: int, requests: int, window_s: float) -> float:
    """``bad`` requests out of ``requests`` sent over ``window_s``, as seconds of full outage at that rate."""
    return bad * window_s / requests


def cost(bad: int | None, requests: int | None, window_s: float | None, base_bad: int | None,
         base_requests: int | None) -> tuple[float | None, str | None]:
    """The window's lost seconds minus the baseline's over the same window length; (None, why) when it
    cannot be measured."""
    if not requests:
        return None, "no request of the population in the fault's window"
    if window_s is None or window_s <= 0:
        return None, "the fault's analysis window has no length"
    if bad is None:
        return None, "the window's requests outside the SLO are not known (no records.ndjson)"
    if base_requests is None or base_bad is None:
        return None, "no baseline: the run has no records.ndjson to count the requests before the injection"
    if base_requests == 0:
        return None, "no baseline: no request of the population ended before the injection"
    return lost_seconds(bad, requests, window_s) - lost_seconds(base_bad, base_requests, window_s), None


def baseline(records: rec.RunRecords, first_inject_ns: int, zones: Iterable[str] | None,
             slo: analysis.SLO) -> dict[str, Any]:
    """The population's measured requests before the first injection that ended by it (those in flight at
    the injection are the fault's): requests, failed, outside the SLO, and the span they were sent over."""
    keep = None if zones is None else set(zones)
    measured = [r for r in records.requests if r.phase == rec.MEASURE]
    base = [r for r in measured if r.sent_ns < first_inject_ns and analysis._end_ns(r) <= first_inject_ns
            and (keep is None or r.zone in keep)]
    start = min((r.sent_ns for r in measured), default=first_inject_ns)
    return {"requests": len(base), "failed": sum(1 for r in base if not r.ok),
            "slo_missed": sum(1 for r in base if not slo.met(r)),
            "span_s": round(max(0, first_inject_ns - start) / NS, 4)}


def slo_missed(records: rec.RunRecords, definitions: dict[str, Any] | None) -> dict[str, dict[str, tuple[int, int]]]:
    """Per fault and population, (requests that did not meet the SLO, requests), from the analysis itself
    run on the records with every request outside the run's SLO counted as failed: the same windows and
    populations as the summary's."""
    defs = analysis.Definitions.from_dict(definitions)
    marked = [r if not r.ok or defs.slo.met(r) else dataclasses.replace(r, ok=False, failure="outside_slo")
              for r in records.requests]
    run = dataclasses.replace(records, requests=marked, samples=[])
    s = analysis.analyse(run, defs.steady_state, defs.slo, defs.population)
    return {f["fault_id"]: {p: (f[p]["failed_total"], f[p]["requests"]) for p in POPULATIONS} for f in s["faults"]}


def _span_s(f: dict[str, Any], pop: dict[str, Any]) -> float | None:
    """How long the event kept the system from normal: the latest of the fault's heal, the population's
    steady state, capacity and control plane restored (what overlapping events would share)."""
    vals = [f.get("heal_start_s"), pop.get("time_to_steady_state_s"), _get(f, "capacity", "time_to_restored_s"),
            _get(f, "control_plane", "time_to_restored_s")]
    vals = [v for v in vals if _number(v)]
    return max(vals) if vals else None


def outage_tested(f: dict[str, Any]) -> float | None:
    """How long the fault was imposed: from its injection to its heal's start; for an upgrade (a scope that
    replaces every replica) until every replica was replaced (``replacement.time_to_complete_s``)."""
    if scopes.get(f.get("scope")).replaces_every_replica:
        return _get(f, "replacement", "time_to_complete_s")
    return f.get("heal_start_s")


def fault_cost(f: dict[str, Any], population: str, base: dict[str, Any] | None,
               slo: tuple[int, int] | None, no_records: str | None = None) -> dict[str, Any]:
    """The cost of one fault of a run on ``population`` (see the module docstring), with its inputs."""
    pop = f.get(population) or {}
    unmeasurable: dict[str, str] = {}
    requests, failed, window_s = pop.get("requests"), pop.get("failed_total"), f.get("window_s")
    routed_blind = (population == "affected" and scopes.get(f.get("scope")).routed
                    and pop.get("basis") == "service")
    if routed_blind:
        why = (f"the affected population is the service here ({pop.get('why')}): the lost domain's users cannot be "
               "told apart; run it behind zonal-lb or direct to claim for them")
        lost = slo_lost = None
        unmeasurable["lost_service_s"] = unmeasurable["slo_lost_service_s"] = why
    else:
        base_failed = base_requests = base_slo = None
        if base is not None:
            base_failed, base_requests, base_slo = base["failed"], base["requests"], base["slo_missed"]
        lost, why = cost(failed, requests, window_s, base_failed, base_requests)
        if why:
            unmeasurable["lost_service_s"] = no_records if (no_records and "baseline" in why) else why
        slo_bad, slo_requests = slo if slo is not None else (None, requests)
        slo_lost, why = cost(slo_bad, slo_requests, window_s, base_slo, base_requests)
        if why:
            unmeasurable["slo_lost_service_s"] = no_records or why
    recovered = pop.get("recovered")
    lower = None
    if recovered is False:
        lower = "never reached steady state in its window"
    elif recovered is None and not f.get("window_cut_by"):
        lower = ("steady state could not be judged ("
                 + ((f.get("unmeasurable") or {}).get(f"{population}.recovered") or "no reason recorded") + ")")
    outage = outage_tested(f)
    if outage is None:
        upgrade = scopes.get(f.get("scope")).replaces_every_replica
        unmeasurable["outage_tested_s"] = (
            f"the {f.get('scope')} upgrade did not complete in its window" if upgrade
            else f"the {f.get('scope')} fault has no heal: it lasts until the system replaces what it hit, no outage "
                 "length was imposed")
    return {
        "fault_id": f.get("fault_id"), "scope": f.get("scope"), "zones": pop.get("zones"),
        "window_s": window_s, "window_cut_by": f.get("window_cut_by"),
        "requests": requests, "failed": failed,
        "slo_missed": None if slo is None else slo[0],
        "rate_rps": round(requests / window_s, 4) if requests and window_s else None,
        "baseline": base,
        "lost_service_s": None if lost is None else round(lost, 6),
        "slo_lost_service_s": None if slo_lost is None else round(slo_lost, 6),
        "recovered": recovered, "lower_bound": lower,
        "outage_tested_s": outage, "span_s": _span_s(f, pop),
        "unmeasurable": unmeasurable,
    }


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(sum(values), 6)


def run_cost(name: str, trial: int | None, run_dir: str, summary: dict[str, Any], records: rec.RunRecords | None,
             population: str) -> dict[str, Any]:
    """One run's cost on ``population``: per fault, and in all; whether it is a trial of its scope."""
    faults = summary.get("faults") or []
    base = slo = None
    no_records = None
    if records is None:
        no_records = ("derived from records.ndjson, which this run does not have (the summary holds no baseline "
                      "count and no count of requests outside the SLO)")
    elif faults:
        slo = slo_missed(records, summary.get("definitions"))
    costs = []
    for f in faults:
        zones = (f.get(population) or {}).get("zones") if population == "affected" else None
        b = None if records is None else baseline(records, faults[0]["inject_ns"], zones,
                                                  analysis.Definitions.from_dict(summary.get("definitions")).slo)
        missed = None if slo is None else slo.get(f.get("fault_id"), {}).get(population)
        costs.append(fault_cost(f, population, b, missed, no_records))
    word = (summary.get("verdict") or {}).get("word")
    out = {
        "experiment": name, "trial": trial, "dir": run_dir, "run_id": summary.get("run_id"),
        "title": summary.get("experiment"), "scopes": [f.get("scope") for f in faults],
        "pooled": len(faults) == 1, "verdict": word, "partial": bool(summary.get("partial")),
        "stop_reason": summary.get("stop_reason"), "note": summary.get("note"),
        "faults": costs,
        "lost_service_s": _sum([c["lost_service_s"] for c in costs]) if costs else None,
        "slo_lost_service_s": _sum([c["slo_lost_service_s"] for c in costs]) if costs else None,
        "outage_tested_s": costs[-1]["outage_tested_s"] if len(costs) == 1 else None,
        "span_s": max((c["span_s"] for c in costs if c["span_s"] is not None), default=None),
    }
    lower = [c["lower_bound"] for c in costs[-1:] if c["lower_bound"]]  # the incident: the last fault's window
    if out["stop_reason"]:
        lower.append(f"stopped early: {out['stop_reason']}")
    if out["partial"]:
        lower.append("the run did not finish")
    out["lower_bound"] = "; ".join(lower) or None
    unm = {}
    for c in costs:
        for k, v in c["unmeasurable"].items():
            unm.setdefault(k, v)
    out["unmeasurable"] = {k: v for k, v in unm.items() if k in ("lost_service_s", "slo_lost_service_s")
                           or (k == "outage_tested_s" and len(costs) == 1)}
    why_not = None
    if not faults:
        why_not = "no fault in the run"
    elif len(faults) > 1:
        why_not = f"a run of {len(faults)} faults ({', '.join(out['scopes'])}): reported on its own, never pooled"
    elif word == "ERROR":
        why_not = "its verdict is ERROR (no measurement: " + "; ".join((summary.get("verdict") or {}).get("reasons")
                                                                      or ["no reason recorded"]) + ")"
    elif (faults[0].get("effect") or {}).get("verified") is False:
        why_not = "its fault was not seen in effect"
    out["measurement"] = why_not is None  # the run measured its fault (its outage counts as tested)
    if why_not is None and out["lost_service_s"] is None:
        why_not = "its cost could not be measured: " + out["unmeasurable"].get("lost_service_s", "no reason")
    out["counted"] = why_not is None
    out["not_counted"] = why_not
    return out


# ---------------------------------------------------------------- per scope, and the claim
def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _boot_means(values: list[float], rng, resamples: int):
    import numpy as np

    v = np.asarray(values, dtype=float)
    return v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1)


def _ci(draws) -> list[float] | None:
    if draws is None:
        return None
    d = [float(x) for x in draws]
    return [stats.percentile(d, 0.025), stats.percentile(d, 0.975)]


def _distinct(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


ENV_FIELDS = {"backend": ("cluster", "backend"), "topology": ("cluster", "topology"),
              "gcs_fault_tolerance": ("cluster", "gcs_fault_tolerance"), "network": ("cluster", "network"),
              "app": ("app",), "front_door": ("environment", "front_door", "shape"),
              "platform": ("environment", "platform"), "cpus": ("environment", "cpus"),
              "availproof": ("environment", "availproof"), "ray": ("environment", "ray"),
              "vllm": ("environment", "vllm"), "python": ("environment", "python")}
LOAD_FIELDS = ("mode", "arrival", "rate", "concurrency", "stream", "route", "max_tokens", "timeout_s")


def environment(summaries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each field's distinct values over the runs (null: a run that did not record it)."""
    return {k: _distinct(_get(s, *path) for s in summaries) for k, path in ENV_FIELDS.items()}


def mixed(env: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The fields with more than one recorded value: runs on different set-ups."""
    return {k: [x for x in v if x is not None] for k, v in env.items() if len([x for x in v if x is not None]) > 1}


def offered_load(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _distinct({k: (_get(s, "environment", "load") or {}).get(k) for k in LOAD_FIELDS} for s in summaries)


def scope_entry(scope: str, runs: list[dict[str, Any]], summaries: list[dict[str, Any]], rate: Rate | None,
                rng, resamples: int) -> dict[str, Any]:
    """One scope: its runs, its mean cost (and interval), the longest outage tested, its load."""
    counted = [r for r in runs if r["counted"]]
    values = [r["lost_service_s"] for r in counted]
    slo_values = [r["slo_lost_service_s"] for r in counted if r["slo_lost_service_s"] is not None]
    boot = _boot_means(values, rng, resamples) if len(values) >= MIN_TRIALS else None
    slo_boot = _boot_means(slo_values, rng, resamples) if len(slo_values) >= MIN_TRIALS else None
    outages = [r["outage_tested_s"] for r in runs if r["measurement"] and r["outage_tested_s"] is not None]
    spans = [r["span_s"] for r in counted if r["span_s"] is not None]
    rates_rps = [c["rate_rps"] for r in counted for c in r["faults"] if c["rate_rps"] is not None]
    return {
        "scope": scope, "label": scopes.label(scope) or scope,
        "rate": None if rate is None else rate.to_dict(),
        "experiments": _distinct(r["experiment"] for r in runs),
        "runs": len(runs), "trials": len(counted),
        "not_counted": [{"run": _run_name(r), "why": r["not_counted"]} for r in runs if not r["counted"]],
        "lost_service_s": {"mean": _round(_mean(values)), "ci95": _round_pair(_ci(boot)), "values": values,
                           "lower_bound": [{"run": _run_name(r), "why": r["lower_bound"]}
                                           for r in counted if r["lower_bound"]]},
        "slo_lost_service_s": {"mean": _round(_mean(slo_values)), "ci95": _round_pair(_ci(slo_boot)),
                               "values": slo_values},
        "environment_mixed": mixed(environment([s for r, s in zip(runs, summaries) if r["counted"]])),
        "outage_tested_s": max(outages) if outages else None,
        "span_s": max(spans) if spans else None,
        "load": {"offered": offered_load(summaries), "measured_rps": _round(_mean(rates_rps), 4),
                 "utilization": None},
        "_boot": boot, "_slo_boot": slo_boot,  # removed before the claim is returned
    }


def _run_name(r: dict[str, Any]) -> str:
    return r["experiment"] + (f"/trial-{r['trial']}" if r["trial"] is not None else "")


def _round(v: float | None, n: int = 6) -> float | None:
    return None if v is None else round(v, n)


def _round_pair(p: list[float] | None) -> list[float] | None:
    return None if p is None else [round(p[0], 6), round(p[1], 6)]


def availability(entries: dict[str, dict[str, Any]], rates: Rates, figure: str = "lost_service_s") -> dict[str, Any]:
    """1 - sum(events x mean cost) / period over the scopes with a rate and a cost; the interval from the
    scopes' bootstrap means when every scope in the sum has one. Scopes left out are named with why."""
    included, left_out, lost = [], {}, 0.0
    boots = []
    for name, rate in rates.scopes.items():
        e = entries.get(name)
        mean = None if e is None else e[figure]["mean"]
        if rate.events == 0:
            continue
        if mean is None:
            left_out[name] = ("no single-fault run of this scope" if e is None or not e["runs"]
                              else "no run of this scope with a measured cost")
            continue
        included.append(name)
        lost += rate.events * mean
        boots.append((rate.events, e["_boot" if figure == "lost_service_s" else "_slo_boot"]))
    value = 1 - lost / rates.period_s if included or not left_out else None
    ci, why_value, why_ci = None, None, None
    if value is None:
        why_value = "no scope with a rate has a measured cost"
    elif not boots:
        why_ci = "no scope with events in the sum"
    elif any(b is None for _, b in boots):
        why_ci = f"a scope in the sum has fewer than {MIN_TRIALS} trials: no interval"
    else:
        total = sum(ev * b for ev, b in boots)
        draws = [float(x) for x in 1 - total / rates.period_s]
        ci = [round(stats.percentile(draws, 0.025), 9), round(stats.percentile(draws, 0.975), 9)]
    return {"value": None if value is None else round(value, 9), "ci95": ci, "expected_lost_s": round(lost, 6),
            "scopes": included, "left_out": left_out, "why_no_value": why_value, "why_no_interval": why_ci}


def p_miss(costs: dict[str, tuple[float, list[float]]], budget_s: float, seed: int,
           simulations: int = SIMULATIONS) -> dict[str, Any]:
    """The fraction of simulated periods whose lost seconds exceed the budget: per scope, a Poisson(events)
    count of events per period, each costing one of the scope's measured costs drawn at random."""
    import numpy as np

    rng = np.random.default_rng([seed, 2])
    total_rate = sum(ev for ev, _ in costs.values())
    n = simulations
    if total_rate * n > MAX_DRAWS:
        n = max(1000, int(MAX_DRAWS / total_rate))
    loss = np.zeros(n)
    for name in sorted(costs):
        events, values = costs[name]
        counts = rng.poisson(events, n)
        k = int(counts.sum())
        if k:
            draws = rng.choice(np.asarray(values, dtype=float), size=k)
            loss += np.bincount(np.repeat(np.arange(n), counts), weights=draws, minlength=n)
    p = float((loss > budget_s).mean())
    return {"value": round(p, 6), "simulations": n, "stderr": round(math.sqrt(p * (1 - p) / n), 6),
            "seed": seed, "scopes": sorted(costs)}


def overlap(rates: Rates, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Roughly the chance that two events overlap in a period. The expected number of overlaps of a pair
    of scopes (a scope with itself too) is rate x rate x (duration + duration) / period (for a scope with
    itself: events^2 x duration / period); events arriving as Poisson processes, the chance of at least
    one overlap is 1 - exp(-expected), per pair and for the sum over pairs (``probability``; the
    expected numbers are ``expected``: they can pass 1, a probability cannot). A duration is the stated
    ``duration_s``, else the longest span measured (heal, steady state, capacity and control plane
    restored); a scope with neither is left out, named."""
    durs: dict[str, tuple[float, str]] = {}
    left_out = {}
    for name, rate in rates.scopes.items():
        if rate.events == 0:
            continue
        if rate.duration_s is not None:
            durs[name] = (rate.duration_s, "stated")
        elif entries.get(name) and entries[name]["span_s"] is not None:
            durs[name] = (entries[name]["span_s"], "measured span")
        else:
            left_out[name] = "no stated duration and no measured span"
    names = sorted(durs)
    pairs, total = [], 0.0
    T = rates.period_s
    for i, a in enumerate(names):
        for b in names[i:]:
            la, lb = rates.scopes[a].events, rates.scopes[b].events
            m = la * la * durs[a][0] / T if a == b else la * lb * (durs[a][0] + durs[b][0]) / T
            total += m
            pairs.append({"scopes": [a, b], "expected": round(m, 9), "probability": round(-math.expm1(-m), 9)})
    pairs.sort(key=lambda x: -x["expected"])
    return {"probability": round(-math.expm1(-total), 9), "expected": round(total, 9), "pairs": pairs[:10],
            "durations_s": {n: {"value": d, "from": src} for n, (d, src) in durs.items()}, "left_out": left_out}


def worst_zone(runs: list[dict[str, Any]], rates: Rates) -> dict[str, Any] | None:
    """Affected population only: per zone, sum over scopes (events x mean cost of that scope's counted runs
    that hit the zone, or of all its runs when its events hit every zone's users); the largest."""
    per: dict[str, dict[str, list[float]]] = {}
    everywhere: dict[str, list[float]] = {}
    for r in runs:
        if not r["counted"]:
            continue
        f = r["faults"][0]
        if f["zones"]:
            for z in f["zones"]:
                per.setdefault(z, {}).setdefault(f["scope"], []).append(r["lost_service_s"])
        else:
            everywhere.setdefault(f["scope"], []).append(r["lost_service_s"])
    if not per:
        return None
    zones = {}
    for z, by_scope in per.items():
        merged = {**everywhere, **by_scope}
        lost = sum(rates.scopes[s].events * _mean(v) for s, v in merged.items() if s in rates.scopes)
        zones[z] = {"expected_lost_s": round(lost, 6), "scopes": sorted(s for s in merged if s in rates.scopes)}
    worst = max(zones, key=lambda z: (zones[z]["expected_lost_s"], z))
    return {"zone": worst, **zones[worst],
            "availability": round(1 - zones[worst]["expected_lost_s"] / rates.period_s, 9), "zones": zones}


def verdict(entries: dict[str, dict[str, Any]], rates: Rates, runs: list[dict[str, Any]], avail: dict[str, Any],
            target: float, pm: dict[str, Any] | None, risk: float) -> dict[str, Any]:
    """The first word that holds, in :data:`VERDICTS` order, and every reason found."""
    found: dict[str, list[str]] = {w: [] for w in VERDICTS}
    multi = [r for r in runs if not r["pooled"]]
    for name, rate in rates.scopes.items():
        if rate.events == 0:
            continue
        e = entries.get(name)
        if e is None or not e["runs"]:
            inside = sorted({r["experiment"] for r in multi if name in r["scopes"]})
            only = f" (only inside {', '.join(inside)}, which is never pooled)" if inside else ""
            found[NOT_COVERED].append(f"{name}: no single-fault run of this scope in the suite{only}")
            continue
        if rate.duration_s is not None:
            if e["outage_tested_s"] is None:
                found[NOT_COVERED].append(f"{name}: a duration of {rate.duration_s:g} s is stated, but no run of it "
                                          "imposed an outage length to compare it with")
            elif rate.duration_s > e["outage_tested_s"]:
                found[NOT_COVERED].append(f"{name}: the stated duration {rate.duration_s:g} s exceeds the longest "
                                          f"outage tested ({e['outage_tested_s']:g} s)")
        if e["trials"] < MIN_TRIALS:
            left = f"; {len(e['not_counted'])} run(s) not counted" if e["not_counted"] else ""
            found[INSUFFICIENT_TRIALS].append(
                f"{name}: {e['trials']} trial(s) with a measured cost (need {MIN_TRIALS}){left}")
        for lb in e["lost_service_s"]["lower_bound"]:
            found[NOT_SUPPORTED].append(f"{name}: {lb['run']} {lb['why']}: its cost is only a lower bound")
    if pm is None or pm.get("value") is None:
        found[NOT_SUPPORTED].append("p_miss could not be computed: " + ((pm or {}).get("why") or "no cost measured"))
    elif pm["value"] > risk:
        found[NOT_SUPPORTED].append(f"p_miss {pm['value']:g} exceeds the risk {risk:g}")
    if avail["value"] is not None and avail["value"] < target:
        found[NOT_SUPPORTED].append(f"the expected availability {avail['value']:.6f} is below the target {target:g}")
    word = next((w for w in VERDICTS[:-1] if found[w]), SUPPORTED)
    return {"word": word, "reasons": [f"{w}: {r}" for w in VERDICTS[:-1] for r in found[w]]}


def assumptions(population: str) -> list[str]:
    out = [
        "events of different scopes, and of one scope, are independent and arrive as Poisson processes at the "
        "stated rates",
        "each event costs what the tested runs cost: measured at the load they ran at, for the outage length they "
        "imposed, over analysis windows of the length they had; a longer or busier event may cost more",
        "the cost counts failed requests as seconds of full outage at the test's request rate, net of the "
        "baseline's failure ratio before the injection",
        "events do not overlap (see overlap.probability): two at once may cost more than the sum",
        "untested causes (software and configuration errors, dependencies outside the rig, scopes with no rate) are "
        "not in the figures: the availability is an upper bound",
    ]
    if population == "affected":
        out.append("affected population: every event of a scope is charged in full to the users of one lost "
                   "domain, so the figure is that of a zone hit by every event (the worst case for any zone)")
    return out


def build(runs: list[dict[str, Any]], summaries: list[dict[str, Any]], rates: Rates, target: float, risk: float,
          population: str = "service", seed: int = 0, suite_dir: str = "", resamples: int = RESAMPLES,
          simulations: int = SIMULATIONS) -> dict[str, Any]:
    """The claim document from the runs' costs (:func:`run_cost`, same order as ``summaries``)."""
    import numpy as np

    if population not in POPULATIONS:
        raise UsageError(f"--population: one of {', '.join(POPULATIONS)}, got {population!r}")
    rng = np.random.default_rng([seed, 1])
    pooled = [(r, s) for r, s in zip(runs, summaries) if r["pooled"]]
    names = _distinct(r["scopes"][0] for r, _ in pooled)
    entries = {}
    for name in sorted(names):
        mine = [(r, s) for r, s in pooled if r["scopes"][0] == name]
        entries[name] = scope_entry(name, [r for r, _ in mine], [s for _, s in mine], rates.scopes.get(name),
                                    rng, resamples)
    period, budget = rates.period_s, (1 - target) * rates.period_s
    avail = availability(entries, rates)
    slo = availability(entries, rates, "slo_lost_service_s")
    unmeasurable: dict[str, str] = {}
    for key, a in (("availability", avail), ("slo_attainment", slo)):
        if a["value"] is None:
            unmeasurable[f"{key}.value"] = a["why_no_value"]
        if a["ci95"] is None:
            unmeasurable[f"{key}.ci95"] = a["why_no_value"] or a["why_no_interval"]
    expected = {}
    for name, e in entries.items():
        rate = rates.scopes.get(name)
        mean = e["lost_service_s"]["mean"]
        if rate is None:
            e["expected_lost_s"] = e["budget_share"] = e["max_events"] = e["max_events_alone"] = None
            unmeasurable[f"scopes.{name}.expected_lost_s"] = "the scope has no rate in RATES: not in the claim"
            continue
        if mean is None:
            e["expected_lost_s"] = e["budget_share"] = e["max_events"] = e["max_events_alone"] = None
            unmeasurable[f"scopes.{name}.lost_service_s.mean"] = "no run of this scope with a measured cost"
            continue
        e["expected_lost_s"] = round(rate.events * mean, 6)
        e["budget_share"] = round(rate.events * mean / budget, 6)
        expected[name] = rate.events * mean
    for name, e in entries.items():
        if name not in expected:
            continue
        mean = e["lost_service_s"]["mean"]
        others = sum(v for n, v in expected.items() if n != name)
        if mean <= 0:
            e["max_events"] = e["max_events_alone"] = None
            unmeasurable[f"scopes.{name}.max_events"] = ("its mean cost is not above the baseline's: no number of "
                                                         "such events misses the target, as measured")
        else:
            e["max_events"] = round(max(0.0, budget - others) / mean, 4)
            e["max_events_alone"] = round(budget / mean, 4)
    dominant = None
    if expected and max(expected.values()) > 0:
        d = max(expected, key=lambda n: expected[n])
        dominant = {"scope": d, "expected_lost_s": round(expected[d], 6), "budget_share": entries[d]["budget_share"]}
    else:
        unmeasurable["dominant_scope"] = "no scope with a rate costs more than its baseline"
    pm_costs = {n: (rates.scopes[n].events, entries[n]["lost_service_s"]["values"])
                for n in avail["scopes"] if rates.scopes[n].events > 0}
    if pm_costs:
        pm = p_miss(pm_costs, budget, seed, simulations)
        if avail["left_out"]:
            pm["left_out"] = avail["left_out"]
    else:
        pm = {"value": None, "why": "no scope with a rate has a measured cost"}
        unmeasurable["p_miss.value"] = pm["why"]
    wz = worst_zone([r for r, _ in pooled], rates) if population == "affected" else None
    if wz is None:
        unmeasurable["worst_zone"] = ("the service population has no zone: claim with --population affected"
                                      if population == "service"
                                      else "no counted run kept its requests' zones (behind lb every request is "
                                           "the service's)")
    if entries:
        unmeasurable["scopes.*.load.utilization"] = UTILIZATION_REASON
    for e in entries.values():
        e.pop("_boot")
        e.pop("_slo_boot")
    multi = [r for r in runs if not r["pooled"]]
    pooled_summaries = [s for r, s in pooled if r["counted"]]
    env = environment(pooled_summaries or summaries)
    word = verdict(entries, rates, runs, avail, target, pm if pm_costs else None, risk)
    return {
        "format_version": FORMAT_VERSION,
        "suite_dir": suite_dir,
        "population": population,
        "target": {"percent": round(target * 100, 6), "availability": target},
        "risk": risk, "seed": seed,
        "period": {"days": rates.period_days, "seconds": period},
        "rates": {"path": rates.path, "scopes": {n: r.to_dict() for n, r in rates.scopes.items()}},
        "verdict": word,
        "availability": {k: avail[k] for k in ("value", "ci95", "expected_lost_s", "scopes", "left_out")},
        "slo_attainment": {k: slo[k] for k in ("value", "ci95", "expected_lost_s", "scopes", "left_out")},
        "error_budget": {"seconds": round(budget, 6), "expected_lost_s": avail["expected_lost_s"],
                         "used": round(avail["expected_lost_s"] / budget, 6)},
        "dominant_scope": dominant,
        "p_miss": pm,
        "overlap": overlap(rates, entries),
        "worst_zone": wz,
        "scopes": entries,
        "multi_fault_runs": [{k: r[k] for k in ("experiment", "trial", "dir", "scopes", "verdict", "lost_service_s",
                                                "slo_lost_service_s", "lower_bound", "faults", "unmeasurable")}
                             for r in multi],
        "tested_without_rate": sorted(n for n in entries if n not in rates.scopes),
        "not_considered": [n for n in scopes.names() if n not in rates.scopes and n not in entries],
        "runs": runs,
        "environment": env,
        "warnings": [f"{n}: its runs were measured on different set-ups ("
                     + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in e["environment_mixed"].items())
                     + "): their mean mixes them; claim from a suite of one set-up"
                     for n, e in entries.items() if e["environment_mixed"]],
        "assumptions": assumptions(population),
        "derived_from_records": [
            "baseline: the population's measured requests that ended by the first injection (the summary's "
            "failed_before_first_fault also counts those in flight at it, which are the fault's, and no request count)",
            "slo_missed: the analysis (chaos.analysis) run again on records.ndjson with every request outside the "
            "run's SLO counted as failed (the summary counts no such requests)"],
        "unmeasurable": unmeasurable,
    }


def claim(suite_dir: str | Path, rates: Rates, target: float, risk: float, population: str = "service",
          seed: int = 0) -> dict[str, Any]:
    """Read the suite's runs and build the claim (nothing is written)."""
    runs, summaries = [], []
    for name, trial, d in find_runs(suite_dir):
        s = read_summary(d)
        runs.append(run_cost(name, trial, str(d), s, read_records(d), population))
        summaries.append(s)
    return build(runs, summaries, rates, target, risk, population, seed, str(suite_dir))
