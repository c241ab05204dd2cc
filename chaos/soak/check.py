"""The soak checked against the claim, per scope and in two parts, as posterior predictive p-values (Gelman, Meng
& Stern 1996): could the claim's model of a scope have produced what the soak saw of it?

**What is observed**, per scope ``s`` (:func:`observed_events`): its injected events (``inject_start`` marks), each
- *recovered*: its population (``service`` or ``affected``) reached steady state in its analysis window
  (the summary's ``faults[i][population].recovered`` true: :mod:`chaos.analysis`);
- *unrecovered*: it did not, in a window at least as long as its experiment's own (its heal, or occupancy bound,
  plus its recovery window);
- *unjudged*: its recovery could not be judged (null, with the analysis' reason), or the next injection cut its
  window before its own recovery window ended while it had not yet recovered. Left out of both parts, and said.
An event's *cost* is the lost service-seconds (:func:`chaos.soak.figures.parts`) of the stretches of its own
window (:func:`chaos.soak.figures.windows`) where only its scope's windows are active. The stretches where two
scopes' windows are active (``overlapping_s``), and the quiet ones between windows (``quiet_s``, each given to the
scope whose window starts where it ends: requests sent just before an injection and broken by it), are reported
apart and **not** compared: the claim models neither. An event whose window meets another scope's is
``overlapped``: its cost leaves those stretches out.

**(a) The count.** Of the ``m`` judged events, ``u`` did not recover. The claim's unrecovered share ``q`` has the
posterior Beta(``A``, ``B``) = Beta(``prior.a + u_c``, ``prior.b + n_c - u_c``) (its document's ``unrecovered``:
``runs`` ``u_c`` of ``of`` ``n_c``, ``prior``); the predictive of ``U`` is Beta-Binomial(``m``, ``A``, ``B``),
exactly (:func:`beta_binomial_pmf`). ``p_upper`` = P(``U >= u``): more non-recovery than the claim said, the
verdict's tail; ``p_lower`` = P(``U <= u``) is reported beside it.

**(b) The recovered cost.** The summed cost of the ``k`` recovered events against the claim's prediction for exactly
``k`` recovered events: ``theta`` drawn from the claim's model of its scopes (:func:`chaos.soak.figures.claim_models`:
the costs of the soak's own experiment's recovered runs, the claim's prior and floored unrecovered cost;
:func:`chaos.claim.theta.draw`, the base measure's spread pooled across the claim's scopes as the claim pools it),
then ``k`` costs summed from each outer draw's ``F`` (:func:`chaos.claim.theta.recovered_sums`). Two-sided mid-p:
``2 min(P(S > obs) + P(S = obs) / 2, P(S < obs) + P(S = obs) / 2)``, at most 1. Only the recovered events whose
cost was measured whole and alone are compared (``k`` of them): an event whose window meets another of its scope's
is not told apart, one that meets another scope's is ``overlapped``; with none left the part is null with why. The
claim of the ``affected`` population has no cost here: the soak's figures are the service's.

A part is ``surprising`` when its p-value is below :data:`ALPHA`, else ``consistent``; the soak is ``surprising``
when any part is (named), ``consistent`` when at least one part was compared and none is, null when none could be.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from chaos import analysis
from chaos.recording import records as rec, request_columns as rc
from chaos.claim import theta as th
from chaos.base.errors import UsageError
from chaos.soak import figures
from chaos.soak.schedule import Schedule

ALPHA = 0.05
OUTER, INNER = 4000, 5  # theta draws x event draws per theta: 20 000 predicted sums per scope
RECOVERED, UNRECOVERED, UNJUDGED = "recovered", "unrecovered", "unjudged"
EXCLUDED_NOTE = ("overlapping and quiet stretches are not in the comparison: the claim models events one at a time, "
                 "and a quiet stretch belongs to no event's window")


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6)


# ---------------------------------------------------------------- the Beta-Binomial count
def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_binomial_pmf(j: int, m: int, a: float, b: float) -> float:
    """P(``U = j``) for ``U`` ~ Binomial(``m``, ``q``), ``q`` ~ Beta(``a``, ``b``)."""
    if j < 0 or j > m:
        return 0.0
    return math.comb(m, j) * math.exp(_log_beta(j + a, m - j + b) - _log_beta(a, b))


def count_part(m: int, u: int, a: float, b: float) -> dict[str, Any]:
    """Part (a): ``u`` unrecovered of ``m`` judged events against Beta-Binomial(``m``, ``a``, ``b``)."""
    pmf = [beta_binomial_pmf(j, m, a, b) for j in range(m + 1)]
    p_upper = min(1.0, sum(pmf[u:]))
    p_lower = min(1.0, sum(pmf[:u + 1]))
    out = {"observed": u, "of": m, "predicted_mean": _r(m * a / (a + b)), "posterior": {"a": a, "b": b},
           "p_upper": _r(p_upper), "p_lower": _r(p_lower),
           "verdict": "surprising" if p_upper < ALPHA else "consistent"}
    if p_lower < ALPHA:
        out["note"] = "fewer unrecovered events than the claim expects (its share may be pessimistic)"
    return out


# ---------------------------------------------------------------- the recovered cost
def mid_p(draws: np.ndarray, observed: float) -> float:
    """Two-sided mid-p of ``observed`` in ``draws``: ties count half, at most 1."""
    gt, lt = float((draws > observed).mean()), float((draws < observed).mean())
    eq = 1.0 - gt - lt
    return min(1.0, 2 * min(gt + eq / 2, lt + eq / 2))


def recovered_sum_draws(theta: th.ScopeTheta, k: int, seed: int, inner: int = INNER) -> np.ndarray:
    """The predicted summed cost of exactly ``k`` recovered events: ``k`` draws of each outer draw's ``F``, summed."""
    outer = len(theta.lam)
    r = np.random.default_rng([seed, 61])
    return th.recovered_sums([theta], inner, r, {theta.name: np.full((outer, inner), k, dtype=np.int64)}).ravel()


