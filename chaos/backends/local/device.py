"""``device-loss`` on the local backend (:mod:`chaos.scopes.device_loss`): the node's marker written, read and removed
in place (:mod:`serve_apps.device_loss`), and the remedy's cordon.

Where: the local nodes are raylets on this one machine sharing one ``/tmp``, so the marker is keyed by the Ray node's
name: each raylet is started with ``AVAILPROOF_NODE=<its name>`` (:mod:`chaos.backends.local.nodes`) and every process
it starts (the replicas, their engines) inherits it; the marker is ``/tmp/availproof-device-loss-<name>/marker.json``
and the engines' records lie beside it. A replica whose process does not carry its node's name (a cluster started
before the key existed) is refused in one line, nothing written.

The cordon: Ray's drain of the node (the drain scope's mechanism, reason PREEMPTION, with a deadline far out): Ray
places nothing more there and Serve treats the node as inactive (it starts a replica elsewhere and stops what is on
it). Ray has no undrain: the heal restarts the node's raylet, and only while it is still the session the remedy
drained (its session id and start count); a node restarted since is left as it is.

The rig keeps a registry of what each fault wrote (``$AVAILPROOF_HOME/device-loss``: the node, the token, the cordon's
session), so ``availproof recover`` undoes a killed run's markers and cordons. Each function takes the backend first,
as its methods do; :class:`Methods` is what the backend's class takes of them."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Callable

from chaos.backends import device_loss as shared
from chaos.backends.local import engines, nodes
from chaos.base.errors import ClusterError, UsageError
from serve_apps import device_loss as app

CORDON_DEADLINE_S = 3600.0  # the drain's deadline: far out (the rig ends the cordon itself, at the heal)


def registry_dir() -> Path:
    return Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof")) / "device-loss"


def registry_entry(run_id: str | None, fault_id: str) -> Path:
    return registry_dir() / f"{run_id or 'no-run'}-{fault_id}.json"


def process_env(pid: int) -> dict[str, str]:
    """A process's environment (/proc/PID/environ; {} when it cannot be read)."""
    try:
        raw = Path(f"/proc/{int(pid)}/environ").read_bytes()
    except OSError:
        return {}
    return dict(x.split("=", 1) for x in raw.decode(errors="replace").split("\0") if "=" in x)


def breaker(b, r, mode: str, xid: int) -> Callable[[str, str], dict]:
    """Everything but the marker done: the node known, its replica's process carrying the node's name (the key its
    engines read the marker by), the engine's hook on (it takes SIGUSR1: :func:`chaos.backends.local.engines.hooked`),
    no marker on the node already. The callable writes it (the registry's entry first)."""
    shared.check_arguments(mode, xid, None, 1.0)
    if not r.node:
        raise UsageError(f"device-loss: replica {r.replica_id}'s node is not known")
    have = process_env(int(r.pid)).get(app.NODE_ENV) if r.pid else None
    if have != r.node:
        raise ClusterError(f"device-loss: replica {r.replica_id}'s process {r.pid} carries {app.NODE_ENV}={have!r}, "
                           f"not its node's name {r.node!r}: its engines could not tell their node's marker (a cluster "
                           "started before device-loss: `availproof cluster down`, then `up`); nothing written")
    engines.hooked(b, r, "fail on its lost device", "fail")
    left = app.read_marker(r.node)
    if left is not None:
        raise ClusterError(f"device-loss: node {r.node} already has a marker (run {left.get('run')!r}, "
                           f"{app.marker_path(r.node)}): run `availproof recover` first")

    def write(fault_id: str, token: str) -> dict:
        entry = registry_entry(b.run_id, fault_id)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"node": r.node, "token": token, "run_id": b.run_id, "fault_id": fault_id}))
        try:
            mark = app.set_marker(r.node, b.run_id or "", fault_id, token, mode, xid)
        except BaseException:
            entry.unlink(missing_ok=True)
            raise
        return {**mark, "where": f"node {r.node} (/tmp on this machine, keyed by the node's name)"}
    return write


def look(b, fault: dict) -> dict:
    return app.look((fault.get("device") or {}).get("node_key") or fault["target"])


def restore(b, fault: dict) -> dict:
    """The marker removed while it holds the fault's token (the first outcome kept: the rollback's second call does
    not overwrite the outage's)."""
    first = fault.get("device_restored") or {}
    if first.get("state") in ("ours", "gone", "another"):
        return first
    mark = fault.get("device") or {}
    if not mark.get("token"):
        return {"removed": False, "state": None, "why": "the fault recorded no marker: nothing written"}
    out = app.clear(mark.get("node_key") or fault["target"], mark["token"])
    if not (fault.get("cordon") or {}).get("cordoned"):  # a cordon's entry goes with its undoing
        registry_entry(b.run_id, fault["fault_id"]).unlink(missing_ok=True)
    return out


def gcs_client(b):
    """The GCS's client (a seam for the tests)."""
    from ray._raylet import GcsClient

    return GcsClient(address=b.cluster.state.gcs_address)


