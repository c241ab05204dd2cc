"""The soak's own figures, from its records (:class:`chaos.recording.records.RunRecords`) and its schedule.

**Observed lost service-seconds** (:func:`observed_lost_service_s`): the time-bucket integral of
:func:`chaos.analysis.lost_service.open_loop` over the measured requests, from the first injection (its
``inject_start`` mark, with the requests in flight at it, as the rig's figure starts) to the run's end
(:func:`chaos.analysis.run_end_ns`), the baseline taken off as a rate: the failed fraction of the measured
requests sent and ended before the first injection. ``total`` is that integral over the whole soak. A soak whose
client retried is counted in logical requests, as the claim it is checked against counts its runs
(:mod:`chaos.claim.counted`).
A fault's **window** runs from its ``inject_start`` mark to its heal's end (its ``heal_end`` mark, else its
``heal_start``; a fault with no heal of its own: its injection plus its occupancy bound ``heal_s``, or its heal
marks when sooner: the soak's closing rollback marks every fault healed at the soak's end) plus its
experiment's settle (``settle_s``), clipped to the run's end; a fault that should heal and has no heal mark
holds to the run's end. (Not *to the next injection*, the rig's window for one experiment: in a soak faults
of other scopes arrive while one heals, and that window would hide every overlap.) The soak is cut into
*stretches* by which scopes' windows are active: ``per_scope[s]`` is the integral over the stretches where
only scope ``s``'s windows are, ``overlapping`` over those where two scopes' or more are (each stretch
listed), ``quiet`` over those where none is. Each stretch is integrated on its own (buckets of the total's
width aligned on its start; a request belongs to the stretch it was sent in; the first one also takes the
requests in flight at the first injection), so the parts add up to ``total`` but for the buckets cut at the
stretches' edges. A part is the sum of its stretches' unclipped integrals, clipped at 0 at the end.
Instants are seconds since the first injection.

**The prediction** (:func:`prediction`): per injected scope, the claim's event model rebuilt from its
document (:func:`scope_model`), simulated with the injected counts fixed (:func:`chaos.claim.predict.simulate`,
``fixed_counts``), an unrecovered event costing the claim's floored ``unrecovered.cost_s`` (above the error
budget), at most the soak's duration. Its costs are the recovered runs' of the soak's own experiment, as measured
(when the claim has any; else every run of the scope): the soak injects that experiment's outage length, so none
is moved along a coverage fit. The prediction adds events' costs as if they never overlapped: the overlaps that
happened are listed as not modelled (``from.not_modelled``). Its mean and 90 % interval are for display: a mixture
of recovered costs and rare non-recovery costing more than the budget, its interval admits nearly anything. The
soak is judged by ``check`` (:mod:`chaos.soak.check`): per scope, its unrecovered count and its recovered events'
summed cost, each against the claim's posterior predictive."""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos import analysis
from chaos.analysis import lost_service as ls
from chaos.recording import records as rec
from chaos.claim import counted, predict
from chaos.claim.cost import run_name
from chaos.claim.rates import DAY_S, DEFAULT_UNRECOVERED_COST_S
from chaos.claim.unrecovered import Prior
from chaos.base.errors import UsageError
from chaos.soak.schedule import Schedule

NS = ls.NS
QUIET, OVERLAP = "quiet", "overlapping"


def _s(ns: int, t0: int) -> float:
    return round((ns - t0) / NS, 6)


