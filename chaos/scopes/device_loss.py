"""device-loss: a device that stays bad (issue 46). :func:`lose_device` marks the accelerator of the node one replica
(of ``zone``) runs on as lost, the way a GPU fails in production (NVIDIA XID 79 "GPU has fallen off the bus", XID 48
a double-bit ECC error, XID 94/95 a contained or uncontained ECC error), without a GPU: a per-node marker that the
app's engine-side hook reads (:mod:`serve_apps.device_loss`). While it is there the engine on the node fails at its
next step (``mode`` ``error``) or hangs (``hang``), and every new engine that starts on the node fails (or hangs) as
it starts. Nothing evicts the replica's node and Ray keeps advertising its resources, so Serve re-places the replica
where it has room: with replicas pinned one per node, on the same node, where it crash-loops until something cordons
the node or the device comes back. After ``outage_s`` the rig removes the marker, only while it still holds the
fault's token (the heal never undoes what someone else set).

Where the marker is: on the local backend a file under ``/tmp`` keyed by the Ray node's name (the local nodes are
raylets on one machine; each raylet and every process it starts carries its name, ``AVAILPROOF_NODE``); on KubeRay
in a hostPath directory of the Kubernetes node that every Ray worker pod mounts (the shipped manifests), written and
read through exec of ``python -m serve_apps.device_loss`` in any Ray pod of the rig on that node: the device stays bad
for every pod placed there, a replacement included.

The proof, before the inject end mark: the marker the fault's, and an engine on the node that failed or hung on it
(its own record, at its step or at its start). It is **held to the heal**: every ``poll_s`` during the outage and
once more at the heal the marker must still be the fault's; one someone removed or replaced makes the effect
``verified: false`` with ``lost_until_s`` (when) and ``came_back`` (how).

Meanwhile the rig watches (every ``poll_s``): where each replica of the deployment is (``watch``: the events its
figures are derived from, :mod:`chaos.analysis.device`: the placements, the failed starts on the bad node, the time
to a healthy replica, whether Serve moved off the bad node by itself) and the engines' records (``engine_failures``).

**The remedy** (``remedy="cordon"``, opt-in, the rig's own health monitor): as soon as an engine's record of the
device error is seen, the bad node is cordoned (``cordon``): locally Ray's drain of the node (reason PREEMPTION, as
the drain scope's notice: Ray and Serve place nothing more there, Serve moves what is on it), on KubeRay the
Kubernetes node cordoned (annotated with the run) and the node's Ray pod evicted, as a health monitor that cordons
and drains does (NVIDIA's NVSentinel is reported to detect in ~15 s and cordon and drain in ~2 min; the rig's
monitor looks every ``poll_s``). The heal undoes only what is still the rig's: locally the drained node's raylet is
restarted (Ray has no undrain) only while it is still the one the remedy drained; on KubeRay the node uncordoned only
while its annotation still names the run.

On KubeRay, beside the marker (:mod:`chaos.backends.kuberay.device_node`): the node's NVIDIA device plugin paused the
way the ``accelerator`` scope pauses it (so the node's allocatable ``nvidia.com/gpu`` drops to 0), where the node
carries the GPU operator's label (skipped and said where it does not: ``device.plugin`` null, ``plugin_why``), held
with the marker and given back at the heal only while still the rig's pause; with ``taint`` the node tainted
``availproof.io/device-lost:NoSchedule`` as a health monitor (NVSentinel, node-problem-detector) would, removed at the
heal only while still the run's. The marker of a node with no Ray pod of the rig left is cleared through a helper pod
pinned to the node.
"""

from __future__ import annotations

import secrets
import time

from chaos.scopes import faults
from chaos.backends import device_loss as shared
from chaos.backends.kuberay.kube.access import EXEC, Access
from chaos.base.scope_registry import Scope
from chaos.system import orphan_watch


def lose_device(backend, marker: faults.Marker, zone: str | None = None, mode: str = "error", xid: int = 79,
                remedy: str | None = None, outage_s: float = 150.0, poll_s: float = 1.0, taint: bool = False,
                acknowledge_other_gpu_pods: bool = False) -> dict:
    """Mark the device of the node one RUNNING replica (of ``zone``) runs on as lost, ``mode`` ``error`` or ``hang``,
    as NVIDIA XID ``xid`` (79, 48, 94, 95); watch the node and the replicas every ``poll_s`` (with ``remedy``
    ``"cordon"``: cordon the node once an engine's device error is seen); remove the marker ``outage_s`` after the
    injection (and undo the cordon), only while they are still the rig's. Everything is read and checked before the
    mark (the replicas' placement, the node's marker free, the engine's hook on). On KubeRay also: the node's device
    plugin paused where the GPU operator's label is on it (another namespace's GPU pods there refused unless
    ``acknowledge_other_gpu_pods``), and with ``taint`` the node tainted as a health monitor would (KubeRay only)."""
    shared.check_arguments(mode, xid, remedy, outage_s, poll_s)
    r = backend.pick_replica(zone=zone)
    engines, why = orphan_watch.engines_before_kill(backend, r)  # the failed engine must go with its replica
    before = [shared.placed(x) for x in backend.replicas(state=None)]  # unknown: raises, nothing to compare with
    breaker = backend.device_breaker(r, mode, xid, outage_s=outage_s, taint=taint,  # checked, nothing written yet
                                     acknowledge_other_gpu_pods=acknowledge_other_gpu_pods)
    token = secrets.token_hex(8)
    with marker.inject(SCOPE.name, r.node, [r.zone] if r.zone else [],
                       {"node": r.node, "replica": r.replica_id, "pid": r.pid, "deployment": r.deployment,
                        "mode": mode, "xid": xid, "remedy": remedy, "outage_s": outage_s,
                        **({"taint": True} if taint else {})}) as f:
        f["replicas_at_injection"] = before
        orphan_watch.record_victim(f, r, engines, why)
        f["device"] = breaker(f["fault_id"], token)
        faults.prove(backend, marker, f)
    watch(backend, marker, f, remedy, outage_s, poll_s)
    with marker.heal(f):
        look(backend, marker, f)  # the hold, once more at the heal
        heal(backend, f)
    return f


