"""The claim document: every figure of :mod:`chaos.claim` put together (``claim.json``'s shape, its schema in
``chaos/schemas/claim.schema.json``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from chaos import scopes
from chaos.claim import background, decide, judgement, predict
from chaos.claim.credible import DEFAULT_CREDIBILITY
from chaos.claim.cost import POPULATIONS
from chaos.claim.rates import Rates
from chaos.claim.scope_entry import environment, mean, model, point_cost, scope_entry
from chaos.base.errors import UsageError

FORMAT_VERSION = 3
SIMULATIONS = 100_000
UTILIZATION_REASON = ("not measured: the rig records the offered load and every request, not how busy the "
                      "replicas were")
EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def overlap(rates: Rates, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Roughly the chance that two events overlap in a period. The expected number of overlaps of a pair
    of scopes (a scope with itself too) is rate x rate x (duration + duration) / period (for a scope with
    itself: events^2 x duration / period), at the rates' means; events arriving as Poisson processes, the
    chance of at least one overlap is 1 - exp(-expected), per pair and for the sum over pairs. A duration is
    the stated ``duration_s``, else the longest span measured (heal, steady state, capacity and control
    plane restored); a scope with neither is left out, named."""
    durs: dict[str, tuple[float, str]] = {}
    left_out = {}
    ev = {n: r.mean_events(rates.period_days) for n, r in rates.rated().items()}
    for name, rate in rates.rated().items():
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
            m = ev[a] * ev[a] * durs[a][0] / T if a == b else ev[a] * ev[b] * (durs[a][0] + durs[b][0]) / T
            total += m
            pairs.append({"scopes": [a, b], "expected": round(m, 9), "probability": round(-math.expm1(-m), 9)})
    pairs.sort(key=lambda x: -x["expected"])
    return {"probability": round(-math.expm1(-total), 9), "expected": round(total, 9), "pairs": pairs[:10],
            "durations_s": {n: {"value": d, "from": src} for n, (d, src) in durs.items()}, "left_out": left_out}


def worst_zone(runs: list[dict[str, Any]], rates: Rates) -> dict[str, Any] | None:
    """Affected population only: per zone, sum over scopes (mean events x mean cost of that scope's counted
    runs that hit the zone, or of all its runs when its events hit every zone's users); the largest."""
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
        lost = sum(rates.scopes[s].mean_events(rates.period_days) * mean(v) for s, v in merged.items()
                   if s in rates.scopes)
        zones[z] = {"expected_lost_s": round(lost, 6), "scopes": sorted(s for s in merged if s in rates.scopes)}
    worst = max(zones, key=lambda z: (zones[z]["expected_lost_s"], z))
    return {"zone": worst, **zones[worst],
            "availability": round(1 - zones[worst]["expected_lost_s"] / rates.period_s, 9), "zones": zones}


RETRIES_ASSUMPTION = (
    "a run whose client retried (load.retry) is counted in logical requests (chaos.claim.counted): a logical request "
    "fails only when its last attempt failed, and it spans from its first attempt's send to its final answer, so "
    "its cost is what the users saw with those retries; a different retry policy would cost differently")


def assumptions(population: str, retried: bool = False) -> list[str]:
    out = [
        "events of different scopes, and of one scope, are independent and arrive as Poisson processes; a point "
        "rate is taken as exact, an observed history's rate is uncertain (Gamma posterior, Jeffreys prior)",
        "a recovered event costs a draw of the scope's cost distribution, unknown and drawn from its Dirichlet-process "
        "posterior (concentration 1, a log-normal base measure centred on the tested costs, its spread pooled across "
        "scopes: chaos.claim.cost_model), so costs never seen can be drawn; the tested costs were measured at the "
        "load they ran at, for the outage length they imposed (or moved along the fitted line within the lengths "
        "tested)",
        "an event is unrecovered with the scope's unrecovered share, unknown: Beta(a + u, b + n - u) with Jeffreys' "
        "prior (a = b = 0.5) unless RATES gives a fleet history (prior_unrecovered) or --pool-scopes pools the "
        "scopes (a hierarchical Beta); runs that never came back count as unrecovered; an unrecovered event costs "
        "the stated unrecovered_cost_s, and always more than the whole error budget",
        "the background (requests failing with no fault) is charged to every period: the baselines' failed share, "
        "pooled over the runs, times the period",
        "supported means P(P(miss | theta) <= risk) >= the required credibility: the unknowns (rates, shares, cost "
        "distributions, background) drawn in an outer loop, the events of a period in an inner one "
        "(chaos.claim.credible)",
        "a run's cost is its population's lost service-seconds net of the baseline before the injection: a "
        "time-bucket integral of the failed fraction by send instant for an open loop, the failed requests' "
        "spans over the users for a closed one (chaos.analysis.lost_service)",
        "events do not overlap (see overlap.probability): two at once may cost more than the sum",
        "untested causes (software and configuration errors, dependencies outside the rig, scopes with no rate) are "
        "not in the figures: the availability is an upper bound",
    ]
    if retried:
        out.append(RETRIES_ASSUMPTION)
    if population == "affected":
        out.append("affected population: every event of a scope is charged in full to the users of one lost "
                   "domain, so the figure is that of a zone hit by every event (the worst case for any zone)")
    return out


