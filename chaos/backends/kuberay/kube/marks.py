"""Every change the rig makes on the cluster carries the run id and a deadline, so that a crashed run's
leftovers can be found without the run (``availproof recover``, the next preparation) and told apart:
past its deadline a mark belongs to no live run.

Where each mark lives: a cordon, the annotations :data:`CORDON_MARK` (the run id) and
:data:`CORDON_EXPIRES` on the node; an nft table of a node-filter partition, :data:`NFT_MARK` on its node
(written before the table is loaded, removed once it is deleted: a table whose helper pod died is found
there); a pod labelled for a networkpolicy partition, :data:`MEMBER_MARK`; an engine stopped (SIGSTOP),
:data:`PAUSED_MARK` on its pod (the pids, for a SIGCONT through exec); an accelerator loss,
:data:`ACCELERATOR_MARK` on its node (the device plugin's label and the value to put back, written with the
pause itself); a device-loss marker in a node's directory, :data:`DEVICE_MARK` on the node; helper pods, NetworkPolicies, the load Job and its ConfigMaps, the upgrade's record and the pod
templates of a ``cluster`` upgrade (so the pending RayCluster KubeRay makes of them), the label or annotation
:data:`RUN` and :data:`EXPIRES`."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

RUN = "availproof.io/run"  # the run id (the label kube_partition.RUN_KEY, or an annotation)
EXPIRES = "availproof.io/expires"  # RFC 3339 (UTC): past it, no live run owns the object
CORDON_MARK = "availproof.io/cordoned"  # on a node a zone loss cordoned; its value: the run id
CORDON_EXPIRES = "availproof.io/cordoned-expires"
NFT_MARK = "availproof.io/nft-table"  # on a node whose nft table a partition loaded: {"run", "zone", "expires"}
MEMBER_MARK = "availproof.io/partition-member"  # on a pod labelled for a partition: {"run", "expires"}
PAUSED_MARK = "availproof.io/paused"  # on a pod with engine processes stopped: {"run", "pids", "expires"}
# on a node whose device plugin an accelerator loss paused: {"run", "label", "was", "plugin", "gpus", "expires"}
ACCELERATOR_MARK = "availproof.io/accelerator-lost"
# on a node in whose directory (mounted in its Ray pods) a device-loss fault wrote its marker:
# {"run", "fault", "token", "pod", "expires"}
DEVICE_MARK = "availproof.io/device-lost"


def deadline(seconds: float, now: float | None = None) -> str:
    """The instant ``seconds`` from now (wall clock, UTC), as RFC 3339 to the second."""
    t = (time.time() if now is None else now) + max(0.0, float(seconds))
    return datetime.fromtimestamp(int(t + 0.999), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def expired(stamp: str | None, now: float | None = None) -> bool:
    """Whether an :data:`EXPIRES` stamp has passed. None or unreadable: not known to have expired (an object
    of an older rig, or written by hand), so not taken as one no run owns."""
    if not stamp:
        return False
    try:
        t = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return False
    return (time.time() if now is None else now) >= t


def record(run_id: str, seconds: float, **extra) -> str:
    """A mark's annotation value: JSON with the run id, the deadline and what undoing it needs."""
    return json.dumps({"run": run_id, "expires": deadline(seconds), **extra}, sort_keys=True)


def read(value: str | None) -> dict:
    """A mark written by :func:`record` ({} when absent or unreadable)."""
    try:
        out = json.loads(value or "{}")
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def annotations(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("annotations") or {}


def stamped(run_id: str, seconds: float) -> dict[str, str]:
    """The annotations of an object the rig creates: its run id and its deadline."""
    return {RUN: run_id, EXPIRES: deadline(seconds)}
