"""Leftovers of a run that crashed, whatever run left them: found by label and annotation (each with its run
id and its deadline: :mod:`chaos.backends.kuberay.kube.marks`) and undone, by ``availproof recover`` (every one) and
by the next preparation (those past their deadline). Functions over the backend (``b``), undoing through its parts
(and :data:`IN_POD_LEFTOVERS` through the backend itself); the backend's ``leftovers`` and ``remove_leftovers``
call :func:`find` and :func:`remove`."""

from __future__ import annotations

import json
from typing import Callable

from chaos.backends.kuberay import engine_marks, weights
from chaos.backends.kuberay.kube import load as kl, marks as km, partition as kp
from chaos.backends.kuberay.common import (CORDON_MARK, ZONE_LABEL, api_message, is_not_found, labels_of, name_of,
                                           node_of)
from chaos.base.errors import ClusterError


def _row(kind: str, name: str, namespace: str | None, run_id, zone, what: str, expires=None, **extra) -> dict:
    return {"kind": kind, "name": name, "namespace": namespace, "run_id": run_id, "zone": zone, "what": what,
            "expires": expires, **extra}


# IN_POD_LEFTOVERS: what the rig leaves inside the Ray pods' own files (no API object carries it), one entry per
# kind: (kind, find, undo). ``find(backend)`` -> the leftovers rows of that kind (one exec per pod; each row a
# ``pod`` key); ``undo(backend, pod)`` undoes every one of that kind in ``pod`` whatever run left it (raises on
# failure). find() lists them (so the next preparation refuses while any is there) and remove() (``availproof
# recover``) undoes them, one call per pod.
IN_POD_LEFTOVERS: list[tuple[str, Callable, Callable]] = [
    ("EngineMark", engine_marks.find, engine_marks.undo),  # any run's held engine faults (marks, pending requests)
    ("Weights", weights.leftover_rows, weights.undo_pod),  # any run's restart-fails weights swapped in a pod
]


