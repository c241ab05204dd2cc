"""A device that stays bad (``device-loss``, issue 46): the fault's ``device`` entry, from the records alone: the
fault's own watch of the replicas (its detail's ``watch.events``: each replica of the deployment's state, node and
zone whenever one changed, every ``poll_s``; ``replicas_at_injection``; the remedy's ``cordon``; the marker's removal,
``device_restored``, at the heal's end mark) and the requests' ``served_replica``.

A **replacement** is a replica of the deployment not listed at the injection; it is **placed** where it was first seen
with a node (a replica waiting for a node is not placed).

- ``placements``: every replacement placed in the watch, ``{"replica", "node", "zone", "t_s", "on_bad_node",
  "outcome"}`` (``t_s`` from the injection; ``outcome``: ``running`` once seen RUNNING, ``failed`` gone without, or
  ``starting`` at the watch's end).
- ``failed_starts``: the placements on the bad node that failed (a lower bound: a start that failed between two looks
  is not seen); null with the reason when the watch saw nothing.
- ``time_to_healthy_replica_s``: from the injection to the first request a replacement answered (the instant the
  client saw it end) from a **healthy node**: off the bad node, or on it after the device's restore; null with the
  reason when none did within the window, or the requests do not say who served them. Only replacements count: the
  replicas of the other nodes serve throughout.
- ``moved_off_bad_node``: whether Serve (or KubeRay) placed a replacement off the bad node by itself: before the rig's
  cordon, or in the whole watch without one; null with the reason when it placed none by then (the cordon came first).
- ``crashloop_s``: how long replacements kept failing on the bad node: 0 when no start on the bad node failed or hung;
  else until a healthy replica served (``time_to_healthy_replica_s``), or, when none did, the whole window
  (``crashloop_ongoing`` true): the bound ``max_device_crashloop_s`` (default :data:`DEFAULT_MAX_CRASHLOOP_S`) reads it.
- ``cordoned_s`` (the remedy's cordon, from the injection), ``device_restored_s`` (the heal's end, when it removed
  the marker), ``engine_failures`` (the engines' own records of the loss), ``resolution_s`` (the watch's period).
"""

from __future__ import annotations

from typing import Any

from chaos import scopes
from chaos.recording import records as rec
from chaos.analysis.windows import NS, Fault

DEFAULT_MAX_CRASHLOOP_S = 120.0
RUNNING = "RUNNING"
GONE = ("GONE", "STOPPING")


def applies(scope: str) -> bool:
    """Whether a fault of ``scope`` leaves a node whose device stays bad: its flag ``bad_device``."""
    return scopes.get(scope).bad_device


def _sec(t0: int, t: int | None) -> float | None:
    return None if t is None else round((t - t0) / NS, 3)


def placements(detail: dict[str, Any], bad: str | None) -> list[dict[str, Any]]:
    """The replacements placed in the watch (see the module doc), in the order they were placed."""
    before = {x.get("replica") for x in detail.get("replicas_at_injection") or []}
    events = sorted((detail.get("watch") or {}).get("events") or [], key=lambda e: e.get("t_s") or 0.0)
    first: dict[str, dict] = {}
    states: dict[str, list[str]] = {}
    for e in events:
        rid = e.get("replica")
        if rid in before:
            continue
        states.setdefault(rid, []).append(e.get("state"))
        if rid not in first and e.get("node"):
            first[rid] = e
    out = []
    for rid, e in sorted(first.items(), key=lambda kv: (kv[1].get("t_s") or 0.0, kv[0])):
        seen = states[rid]
        outcome = "running" if RUNNING in seen else "failed" if seen[-1] in GONE else "starting"
        out.append({"replica": rid, "node": e.get("node"), "zone": e.get("zone"), "t_s": e.get("t_s"),
                    "on_bad_node": e.get("node") == bad, "outcome": outcome})
    return out


