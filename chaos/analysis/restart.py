"""A restart that fails (``restart-fails``, issue 48): the fault's ``restart`` entry, from Serve's replica states over
time (the sampler's samples: the RUNNING replicas' ids, ``replica_ids``, and those STARTING on a node, their
constructor running, ``starting_ids``, per deployment; and the application's status).

Of the deployment the fault killed a replica of (its ``detail.deployment``), a **start** is a replica id not running
before the injection, first seen STARTING or RUNNING in the window. Each start either **succeeded** (seen RUNNING),
**failed** (seen STARTING, then gone without ever being seen RUNNING), or is **still starting** at the window's end.

- ``failed_starts``: the starts that failed. A start that failed between two samples is not seen (the sampler's
  period, ``resolution_s``): a lower bound; null with the reason when no sample knew the starting replicas.
- ``starts``: every start, ``{"replica", "first_seen_s", "last_seen_s", "outcome"}`` (from the injection).
- ``backoff_s``: the gaps between consecutive starts' first sightings (s): what Serve waited between its attempts,
  to the sampler's resolution; null with the reason for fewer than two starts.
- ``went_unhealthy``: the application's status was UNHEALTHY or DEPLOY_FAILED in any sample of the window (null
  when no sample said its status); ``statuses``: every status seen, in order.
- ``others_kept_serving``: every replica of the deployment running before the injection but the killed one was
  RUNNING in every sample from the injection to the weights' restore (null when no sample knew the ids).
- ``weights_restored_s``: the restore's instant (the heal's end mark), from the injection; null when not in the window,
  or when the heal did not restore them (the fault's ``weights_restored.restored`` not true: someone else's file
  left, a pod gone, nothing recorded), with its reason.
- ``time_to_first_success_s``: from the weights' restore to the first sample with a new replica RUNNING; null with the
  reason when the weights were never restored in the window (or the heal did not restore them), when no new replica ran after it, or when one already ran
  before it (the fault did not hold the replacement back: its ``first_success_s`` says when, from the injection).
"""

from __future__ import annotations

from typing import Any

from chaos.analysis import planes
from chaos.recording import records as rec
from chaos import scopes
from chaos.analysis.windows import NS, Fault

UNHEALTHY = ("UNHEALTHY", "DEPLOY_FAILED")


def applies(scope: str) -> bool:
    """Whether a fault of ``scope`` leaves its replacement unable to start: its flag ``failing_restart``."""
    return scopes.get(scope).failing_restart


def _sec(t0: int, t: int | None) -> float | None:
    return None if t is None else round((t - t0) / NS, 3)


def _ids(by_deployment: dict[str, list[str]] | None, deployment: str | None) -> set[str]:
    return {i for d, ids in (by_deployment or {}).items() if deployment is None or d == deployment for i in ids}


def restart(f: Fault, samples: list[rec.Sample], window_end_ns: int, unmeasurable: dict[str, str]) -> dict[str, Any]:
    """The fault's ``restart`` entry (see the module doc); each figure's reason in ``unmeasurable``
    (``restart.<name>``) when null."""
    t0, restored_ns = f.inject_ns, f.heal_end_ns
    if restored_ns is not None and restored_ns >= window_end_ns:
        restored_ns = None
    outcome = f.detail.get("weights_restored") or {}
    not_restored = None
    if restored_ns is not None and outcome.get("restored") is not True:  # the heal ran, the weights did not return
        not_restored = ("the heal did not restore the weights (" + str(outcome.get("why") or
                        "the fault recorded no restore outcome") + ")")
        restored_ns = None
    dep = f.detail.get("deployment")
    known = [s for s in samples if s.controller_ok and s.replica_ids is not None]
    before = [s for s in known if s.t_ns < t0]
    window = [s for s in known if t0 <= s.t_ns < window_end_ns]
    out: dict[str, Any] = {"failed_starts": None, "starts": [], "backoff_s": None, "went_unhealthy": None,
                           "statuses": [], "others_kept_serving": None, "weights_restored_s": _sec(t0, restored_ns),
                           "first_success_s": None, "time_to_first_success_s": None,
                           "resolution_s": planes.resolution(window)}

    def why(name: str, reason: str) -> None:
        unmeasurable[f"restart.{name}"] = reason

    statuses = [s.app_status for s in samples if t0 <= s.t_ns < window_end_ns and s.app_status]
    out["statuses"] = list(dict.fromkeys(statuses))
    if statuses:
        out["went_unhealthy"] = any(st in UNHEALTHY for st in statuses)
    else:
        why("went_unhealthy", "no sample in the window said the application's status")
    if restored_ns is None:
        why("weights_restored_s", not_restored or "the weights were not restored within the fault's window")
    if not before or not window:
        reason = ("no sample before the injection knew the replicas' ids" if not before else
                  "no sample in the window knew the replicas' ids")
        for name in ("failed_starts", "backoff_s", "others_kept_serving", "first_success_s",
                     "time_to_first_success_s"):
            why(name, reason)
        return out
    old = _ids(before[-1].replica_ids, dep)
    others = old - {f.target}
    held = [s for s in window if restored_ns is None or s.t_ns < restored_ns]
    out["others_kept_serving"] = all(others <= _ids(s.replica_ids, dep) for s in held) if held else None
    if not held:
        why("others_kept_serving", "no sample between the injection and the restore")

    first: dict[str, int] = {}
    last: dict[str, int] = {}
    ran: dict[str, int] = {}
    for s in window:
        running = _ids(s.replica_ids, dep) - old
        for i in running | (_ids(s.starting_ids, dep) - old):
            first.setdefault(i, s.t_ns)
            last[i] = s.t_ns
        for i in running:
            ran.setdefault(i, s.t_ns)
    still = _ids(window[-1].starting_ids, dep) | _ids(window[-1].replica_ids, dep)
    starts = []
    for i in sorted(first, key=lambda i: (first[i], i)):
        outcome = "succeeded" if i in ran else ("still starting" if i in still else "failed")
        starts.append({"replica": i, "first_seen_s": _sec(t0, first[i]), "last_seen_s": _sec(t0, last[i]),
                       "outcome": outcome})
    out["starts"] = starts
    if any(s.starting_ids is not None for s in window):
        out["failed_starts"] = sum(s["outcome"] == "failed" for s in starts)
    else:
        why("failed_starts", "the samples did not record the STARTING replicas (a run recorded before they were)")
    if len(starts) >= 2:
        out["backoff_s"] = [round(b["first_seen_s"] - a["first_seen_s"], 3) for a, b in zip(starts, starts[1:])]
    else:
        why("backoff_s", f"{len(starts)} start(s) seen in the window: no gap between two")
    first_run = min(ran.values()) if ran else None
    out["first_success_s"] = _sec(t0, first_run)
    if first_run is None:
        why("first_success_s", "no new replica RUNNING within the window")
    if restored_ns is None:
        why("time_to_first_success_s", not_restored or "the weights were not restored within the fault's window")
    elif first_run is not None and first_run < restored_ns:
        why("time_to_first_success_s", f"a replacement was RUNNING {_sec(t0, first_run)} s after the injection, "
            "before the weights were restored: the fault did not hold it back")
    else:
        after = [t for t in ran.values() if t >= restored_ns]
        if after:
            out["time_to_first_success_s"] = _sec(restored_ns, min(after))
        else:
            why("time_to_first_success_s", "no new replica RUNNING within the window after the weights' restore")
    return out
