"""The ``restart-fails`` fault on the local backend (:mod:`chaos.scopes.restart_fails`): the weights file the
deployed app's replicas load at their start, swapped and restored in place (:mod:`serve_apps.weights_swap`).

Where: the local nodes are raylets on this one machine, so the file is **one, shared by every node** (the stream
target's default file under ``$AVAILPROOF_HOME``, or its ``weights_path``; vLLM's ``model.safetensors`` in the
checkpoint directory it serves): the fault makes the weights unreadable cluster-wide. The replicas already running
are not touched (they loaded theirs); any replica that starts meanwhile fails, whichever node it lands on, which is
what a replacement meets when a shared model store fails. Each function takes the backend first, as its methods do."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from chaos.system import ray_dashboard
from chaos.backends import weights_source
from chaos.backends.local import effect
from chaos.base.errors import ClusterError, UsageError
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


def registry_dir() -> Path:
    """Where the rig records each file a restart-fails fault swaps (``$AVAILPROOF_HOME/restart-fails``, default
    ``~/.availproof``): what ``availproof recover`` walks, whatever app is deployed by then."""
    return Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof")) / "restart-fails"


def registry_entry(run_id: str, fault_id: str) -> Path:
    return registry_dir() / f"{run_id or 'no-run'}-{fault_id}.json"


def registered_paths() -> dict[str, list[Path]]:
    """The weights files the registry names (path: its entries)."""
    out: dict[str, list[Path]] = {}
    for entry in sorted(registry_dir().glob("*.json")):
        try:
            out.setdefault(json.loads(entry.read_text())["path"], []).append(entry)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def breaker(b, r) -> Callable[[str], dict]:
    """Everything but the swap done (the file found and read); the callable swaps it (its mark: what the heal
    needs), for fault ``fault_id``. The file is recorded in the rig's registry (:func:`registry_dir`) before the
    swap, and the entry removed again if the swap did not happen."""
    w = weights_file(b)

    def swap(fault_id: str, fault: dict | None = None) -> dict:  # one file: swapped whole, or not (it cleans itself)
        entry = registry_entry(b.run_id or "", fault_id)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"path": w["path"], "run_id": b.run_id or "", "fault_id": fault_id}))
        try:
            mark = weights_swap.break_weights(w["path"], b.run_id or "", fault_id)
        except BaseException:
            entry.unlink(missing_ok=True)
            raise
        return {**mark, "app": w["app"], "where": "this machine (every local node)"}
    return swap


def restore(b, fault: dict) -> dict:
    """The original put back where it still reads as this run's fault left it; what was done (and why not). A
    fault already restored (its outage's restore) keeps that outcome: the rollback's second call does not overwrite
    it. The registry's entry is removed once nothing of the fault's is left (restored, or its mark cleared)."""
    first = fault.get("weights_restored") or {}
    if first.get("restored") is True:
        return first
    w = fault.get("weights") or {}
    if not w.get("path"):
        return {"restored": False, "state": None, "why": "the fault recorded no weights file: nothing swapped"}
    out = weights_swap.restore(w["path"], b.run_id or "")
    if out.get("restored") or out.get("cleared"):
        registry_entry(b.run_id or "", w.get("fault_id") or fault.get("fault_id") or "").unlink(missing_ok=True)
    return out


def recover(b) -> dict | None:
    """``availproof recover``: every weights file the rig's registry names (any run's) and the deployed app's, put
    back where a restart-fails mark of any run is left next to it and it still reads as its truncated copy;
    ``{"restored": all were, "files": {path: what was done}}``, None when no such file has a mark. A registry entry
    is removed once its file has no mark left."""
    try:
        from serve_apps.config import APP_NAME

        details = ray_dashboard.serve_details(b.dashboard_url) or {}
        w = weights_source.of_app((details.get("applications") or {}).get(APP_NAME) or {})
    except UsageError:
        w = {"path": weights_source.NODE_DEFAULT}  # nothing deployed: the stream target's default file still
    current = stream_weights.default_path() if w["path"] == weights_source.NODE_DEFAULT else w["path"]
    entries = registered_paths()
    files = {}
    for path in dict.fromkeys([*entries, current]):
        if weights_swap.read_mark(path):
            files[path] = weights_swap.restore(path, None)
        if weights_swap.read_mark(path) is None:
            for entry in entries.get(path, []):
                entry.unlink(missing_ok=True)
    if not files:
        return None
    return {"restored": all(o.get("restored") or o.get("cleared") for o in files.values()), "files": files}


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
    outage, starts, cap = a.get("outage_s", 30.0), a.get("hold_until_failed_starts", 1), a.get("max_outage_s", 600.0)
    hold = (f"the original put back once a replacement's start failed {starts} time(s) and at least {outage} s after "
            f"the injection, at most {cap} s after it" if starts else f"the original put back {outage} s after the "
            "injection")
    return [{"kind": "file", "name": w["path"], "where": "this machine (shared by every local node)",
             "does": f"swapped for a truncated copy of itself (the {w['app']} app's weights; the original copied "
                     "aside, a mark naming the run)",
             "after": hold if outage is not None else "the original put back at the rollback"},
            {"kind": "process", "name": str(r.pid), "where": f"node {r.node} (zone {r.zone})",
             "does": f"SIGKILL of replica {r.replica_id}'s worker process",
             "after": "Serve's replacement fails to start until the weights are back"}]