def experiment_for(scope: str, entry: dict[str, Any] | None) -> str:
    """The experiment file that tests ``scope``: the one its runs came from, else a shipped one of its scope."""
    import json

    names = (entry or {}).get("experiments") or []
    for n in names:
        if (EXPERIMENTS / f"{n}.json").is_file():
            return f"experiments/{n}.json"
    for p in sorted(EXPERIMENTS.glob("*.json"), key=lambda p: (p.name.startswith("kuberay-"), p.name)):
        try:
            ext = json.loads(p.read_text()).get("extensions") or []
        except (OSError, ValueError):
            continue
        if any(isinstance(e, dict) and e.get("scope") == scope for e in ext) and "no-ft" not in p.name:
            return f"experiments/{p.name}"
    return f"<an experiment of scope {scope}>"


def _point(entries: dict[str, dict[str, Any]], rates: Rates, figure: str) -> dict[str, Any]:
    """The plug-in figure: 1 - sum(mean events x mean cost) / period over the rated scopes with a cost (the
    costs of the runs the stated length is covered by: :func:`chaos.claim.scope_entry.point_cost`)."""
    included, left_out, lost = [], {}, 0.0
    for name, rate in rates.rated().items():
        e = entries.get(name)
        m = None if e is None else point_cost(e, rate, figure)
        if m is None:
            left_out[name] = ("no single-fault run of this scope" if e is None or not e["runs"]
                              else "no run of this scope with a measured cost")
            continue
        included.append(name)
        lost += rate.mean_events(rates.period_days) * m
    return {"point": round(1 - lost / rates.period_s, 9) if included else None, "point_lost_s": round(lost, 6),
            "scopes": included, "left_out": left_out}


def background_warning(bg, credibility: float, period_s: float, budget_s: float) -> list[str]:
    """A line when the background alone, at the required credibility, costs a tenth of the budget or more."""
    if bg is None:
        return []
    share = float(np.quantile(bg.draw(200_000, 0), credibility)) * period_s / budget_s
    if share < 0.1:
        return []
    return [f"background: {bg.failed} of {bg.requests} baseline requests failed; at credibility {credibility:g} "
            f"the background may cost {share * 100:.3g} % of the budget: longer baselines, or a fault-free run, "
            "narrow it"]