def look(backend, marker: faults.Marker, f: dict) -> dict:
    """One look at the node: the engines' new records taken in, the hold written into the fault's effect."""
    t = round(marker.since_inject(f), 3)
    try:
        seen = backend.device_look(f)
    except Exception as e:  # noqa: BLE001 - a look that fails proves nothing either way
        seen = {"error": f"{type(e).__name__}: {e}"[:200]}
    shared.new_failures(f, seen)
    shared.hold(f, seen, t, drained=bool((f.get("cordon") or {}).get("evicted")))
    return seen


def watch(backend, marker: faults.Marker, f: dict, remedy: str | None, outage_s: float, poll_s: float) -> None:
    """Until ``outage_s`` after the injection: the replicas' placement and the node looked at every ``poll_s``;
    with the remedy, the node cordoned at the first look that finds an engine's device error."""
    placements = shared.Placements(f.get("deployment"), f.get("replicas_at_injection") or [])
    t = 0.0
    while (left := outage_s - marker.since_inject(f)) > 0:
        time.sleep(min(poll_s, left))
        t = round(marker.since_inject(f), 3)
        try:
            placements.saw(t, backend.replicas(state=None))
        except Exception:  # noqa: BLE001 - PlacementUnknown (no answer) or a read that failed: unknown, not empty
            placements.unknown += 1
        look(backend, marker, f)
        errors = shared.device_errors(f)
        if remedy == "cordon" and "cordon" not in f and errors:
            first = errors[0]
            try:
                done = backend.cordon_device_node(f)
            except Exception as e:  # noqa: BLE001 - recorded; the outage goes on without the remedy
                done = {"cordoned": False, "error": f"{type(e).__name__}: {e}"[:300]}
            f["cordon"] = {"t_s": t, "after": f"engine {first.get('pid')} {first.get('kind')} at its "
                                               f"{'start' if first.get('at') == 'init' else 'step'} "
                                               f"({first.get('t_s')} s)", **done}
            marker.log(f"device-loss remedy: node {f['target']} cordoned {t} s after the injection ({f['cordon']})")
    f["watch"] = placements.detail(poll_s, t)


def heal(backend, f: dict) -> None:
    """The marker removed (only while the fault's), then the cordon undone (only while the rig's); each outcome kept
    in the fault (a second call, the rollback's, keeps the first)."""
    f["device_restored"] = backend.restore_device(f)
    if (f.get("cordon") or {}).get("cordoned") and not (f.get("uncordon") or {}).get("uncordoned"):
        f["uncordon"] = backend.uncordon_device_node(f)


SCOPE = Scope(
    "device-loss", "device loss", fault=lose_device,
    backend_methods=("device_breaker", "device_look", "restore_device", "cordon_device_node", "uncordon_device_node"),
    action_omits=("poll_s",),  # the watch's period (a test's)
    # a replica's node: Serve routes to its replica from every zone's proxy; the marks name the node's zone
    zoned=True, every_target_affected=True,
    orphan_check=True,  # the replaced replica's engines must be gone (chaos.system.orphan_watch)
    bad_device=True,  # its replacements' placements and failed starts measured (chaos.analysis.device)
    # the engine looks at its marker from its step (the stream target's every ~0.1 s; vLLM's at its next request)
    effect_bound_s=30.0,
    kube_access=EXEC + (
        Access("patch", "nodes", namespaced=False, why="the marker recorded on its Kubernetes node, for recover, and "
               "dropped at the heal (device_breaker, restore_device); the remedy's cordon and uncordon"),
        Access("create", "pods", subresource="eviction", why="the remedy's drain of the bad node's Ray pod "
                                                             "(cordon_device_node)"),
        Access("create", "pods", why="the helper pod pinned to the node that clears the marker once no Ray pod of the "
                                     "rig is there (restore_device, recover)"),
        Access("delete", "pods", why="that helper pod deleted once done"),
        Access("list", "pods", namespaced=False,
               why="the pods on a GPU node in every namespace, before its device plugin is paused with the marker "
                   "(the device plugin's, any other the paused label would select, other namespaces' GPU pods)")),
    heal_args=("outage_s",), conflict_class="replica-level",
)
