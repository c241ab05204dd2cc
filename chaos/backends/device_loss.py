"""What ``device-loss`` (:mod:`chaos.scopes.device_loss`) shares on every backend: pure logic, nothing touched.

- :func:`refusal`: its arguments checked before anything is read or written (the mode, the XID, the remedy, the
  outage and the polling);
- :func:`checks`: its proof from one look at the node (``{"marker": ..., "failures": [...]}``, what
  :func:`serve_apps.device_loss.look` returns there, locally or through exec in the pod): the marker still the
  fault's (its token), and an engine on the node that failed or hung on the lost device since the marker (its own
  record: at its step, or at its start);
- :func:`hold`: one look during the outage, or at the heal, written into the fault's effect: a marker someone
  removed or replaced makes it ``verified: false`` with ``lost_until_s`` (when) and ``came_back`` (how), as the
  accelerator's and a zone loss's watches record a proof that did not hold; a look that could not be made proves
  nothing either way; once the remedy drained the node (KubeRay: the pod evicted, its ``/tmp`` with it) the hold
  ends there (``held_until_s``);
- :func:`new_failures`: the engines' records not seen before, each with its instant from the injection;
- :class:`Placements`: where the replicas of the deployment were, look after look (its ``events``: a replica's
  state, node and zone each time one changes, ``GONE`` when it is no longer listed): what the analysis derives the
  placements, failed starts and moves from (:mod:`chaos.analysis.device`).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Iterable

from chaos.backends import held
from chaos.base.errors import UsageError
from serve_apps.device_loss import MODES, XIDS

REMEDIES = ("cordon",)  # the rig's own remedy: the bad node cordoned once an engine's device error is seen
HELD = "the device marker still this fault's"
GONE = "GONE"  # a replica no longer listed by Serve


def refusal(mode: Any, xid: Any, remedy: Any, outage_s: Any, poll_s: Any = 1.0) -> str | None:
    """Why the arguments are refused (one line), else None."""
    if mode not in MODES:
        return f"device-loss: mode must be one of {', '.join(MODES)}, got {mode!r}"
    if isinstance(xid, bool) or xid not in XIDS:
        return f"device-loss: xid must be one of {', '.join(map(str, XIDS))} (the XIDs it models), got {xid!r}"
    if remedy is not None and remedy not in REMEDIES:
        return f"device-loss: remedy must be none or one of {', '.join(REMEDIES)}, got {remedy!r}"
    for name, v in (("outage_s", outage_s), ("poll_s", poll_s)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return (f"device-loss: {name} must be a number of seconds above 0, got {v!r}"
                    + (" (the rig watches the node until it heals it: the outage is not left to the rollback)"
                       if name == "outage_s" else ""))
    return None


def check_arguments(mode: Any, xid: Any, remedy: Any, outage_s: Any, poll_s: Any = 1.0) -> None:
    why = refusal(mode, xid, remedy, outage_s, poll_s)
    if why:
        raise UsageError(why)


def _check(what: str, ok: bool, seen: str) -> dict[str, Any]:
    return {"check": what, "ok": bool(ok), "seen": seen}


def ours(fault: dict, marker: dict | None) -> bool:
    """Whether ``marker`` is the one this fault wrote (its token)."""
    token = (fault.get("device") or {}).get("token")
    return bool(token) and isinstance(marker, dict) and marker.get("token") == token


def marker_seen(marker: dict | None) -> str:
    if marker is None:
        return "no marker (someone removed it)"
    return f"another marker (run {marker.get('run')!r})" if marker.get("token") else "an unreadable marker"


def since_marker(fault: dict, look: dict) -> list[dict]:
    """The engines' records on the node written since the fault's marker (an older one is another fault's)."""
    t0 = (fault.get("device") or {}).get("t")
    return [r for r in look.get("failures") or [] if isinstance(r.get("t"), (int, float))
            and (t0 is None or r["t"] >= t0 - 0.001)]


def checks(fault: dict, look: dict) -> list[dict]:
    """The proof from one look at the node: the marker the fault's, an engine there failed or hung on it since."""
    node = fault.get("target")
    if look.get("error"):
        return [_check(f"node {node}: the device marker and its engines' records read", False, str(look["error"]))]
    marker = look.get("marker")
    since = since_marker(fault, look)
    return [_check(f"node {node}: its device marked lost ({HELD})", ours(fault, marker),
                   "the fault's marker" if ours(fault, marker) else marker_seen(marker)),
            _check(f"an engine on node {node} failed (or hung) on the lost device (its own record)", bool(since),
                   ", ".join(f"engine {r.get('pid')} {r.get('kind')} at its {'start' if r.get('at') == 'init' else 'step'}"
                             for r in since) or "no engine's record since the marker")]


def new_failures(fault: dict, look: dict) -> list[dict]:
    """The records since the marker not yet in ``fault["engine_failures"]``, appended there with ``t_s`` (from the
    marker's write, the injection's instant to within its call); the new ones returned."""
    known = fault.setdefault("engine_failures", [])
    seen = {(r.get("pid"), r.get("kind"), r.get("at")) for r in known}
    t0 = (fault.get("device") or {}).get("t")
    new = []
    for r in since_marker(fault, look):
        key = (r.get("pid"), r.get("kind"), r.get("at"))
        if key in seen:
            continue
        seen.add(key)
        new.append({**r, "t_s": round(r["t"] - t0, 3) if t0 is not None else None})
    known += new
    return new


def device_errors(fault: dict) -> list[dict]:
    """The engines' records that say their device failed them (what the rig's remedy acts on): a failure, or a
    hang (a hung engine is a device error too, its watchdog's to tell; here the engine's own record)."""
    return [r for r in fault.get("engine_failures") or [] if r.get("kind") in ("failed", "hung")]


def hold(fault: dict, look: dict, t_s: float | None, drained: bool = False) -> dict:
    """One look at whether the proof holds (the marker still the fault's), written into the fault's effect (a copy:
    the inject end mark keeps the proof of its instant). The first look that sees it gone or replaced makes the
    effect ``verified: false`` with ``lost_until_s`` and ``came_back`` (and stays so); a look that could not be
    made proves nothing (its check says so); ``drained`` (the remedy took the node's pod away, its marker with it)
    ends the hold there (``held_until_s``). The check, as recorded."""
    effect = copy.deepcopy(fault.get("effect")) if isinstance(fault.get("effect"), dict) else {
        "verified": None, "time_to_effect_s": None, "bound_s": None, "checks": []}
    node = fault.get("target")
    what = f"node {node}: {HELD} from the injection to the heal"
    if effect.get("came_back") or effect.get("held_until_s") is not None:
        return {"check": what, "ok": not effect.get("came_back"), "seen": "decided already", "t_s": t_s}
    if look.get("error") and drained:
        c = _check(what, True, f"the node's pod is gone with its marker: the remedy drained it ({look['error']})")
        effect["held_until_s"] = t_s
    elif look.get("error"):
        c = _check(what, True, f"the look failed ({look['error']}): nothing found either way")
    else:
        marker = look.get("marker")
        c = _check(what, ours(fault, marker), "the fault's marker" if ours(fault, marker) else marker_seen(marker))
    return held.write(fault, effect, c, t_s)


class Placements:
    """Where the replicas of one deployment were, look after look: an event (``t_s``, ``replica``, ``state``,
    ``node``, ``zone``) each time a replica is first listed or its state or node changes, and ``GONE`` when it is
    no longer listed; looks that got no answer counted (``unknown``)."""

    def __init__(self, deployment: str | None, before: Iterable[dict] = ()):
        self.deployment = deployment
        self.last: dict[str, tuple] = {x["replica"]: (x.get("state"), x.get("node"), x.get("zone")) for x in before}
        self.events: list[dict] = []
        self.looks = self.unknown = 0

    def saw(self, t_s: float, rows: Iterable[Any]) -> None:
        """One look's replicas (:class:`chaos.system.placement.Replica` each), at ``t_s`` from the injection."""
        self.looks += 1
        now = {r.replica_id: (r.state, r.node, r.zone) for r in rows
               if self.deployment is None or r.deployment == self.deployment}
        for rid, where in now.items():
            if self.last.get(rid) != where:
                self.events.append({"t_s": t_s, "replica": rid, "state": where[0], "node": where[1], "zone": where[2]})
        for rid in self.last.keys() - now.keys():
            if self.last[rid][0] != GONE:
                self.events.append({"t_s": t_s, "replica": rid, "state": GONE, "node": None, "zone": None})
                now[rid] = (GONE, None, None)
        self.last = {**{k: v for k, v in self.last.items() if v[0] == GONE}, **now}

    def detail(self, poll_s: float, until_s: float | None) -> dict:
        return {"deployment": self.deployment, "poll_s": poll_s, "until_s": until_s, "looks": self.looks,
                "unknown": self.unknown, "events": self.events}


def placed(r: Any) -> dict:
    """A replica as the fault records it before its marker."""
    return {"replica": r.replica_id, "state": r.state, "node": r.node, "zone": r.zone, "deployment": r.deployment}