def windows(records: rec.RunRecords, schedule: Schedule) -> list[dict[str, Any]]:
    """Each injected fault's window (see the module docstring), in injection order, in ns."""
    end = analysis.run_end_ns(records)
    by: dict[str, dict[str, int]] = {}
    scope_of: dict[str, str] = {}
    for m in records.marks:
        by.setdefault(m.fault_id, {}).setdefault(m.event, m.t_ns)
        scope_of[m.fault_id] = m.scope
    out = []
    for fid, ev in by.items():
        if rec.INJECT_START not in ev:
            continue
        f = schedule.faults.get(scope_of[fid])
        settle = int(round((f.settle_s if f else 0.0) * NS))
        healed = ev.get(rec.HEAL_END, ev.get(rec.HEAL_START))
        if f is not None and f.healed_by == "occupancy":  # the soak's closing rollback marks it healed at the end
            bound = ev[rec.INJECT_START] + int(round(f.heal_s * NS))
            healed = bound if healed is None else min(healed, bound)
        stop = end if healed is None else min(end, healed + settle)
        out.append({"fault_id": fid, "scope": scope_of[fid], "start_ns": ev[rec.INJECT_START], "end_ns": stop})
    return sorted(out, key=lambda w: (w["start_ns"], w["fault_id"]))


def stretches(wins: list[dict[str, Any]], t0_ns: int, end_ns: int) -> list[tuple[int, int, frozenset]]:
    """``[t0_ns, end_ns)`` cut where the set of scopes with an active window changes: (from, to, scopes)."""
    cuts = sorted({t0_ns, end_ns} | {min(max(t, t0_ns), end_ns) for w in wins for t in (w["start_ns"], w["end_ns"])})
    out: list[tuple[int, int, frozenset]] = []
    for a, b in zip(cuts, cuts[1:]):
        active = frozenset(w["scope"] for w in wins if w["start_ns"] <= a and w["end_ns"] >= b)
        if out and out[-1][2] == active:
            out[-1] = (out[-1][0], b, active)
        else:
            out.append((a, b, active))
    return out


def parts(records: rec.RunRecords, schedule: Schedule) -> dict[str, Any]:
    """The soak cut into stretches (:func:`stretches`), each integrated on its own: ``t0`` (the first injection),
    ``end``, ``frac`` (the baseline), ``whole`` (the total's integral), ``wins`` (:func:`windows`), ``stretches``
    (``(from_ns, to_ns, scopes, raw_s)``, unclipped); or ``unmeasurable`` (why none). On the request columns
    (:mod:`chaos.recording.request_columns`, in send order): a stretch's requests are a slice found by searching."""
    injects = [m.t_ns for m in records.marks if m.event == rec.INJECT_START]
    if (records.header.get("load") or {}).get("mode") == "closed":
        return {"unmeasurable": "a closed loop's soak: its figure is the open loop's time-bucket integral"}
    if not injects:
        return {"unmeasurable": "no fault was injected"}
    c = counted.counted(records).columns  # logical requests when its client retried, as the claim counts
    rows = np.flatnonzero(c.measure)
    sent, ended, bad = c.sent_ns[rows], c.end_ns[rows], ~c.ok[rows]
    t0, end = min(injects), analysis.run_end_ns(records, c)
    before = int(np.searchsorted(sent, t0, "left"))
    base = ended[:before] <= t0
    if not base.any():
        return {"unmeasurable": "no baseline: no measured request ended before the first injection"}
    frac = ls.base_fraction_columns(bad[:before][base])
    whole = ls.open_loop_columns(sent, ended, bad, t0, end, frac)
    wins = windows(records, schedule)
    cut = []
    for a, b, active in stretches(wins, t0, end):
        lo = 0 if a == t0 else int(np.searchsorted(sent, a, "left"))  # the first also takes those in flight at t0
        hi = int(np.searchsorted(sent, b, "left"))
        v = (ls.open_loop_columns(sent[lo:hi], ended[lo:hi], bad[lo:hi], a, b, frac, width=whole["width_s"])["raw_s"]
             if hi > lo else 0.0)
        cut.append((a, b, active, v))
    return {"t0": t0, "end": end, "frac": frac, "whole": whole, "wins": wins, "stretches": cut}