def cordon(b, fault: dict) -> dict:
    """Ray's drain of the bad node (reason PREEMPTION, deadline :data:`CORDON_DEADLINE_S` out); its session recorded
    (in the registry too) for the heal and ``recover``."""
    n = b.cluster.node(fault["target"])
    node_id = b.node_id(n)
    nodes.request_drain(gcs_client(b), node_id, n.name, f"availproof: device-loss remedy, the device of {n.name} is lost",
                        CORDON_DEADLINE_S)
    done = {"cordoned": True, "method": "ray drain-node (PREEMPTION)", "node": n.name, "node_id": node_id,
            "sid": n.sid, "starts": n.starts}
    entry = registry_entry(b.run_id, fault["fault_id"])
    if entry.exists():
        entry.write_text(json.dumps({**json.loads(entry.read_text()), "cordon": done}))
    return done


def uncordon(b, fault: dict) -> dict:
    """The drained node's raylet restarted (Ray has no undrain), only while it is still the session the remedy drained;
    the registry's entry then removed."""
    c = fault.get("cordon") or {}
    if not c.get("cordoned"):
        return {"uncordoned": False, "why": "the remedy cordoned nothing"}
    out = restart_if_drained(b, c)
    registry_entry(b.run_id, fault["fault_id"]).unlink(missing_ok=True)
    return out


def restart_if_drained(b, c: dict) -> dict:
    n = b.cluster.node(c["node"])
    if n.sid != c.get("sid") or n.starts != c.get("starts"):
        return {"uncordoned": False, "why": f"node {n.name} was restarted since the remedy drained it: its raylet is "
                                            "not the drained one (nothing of the rig's left): left as it is"}
    b.cluster.kill_node(n.name)
    b.cluster.start_node(n.name)
    return {"uncordoned": True, "how": f"node {n.name}'s raylet restarted (Ray keeps a drained node draining)"}


def left_markers() -> list[str]:
    """Every device-loss marker on this machine (any run's): what a preparation refuses."""
    out = []
    for path in sorted(glob.glob(f"{app.DIR}/{app.PREFIX}*/marker.json")):
        key = Path(path).parent.name.removeprefix(app.PREFIX).lstrip("-")
        m = app.read_marker(key) or {}
        out.append(f"device-loss marker on node {key or '?'} (run {m.get('run')!r})")
    return out


def recover(b) -> dict | None:
    """``availproof recover``: every device-loss marker on this machine removed (only the rig writes them), every
    registered cordon undone where its node is still the drained session, the registry emptied; what was done, None
    when nothing was left."""
    markers = [Path(p).parent.name.removeprefix(app.PREFIX).lstrip("-")
               for p in sorted(glob.glob(f"{app.DIR}/{app.PREFIX}*/marker.json"))]
    out: dict = {"markers": {k: app.clear(k, None) for k in markers}, "cordons": {}}
    for entry in sorted(registry_dir().glob("*.json")):
        try:
            c = json.loads(entry.read_text()).get("cordon") or {}
        except (OSError, ValueError):
            c = {}
        if c.get("cordoned"):
            try:
                out["cordons"][c["node"]] = restart_if_drained(b, c)
            except Exception as e:  # noqa: BLE001 - said, the others go on
                out["cordons"][c["node"]] = {"uncordoned": False, "why": f"{type(e).__name__}: {e}"[:200]}
                continue
        entry.unlink(missing_ok=True)
    return out if out["markers"] or out["cordons"] else None


def heal(b, faults: list[dict], done: dict) -> None:
    """The backend's heal of device-loss faults not healed by their outage: the marker removed, the cordon undone."""
    from chaos.scopes import device_loss

    for f in faults:
        device_loss.heal(b, f)
        done.setdefault("devices", []).append({"device_restored": f["device_restored"], "uncordon": f.get("uncordon")})


def checks(b, fault: dict) -> list[dict]:
    return shared.checks(fault, look(b, fault))


def plan_rows(b, scope: str, a: dict) -> list[dict]:
    r = b.pick_replica(zone=a.get("zone"))
    mode, remedy = a.get("mode", "error"), a.get("remedy")
    rows = [{"kind": "file", "name": app.marker_path(r.node), "where": f"node {r.node} (zone {r.zone})",
             "does": f"written: the node's device marked lost ({mode}, XID {a.get('xid', 79)}): its engine "
                     f"{'fails at its next step' if mode == 'error' else 'hangs'}, every new engine there too",
             "after": f"removed {a.get('outage_s', 150.0)} s after the injection, only while it holds the fault's token"}]
    if remedy == "cordon":
        rows.append({"kind": "node", "name": r.node, "where": f"zone {r.zone}",
                     "does": "on the first engine's device error: Ray's drain of the node (PREEMPTION), the remedy",
                     "after": "its raylet restarted at the heal, only while still the session drained"})
    return rows


class Methods:
    """The backend's methods of device-loss (:class:`chaos.backends.base.Backend`), each one of the functions above."""

    def device_breaker(self, r, mode: str, xid: int, outage_s: float | None = None, taint: bool = False,
                       acknowledge_other_gpu_pods: bool = False) -> Callable[[str, str], dict]:
        if taint:
            raise UsageError("device-loss: taint is a Kubernetes node taint (availproof.io/device-lost): KubeRay only; "
                             "the local backend has no node to taint")
        return breaker(self, r, mode, xid)

    def device_look(self, fault: dict) -> dict:
        return look(self, fault)

    def restore_device(self, fault: dict) -> dict:
        return restore(self, fault)

    def cordon_device_node(self, fault: dict) -> dict:
        return cordon(self, fault)

    def uncordon_device_node(self, fault: dict) -> dict:
        return uncordon(self, fault)

