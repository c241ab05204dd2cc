"""A fault's ``orphans`` in the summary: what the orphan check (:mod:`chaos.system.orphan_watch`) saw of the engine
processes of the replica the fault killed or replaced, read from the fault's detail (its ``looked_after`` mark).

``seconds_until_freed`` is null with its reason (``unmeasurable["orphans.seconds_until_freed"]``, and ``why``) when
the fault's scope kills or replaces no replica (plane null: engine-slow, engine-stutter, a partition, a node or zone loss: not
followed), when the replica was not replaced in the run or had no engine (status ``not_replaced``,
``no_engines``: its bound does not apply), when it could not be looked at (``unmeasurable``: its bound is
unmeasurable), and null without a reason in ``unmeasurable`` when an engine was left at the bound (``left``: never
freed, its bound violated)."""

from __future__ import annotations

from typing import Any

from chaos.analysis import figures
from chaos import scopes

KEY = figures.ORPHANS_FREED.key()


def orphans_of(scope: str, detail: dict[str, Any], unmeasurable: dict[str, str]) -> dict[str, Any] | None:
    """The fault's ``orphans`` plane (None for a scope without the check), its null's reason into ``unmeasurable``."""
    if not scopes.get(scope).orphan_check:
        unmeasurable[KEY] = (f"{'an' if scope[:1] in 'aeiou' else 'a'} {scope} fault kills or replaces no replica "
                             "(or its engines die with their node, not followed): no engine of it to be left behind")
        return None
    found = detail.get("orphans")
    if not isinstance(found, dict):
        why = "no orphan check was recorded for this fault (a run recorded before it, or one that ended before it)"
        unmeasurable[KEY] = why
        return {"status": "unmeasurable", "why": why, "engines": (detail.get("victim") or {}).get("engines"),
                "left": None, "seconds_until_freed": None, "rss_mb_left": None, "replica_gone_s": None,
                "engines_gone_s": None, "bound_s": None, "resolution_s": None, "clock": None}
    out = dict(found)
    if out.get("seconds_until_freed") is None and out.get("status") != "left":
        unmeasurable[KEY] = out.get("why") or "not measured"
    return out