def observed_lost_service_s(records: rec.RunRecords, schedule: Schedule) -> dict[str, Any]:
    """The soak's observed lost service-seconds: total, per scope, overlapping, quiet (the module docstring)."""
    out: dict[str, Any] = {"total": None, "per_scope": {}, "overlapping": None, "quiet": None, "unmeasurable": {}}
    got = parts(records, schedule)
    if "unmeasurable" in got:
        out["unmeasurable"]["total"] = got["unmeasurable"]
        return out
    t0, end, whole, wins = got["t0"], got["end"], got["whole"], got["wins"]
    out.update(total=round(whole["value_s"], 6), base_fraction=got["frac"], width_s=whole["width_s"],
               span_s=round((end - t0) / NS, 6))
    out["windows"] = [{"fault_id": w["fault_id"], "scope": w["scope"], "from_s": _s(w["start_ns"], t0),
                       "to_s": _s(w["end_ns"], t0)} for w in wins]
    raw: dict[str, float] = {}
    overl: list[dict[str, Any]] = []
    for a, b, active, v in got["stretches"]:
        key = QUIET if not active else next(iter(active)) if len(active) == 1 else OVERLAP
        raw[key] = raw.get(key, 0.0) + v
        if key == OVERLAP:
            overl.append({"scopes": sorted(active), "from_s": _s(a, t0), "to_s": _s(b, t0),
                          "lost_s": round(max(0.0, v), 6)})
    out["per_scope"] = {k: round(max(0.0, v), 6) for k, v in sorted(raw.items()) if k not in (QUIET, OVERLAP)}
    for w in wins:
        out["per_scope"].setdefault(w["scope"], 0.0)
    out["overlapping"] = {"value_s": round(max(0.0, raw.get(OVERLAP, 0.0)), 6), "stretches": overl}
    out["quiet"] = round(max(0.0, raw.get(QUIET, 0.0)), 6)
    return out


def _prior(entry: dict[str, Any]) -> Prior:
    p = (entry.get("unrecovered") or {}).get("prior")
    if isinstance(p, dict) and p.get("a") is not None and p.get("b") is not None:
        return Prior(float(p["a"]), float(p["b"]), str(p.get("source") or ""))
    return Prior()


def unrecovered_cost_s(entry: dict[str, Any], rate: dict[str, Any]) -> float:
    """What an unrecovered event costs in the claim: its floored ``unrecovered.cost_s`` (above the error budget
    and every lower bound: :func:`chaos.claim.scope_entry.unrecovered_cost`), else the rate's stated cost."""
    floored = (entry.get("unrecovered") or {}).get("cost_s")
    return float(floored if floored is not None else rate.get("unrecovered_cost_s") or DEFAULT_UNRECOVERED_COST_S)


def scope_model(name: str, entry: dict[str, Any], rate: dict[str, Any], runs: list[dict[str, Any]] | None = None,
                cap_s: float | None = None, experiment: str | None = None) -> predict.ScopeModel:
    """A scope's event model from a claim *document* (its private fields dropped). Its costs: the recovered counted
    runs' (told from the document's ``runs``; without them ``lost_service_s.values``, which must then hold no lower
    bound), only those of ``experiment`` (the soak's, whose outage length it injects) when the claim has any, and
    the soak events the claim counted (``soak_events.values``; not on a fit's coverage). Its trials: ``unrecovered``
    (``runs`` of ``of``, every counted run of the scope, whatever its length, as the claim counts them), its prior
    the claim's. An unrecovered event costs the claim's floored ``unrecovered.cost_s`` (:func:`unrecovered_cost_s`),
    capped at ``cap_s``. The rate: point ``events`` or ``count`` + ``exposure_days``."""
    lower = {x["run"] for x in entry["lost_service_s"].get("lower_bound") or []}
    if runs is None:
        if lower:
            raise UsageError(f"claim document: scopes.{name}: its lower-bound runs cannot be told from its recovered "
                             "ones without the document's runs")
        values = [float(v) for v in entry["lost_service_s"]["values"]]
    else:
        mine = [r for r in runs if r.get("pooled") and r.get("counted") and (r.get("scopes") or [None])[0] == name
                and run_name(r) not in lower and not r.get("lower_bound") and r.get("lost_service_s") is not None]
        same = [r for r in mine if experiment is not None and r.get("experiment") == experiment]
        values = [float(r["lost_service_s"]) for r in (same or mine)]
    soak = entry.get("soak_events") or {}
    if (entry.get("coverage") or {}).get("by") != "fit":
        values += [float(v) for v in soak.get("values") or []]
    cost = unrecovered_cost_s(entry, rate)
    return predict.ScopeModel(
        name=name, values=tuple(values), n=int(entry["unrecovered"]["of"]),
        u=int(entry["unrecovered"]["runs"]), unrecovered_cost_s=cost if cap_s is None else min(cost, cap_s),
        events=rate.get("events"), count=rate.get("count"), exposure_days=rate.get("exposure_days"),
        prior=_prior(entry))