def cost_part(draws: np.ndarray, observed_s: float, k: int) -> dict[str, Any]:
    """Part (b): the recovered events' summed cost against ``draws`` (:func:`recovered_sum_draws`)."""
    lo, hi = np.quantile(draws, (0.05, 0.95))
    p = mid_p(draws, observed_s)
    return {"observed_s": _r(observed_s), "recovered_events": k, "predicted_mean_s": _r(draws.mean()),
            "interval90_s": [_r(lo), _r(hi)], "observed_percentile": _r(100 * (float((draws < observed_s).mean())
                                                                          + float((draws == observed_s).mean()) / 2)),
            "p_value": _r(p), "verdict": "surprising" if p < ALPHA else "consistent"}


# ---------------------------------------------------------------- what the soak saw
def _status(f: dict[str, Any] | None, population: str, fault) -> tuple[str, str | None]:
    """An event's recovery (:data:`RECOVERED`, :data:`UNRECOVERED`, :data:`UNJUDGED`) and, unjudged, why."""
    if f is None:
        return UNJUDGED, "no per-fault analysis of it"
    got = (f.get(population) or {}).get("recovered")
    if got is True:
        return RECOVERED, None
    if got is None:
        return UNJUDGED, ((f.get("unmeasurable") or {}).get(f"{population}.recovered")
                          or "its steady state could not be judged")
    need = None if fault is None else fault.heal_s + (fault.recovery_window_s if fault.healed_by == "heal" else 0.0)
    if f.get("window_cut_by") and need is not None and (f.get("window_s") or 0.0) < need:
        return UNJUDGED, (f"not yet steady when the next injection ({f['window_cut_by']}) cut its window at "
                          f"{f.get('window_s')} s, before its own window ({need:g} s) ended")
    return UNRECOVERED, None


