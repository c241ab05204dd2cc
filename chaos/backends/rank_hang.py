"""What ``rank-hang`` (:mod:`chaos.scopes.rank_hang`) proves of the *engine*, not only of the hung rank: pure logic on
what a backend read (its step heartbeat, :mod:`serve_apps.heartbeat`), nothing touched here.

A collective hang is the engine that stops stepping: the hung rank's mark and state say the rank took the fault, not
that its engine waits on it. So the proof also reads the engine's step heartbeat (the engine processes of the group:
the stream target's engine child, vLLM's ``EngineCore``) and asks for a step **under way** (``busy_since`` set) whose
count does not move across the proof's looks for :func:`needed_s`. An idle engine (no step under way: between steps,
or vLLM's engine with no request to step for) proves nothing: its check reads "not verified: engine idle", and the
proof looks again (a step that starts meets the hung rank and stays under way).

- :func:`stopped_check`: the proof's check from one look (``{pid: Beat or None}``), its state kept in the fault's
  ``engine_steps`` between looks (each engine's count and the instant a look first saw it, the instant it held);
- :func:`hold`: one more look just before the run's end releases the rank, written into the fault's effect as
  ``device-loss``'s hold is (:func:`chaos.backends.device_loss.hold`): the rank's hang mark no longer this run's (someone
  released it, another run's), or the engine stepped since the proof, makes the effect ``verified: false`` with
  ``lost_until_s`` and ``came_back``; a look that could not be made, an engine with no heartbeat left to read, or a
  heartbeat file made anew (its pid reused: a lower count) proves nothing either way.

The local backend reads the heartbeat file (:mod:`chaos.backends.local.ranks`). On KubeRay no exec reads an engine's
heartbeat yet: there the proof is the rank's mark and state alone, and no hold is made (no ``engine_steps``).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from chaos.backends import engine_faults, held

FLOOR_S = 0.5  # the least time a step must be seen under way, its count unchanged: 100 of the stream target's 5 ms steps
P99_TIMES = 3  # or this many times the engine's 99th percentile step time (its histogram's, at most twice the true one)
CAP_S = 10.0  # at most: the proof's bound is 15 s (rank-hang's effect_bound_s); a step held 10 s is a hang to prove
KEY = "engine_steps"  # the fault's key: the proof's state, then what the heal's look compares with
HELD = "the rank's hang mark still this run's and its engine not stepped since the proof"


def _check(what: str, ok: bool, seen: str) -> dict[str, Any]:
    return {"check": what, "ok": bool(ok), "seen": seen}


def needed_s(p99: float | None) -> float:
    """How long a step must be seen under way with its count unchanged: :data:`P99_TIMES` times the engine's p99 step
    time (a step that long is not a slow step of this engine's: 3 x p99 is past nearly every step it took), at least
    :data:`FLOOR_S` (vLLM's and the stream target's steps are milliseconds: the looks' own period, 0.25 s, would
    otherwise decide), at most :data:`CAP_S` (within the proof's bound)."""
    return min(CAP_S, max(FLOOR_S, P99_TIMES * p99 if p99 else 0.0))


def what(engines: list) -> str:
    return (f"engine {', '.join(map(str, engines)) or '(none found)'}: stopped stepping (its step heartbeat: a step "
            "under way, its count unchanged)")


def stopped_check(fault: dict, engines: list, beats: Mapping[Any, Any], now: float) -> dict[str, Any]:
    """One look at the engines' heartbeats (``beats``: pid -> :class:`serve_apps.heartbeat.Beat`, None where there is
    none; ``now``: the look's monotonic instant, on the clock the engines write). Ok when every engine has a step
    under way whose count a previous look saw too, at least :func:`needed_s` before. The state is kept in
    ``fault[KEY]``: ``engines`` (pid, count, ``first`` the instant a look first saw that count under way), ``need_s``,
    and once it held ``proved`` (the instant) and ``counts`` (pid -> count: what the heal's :func:`hold` compares)."""
    state = fault.setdefault(KEY, {})
    known = {e["pid"]: e for e in state.get("engines") or []}
    rows, seen, ok = [], [], bool(engines)
    need = needed_s(max((b.p99 for b in beats.values() if b is not None and b.p99), default=None))
    for pid in engines:
        beat = beats.get(pid)
        if beat is None:
            ok = False
            seen.append(f"engine {pid}: no step heartbeat to read (the app's engine hook off, or gone)")
            continue
        if beat.busy_since is None:
            ok = False
            seen.append(f"not verified: engine {pid} idle (count {beat.count}, no step under way: between steps, or "
                        "nothing to step for)")
            continue
        before = known.get(pid)
        first = before["first"] if before and before["count"] == beat.count else now
        rows.append({"pid": pid, "count": beat.count, "first": first})
        held = now - first
        if held < need:
            ok = False
            seen.append(f"engine {pid}: a step under way, count {beat.count} unchanged for {held:.2f} s of the "
                        f"{need:.2f} s asked" + (f" (it stepped: count {before['count']} -> {beat.count})"
                                                  if before and before["count"] != beat.count else ""))
        else:
            seen.append(f"engine {pid}: a step under way for {max(held, now - beat.busy_since):.2f} s, count "
                        f"{beat.count} unchanged for {held:.2f} s (>= {need:.2f} s)")
    state.update(engines=rows, need_s=round(need, 3))
    if ok:
        state.setdefault("proved", now)
        state.setdefault("counts", {str(r["pid"]): r["count"] for r in rows})
    return _check(what(engines), ok, "; ".join(seen) or "no engine process of the rank found")


def t_s_at(fault: dict, now: float) -> float | None:
    """``now`` (monotonic) in seconds from the injection: the proof's time to effect plus the time since the look
    that proved it (that look ended the proof, to within its own duration)."""
    state, effect = fault.get(KEY) or {}, fault.get("effect") or {}
    if state.get("proved") is None or effect.get("time_to_effect_s") is None:
        return None
    return round(effect["time_to_effect_s"] + now - state["proved"], 3)


HELD_CHECK = f"{HELD}, to the heal"


def holdable(fault: dict) -> bool:
    """Whether the heal has something to hold: the effect verified, with the engines' counts at the proof, and not
    looked at by a heal before (a heal runs again over every fault it healed: after its own release the mark is gone,
    which proves nothing of the hang)."""
    effect = fault.get("effect") or {}
    return (effect.get("verified") is True and bool((fault.get(KEY) or {}).get("counts"))
            and not any(c.get("check") == HELD_CHECK for c in effect.get("checks") or []))


def hold(fault: dict, look: dict, run_id: str | None, t_s: float | None) -> dict | None:
    """One look just before the release (``look``: ``marks`` rank pid -> its hang mark's text or None, ``beats``
    engine pid -> Beat or None; or ``error``), written into the fault's effect (a copy: the inject end mark keeps the
    proof of its instant). The mark not this run's, or an engine's count above the proof's, makes it ``verified:
    false`` with ``lost_until_s`` and ``came_back`` (``t_s``, ``how``). Nothing to hold (:func:`holdable`): None."""
    if not holdable(fault):
        return None
    effect = copy.deepcopy(fault["effect"])
    name = HELD_CHECK
    if look.get("error"):
        c = _check(name, True, f"the look failed ({look['error']}): nothing found either way")
    else:
        lost, unknown = [], []
        for pid, text in (look.get("marks") or {}).items():
            run = engine_faults.mark_run(text)
            if run != run_id:
                lost.append(f"rank {pid}'s hang mark " + ("gone (someone released it)" if text is None else
                                                          f"another run's ({run!r})" if run else "unreadable"))
        for pid, count in fault[KEY]["counts"].items():
            beat = (look.get("beats") or {}).get(int(pid))
            if beat is None:
                unknown.append(f"engine {pid}: no heartbeat left to read")
            elif beat.count > count:
                lost.append(f"engine {pid} stepped again (count {count} -> {beat.count})")
            elif beat.count < count:
                unknown.append(f"engine {pid}: a new heartbeat (count {beat.count} < {count}: its pid reused)")
        c = _check(name, not lost, "; ".join(lost) or "the mark this run's, no step since the proof"
                   + (f" ({'; '.join(unknown)}: nothing found either way there)" if unknown else ""))
    return held.write(fault, effect, c, t_s)