def claim_models(claim_doc: dict[str, Any], cap_s: float | None = None,
                 experiments: dict[str, str] | None = None) -> tuple[dict[str, predict.ScopeModel], dict[str, str]]:
    """Every scope of the claim with a rate and a counted run, as :func:`scope_model` (``experiments``: per scope,
    the soak's experiment); and the scopes left out, with why."""
    rates = (claim_doc.get("rates") or {}).get("scopes") or {}
    models, left_out = {}, {}
    for name, e in sorted((claim_doc.get("scopes") or {}).items()):
        if rates.get(name) is None:
            left_out[name] = "no rate in the claim's RATES"
        elif not e["unrecovered"]["of"]:
            left_out[name] = "no counted run of this scope in the claim"
        else:
            models[name] = scope_model(name, e, rates[name], claim_doc.get("runs"), cap_s,
                                       (experiments or {}).get(name))
    return models, left_out


def prediction(claim_doc: dict[str, Any], injected_counts: dict[str, int], soak_duration_s: float,
               periods: int = 20_000, seed: int = 0, observed_s: float | None = None,
               overlaps: list[dict[str, Any]] | None = None, experiments: dict[str, str] | None = None
               ) -> dict[str, Any]:
    """The claim's predictive distribution of the soak's lost seconds for the injected counts (its mean and 90 %
    interval, for display), and where the observed total falls in it (``observed_percentile``: information only;
    the soak is judged by :mod:`chaos.soak.check`, per scope and part, not by this mixture)."""
    counts = {s: int(k) for s, k in injected_counts.items() if k}
    every, why = claim_models(claim_doc, soak_duration_s, experiments)
    models = [every[n] for n in sorted(counts) if n in every]
    rated = (claim_doc.get("rates") or {}).get("scopes") or {}
    left_out = {n: why.get(n) or ("no rate in the claim's RATES" if n not in rated
                                  else "no counted run of this scope in the claim")
                for n in sorted(counts) if n not in every}
    frm = {"claim": claim_doc.get("suite_dir"), "population": claim_doc.get("population"),
           "scopes": {m.name: counts[m.name] for m in models}, "left_out": left_out, "periods": periods,
           "seed": seed, "unrecovered_cost_s": {m.name: m.unrecovered_cost_s for m in models},
           "not_modelled": [dict(o) for o in overlaps or []]}
    out = {"mean_s": None, "interval_90_s": None, "observed_percentile": None, "from": frm}
    if not models:
        frm["unmeasurable"] = "no injected scope has a model in the claim"
        return out
    loss = predict.simulate(models, soak_duration_s / DAY_S, periods, seed, fixed_counts=counts).loss
    lo, hi = predict.quantiles(loss, (0.05, 0.95))
    out.update(mean_s=round(float(loss.mean()), 6), interval_90_s=[round(lo, 6), round(hi, 6)])
    if left_out:
        frm["unmeasurable"] = ("the observed figure includes scopes the prediction leaves out: "
                               + ", ".join(left_out))
    elif observed_s is not None:
        out["observed_percentile"] = predict.percentile_of(observed_s, loss)
    return out


def injected_counts(records: rec.RunRecords) -> dict[str, int]:
    """Faults actually injected per scope (their ``inject_start`` marks)."""
    out: dict[str, int] = {}
    for m in records.marks:
        if m.event == rec.INJECT_START:
            out[m.scope] = out.get(m.scope, 0) + 1
    return out