def observed_events(records: rec.RunRecords, schedule: Schedule, faults: list[dict[str, Any]] | None = None,
                    population: str = "service") -> dict[str, Any]:
    """Per scope, its events (fault id, status, why unjudged, cost, told apart, overlapped), its alone, overlapping
    and quiet seconds (see the module docstring); ``faults``: the summary's per-fault analysis, else derived from
    the records with the header's definitions."""
    if faults is None:
        d = analysis.Definitions.from_dict(records.header.get("definitions"))
        faults = analysis.analyse(records, d.steady_state, d.slo, d.population)["faults"]
    by_id = {f.get("fault_id"): f for f in faults}
    got = figures.parts(records, schedule)
    wins = got.get("wins") or figures.windows(records, schedule)
    scopes: dict[str, dict[str, Any]] = {}
    events: dict[str, dict[str, Any]] = {}
    for w in wins:
        status, why = _status(by_id.get(w["fault_id"]), population, schedule.faults.get(w["scope"]))
        sc = scopes.setdefault(w["scope"], {"events": [], "alone_raw": 0.0, "overlapping_raw": 0.0,
                                            "quiet_raw": 0.0})
        ev = {"fault_id": w["fault_id"], "status": status, "why": why, "raw_s": 0.0, "told_apart": True,
              "overlapped": False}
        sc["events"].append(ev)
        events[w["fault_id"]] = ev
    out = {"population": population, "scopes": scopes, "unmeasurable": got.get("unmeasurable"),
           "overlapping_s": None, "quiet_s": None}
    if "unmeasurable" in got:
        return out
    over = quiet = 0.0
    for a, b, active, v in got["stretches"]:
        # the windows that share some of the stretch (a stretch may join several cuts of one scope's windows:
        # none of them need hold it whole)
        inside = [w for w in wins if w["start_ns"] < b and w["end_ns"] > a]
        if not active:
            quiet += v
            nxt = [w for w in wins if w["start_ns"] == b]
            if nxt:
                scopes[nxt[0]["scope"]]["quiet_raw"] += v
        elif len(active) > 1:
            over += v
            for s in active:
                scopes[s]["overlapping_raw"] += v
            for w in inside:
                events[w["fault_id"]]["overlapped"] = True
        else:
            s = next(iter(active))
            scopes[s]["alone_raw"] += v
            if len(inside) == 1:
                events[inside[0]["fault_id"]]["raw_s"] += v
            for w in inside if len(inside) > 1 else ():
                events[w["fault_id"]]["told_apart"] = False
    out["overlapping_s"], out["quiet_s"] = _r(max(0.0, over)), _r(max(0.0, quiet))
    return out


# ---------------------------------------------------------------- the check
def _scope_check(name: str, sc: dict[str, Any], model, theta, population: str, why_no_model: str | None,
                 measurable: str | None, seed: int) -> dict[str, Any]:
    evs = sc["events"]
    n = {k: sum(1 for e in evs if e["status"] == k) for k in (RECOVERED, UNRECOVERED, UNJUDGED)}
    unm: dict[str, str] = {}
    out = {"scope": name, "events": len(evs), "recovered": n[RECOVERED], "unrecovered": n[UNRECOVERED],
           "unjudged": [{"fault_id": e["fault_id"], "why": e["why"]} for e in evs if e["status"] == UNJUDGED],
           "count": None, "cost": None,
           "excluded": {"overlapping_s": None if measurable else _r(max(0.0, sc["overlapping_raw"])),
                        "quiet_s": None if measurable else _r(max(0.0, sc["quiet_raw"])),
                        "overlapped_events": sum(1 for e in evs if e["overlapped"] and e["status"] == RECOVERED)},
           "unmeasurable": unm}
    m = n[RECOVERED] + n[UNRECOVERED]
    if model is None:
        unm["count"] = unm["cost"] = why_no_model
        return out
    if not m:
        unm["count"] = "no event of this scope could be judged recovered or not"
    else:
        out["count"] = count_part(m, n[UNRECOVERED], model.prior.a + model.u, model.prior.b + model.n - model.u)
    rec_evs = [e for e in evs if e["status"] == RECOVERED]
    clean = [e for e in rec_evs if e["told_apart"] and not e["overlapped"]]  # its cost measured whole and alone
    k = len(clean)
    if measurable:
        unm["cost"] = measurable
    elif population != "service":
        unm["cost"] = (f"the claim is of the {population} population; the soak's lost service-seconds are the "
                       "service's")
    elif not rec_evs:
        unm["cost"] = "no event of this scope recovered"
    elif not k:
        unm["cost"] = (f"each of its {len(rec_evs)} recovered events met another fault's window: no cost measured "
                       "whole and alone")
    elif not model.values:
        unm["cost"] = "the claim has no recovered cost of this scope (every counted run a lower bound)"
    else:
        observed = sum(e["raw_s"] for e in clean)
        out["cost"] = cost_part(recovered_sum_draws(theta, k, seed), max(0.0, observed), k)
        if len(clean) < len(rec_evs):
            out["cost"]["note"] = (f"{len(rec_evs) - len(clean)} of the {len(rec_evs)} recovered events met another "
                                   "fault's window: left out (an overlap's seconds cannot be split between events); "
                                   f"the {k} compared were measured whole and alone")
    return out