def find(b, in_pods: bool = True) -> list[dict]:
    """Every object or change of the rig's still in place, whatever run left it: partition helper pods,
    nft tables recorded on nodes (their helper alive or not), partition NetworkPolicies, Ray pods labelled
    for a partition, engines stopped (SIGSTOP), Jobs of load workers (by their pods), nodes cordoned for a
    zone loss, device plugins paused for an accelerator loss, a ``cluster`` upgrade's record (its pending
    RayCluster), and what the Ray pods' own files hold (:data:`IN_POD_LEFTOVERS`: held engine faults' marks and
    requests never taken, ``EngineMark``; one exec per Ray pod, left out without ``in_pods``: a preparation
    whose faults need no exec, not reviewed for it, does not look there). Each: {"kind", "name", "namespace", "run_id", "zone", "what", "expires"} (``expires``: the
    mark's deadline, None when it has none)."""
    out = []
    for p in b.domains.partitions.helpers():
        lab = labels_of(p)
        out.append(_row("Pod", name_of(p), b.namespace, lab.get(kp.RUN_KEY), lab.get(kp.ZONE_KEY),
                        f"partition helper of {lab.get(kp.ZONE_KEY)} on node {node_of(p)} "
                        f"({(p.get('status') or {}).get('phase')})", km.annotations(p).get(km.EXPIRES)))
    out += b.engines.devices.helpers.leftovers()  # device-loss's helper pods (the marker cleared on a node)
    selector = ",".join(f"{k}={v}" for k, v in kp.POLICY_LABEL.items())
    for pol in b.kube.net.list_namespaced_network_policy(b.namespace, label_selector=selector).items:
        pol = pol.to_dict()
        lab = labels_of(pol)
        out.append(_row("NetworkPolicy", name_of(pol), b.namespace, lab.get(kp.RUN_KEY), lab.get(kp.ZONE_KEY),
                        f"partition of {lab.get(kp.ZONE_KEY)}", km.annotations(pol).get(km.EXPIRES)))
    for p in b.pods.pods(label_selector=kp.MEMBER_LABEL):
        mark, zone = km.read(km.annotations(p).get(km.MEMBER_MARK)), labels_of(p).get(kp.MEMBER_LABEL)
        out.append(_row("Pod", name_of(p), b.namespace, mark.get("run"), zone,
                        f"Ray pod labelled {kp.MEMBER_LABEL}={zone} for a partition", mark.get("expires")))
    pods = b.pods.pods()
    for p in pods:
        mark = km.read(km.annotations(p).get(km.PAUSED_MARK))
        if mark.get("pids"):
            cycles = list(mark.get("throttles") or [])
            out.append(_row("Paused", name_of(p), b.namespace, mark.get("run"), None,
                            f"engine process(es) {', '.join(map(str, mark['pids']))} stopped (SIGSTOP)"
                            + (f", duty cycle(s) {', '.join(cycles)} (engine-stutter)" if cycles else ""),
                            mark.get("expires"), pids=list(mark["pids"]), throttles=cycles))
    jobs: dict[str, list[dict]] = {}
    for p in b.pods.pods(label_selector=kl.RUN_LABEL):  # a Job of load workers keeps its pods until it is deleted
        lab = labels_of(p)
        name = next((lab[k] for k in kl.JOB_NAME_LABELS if lab.get(k)), None)
        if name:
            jobs.setdefault(name, []).append(p)
    for name, jpods in sorted(jobs.items()):
        phases = ", ".join(sorted({str((p.get("status") or {}).get("phase")) for p in jpods}))
        out.append(_row("Job", name, b.namespace, labels_of(jpods[0]).get(kl.RUN_LABEL), None,
                        f"load workers ({len(jpods)} pod(s): {phases})", km.annotations(jpods[0]).get(km.EXPIRES)))
    for n in b.pods.nodes():
        ann = km.annotations(n)
        if CORDON_MARK in ann:
            out.append(_row("Node", name_of(n), None, ann[CORDON_MARK], labels_of(n).get(ZONE_LABEL),
                            f"cordoned for a zone loss (unschedulable: {bool((n.get('spec') or {}).get('unschedulable'))})",
                            ann.get(km.CORDON_EXPIRES)))
        if km.NFT_MARK in ann:
            mark = km.read(ann[km.NFT_MARK])
            out.append(_row("NftTable", name_of(n), None, mark.get("run"), mark.get("zone"),
                            f"nft table inet {kp.TABLE} of a partition of {mark.get('zone')} on the node",
                            mark.get("expires")))
    out += b.accelerators.leftovers(b.pods.nodes())  # device plugins an accelerator loss paused
    out += b.engines.devices.leftovers(b.pods.nodes())  # device-loss markers in nodes' directories (no exec)
    out += b.lifecycle.rollbacks.leftovers()
    for _kind, find, _undo in IN_POD_LEFTOVERS if in_pods else ():  # inside the Ray pods: engine marks (and
        out += find(b)  # what plugs in)
    return out