def build(runs: list[dict[str, Any]], summaries: list[dict[str, Any]], rates: Rates, target: float, risk: float,
          population: str = "service", seed: int = 0, suite_dir: str = "", simulations: int = SIMULATIONS,
          slo_target: float | None = None, search_periods: int = decide.SEARCH_PERIODS,
          credibility: float = DEFAULT_CREDIBILITY, pool: bool = False,
          soak_events: dict[str, dict[str, Any]] | None = None,
          soak_quiet: dict[str, int] | None = None) -> dict[str, Any]:
    """The claim document from the runs' costs (:func:`chaos.claim.cost.run_cost`, in ``summaries``' order);
    ``soak_events``: per scope, a soak's events counted as trials (``recovered``, ``unrecovered``, ``values``:
    the recovered ones' costs where measured apart: :mod:`chaos.soak.check`)."""
    if population not in POPULATIONS:
        raise UsageError(f"--population: one of {', '.join(POPULATIONS)}, got {population!r}")
    goal = decide.Goal(rates.period_days, target, risk, slo_target, credibility, pool)
    pooled = [(r, s) for r, s in zip(runs, summaries) if r["pooled"]]
    entries = {}
    for name in sorted({r["scopes"][0] for r, _ in pooled}):
        mine = [(r, s) for r, s in pooled if r["scopes"][0] == name]
        entries[name] = scope_entry(name, [r for r, _ in mine], [s for _, s in mine], rates.scopes.get(name))
    unmeasurable: dict[str, str] = {}
    budget = (1 - target) * rates.period_s
    slo_budget = (1 - (slo_target if slo_target is not None else target)) * rates.period_s
    not_covered, models, slo_models = [], [], []
    uncovered: list[tuple[str, str]] = []  # (scope, why) for the plan
    multi = [r for r in runs if not r["pooled"]]
    for name, rate in rates.rated().items():
        e = entries.get(name)
        if e is None or not e["runs"]:
            inside = sorted({r["experiment"] for r in multi if name in r["scopes"]})
            only = f" (only inside {', '.join(inside)}, which is never pooled)" if inside else ""
            not_covered.append(f"{name}: no single-fault run of this scope in the suite{only}")
            uncovered.append((name, "no single-fault run of this scope: run its experiment"))
            continue
        soak = (soak_events or {}).get(name) or {}
        extra = (int(soak.get("recovered") or 0), int(soak.get("unrecovered") or 0))
        e["_soak_values"] = soak.get("values") or ()
        e["soak_events"] = None if not soak else {"recovered": extra[0], "unrecovered": extra[1],
                                                   "values": list(e["_soak_values"]), "from": soak.get("from")}
        m = model(e, rate, budget, extra_trials=extra)
        e["unrecovered"]["cost_s"] = None if m is None else m.unrecovered_cost_s
        if m is not None:
            e["unrecovered"].update(prior=m.prior.to_dict(), runs=m.u, of=m.n,
                                    share_mean=round((m.prior.a + m.u) / (m.prior.a + m.prior.b + m.n), 6))
        if m is None:
            not_covered.append(f"{name}: no run of this scope with a measured cost ("
                               + "; ".join(f"{x['run']}: {x['why']}" for x in e["not_counted"]) + ")")
            uncovered.append((name, "no run of this scope with a measured cost"))
            continue
        if e["coverage"]["covered"] is False:
            not_covered.append(f"{name}: {e['coverage']['why']}")
            uncovered.append((name, f"test the stated {rate.duration_s:g} s outage: set the fault's outage to at "
                                    f"least that in a copy of the experiment, or state the length tested"))
            continue
        models.append(m)
        sm = model(e, rate, slo_budget, "slo_lost_service_s", extra_trials=extra)
        if sm is not None:
            slo_models.append(sm)
    period_s = rates.period_s
    point, slo_point = _point(entries, rates, "lost_service_s"), _point(entries, rates, "slo_lost_service_s")
    avail = slo = None
    needed = judged = None
    evidence_runs = runs + ([{"quiet": soak_quiet}] if soak_quiet else [])  # a soak's quiet requests count too
    bg, bg_runs = background.pooled(evidence_runs)
    slo_bg, _ = background.pooled(evidence_runs, "slo_missed")
    plan_rows: list[dict[str, Any]] = []
    if models:
        bg_s = None if bg is None else bg.draw(simulations, seed) * period_s
        draws = predict.simulate(models, rates.period_days, simulations, seed, background_s=bg_s, pool=pool)
        avail = predict.figure(draws.loss, period_s, target)
        slo_bg_s = None if slo_bg is None else slo_bg.draw(simulations, seed) * period_s
        slo_draws = predict.simulate(slo_models, rates.period_days, simulations, seed, background_s=slo_bg_s,
                                     pool=pool)
        slo = predict.figure(slo_draws.loss, period_s, slo_target if slo_target is not None else target)
        for name, x in draws.expected.items():
            lo, hi = predict.quantiles(x, (0.05, 0.95))
            e = entries[name]
            e["expected_lost_s"] = {"mean": round(float(x.mean()), 6), "interval90": [round(lo, 6), round(hi, 6)]}
            e["budget_share"] = round(float(x.mean()) / ((1 - target) * period_s), 6)
        judged = judgement.judgement(models, slo_models, goal, seed, bg, slo_bg)
        needed = judged["needed"]
    else:
        unmeasurable["availability.mean"] = unmeasurable["slo_attainment.mean"] = (
            "no rated scope has a covered, measured cost: nothing to predict from")
        unmeasurable["credibility"] = "nothing was predicted"
    suite = suite_dir or "SUITE_DIR"
    plan_rows = decide.plan(models, rates.period_days, seed,
                            lambda s, k: (f"availproof run {experiment_for(s, entries.get(s))} --trials {k} "
                                          f"--out {suite}/{s}-more"),
                            (needed or {}).get("extra"), search_periods, uncovered)
    for name, e in entries.items():
        if "expected_lost_s" not in e:
            e["expected_lost_s"] = e["budget_share"] = None
            unmeasurable[f"scopes.{name}.expected_lost_s"] = (
                "the scope has no rate in RATES: not in the claim" if name not in rates.scopes
                else "not in the prediction: " + next((r for r in not_covered if r.startswith(name + ":")),
                                                      "no measured cost"))
    expected = {n: e["expected_lost_s"]["mean"] for n, e in entries.items() if e["expected_lost_s"]}
    dominant = None
    if expected and max(expected.values()) > 0:
        d = max(expected, key=lambda n: expected[n])
        dominant = {"scope": d, "expected_lost_s": expected[d], "budget_share": entries[d]["budget_share"]}
    else:
        unmeasurable["dominant_scope"] = "no scope in the prediction costs more than its baseline"
    wz = worst_zone([r for r, _ in pooled], rates) if population == "affected" else None
    if wz is None:
        unmeasurable["worst_zone"] = ("the service population has no zone: claim with --population affected"
                                      if population == "service"
                                      else "no counted run kept its requests' zones (behind lb every request is "
                                           "the service's)")
    if entries:
        unmeasurable["scopes.*.load.utilization"] = UTILIZATION_REASON
    for e in entries.values():
        e.pop("_counted")
        e.pop("_use")
        e.pop("_soak_values", None)
        e.setdefault("soak_events", None)
    word = decide.verdict(not_covered, None if judged is None else judged["judged"], goal,
                          None if judged is None else judged["optimistic"], needed)
    if needed is None and word["word"] == decide.NOT_SUPPORTED:
        unmeasurable["trials_needed"] = "not searched: not even the optimistic end of more trials would support it"
    elif needed is None:
        unmeasurable["trials_needed"] = f"not searched: the claim is {word['word']} as it is" if avail else \
            "not searched: nothing was predicted"
    from chaos.claim import calibrate  # the shipped table's row nearest this claim (docs/claim.md)

    oc, oc_why = calibrate.claim_row(models, rates)
    if oc is None:
        unmeasurable["operating_characteristic"] = oc_why
    pooled_summaries = [s for r, s in pooled if r["counted"]]
    sims = {"periods": simulations, "seed": seed, "search_periods": search_periods,
            "search_draws": [decide.SEARCH_OUTER, decide.SEARCH_INNER]}
    return {
        "format_version": FORMAT_VERSION,
        "suite_dir": suite_dir,
        "population": population,
        "target": {"percent": round(target * 100, 6), "availability": target,
                   "slo_percent": None if slo_target is None else round(slo_target * 100, 6)},
        "risk": risk, "seed": seed, "simulation": sims,
        "period": {"days": rates.period_days, "seconds": period_s},
        "rates": {"path": rates.path,
                  "scopes": {n: r.to_dict(rates.period_days) for n, r in rates.scopes.items()}},
        "verdict": word,
        "credibility": None if judged is None else judgement.credibility_block(judged, goal, models),
        "background": background.row(bg, bg_runs, period_s, budget, seed),
        "operating_characteristic": oc,
        "trials_needed": needed,
        "plan": plan_rows,
        "availability": {**(avail or {}), **point},
        "slo_attainment": {**(slo or {}), **slo_point},
        "error_budget": {"seconds": round(budget, 6),
                         "expected_lost_s": None if avail is None else avail["lost_s"]["mean"],
                         "used": None if avail is None else round(avail["lost_s"]["mean"] / budget, 6)},
        "dominant_scope": dominant,
        "overlap": overlap(rates, entries),
        "worst_zone": wz,
        "scopes": entries,
        "multi_fault_runs": [{k: r[k] for k in ("experiment", "trial", "dir", "scopes", "verdict", "lost_service_s",
                                                "slo_lost_service_s", "lower_bound", "faults", "unmeasurable")}
                             for r in multi],
        "tested_without_rate": sorted(n for n in entries if n not in rates.scopes),
        "not_considered": [n for n in scopes.names() if n not in rates.scopes and n not in entries],
        "runs": runs,
        "environment": environment(pooled_summaries or summaries),
        "warnings": [f"{n}: its runs were measured on different set-ups ("
                     + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in e["environment_mixed"].items())
                     + "): their costs mix them; claim from a suite of one set-up"
                     for n, e in entries.items() if e["environment_mixed"]]
        + [f"{n}: {len(e['lost_service_s']['clipped'])} run(s) lost less than their baseline: clipped at 0 ("
           + ", ".join(e["lost_service_s"]["clipped"]) + ")" for n, e in entries.items()
           if e["lost_service_s"]["clipped"]]
        + [f"{n}: its costs pool runs of different loads ("
           + "; ".join(", ".join(f"{k} {v}" for k, v in o.items() if v is not None) for o in e["load"]["offered"])
           + "): a cost depends on the load it was measured at" for n, e in entries.items()
           if len(e["load"]["offered"]) > 1]
        + [f"{n}: its costs pool runs with and without client retries ({e['counted_in']['statement']}): retries "
           "hide failures, so a cost depends on the policy it was measured with" for n, e in entries.items()
           if e.get("counted_in") and e["counted_in"]["runs"] < e["counted_in"]["of"]]
        + background_warning(bg, credibility, period_s, budget),
        "assumptions": assumptions(population, any(r.get("counted_in") for r in runs)),
        "unmeasurable": unmeasurable,
    }