def check(claim_doc: dict[str, Any], records: rec.RunRecords, schedule: Schedule,
          faults: list[dict[str, Any]] | None = None, population: str | None = None, seed: int = 0,
          outer: int = OUTER) -> dict[str, Any]:
    """The soak against the claim, per scope in two parts (the module docstring): the summary's ``soak.check``."""
    population = population or (claim_doc or {}).get("population") or "service"
    obs = observed_events(records, schedule, faults, population)
    exps = {s: f.experiment for s, f in schedule.faults.items()}
    models, left_out = (figures.claim_models(claim_doc, schedule.end_s, exps) if claim_doc
                        else ({}, {}))
    thetas = {t.name: t for t in th.draw(list(models.values()), outer, 1.0, seed)} if models else {}
    scopes = []
    for name in sorted(obs["scopes"]):
        why = (None if name in models else "no claim to compare with" if not claim_doc
               else left_out.get(name, "the claim has no scope of this name"))
        scopes.append(_scope_check(name, obs["scopes"][name], models.get(name), thetas.get(name), population, why,
                                   obs["unmeasurable"], seed))
    surprising = [f"{s['scope']}: {part}" for s in scopes for part in ("count", "cost")
                  if s[part] and s[part]["verdict"] == "surprising"]
    compared = [f"{s['scope']}: {part}" for s in scopes for part in ("count", "cost") if s[part]]
    out = {"verdict": "surprising" if surprising else "consistent" if compared else None,
           "surprising": surprising, "compared": compared, "alpha": ALPHA, "population": population,
           "scopes": scopes,
           "excluded": {"overlapping_s": obs["overlapping_s"], "quiet_s": obs["quiet_s"], "note": EXCLUDED_NOTE},
           "draws": {"outer": outer, "inner": INNER, "seed": seed}, "unmeasurable": {}}
    if not compared:
        out["unmeasurable"]["verdict"] = (obs["unmeasurable"] or ("no claim to compare with" if not claim_doc
                                                                  else "no part of any scope could be compared"))
    return out


# ---------------------------------------------------------------- a soak's events as a claim's trials
def soak_events(soak_dir: Path, population: str) -> dict[str, dict[str, Any]]:
    """Per scope, the soak's events as trials for ``availproof claim SUITE --with-soak SOAK_DIR``: ``recovered``,
    ``unrecovered`` (the unjudged left out, counted in ``unjudged``), ``values`` (each recovered event's cost where
    measured apart: its window met no other scope's nor one of its own; none for the affected population, the
    soak's figures being the service's), ``from``. Bad input is one line (UsageError)."""
    from chaos.core import evidence

    d = Path(soak_dir)
    if not d.is_dir():
        raise UsageError(f"--with-soak {d}: no such directory")
    if not rec.is_run_dir(d):
        raise UsageError(f"--with-soak {d}: not a run directory (no summary.json or records.ndjson)")
    records = evidence.read_records(d)
    if records is None:
        raise UsageError(f"--with-soak {d}: no records.ndjson (a soak's events are read from its records)")
    sched = (records.header.get("soak") or {}).get("schedule")
    if not sched:
        raise UsageError(f"--with-soak {d}: not a soak run (its records' header has no soak schedule)")
    summary = evidence.load_summary(d)
    obs = observed_events(records, Schedule.from_dict(sched), summary.get("faults"), population)
    out = {}
    for name, sc in sorted(obs["scopes"].items()):
        evs = sc["events"]
        values = [] if population != "service" or obs["unmeasurable"] else [
            round(max(0.0, e["raw_s"]), 6) for e in evs
            if e["status"] == RECOVERED and e["told_apart"] and not e["overlapped"]]
        out[name] = {"recovered": sum(1 for e in evs if e["status"] == RECOVERED),
                     "unrecovered": sum(1 for e in evs if e["status"] == UNRECOVERED),
                     "unjudged": sum(1 for e in evs if e["status"] == UNJUDGED),
                     "values": values, "from": str(d)}
    return out


