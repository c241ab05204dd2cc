"""One scope of a claim: its runs, its costs, what its stated outage length is covered by, and the model
the prediction draws its events from (:class:`chaos.claim.model.ScopeModel`)."""

from __future__ import annotations

from typing import Any, Iterable

from chaos import scopes
from chaos.claim import coverage as cov
from chaos.claim.model import ScopeModel
from chaos.claim.unrecovered import Prior
from chaos.claim.cost import run_name
from chaos.claim.counted import scope_counted_in
from chaos.claim.rates import Rate

ENV_FIELDS = {"backend": ("cluster", "backend"), "topology": ("cluster", "topology"),
              "gcs_fault_tolerance": ("cluster", "gcs_fault_tolerance"), "network": ("cluster", "network"),
              "app": ("app",), "front_door": ("environment", "front_door", "shape"),
              "platform": ("environment", "platform"), "cpus": ("environment", "cpus"),
              "availproof": ("environment", "availproof"), "ray": ("environment", "ray"),
              "vllm": ("environment", "vllm"), "python": ("environment", "python")}
LOAD_FIELDS = ("mode", "arrival", "rate", "concurrency", "stream", "route", "max_tokens", "timeout_s")


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def distinct(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rnd(v: float | None, n: int = 6) -> float | None:
    return None if v is None else round(v, n)


def environment(summaries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each field's distinct values over the runs (null: a run that did not record it)."""
    return {k: distinct(_get(s, *path) for s in summaries) for k, path in ENV_FIELDS.items()}


def mixed(env: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The fields with more than one recorded value: runs on different set-ups."""
    return {k: [x for x in v if x is not None] for k, v in env.items() if len([x for x in v if x is not None]) > 1}


def offered_load(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return distinct({k: (_get(s, "environment", "load") or {}).get(k) for k in LOAD_FIELDS} for s in summaries)


def scope_entry(scope: str, runs: list[dict[str, Any]], summaries: list[dict[str, Any]],
                rate: Rate | None) -> dict[str, Any]:
    """One scope: its runs, its costs, coverage of the stated length, its unrecovered share, its load."""
    counted = [r for r in runs if r["counted"]]
    values = [r["lost_service_s"] for r in counted if r["lost_service_s"] is not None]
    slo_values = [r["slo_lost_service_s"] for r in counted if r["slo_lost_service_s"] is not None]
    measured = [r for r in runs if r["measurement"]]
    outages = [r["outage_tested_s"] for r in measured if r["outage_tested_s"] is not None]
    spans = [r["span_s"] for r in counted if r["span_s"] is not None]
    rates_rps = [c["rate_rps"] for r in counted for c in r["faults"] if c["rate_rps"] is not None]
    lower = [r for r in counted if r["lower_bound"]]
    n, u = len(counted), len(lower)
    covers = cov.coverage(None if rate is None else rate.duration_s, counted)
    counted_in = scope_counted_in(counted)
    return {
        "scope": scope, "label": scopes.label(scope) or scope,
        "rate": None if rate is None else rate.to_dict(),
        "experiments": distinct(r["experiment"] for r in runs),
        "runs": len(runs), "trials": n,
        "not_counted": [{"run": run_name(r), "why": r["not_counted"]} for r in runs if not r["counted"]],
        "never_came_back": [{"run": run_name(r), "why": r["never_came_back"]} for r in counted
                            if r.get("never_came_back")],
        "lost_service_s": {"mean": rnd(mean(values)), "values": values,
                           "lower_bound": [{"run": run_name(r), "why": r["lower_bound"]} for r in lower],
                           "clipped": [run_name(r) for r in counted if r["clipped"]]},
        "slo_lost_service_s": {"mean": rnd(mean(slo_values)), "values": slo_values},
        "unrecovered": {"runs": u, "of": n,
                        "share_mean": rnd((u + 0.5) / (n + 1.0)) if n else None,
                        "prior": "Beta(u + 0.5, n - u + 0.5)", "cost_s": None},
        "coverage": {k: v for k, v in covers.items() if k != "use"},
        "load_modes": distinct(r.get("load_mode") for r in counted),
        "environment_mixed": mixed(environment([s for r, s in zip(runs, summaries) if r["counted"]])),
        "outage_tested_s": max(outages) if outages else None,
        "span_s": max(spans) if spans else None,
        "load": {"offered": offered_load(summaries), "measured_rps": rnd(mean(rates_rps), 4), "utilization": None},
        "_counted": counted, "_use": covers["use"],  # removed before the claim is returned
        # its runs' client retried: its costs are counted in logical requests (absent when none did)
        **({} if counted_in is None else {"counted_in": counted_in}),
    }


FLOOR_MARGIN_S = 1.0  # an unrecovered event costs at least the budget plus this


def unrecovered_cost(entry: dict[str, Any], rate: Rate, budget_s: float, figure: str = "lost_service_s") -> float:
    """What an unrecovered event (or one unlike any tested) costs in the prediction: the stated
    ``unrecovered_cost_s``, but never less than the largest cost a run that did not recover measured (its
    lower bound), and always strictly more than the whole error budget (the budget plus
    :data:`FLOOR_MARGIN_S`): such an event can always make a period miss."""
    lower = [r[figure] for r in entry["_counted"] if r["lower_bound"] and r[figure] is not None]
    return max([rate.unrecovered_cost_s, budget_s + FLOOR_MARGIN_S] + lower)


def model(entry: dict[str, Any], rate: Rate, budget_s: float = 0.0,
          figure: str = "lost_service_s", extra_trials: tuple[int, int] = (0, 0)) -> ScopeModel | None:
    """The scope's event model for the prediction; None when no counted run has a cost and none never came
    back. The unrecovered share counts every counted run (one that did not recover from a shorter outage says
    something about a longer one too) and ``extra_trials`` (soak events: recovered, unrecovered); the costs drawn
    are those of the recovered runs the stated length is covered by. The prior on the share is Jeffreys', updated
    by the scope's fleet history when RATES gives one (:mod:`chaos.claim.unrecovered`)."""
    counted = entry["_counted"]
    if not counted:
        return None
    use = [counted[i] for i in entry["_use"]]
    recovered = [r for r in use if not r["lower_bound"] and r[figure] is not None]
    if not recovered and not any(r["lower_bound"] for r in counted):
        return None
    by_fit = entry["coverage"]["by"] == "fit"
    fit = entry["coverage"]["fit"]
    fleet = rate.prior_unrecovered
    prior = Prior() if fleet is None else Prior.fleet(*fleet)
    soak_values = () if by_fit else tuple(entry.get("_soak_values") or ())  # a soak's outages are not on the fit
    return ScopeModel(
        name=entry["scope"], values=tuple(r[figure] for r in recovered) + soak_values,
        n=len(counted) + extra_trials[0] + extra_trials[1], u=sum(1 for r in counted if r["lower_bound"])
        + extra_trials[1], unrecovered_cost_s=unrecovered_cost(entry, rate, budget_s, figure),
        events=rate.events, count=rate.count, exposure_days=rate.exposure_days,
        outages=tuple(r["outage_tested_s"] for r in recovered) if by_fit else None,
        fit=(fit["b"], fit["b_se"], fit["df"]) if by_fit else None,
        duration_s=rate.duration_s if by_fit else None, prior=prior, prior_events=fleet or (0, 0))


def point_cost(entry: dict[str, Any], rate: Rate | None, figure: str = "lost_service_s") -> float | None:
    """The plug-in cost of one event: the mean measured cost of the runs the stated length is covered by
    (moved along the fit, its slope floored at 0, when the coverage is by fit); every counted run's when no
    length is stated."""
    use = [entry["_counted"][i] for i in entry["_use"]]
    values = [r[figure] for r in use if r[figure] is not None]
    if not values:
        return None
    fit = entry["coverage"]["fit"]
    if entry["coverage"]["by"] == "fit" and rate is not None and rate.duration_s is not None:
        b = max(0.0, fit["b"])
        values = [r[figure] + b * max(0.0, rate.duration_s - r["outage_tested_s"]) for r in use
                  if r[figure] is not None]
    return sum(values) / len(values)