def remove(b, found: list[dict] | None = None, keep_going: bool = False) -> dict:
    """Undo every leftover :func:`find` finds (or those of ``found``), whatever its run: stopped engines
    resumed (SIGCONT through exec, a process gone skipped; a straggler's duty cycle ended first), helpers
    (their table deleted first, checked), nft tables whose helper died (through a helper made for it),
    NetworkPolicies, the pods' partition labels, load workers' Jobs (``propagationPolicy: Foreground``: their pods
    and ConfigMaps go too), the cordons (a node someone uncordoned meanwhile only loses the annotation), the
    device plugins' labels put back (a device-plugin outage; a label someone else set meanwhile is left), a
    failed ``cluster`` upgrade rolled back, the
    :data:`IN_POD_LEFTOVERS` undone per pod (every engine mark removed, a pending request voided). A removal that fails does not stop the others: each failure is one
    line of ``failed``, its leftover not in ``removed``; with any failure this raises them all (one line)
    unless ``keep_going`` (``availproof recover --backend kuberay``: it reports each and exits non-zero)."""
    found = find(b) if found is None else found
    errors: list[str] = []
    failed: set[int] = set()

    def attempt(what: str, xs: list[dict], fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - one line each; the other removals go on
            status = getattr(e, "status", None)
            text = (f"HTTP {status}: {api_message(e)}" if status is not None else
                    str(e) if isinstance(e, ClusterError) else f"{type(e).__name__}: {e}")
            errors.append(" ".join(f"{what}: {text}".split())[:400])
            failed.update(id(x) for x in xs)

    def of(kind: str) -> list[dict]:
        return [x for x in found if x["kind"] == kind]

    paused = [f"{x['name']}/{pid}" for x in of("Paused") for pid in x.get("pids") or []]
    for x in of("Paused"):  # a straggler's duty cycle is ended before its engines are continued
        if x.get("throttles"):
            known = b.engines.throttles.setdefault(x["name"], [])
            known += [t for t in x["throttles"] if t not in known]
    if paused:
        attempt(f"engines {', '.join(paused)}", of("Paused"), b.resume_engine, paused)
    helpers = [x for x in of("Pod") if x["what"].startswith("partition helper")]
    if helpers:
        attempt(f"partition helpers {', '.join(x['name'] for x in helpers)}", helpers, b.domains.partitions.remove_helpers,
                [x["name"] for x in helpers])
    for x in of("Pod"):  # device-loss's helper pods, before any marker is cleared through a new one
        if x["what"].startswith("device-loss helper"):
            attempt(f"device-loss helper {x['name']}", [x], b.engines.devices.helpers.delete, x["name"])
    tables = {x["name"]: x for x in of("NftTable")}
    nodes: dict[str, dict] = {}
    if tables or of("Node"):
        attempt("the nodes (read)", of("NftTable") + of("Node"), lambda: nodes.update(
            {name_of(n): n for n in b.pods.nodes()}))
    for name, x in tables.items():  # the tables the helpers did not take with them
        if name in nodes and km.NFT_MARK in km.annotations(nodes[name]):
            attempt(f"node {name}", [x], b.domains.partitions.remove_table, name, x["zone"])
    for x in of("NetworkPolicy"):
        attempt(f"NetworkPolicy {x['name']}", [x], _delete_policy, b, x["name"])
    labelled = [x for x in of("Pod") if x["what"].startswith("Ray pod labelled")]
    if labelled:
        attempt(f"pod labels of {', '.join(x['name'] for x in labelled)}", labelled, b.domains.partitions.unlabel,
                [{"metadata": {"name": x["name"]}} for x in labelled])
    for x in of("Job"):  # its pods first, then the Job (its ConfigMaps are its dependents too)
        attempt(f"Job {x['name']}", [x], _delete_job, b, x["name"])
    for x in of("Node"):
        if x["name"] in nodes:
            attempt(f"node {x['name']} (uncordon)", [x], b.domains.zone_loss.uncordon, nodes[x["name"]])
    for x in of("Accelerator"):  # the device plugins' labels put back, while still the rig's pause
        attempt(f"node {x['name']} (device plugin)", [x], b.accelerators.remove, x)
    # the marker removed from the node's directory (any Ray pod there, else a helper pod pinned to it), whatever run
    for x in of("DeviceLoss"):
        attempt(f"node {x['name']} (device-loss marker)", [x], b.engines.devices.remove, x)
    for x in of("Upgrade"):
        attempt(f"upgrade record {x['name']}", [x], b.lifecycle.rollbacks.roll_back_record, json.loads(x["record"]), x["name"])
    for kind, _find, undo in IN_POD_LEFTOVERS:  # one call per pod: every one of the kind there, any run's
        for pod in sorted({x["pod"] for x in of(kind)}):
            attempt(f"pod {pod} ({kind})", [x for x in of(kind) if x["pod"] == pod], undo, b, pod)
    if errors and not keep_going:
        raise ClusterError("; ".join(errors))
    return {"removed": [x for x in found if id(x) not in failed], "failed": errors}

def _delete_policy(b, name: str) -> None:
    try:
        b.kube.net.delete_namespaced_network_policy(name, b.namespace)
    except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
        if not is_not_found(e):
            raise

def _delete_job(b, name: str) -> None:
    try:
        b.kube.batch.delete_namespaced_job(name, b.namespace, propagation_policy="Foreground")
    except Exception as e:  # noqa: BLE001 - ApiException; gone is what we wanted
        if not is_not_found(e):
            raise
