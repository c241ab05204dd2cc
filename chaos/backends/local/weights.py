"""The ``restart-fails`` fault on the local backend (:mod:`chaos.scopes.restart_fails`): the weights file the
deployed app's replicas load at their start, swapped and restored in place (:mod:`serve_apps.weights_swap`).

Where: the local nodes are raylets on this one machine, so the file is **one, shared by every node** (the stream
target's default file under ``$AVAILPROOF_HOME``, or its ``weights_path``; vLLM's ``model.safetensors`` in the
checkpoint directory it serves): the fault makes the weights unreadable cluster-wide. The replicas already running
are not touched (they loaded theirs); any replica that starts meanwhile fails, whichever node it lands on, which is
what a replacement meets when a shared model store fails. Each function takes the backend first, as its methods do."""

from __future__ import annotations

from typing import Callable

from chaos import ray_dashboard
from chaos.backends import weights_source
from chaos.backends.local import effect
from chaos.errors import ClusterError, UsageError
from serve_apps import stream_weights, weights_swap


def weights_file(b) -> dict:
    """The deployed app's weights file here (a path on this machine), checked readable: UsageError or
    ClusterError otherwise."""
    from serve_apps.config import APP_NAME

    details = ray_dashboard.serve_details(b.dashboard_url) or {}
    w = weights_source.of_app((details.get("applications") or {}).get(APP_NAME) or {})
    if w["path"] == weights_source.NODE_DEFAULT:
        w["path"] = stream_weights.default_path()
    if w["checkpoint"]:
        weights_source.check_single_file(w["checkpoint"])
    if weights_swap.digest(w["path"]) is None:
        raise ClusterError(f"restart-fails: the app's weights {w['path']} cannot be read before the fault")
    return w


def breaker(b, r) -> Callable[[str], dict]:
    """Everything but the swap done (the file found and read); the callable swaps it (its mark: what the heal
    needs), for fault ``fault_id``."""
    w = weights_file(b)

    def swap(fault_id: str, fault: dict | None = None) -> dict:  # one file: swapped whole, or not (it cleans itself)
        mark = weights_swap.break_weights(w["path"], b.run_id or "", fault_id)
        return {**mark, "app": w["app"], "where": "this machine (every local node)"}
    return swap


def restore(b, fault: dict) -> dict:
    """The original put back where it still reads as this run's fault left it; what was done (and why not)."""
    w = fault.get("weights") or {}
    if not w.get("path"):
        return {"restored": False, "state": None, "why": "the fault recorded no weights file: nothing swapped"}
    return weights_swap.restore(w["path"], b.run_id or "")


def recover(b) -> dict | None:
    """``availproof recover``: the app's weights put back where a restart-fails mark of any run is left next to them
    and they still read as its truncated copy; None when the app's weights cannot be told (nothing deployed)."""
    try:
        from serve_apps.config import APP_NAME

        details = ray_dashboard.serve_details(b.dashboard_url) or {}
        w = weights_source.of_app((details.get("applications") or {}).get(APP_NAME) or {})
    except UsageError:
        w = {"path": weights_source.NODE_DEFAULT}  # nothing deployed: the stream target's default file still
    path = stream_weights.default_path() if w["path"] == weights_source.NODE_DEFAULT else w["path"]
    return weights_swap.restore(path, None) if weights_swap.read_mark(path) else None


def checks(b, fault: dict) -> list[dict]:
    """The proof: the weights read as the fault's truncated copy, the killed replica's process gone."""
    w = fault.get("weights") or {}
    now = weights_swap.state(w["path"], w) if w.get("path") else "not recorded"
    return [effect.check("the weights read as the fault's truncated copy", now == "truncated",
                         f"{w.get('path')}: {now}"),
            effect.pids_gone(list(fault.get("pids") or []), "the replica's worker process")]


def plan_rows(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    w = weights_file(b)
    outage = a.get("outage_s", 30.0)
    return [{"kind": "file", "name": w["path"], "where": "this machine (shared by every local node)",
             "does": f"swapped for a truncated copy of itself (the {w['app']} app's weights; the original copied "
                     "aside, a mark naming the run)",
             "after": f"the original put back {outage} s after the injection" if outage else
                      "the original put back at the rollback"},
            {"kind": "process", "name": str(r.pid), "where": f"node {r.node} (zone {r.zone})",
             "does": f"SIGKILL of replica {r.replica_id}'s worker process",
             "after": "Serve's replacement fails to start until the weights are back"}]