def _healthy(f: Fault, placed: dict[str, dict], requests: list[rec.RequestRecord], restored_ns: int | None,
             before: set[str]) -> tuple[int | None, str | None, str | None]:
    """(instant, replica) of the first answer a replacement gave from a healthy node, and why none when none."""
    said = [r for r in requests if r.served_replica]
    if not said:
        return None, None, "the requests do not say which replica served them (served_replica)"
    best: tuple[int, str] | None = None
    for r in said:
        if not r.ok or r.served_replica in before:
            continue
        end = r.sent_ns + int((r.e2e_s or 0.0) * NS)
        p = placed.get(r.served_replica)
        healthy = (p is not None and not p["on_bad_node"]) or (restored_ns is not None and end >= restored_ns)
        if healthy and end >= f.inject_ns and (best is None or end < best[0]):
            best = (end, r.served_replica)
    if best is None:
        return None, None, ("no replacement off the bad node (or on it after the device's restore) answered a request "
                            "within the fault's window")
    return best[0], best[1], None


def device(f: Fault, requests: list[rec.RequestRecord], window_end_ns: int,
           unmeasurable: dict[str, str]) -> dict[str, Any]:
    """The fault's ``device`` entry (see the module doc); each null figure's reason in ``unmeasurable``
    (``device.<name>``). ``requests``: the fault's window's requests (those in flight at the injection included)."""
    d, t0 = f.detail, f.inject_ns
    bad = d.get("node") or f.target
    watch = d.get("watch") or {}
    cordon = d.get("cordon") or {}
    restored = (d.get("device_restored") or {}).get("removed") is True
    restored_ns = f.heal_end_ns if restored and f.heal_end_ns is not None and f.heal_end_ns < window_end_ns else None
    out: dict[str, Any] = {
        "node": bad, "mode": d.get("mode"), "xid": d.get("xid"), "remedy": d.get("remedy"), "placements": [],
        "failed_starts": None, "time_to_healthy_replica_s": None, "healthy_replica": None,
        "moved_off_bad_node": None, "crashloop_s": None, "crashloop_ongoing": None,
        "cordoned_s": cordon.get("t_s") if cordon.get("cordoned") else None,
        "device_restored_s": _sec(t0, restored_ns), "engine_failures": len(d.get("engine_failures") or []),
        "resolution_s": watch.get("poll_s")}

    def why(name: str, reason: str) -> None:
        unmeasurable[f"device.{name}"] = reason

    if out["cordoned_s"] is None:
        why("cordoned_s", "the remedy cordoned nothing" + (f" ({cordon['error']})" if cordon.get("error") else
                                                             "" if d.get("remedy") else ": the fault ran without one"))
    if restored_ns is None:
        why("device_restored_s", "the heal did not remove the marker within the fault's window ("
            + str((d.get("device_restored") or {}).get("why") or "no outcome recorded") + ")")
    if not watch.get("looks"):
        for name in ("failed_starts", "time_to_healthy_replica_s", "moved_off_bad_node", "crashloop_s"):
            why(name, "the fault recorded no look at the replicas' placement (its watch)")
        return out
    placed = placements(d, bad)
    out["placements"] = placed
    out["failed_starts"] = sum(p["on_bad_node"] and p["outcome"] == "failed" for p in placed)
    before = {x.get("replica") for x in d.get("replicas_at_injection") or []}
    t_ns, replica, reason = _healthy(f, {p["replica"]: p for p in placed}, requests, restored_ns, before)
    if t_ns is not None and t_ns < window_end_ns:
        out["time_to_healthy_replica_s"], out["healthy_replica"] = _sec(t0, t_ns), replica
    else:
        why("time_to_healthy_replica_s", reason or "no replacement answered from a healthy node within the window")
    by_itself = [p for p in placed if out["cordoned_s"] is None or (p["t_s"] or 0.0) < out["cordoned_s"]]
    if by_itself:
        out["moved_off_bad_node"] = any(not p["on_bad_node"] for p in by_itself)
    else:
        why("moved_off_bad_node", f"no replacement was placed before the rig's cordon ({out['cordoned_s']} s)"
            if out["cordoned_s"] is not None else "no replacement was placed within the watch")
    looped = any(p["on_bad_node"] and p["outcome"] in ("failed", "starting") for p in placed)
    if not looped:
        out["crashloop_s"], out["crashloop_ongoing"] = 0.0, False
    elif out["time_to_healthy_replica_s"] is not None:
        out["crashloop_s"], out["crashloop_ongoing"] = out["time_to_healthy_replica_s"], False
    elif reason and "served_replica" in reason:
        why("crashloop_s", f"its end, a healthy replica's first answer, cannot be told: {reason}")
    else:  # never a healthy replica: the loop went on to the window's end
        out["crashloop_s"], out["crashloop_ongoing"] = _sec(t0, window_end_ns), True
    return out
