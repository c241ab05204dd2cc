"""The cost of one event: per run and fault, the population's lost service-seconds (:mod:`chaos.analysis.lost_service`)
from the run's records, net of its baseline, with whether the run counts as a trial of its scope.

- The fault's window and population are the summary's (``faults[i]``: injection, ``window_s``, the next
  fault's injection, the affected zones); the requests are ``records.ndjson``'s measured ones. Without
  records the cost is null, with the reason.
- The load's shape (the run header's ``load.mode``) picks the model: ``closed`` (``concurrency`` users) the
  failed requests' spans; any other the time-bucket integral by send instant.
- A run whose client retried (``load.retry``) is counted in **logical requests** (:mod:`chaos.claim.counted`): one
  fails only when its last attempt failed, and it spans from its first attempt's send to its final answer; its
  ``counted_in`` (the run's) and ``attempts`` (each fault's) say so. A run without retries has neither key.
- ``lost_service_s`` counts failed requests; ``slo_lost_service_s`` every request that did not meet the run's
  SLO (failed, or late), so it is never below it.
- The baseline: the population's measured requests that ended by the first injection (those in flight at it
  are the fault's).
- A run whose cost is only a lower bound (``lower_bound``): it never reached steady state in its window, its
  steady state could not be judged, it was stopped or did not finish, or most of its window had no request.
  The claim counts such a run as an *unrecovered* event (:mod:`chaos.claim.unrecovered`).
- A run that **never came back** (verdict ERROR after its fault was injected: a heal or a method step failed, it
  was aborted) counts as an unrecovered event (``never_came_back`` says why), its cost or none: never dropped.
- A run with no fault that finished (a fault-free baseline run) is not a trial, but every measured request of
  it is evidence of the background (``quiet``: :mod:`chaos.claim.background`).
- Not counted (``not_counted`` says why): no fault (the run failed before any injection: set-up, the baseline
  gate), several faults (reported on their own, never pooled), the fault not seen in effect, a fault injected
  into a baseline out of steady state (``baseline_gate.injected_anyway``), a cost that cannot be measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos import analysis, scopes
from chaos.analysis import figures, lost_service as ls
from chaos.claim import counted as counted_mod
from chaos.recording import records as rec, request_columns as rc

NS = analysis.NS
QUIET_REASON = "nothing was injected: experiment"  # a fault-free experiment that ran to its end (chaos.core.verdict)
POPULATIONS = ("service", "affected")


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _span_s(f: dict[str, Any], population: str) -> float | None:
    """How long the event kept the system from normal: the latest of the fault's heal, the population's
    steady state, control plane and capacity restored (:func:`chaos.analysis.figures.recovery_instants`: what
    overlapping events would share)."""
    vals = [f.get("heal_start_s"), *figures.recovery_instants(f, (population,))]
    vals = [v for v in vals if _number(v)]
    return max(vals) if vals else None


def outage_tested(f: dict[str, Any]) -> float | None:
    """How long the fault was imposed: from its injection to its heal's start; for an upgrade (a scope that
    replaces every replica) until every replica was replaced (``replacement.time_to_complete_s``)."""
    if scopes.get(f.get("scope")).replaces_every_replica:
        return _get(f, "replacement", "time_to_complete_s")
    return f.get("heal_start_s")


def _load(records: rec.RunRecords) -> dict[str, Any]:
    return records.header.get("load") or {}


def _in_zones(zone: rc.Coded, zones: set[str]) -> np.ndarray:
    """The requests whose zone is one of ``zones`` (None among them: those with no zone too)."""
    hit = zone.isin(zones)
    return hit | ~zone.known() if None in zones else hit


class _Run:
    """What every fault of a run reads of its requests: the columns (:mod:`chaos.recording.request_columns`), one row
    per request, or per logical request when the run's client retried (:mod:`chaos.claim.counted`, the one place
    that is chosen), which are measured, which failed, which missed the SLO."""

    def __init__(self, records: rec.RunRecords, slo: analysis.SLO, columns: rc.RequestColumns | None = None):
        self.counted = counted_mod.counted(records, columns)
        self.c = self.counted.columns
        self.measured = self.c.measure
        self.failed = ~self.c.ok
        self.missed = ~self.c.slo_met(slo)  # failed, or outside the SLO
        self.load = _load(records)


def fault_lost(records: rec.RunRecords, f: dict[str, Any], window_end_ns: int, zones: set[str] | None,
               first_inject_ns: int, slo: analysis.SLO, run: _Run | None = None) -> dict[str, Any]:
    """Lost service-seconds of one fault on one population, failed and outside the SLO, with the baseline; on
    the run's request columns (``run``: those of ``records``, made once for all its faults)."""
    run = run or _Run(records, slo)
    c = run.c
    sent, end = c.sent_ns, c.end_ns
    mine = run.measured if zones is None else run.measured & _in_zones(c.zone, zones)
    cut = f.get("window_cut_by")
    t0 = f["inject_ns"]
    hi = int(np.searchsorted(sent, window_end_ns, "left"))  # the columns are in send order: sent before the end
    window = mine[:hi] & (end[:hi] <= window_end_ns) if cut else mine[:hi]
    bi = int(np.searchsorted(sent, first_inject_ns, "left"))
    ended = end[:bi] <= first_inject_ns
    base, base_all = mine[:bi] & ended, run.measured[:bi] & ended
    first = int(np.argmax(run.measured)) if run.measured.any() else None
    start = first_inject_ns if first is None else int(sent[first])
    base_span_s = max(0, first_inject_ns - start) / NS
    in_window = window & ((sent[:hi] >= t0) | (end[:hi] > t0))
    closed = run.load.get("mode") == "closed"
    n_in = int(np.count_nonzero(in_window))
    n_base = int(np.count_nonzero(base))

    def count(mask: np.ndarray, bad: np.ndarray) -> int:
        return int(np.count_nonzero(mask & bad[:len(mask)]))

    out: dict[str, Any] = {
        "requests": n_in, "failed": count(in_window, run.failed), "slo_missed": count(in_window, run.missed),
        "baseline": {"requests": n_base, "failed": count(base, run.failed), "slo_missed": count(base, run.missed),
                     "span_s": round(base_span_s, 4)},
        "model": ls.CLOSED if closed else ls.OPEN}
    if run.counted.logical:  # requests counted are logical requests: the attempts sent for them besides
        out["attempts"] = run.counted.attempts_of(in_window)
    if not n_in:
        out["why"] = "no request of the population in the fault's window"
        return out
    if not n_base:
        out["why"] = "no baseline: no request of the population ended before the injection"
        return out

    def cols(mask: np.ndarray, bad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = np.flatnonzero(mask)
        return sent[rows], end[rows], bad[rows]

    if closed:
        # the population's users: its share of the users' busy time before the injection (a closed loop's
        # users take targets in turn, so a slower zone holds more of them at any instant than its requests say)
        busy = int((end[:bi][base] - sent[:bi][base]).sum())
        busy_all = int((end[:bi][base_all] - sent[:bi][base_all]).sum())
        users = float(run.load.get("concurrency") or 0) * (busy / busy_all if busy_all else 1.0)
        if users <= 0 or base_span_s <= 0:
            out["why"] = "a closed loop whose users (load.concurrency) or baseline span is not known"
            return out
        for key, bad in (("lost", run.failed), ("slo", run.missed)):
            share = ls.base_share_columns(*cols(base, bad), users, base_span_s)
            out[key] = ls.closed_loop_columns(*cols(in_window, bad), t0, window_end_ns, users, share)
    else:
        for key, bad in (("lost", run.failed), ("slo", run.missed)):
            frac = ls.base_fraction_columns(bad[:bi][base])
            out[key] = ls.open_loop_columns(*cols(window, bad), t0, window_end_ns, frac)
    return out


def fault_cost(f: dict[str, Any], population: str, lost: dict[str, Any] | None, window_end_ns: int | None,
               no_records: str | None = None) -> dict[str, Any]:
    """The cost of one fault of a run on ``population``, with its inputs (see the module docstring)."""
    pop = f.get(population) or {}
    unmeasurable: dict[str, str] = {}
    routed_blind = (population == "affected" and scopes.get(f.get("scope")).routed
                    and pop.get("basis") == "service")
    value = slo_value = None
    model = None
    if routed_blind:
        why = (f"the affected population is the service here ({pop.get('why')}): the lost domain's users cannot be "
               "told apart; run it behind zonal-lb or direct to claim for them")
        unmeasurable["lost_service_s"] = unmeasurable["slo_lost_service_s"] = why
    elif lost is None:
        unmeasurable["lost_service_s"] = unmeasurable["slo_lost_service_s"] = no_records or "no records"
    elif lost.get("why"):
        unmeasurable["lost_service_s"] = unmeasurable["slo_lost_service_s"] = lost["why"]
    else:
        value, slo_value, model = lost["lost"]["value_s"], lost["slo"]["value_s"], lost["lost"]
    recovered = pop.get("recovered")
    lower = []
    if recovered is False:
        lower.append("never reached steady state in its window")
    elif recovered is None and not f.get("window_cut_by"):
        lower.append("steady state could not be judged ("
                     + ((f.get("unmeasurable") or {}).get(f"{population}.recovered") or "no reason recorded") + ")")
    if model and model.get("mostly_empty"):
        lower.append(f"{model['empty_buckets']} of its {model['buckets']} buckets had no request")
    outage = outage_tested(f)
    if outage is None:
        upgrade = scopes.get(f.get("scope")).replaces_every_replica
        unmeasurable["outage_tested_s"] = (
            f"the {f.get('scope')} upgrade did not complete in its window" if upgrade
            else f"the {f.get('scope')} fault has no heal: it lasts until the system replaces what it hit, no outage "
                 "length was imposed")
    window_s = f.get("window_s")
    requests = None if lost is None else lost.get("requests")
    return {
        "fault_id": f.get("fault_id"), "scope": f.get("scope"), "zones": pop.get("zones"),
        "window_s": window_s, "window_cut_by": f.get("window_cut_by"),
        "requests": requests, "failed": None if lost is None else lost.get("failed"),
        "slo_missed": None if lost is None else lost.get("slo_missed"),
        "rate_rps": round(requests / window_s, 4) if requests and window_s else None,
        "baseline": None if lost is None else lost.get("baseline"),
        "model": _model_view(model, None if lost is None else lost.get("model")),
        "lost_service_s": None if value is None else round(value, 6),
        "slo_lost_service_s": None if slo_value is None else round(slo_value, 6),
        "clipped_from": None if model is None or model["clipped_from"] is None else round(model["clipped_from"], 6),
        "recovered": recovered, "lower_bound": "; ".join(lower) or None,
        "outage_tested_s": outage, "span_s": _span_s(f, population),
        "unmeasurable": unmeasurable,
        **({} if lost is None or "attempts" not in lost else {"attempts": lost["attempts"]}),
    }


def _model_view(m: dict[str, Any] | None, name: str | None) -> dict[str, Any] | None:
    if name is None:
        return None
    if m is None:
        return {"name": name}
    keep = ("width_s", "buckets", "empty_buckets", "span_s") if name == ls.OPEN else ("users", "lost_user_s", "span_s")
    return {"name": name, **{k: m[k] for k in keep}}


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(sum(values), 6)


def run_cost(name: str, trial: int | None, run_dir: str, summary: dict[str, Any], records: rec.RunRecords | None,
             population: str) -> dict[str, Any]:
    """One run's cost on ``population``: per fault, and in all; whether it is a trial of its scope."""
    faults = summary.get("faults") or []
    no_records = None
    if records is None:
        no_records = ("derived from records.ndjson, which this run does not have (the summary holds neither the "
                      "requests' send instants nor a baseline)")
    slo = analysis.Definitions.from_dict(summary.get("definitions")).slo
    costs = []
    run = _Run(records, slo) if records is not None and faults else None
    for i, f in enumerate(faults):
        end_ns = (faults[i + 1]["inject_ns"] if i + 1 < len(faults)
                  else f["inject_ns"] + int(round((f.get("window_s") or 0) * NS)))
        zones = (f.get(population) or {}).get("zones") if population == "affected" else None
        lost = None
        if records is not None:
            lost = fault_lost(records, f, end_ns, None if zones is None else set(zones), faults[0]["inject_ns"], slo,
                              run)
        costs.append(fault_cost(f, population, lost, end_ns, no_records))
    word = (summary.get("verdict") or {}).get("word")
    out = {
        "experiment": name, "trial": trial, "dir": run_dir, "run_id": summary.get("run_id"),
        "title": summary.get("experiment"), "scopes": [f.get("scope") for f in faults],
        "pooled": len(faults) == 1, "verdict": word, "partial": bool(summary.get("partial")),
        "stop_reason": summary.get("stop_reason"), "note": summary.get("note"),
        "faults": costs,
        "lost_service_s": _sum([c["lost_service_s"] for c in costs]) if costs else None,
        "slo_lost_service_s": _sum([c["slo_lost_service_s"] for c in costs]) if costs else None,
        "clipped": any(c["clipped_from"] is not None for c in costs),
        "outage_tested_s": costs[-1]["outage_tested_s"] if len(costs) == 1 else None,
        "span_s": max((c["span_s"] for c in costs if c["span_s"] is not None), default=None),
        "load_mode": (_load(records).get("mode") or "open") if records is not None else None,
    }
    counted_in = None if run is None else run.counted.counted_in()
    if counted_in is not None:  # its client retried: every request figure above is of logical requests
        out["counted_in"] = counted_in
    lower = [c["lower_bound"] for c in costs[-1:] if c["lower_bound"]]  # the incident: the last fault's window
    if out["stop_reason"]:
        lower.append(f"stopped early: {out['stop_reason']}")
    if out["partial"]:
        lower.append("the run did not finish")
    out["lower_bound"] = "; ".join(lower) or None
    unm: dict[str, str] = {}
    for c in costs:
        for k, v in c["unmeasurable"].items():
            unm.setdefault(k, v)
    out["unmeasurable"] = {k: v for k, v in unm.items() if k in ("lost_service_s", "slo_lost_service_s")
                           or (k == "outage_tested_s" and len(costs) == 1)}
    gate = summary.get("baseline_gate") or {}
    why_not = None
    if not faults:
        why_not = "no fault in the run (it failed before any injection: set-up, or the baseline gate)"
    elif len(faults) > 1:
        why_not = f"a run of {len(faults)} faults ({', '.join(out['scopes'])}): reported on its own, never pooled"
    elif (faults[0].get("effect") or {}).get("verified") is False:
        why_not = "its fault was not seen in effect"
    elif gate.get("injected_anyway") and gate.get("steady") is False:
        why_not = ("its fault was injected into a baseline out of steady state (injected anyway: "
                   + (gate.get("reason") or "no reason recorded") + ")")
    never_back = None
    if why_not is None and word == "ERROR":  # injected, then it never came back: an unrecovered event, not dropped
        never_back = ("never came back: its verdict is ERROR after the injection ("
                      + "; ".join((summary.get("verdict") or {}).get("reasons") or ["no reason recorded"]) + ")")
        out["lower_bound"] = "; ".join(x for x in (never_back, out["lower_bound"]) if x)
    out["never_came_back"] = never_back
    out["quiet"] = None  # a run with no fault that finished: all its measured requests are background evidence
    reasons = (summary.get("verdict") or {}).get("reasons") or []
    fault_free = word == "ERROR" and reasons and all(x.startswith(QUIET_REASON) for x in reasons)
    if not faults and records is not None and fault_free and not out["partial"] and not out["stop_reason"]:
        q = _Run(records, slo)
        out["quiet"] = {"requests": int(np.count_nonzero(q.measured)),
                        "failed": int(np.count_nonzero(q.measured & q.failed)),
                        "slo_missed": int(np.count_nonzero(q.measured & q.missed))}
        if q.counted.logical:
            out["counted_in"] = q.counted.counted_in()
    out["measurement"] = why_not is None and never_back is None  # the run measured its fault (its outage tested)
    if why_not is None and never_back is None and out["lost_service_s"] is None:
        why_not = "its cost could not be measured: " + out["unmeasurable"].get("lost_service_s", "no reason")
    out["counted"] = why_not is None
    out["not_counted"] = why_not
    return out


def run_name(r: dict[str, Any]) -> str:
    return r["experiment"] + (f"/trial-{r['trial']}" if r["trial"] is not None else "")