def touching(sent_ns: np.ndarray, end_ns: np.ndarray, wins: list[tuple[int, int]]) -> np.ndarray:
    """The requests in flight at some instant of some window ``[a, b]`` (sent by ``b`` and ended at ``a`` or
    after), by searching the windows' union: the first union interval not over before a request was sent is
    the only one it can meet first."""
    hit = np.zeros(len(sent_ns), dtype=bool)
    union: list[list[int]] = []
    for a, b in sorted(w for w in wins if w[0] <= w[1]):
        if union and a <= union[-1][1]:
            union[-1][1] = max(union[-1][1], b)
        else:
            union.append([a, b])
    if union:
        starts, stops = np.array(union, dtype=np.int64).T
        j = np.searchsorted(stops, sent_ns, "left")  # the first interval ending at or after the send
        inside = j < len(stops)
        hit[inside] = starts[j[inside]] <= end_ns[inside]
    for a, b in (w for w in wins if w[0] > w[1]):  # a window that ends before it starts, as the loop read it
        hit |= (sent_ns <= b) & (end_ns >= a)
    return hit


def quiet_requests(records: rec.RunRecords, schedule: Schedule) -> dict[str, int]:
    """The soak's measured requests that were never in flight while a fault's window was open (sent and ended
    before the first injection, or in a quiet stretch: a request in flight at an injection is the fault's), and
    how many failed or missed the SLO: evidence of the background (:mod:`chaos.claim.background`). On the
    request columns (:mod:`chaos.recording.request_columns`)."""
    d = analysis.Definitions.from_dict(records.header.get("definitions"))
    wins = [(w["start_ns"], w["end_ns"]) for w in figures.windows(records, schedule)]
    c = rc.of(records)
    quiet = c.measure & ~touching(c.sent_ns, c.end_ns, wins)
    return {"requests": int(np.count_nonzero(quiet)), "failed": int(np.count_nonzero(quiet & ~c.ok)),
            "slo_missed": int(np.count_nonzero(quiet & ~c.slo_met(d.slo)))}


def soak_quiet(soak_dir: Path) -> dict[str, int]:
    """:func:`quiet_requests` of a soak directory (checked as :func:`soak_events` checks it)."""
    from chaos.core import evidence

    records = evidence.read_records(Path(soak_dir))
    sched = None if records is None else (records.header.get("soak") or {}).get("schedule")
    if not sched:
        raise UsageError(f"--with-soak {soak_dir}: not a soak run (its records' header has no soak schedule)")
    return quiet_requests(records, Schedule.from_dict(sched))


def soak_summary(schedule: Schedule, records: rec.RunRecords, claim_doc: dict[str, Any], periods: int = 20_000,
                 seed: int = 0, faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run summary's ``soak`` object; ``check``: :func:`check` (``faults``: the summary's
    per-fault analysis, else derived from the records with the header's definitions)."""
    observed = figures.observed_lost_service_s(records, schedule)
    counts = figures.injected_counts(records)
    exps = {s: f.experiment for s, f in schedule.faults.items()}
    pred = figures.prediction(claim_doc, counts, schedule.end_s, periods, seed, observed["total"], schedule.overlaps, exps)
    return {"faults_injected": [p.to_dict() for p in schedule.injected],
            "faults_skipped": [p.to_dict() for p in schedule.skipped],
            "overlaps": [dict(o) for o in schedule.overlaps],
            "observed_lost_service_s": observed, "prediction": pred,
            "check": check(claim_doc, records, schedule, faults, seed=seed)}
