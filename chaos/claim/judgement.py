"""The claim's judgement put together: the credibility at the goal (:func:`chaos.claim.decide.judge`), the
optimistic end when it falls short, the trials that would support it, and the same judgement under the default
prior when the claim used another (fleet history, pooling), so that the claim can say how much of its
credibility comes from the prior."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chaos.claim import decide
from chaos.claim.credible import Background
from chaos.claim.model import ScopeModel
from chaos.claim.unrecovered import Prior


def _default(models: list[ScopeModel] | None) -> list[ScopeModel] | None:
    return None if models is None else [replace(m, prior=Prior(), prior_events=(0, 0)) for m in models]


def informed(models: list[ScopeModel], goal: decide.Goal) -> bool:
    """The claim used more than the default prior (a fleet history, or pooling across scopes)."""
    return goal.pool or any(m.prior != Prior() for m in models)


def statement(fig: dict[str, Any], goal: decide.Goal, what: str = "P(miss)") -> str:
    """``P(miss) <= 5 % with credibility 0.93``, and the miss chance at the required credibility."""
    return (f"{what} <= {goal.risk * 100:g} % with credibility {fig['value']:.3g} (required {goal.credibility:g}); "
            f"at credibility {goal.credibility:g}, {what} <= {fig['p_miss_at_credibility'] * 100:.3g} %")


def judgement(models: list[ScopeModel], slo_models: list[ScopeModel] | None, goal: decide.Goal, seed: int,
              bg: Background | None, slo_bg: Background | None) -> dict[str, Any]:
    slo = slo_models if goal.slo_target is not None else None
    judged = decide.judge(models, slo, goal, seed, bg, slo_bg)
    out: dict[str, Any] = {"judged": judged, "optimistic": None, "needed": None, "default_prior": None}
    if not judged["met"]:
        out["optimistic"] = decide.judge(models, slo, goal, seed, bg, slo_bg, limit=True, pool=False)
        if not (out["optimistic"]["resolved"] and not out["optimistic"]["met"]):
            out["needed"] = decide.trials_needed(models, slo, goal, seed, bg, slo_bg)
    if informed(models, goal):
        d = decide.judge(_default(models), _default(slo), replace(goal, pool=False), seed, bg, slo_bg)
        out["default_prior"] = {"value": d["value"], "met": d["met"],
                                "availability": d["availability"], "slo_attainment": d["slo_attainment"]}
    return out


def credibility_block(j: dict[str, Any], goal: decide.Goal, models: list[ScopeModel]) -> dict[str, Any]:
    """The claim document's ``credibility`` (see docs/claim.md)."""
    judged = j["judged"]
    avail = judged["availability"]
    dp = j["default_prior"]
    return {
        "required": goal.credibility, "risk": goal.risk, "met": judged["met"], "resolved": judged["resolved"],
        "availability": avail, "slo_attainment": judged["slo_attainment"],
        "statement": statement(avail, goal),
        "priors": {m.name: m.prior.to_dict() for m in models},
        "pooled": goal.pool,
        "default_prior": dp,
        "from_prior": None if dp is None else round(judged["value"] - dp["value"], 6),
        "optimistic": None if j["optimistic"] is None else {
            "value": j["optimistic"]["value"], "met": j["optimistic"]["met"],
            "resolved": j["optimistic"]["resolved"], "unrecovered_quantile": decide.OPTIMISTIC_Q},
    }
