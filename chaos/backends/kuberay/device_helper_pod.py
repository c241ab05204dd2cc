"""device-loss's helper pod: the marker in a Kubernetes node's directory cleared when no Ray pod of the rig is on the
node any more (the remedy cordoned the node and evicted its pod, or KubeRay placed the replacement elsewhere).

A short-lived pod pinned to the node (``spec.nodeName``: no scheduler, so a cordon does not keep it out) tolerating
the rig's own taints there (the cordon's ``node.kubernetes.io/unschedulable`` and device-loss's
:data:`~chaos.backends.kuberay.device_node.TAINT`, NoSchedule), mounting the same hostPath directory the Ray workers
mount (:data:`HOST_DIR`, ``type: Directory``: a node without it is left as it is) at the same path, in the Ray
workers' image (already on the node: a Ray pod of the rig ran there, and it carries ``serve_apps``): one exec of
``python -m serve_apps.device_loss clear --token`` removes the marker only while it still holds the fault's token
(the same code as through a Ray pod), then the pod is deleted. Labelled as the rig's (:data:`HELPER_LABEL`, the run
id, the node), annotated with a deadline and carrying ``activeDeadlineSeconds``, so ``--plan`` lists it and
``availproof recover`` deletes one a crashed run left. A helper that does not run within :attr:`DeviceHelpers.run_s`
(its image not pullable, the node gone NotReady) is deleted and said in one line; the marker stays."""

from __future__ import annotations

import re

from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.kube.partition import FAULT_LABEL, RUN_KEY
from chaos.backends.kuberay.common import api_message, labels_of, name_of, node_of
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target

HOST_DIR = "/var/lib/availproof/device-loss"  # serve_apps.kuberay.DEVICE_LOSS_HOST_DIR: what the Ray workers mount
HELPER_LABEL = {FAULT_LABEL: "device-loss-helper"}
NODE_KEY = "availproof.io/node"
CONTAINER = "device-loss"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the taint a cordon puts on the node


def helper_name(node: str) -> str:
    return ("availproof-device-loss-" + re.sub(r"[^a-z0-9-]", "-", node.lower()))[:63].rstrip("-")


def helper_pod(node: str, image: str, mount_path: str, run_id: str, deadline_s: float,
               taints: tuple[str, ...] = ()) -> dict:
    """The helper pinned to ``node``: the node's :data:`HOST_DIR` mounted at ``mount_path``, idle until the exec,
    tolerating the cordon's taint and ``taints`` (NoSchedule), gone after ``deadline_s`` whatever happens to the run."""
    life = max(1, int(-(-float(deadline_s or 600) // 1)))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": helper_name(node), "labels": {**HELPER_LABEL, RUN_KEY: run_id, NODE_KEY: node},
                     "annotations": {km.EXPIRES: km.deadline(life)}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": life,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in (UNSCHEDULABLE, *taints)],
            "volumes": [{"name": CONTAINER, "hostPath": {"path": HOST_DIR, "type": "Directory"}}],
            "containers": [{
                "name": CONTAINER, "image": image, "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", str(life)],
                "volumeMounts": [{"name": CONTAINER, "mountPath": mount_path}],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
            }],
        },
    }


class DeviceHelpers:
    """The helper pods of device-loss: made, run once, deleted; listed (``--plan``, the leftovers)."""

    run_s = 120.0  # how long a helper may take to run (its image is on the node already)
    poll_s = 2.0

    def __init__(self, kube: KubeClient, target: Target, pods: Pods):
        self.kube, self.target, self.pods = kube, target, pods

    def pods_of_rig(self, run_id: str | None = None) -> list[dict]:
        want = {**HELPER_LABEL, **({RUN_KEY: run_id} if run_id else {})}
        return self.pods.pods(label_selector=",".join(f"{k}={v}" for k, v in want.items()))

    def image(self, recorded: str | None) -> str | None:
        """The image the helper runs: the one recorded with the marker (the Ray pod's), else any Ray worker's now."""
        if recorded:
            return recorded
        for p in self.pods.ray(node_type="worker"):
            containers = (p.get("spec") or {}).get("containers") or []
            if containers and containers[0].get("image"):
                return containers[0]["image"]
        return None

    def run_on(self, node: str, image: str, mount_path: str, script: str, taints: tuple[str, ...] = ()) -> str:
        """``script`` run once in a helper on ``node`` (created, waited for, exec'd, deleted in every case): its
        stdout. Raises :class:`TimeoutError` (one line) when the helper does not run within :attr:`run_s`."""
        body = helper_pod(node, image, mount_path, self.target.run_id, self.target.helper_deadline_s, taints)
        name = name_of(body)
        try:
            self.kube.core.create_namespaced_pod(self.target.namespace, body)
        except Exception as e:  # noqa: BLE001 - ApiException: a crashed run's helper of that name, deleted first
            if getattr(e, "status", None) != 409:
                raise
            self.replace_own(name)
            self.kube.core.create_namespaced_pod(self.target.namespace, body)
        try:
            t0, phase = self.kube.monotonic(), None
            while True:
                found = [p for p in self.pods_of_rig() if name_of(p) == name]
                phase = (found[0].get("status") or {}).get("phase") if found else "gone"
                if phase == "Running" and node_of(found[0]) == node:
                    break
                if phase in ("gone", "Failed", "Succeeded") or self.kube.monotonic() - t0 >= self.run_s:
                    raise TimeoutError(f"helper pod {name} on node {node} did not run within {self.run_s:g} s "
                                       f"(phase {phase})")
                self.kube.sleep(self.poll_s)
            return self.pods.exec(name, script, container=CONTAINER, ok_codes=(0, 1))
        finally:
            self.delete(name)

    def replace_own(self, name: str) -> None:
        """A helper of that name is there already: deleted, and waited gone, only when it is this run's (a crashed
        look's); another run's is never touched (one line, the caller's marker kept)."""
        found = [p for p in self.pods_of_rig() if name_of(p) == name]
        run = ((found[0].get("metadata") or {}).get("labels") or {}).get(RUN_KEY) if found else None
        if found and run != self.target.run_id:
            raise TimeoutError(f"helper pod {name} is another run's ({run}): left alone")
        self.delete(name)
        t0 = self.kube.monotonic()
        while any(name_of(p) == name for p in self.pods_of_rig()) and self.kube.monotonic() - t0 < self.run_s:
            self.kube.sleep(self.poll_s)

    def delete(self, name: str) -> None:
        self.pods.delete([{"metadata": {"name": name}}])

    def leftovers(self) -> list[dict]:
        """Every device-loss helper pod (any run's): leftover rows of kind ``Pod``."""
        out = []
        for p in self.pods_of_rig():
            lab = labels_of(p)
            out.append({"kind": "Pod", "name": name_of(p), "namespace": self.target.namespace,
                        "run_id": lab.get(RUN_KEY), "zone": None, "expires": km.annotations(p).get(km.EXPIRES),
                        "what": f"device-loss helper on node {lab.get(NODE_KEY)} "
                                f"({(p.get('status') or {}).get('phase')})"})
        return out


def failed(e: Exception) -> str:
    """A helper's failure as one line."""
    status = getattr(e, "status", None)
    text = f"HTTP {status}: {api_message(e)}" if status is not None else f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:300]
