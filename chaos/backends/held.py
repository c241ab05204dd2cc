"""A fault's proof held to the heal: one look's check written into the fault's effect. Shared by the faults whose
heal looks once more before it undoes them (``device-loss``: :func:`chaos.backends.device_loss.hold`; ``rank-hang``:
:func:`chaos.backends.rank_hang.hold`).

The effect is a copy (the inject end mark keeps the proof of its instant); the look's check replaces an earlier one
of the same name; a check that failed makes the effect ``verified: false`` with ``lost_until_s`` (the look's instant
from the injection) and ``came_back`` (when and how), which the verdict reads as a fault not in effect (ERROR)."""

from __future__ import annotations

from typing import Any


def write(fault: dict, effect: dict, check: dict[str, Any], t_s: float | None) -> dict[str, Any]:
    """``check`` (``check``, ``ok``, ``seen``) at ``t_s`` into ``effect``, which becomes ``fault``'s; the check."""
    check["t_s"] = t_s
    effect["checks"] = [x for x in effect.get("checks") or [] if x.get("check") != check["check"]] + [check]
    if not check["ok"]:
        effect["verified"] = False
        effect["lost_until_s"] = t_s
        effect["came_back"] = {"t_s": t_s, "how": check["seen"]}
    fault["effect"] = effect
    return check
