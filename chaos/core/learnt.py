"""What a fault's heal learnt after the run's records closed (a rollback's heal marks come after them), and the one
part of it that changes the verdict: a proof that did not hold to the heal.

A fault's entry in the summary is derived from the records alone (``availproof analyse`` derives it again); what its
heal learnt later is kept beside it, in the summary's ``learnt_at_heal`` (fault id -> what it learnt,
:func:`learnt`): the keys of its detail the records did not carry (a wedge's ``wedge_at_end``), and its ``effect``
when the heal's look found the proof lost (``came_back``: ``rank-hang``'s mark released by someone else or its engine
stepping again, :mod:`chaos.backends.rank_hang`; ``device-loss``'s marker removed). :func:`apply_learnt` then puts
that effect in the fault's entry (``verified: false``: the verdict is ERROR, "fault not in effect",
:mod:`chaos.core.verdict`), at the run's end (:func:`chaos.core.run.learnt_at_heal`) and at each re-analysis
(:func:`chaos.core.summary.reanalyse`, which keeps ``learnt_at_heal`` as the run wrote it): an effect learnt without
``came_back`` never replaces the records'."""

from __future__ import annotations

from typing import Any


def lost(effect: Any) -> bool:
    """Whether an effect says its proof did not hold (``came_back``)."""
    return isinstance(effect, dict) and bool(effect.get("came_back"))


def learnt(told: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """What a fault's detail ``found`` at its heal adds to ``told`` (the detail the records carried): the keys told
    did not carry, and the effect when found's was lost and told's was not."""
    new = {k: v for k, v in found.items() if k not in told}
    if lost(found.get("effect")) and not lost(told.get("effect")):
        new["effect"] = found["effect"]
    return new


def apply_learnt(summary: dict[str, Any]) -> list[str]:
    """Each fault entry (``faults``, and ``by_scope``'s) whose ``learnt_at_heal`` effect is lost gets that effect;
    its detail stays the records'. The fault ids changed (each once)."""
    learnt_by_id = summary.get("learnt_at_heal") or {}
    changed: list[str] = []
    entries = list(summary.get("faults") or []) + [f for fs in (summary.get("by_scope") or {}).values() for f in fs]
    for f in entries:
        effect = (learnt_by_id.get(f.get("fault_id")) or {}).get("effect")
        if lost(effect) and isinstance(f, dict):
            f["effect"] = effect
            if f["fault_id"] not in changed:
                changed.append(f["fault_id"])
    return changed
