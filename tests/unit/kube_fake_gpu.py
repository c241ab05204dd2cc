"""The GPU side of the in-memory API server (tests/unit/kube_fake.py), for the accelerator loss
(chaos/backends/kuberay/accelerators.py): :class:`GpuServer`, advanced on its ``clock`` at every request.

What it models, each piece naming the upstream code (Kubernetes unless said):

- **DaemonSets and their controller** (``pkg/controller/daemon/daemon_controller.go``): per node,
  ``NodeShouldRunDaemonPod`` (the template's nodeSelector and required node affinity against the node's labels;
  taints are not modelled: the device plugins tolerate the GPU taint). A node that should run the daemon and has
  no pod of it (terminating ones count) gets one, bound to the node and Pending until the kubelet starts it at its
  next sync; a node that should not run it and has one gets it deleted (``podsShouldBeOnNode``: "If daemon pod
  isn't supposed to run on node, but it is, delete all daemon pods on node"), gracefully: terminating until the
  kubelet is done, at its next sync (the plugin exits on the SIGTERM);
- **the kubelet's device manager** (``pkg/kubelet/cm/devicemanager``): the NVIDIA device plugin, a pod of a
  DaemonSet labelled as one (``chaos.backends.kuberay.accelerators.is_plugin``), is registered while its pod runs
  (``PluginConnected``, then its ListAndWatch: every device healthy); once its pod terminates (its process gone, the
  stream ended) the plugin is disconnected (``PluginDisconnected``: ``markResourceUnhealthy``, the endpoint's stop
  time); ``GetCapacity``: capacity the healthy and unhealthy devices, allocatable the healthy ones, the resource
  dropped once ``endpointStopGracePeriod`` (5 min) has passed, written as capacity 0
  (``pkg/kubelet/nodestatus/setters.go`` ``MachineInfo``). A new plugin pod registers again when it runs;
- **the kubelet's node status**: capacity and allocatable reach the API only at its next status update, every
  ``nodeStatusUpdateFrequency`` (10 s) on the server's clock, the node's resourceVersion bumped when they change;
- **kube-scheduler's NodeResourcesFit** for ``nvidia.com/gpu`` (``pkg/scheduler/framework/plugins/noderesources/
  fit.go`` ``fitsRequest``): a pod's request against the node's allocatable less what the pods bound there request
  (terminating ones too, as the scheduler's cache keeps them until they are gone); a pod that fits nowhere stays
  Pending with ``PodScheduled`` False, ``Unschedulable``, "0/N nodes are available: K Insufficient nvidia.com/gpu";
- ``GET /api/v1/pods`` (every namespace) with ``fieldSelector=spec.nodeName=NODE`` and a ``labelSelector`` (403 when
  in :attr:`FakeServer.forbidden`, as the base's lists).
"""

from __future__ import annotations

import copy
import itertools

from tests.unit.kube_fake import FakeServer, FakeStream, _matches, _selects, node, node_fits, ray_pod, running_status

RESOURCE = "nvidia.com/gpu"
OPERATOR_LABEL = "nvidia.com/gpu.deploy.device-plugin"
PLUGIN = {"app": "nvidia-device-plugin-daemonset"}  # the GPU operator's device plugin pods' label


def gpus_of(pod: dict) -> int:
    """What a pod (API JSON) asks for of ``nvidia.com/gpu``."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        r = c.get("resources") or {}
        total += max(int((r.get("limits") or {}).get(RESOURCE, 0)), int((r.get("requests") or {}).get(RESOURCE, 0)))
    return total


def _terms_match(affinity: dict | None, labels: dict) -> bool:
    terms = ((((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
              or {}).get("nodeSelectorTerms") or [])
    return not terms or any(_selects({"matchExpressions": t.get("matchExpressions") or []}, labels) for t in terms)


class GpuServer(FakeServer):
    """:class:`FakeServer` with GPU nodes (``gpus``: devices per node), DaemonSets (``daemonsets``), their
    controller, the kubelet's device manager and node status, and a scheduler that honours allocatable."""

    def __init__(self, namespace: str = "availproof", status_period_s: float = 10.0, stop_grace_s: float = 300.0):
        super().__init__(namespace)
        self.gpus: dict[str, int] = {}
        self.daemonsets: dict[tuple[str, str], dict] = {}
        self.status_period_s, self.stop_grace_s = status_period_s, stop_grace_s
        self.endpoints: dict[str, dict] = {}  # node -> {"registered", "stopped_at"}: the device manager's endpoint
        self.posted: dict[str, float] = {}  # node -> the instant of its last status update
        self.events: list[tuple[float, str, str]] = []  # (instant, node, what happened there), for the tests
        self.daemonset_controller = True  # False: the DaemonSet controller is down (nothing deleted, nothing made)
        self._names = itertools.count(1)

    # ---------------------------------------------------------------- set-up
    def add_gpu_node(self, obj: dict, gpus: int) -> None:
        """A node with ``gpus`` devices; no plugin registered yet (:meth:`settle` runs the DaemonSets)."""
        name = obj["metadata"]["name"]
        self.nodes[name] = obj
        self.gpus[name] = gpus
        self.endpoints[name] = {"registered": False, "stopped_at": None}

    def add_daemonset(self, namespace: str, name: str, labels: dict, node_selector: dict | None = None,
                      affinity: dict | None = None, device_plugin: bool = False) -> dict:
        """A DaemonSet (``device_plugin``: its pods register ``nvidia.com/gpu`` with the kubelet); its pods are made
        on the next requests (:meth:`settle` runs them at once)."""
        ds = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-ds-{name}"},
              "device_plugin": device_plugin,
              "spec": {"template": {"metadata": {"labels": dict(labels)},
                                    "spec": {"nodeSelector": dict(node_selector or {}), "affinity": affinity,
                                             "containers": [{"name": name + "-ctr", "image": f"{name}:v1"}]}}}}
        self.daemonsets[(namespace, name)] = ds
        return ds

    def settle(self, rounds: int = 3) -> None:
        """The controllers' steps until quiet (creation, start, registration), status posted at once."""
        for _ in range(rounds):
            self.sync_gpus(post_now=True)

    def daemon_pods(self, namespace: str, name: str, node_name: str | None = None) -> list[dict]:
        uid = self.daemonsets[(namespace, name)]["metadata"]["uid"]
        return [p for (nsp, _), p in sorted(self.other_pods.items()) if nsp == namespace
                and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
                and (node_name is None or p["spec"].get("nodeName") == node_name)]

    # ---------------------------------------------------------------- the controllers, at every request
    def route(self, method, path, query, body):
        self.sync_gpus()
        if path == "/api/v1/pods" and method == "GET" and path not in self.forbidden:  # every namespace, selectors
            on = (query.get("fieldSelector") or "").removeprefix("spec.nodeName=") or None
            items = [{**p, "metadata": {**p["metadata"], "namespace": self.ns}} for p in self.pods.values()]
            items += [{**p, "metadata": {**p["metadata"], "namespace": nsp}} for (nsp, _), p in self.other_pods.items()]
            items = [p for p in items if (on is None or (p.get("spec") or {}).get("nodeName") == on)
                     and _matches(p, query.get("labelSelector"))]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return super().route(method, path, query, body)

    def _plugin_running(self, node_name: str) -> bool:
        """A device plugin's pod runs on the node (the plugin registers with the kubelet, whatever its labels)."""
        plugins = {ds["metadata"]["uid"] for ds in self.daemonsets.values() if ds.get("device_plugin")}
        return any(any(r.get("uid") in plugins for r in p["metadata"].get("ownerReferences") or [])
                   and p["spec"].get("nodeName") == node_name and p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp") for p in self.other_pods.values())

    def sync_gpus(self, post_now: bool = False) -> None:
        now = self.clock()
        # the kubelet: a terminating daemon pod's process exited on its SIGTERM, the object goes; a new one starts
        for key, p in list(self.other_pods.items()):
            if not p["metadata"].get("ownerReferences"):
                continue
            if p["metadata"].get("deletionTimestamp"):
                self.other_pods.pop(key)
                self.events.append((now, p["spec"]["nodeName"], f"pod {key[1]} gone"))
            elif p["status"].get("phase") == "Pending":
                p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                               "containerStatuses": [{"name": c["name"], "restartCount": 0, "ready": True,
                                                      "image": c["image"], "imageID": "", "containerID": ""}
                                                     for c in p["spec"]["containers"]]}
        # the DaemonSet controller: NodeShouldRunDaemonPod, podsShouldBeOnNode
        for (ns, name), ds in (self.daemonsets.items() if self.daemonset_controller else ()):
            tmpl = ds["spec"]["template"]
            for node_name, obj in sorted(self.nodes.items()):
                labels = obj["metadata"].get("labels") or {}
                should = all(labels.get(k) == v for k, v in tmpl["spec"]["nodeSelector"].items()) and \
                    _terms_match(tmpl["spec"].get("affinity"), labels)
                mine = self.daemon_pods(ns, name, node_name)
                if should and not mine:
                    self._create_daemon_pod(ns, name, ds, node_name)
                    self.events.append((now, node_name, f"{name} pod created"))
                elif not should:
                    for p in mine:
                        if not p["metadata"].get("deletionTimestamp"):
                            p["metadata"]["deletionTimestamp"] = "2026-12-05T18:00:00Z"
                            p["metadata"]["deletionGracePeriodSeconds"] = 30
                            self.events.append((now, node_name, f"{name} pod deleted by its DaemonSet"))
        # the device manager: PluginConnected / PluginDisconnected
        for node_name, ep in self.endpoints.items():
            up = self._plugin_running(node_name)
            if up and (not ep["registered"] or ep["stopped_at"] is not None):
                ep.update(registered=True, stopped_at=None)
                self.events.append((now, node_name, "plugin registered"))
            elif not up and ep["registered"] and ep["stopped_at"] is None:
                ep["stopped_at"] = now
                self.events.append((now, node_name, "plugin disconnected: devices unhealthy"))
        # the node status, at the kubelet's next update
        for node_name, devices in self.gpus.items():
            if node_name in self.nodes and (post_now or now - self.posted.get(node_name, float("-inf"))
                                            >= self.status_period_s):
                self.posted[node_name] = now
                self._post_status(node_name, devices, now)

    def _create_daemon_pod(self, ns: str, name: str, ds: dict, node_name: str) -> None:
        tmpl = copy.deepcopy(ds["spec"]["template"])
        pod_name = f"{name}-{next(self._names):05d}"
        spec = {**tmpl["spec"], "nodeName": node_name}
        self.other_pods[(ns, pod_name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": ns, "uid": f"uid-{pod_name}", "resourceVersion": "1",
                         "labels": tmpl["metadata"]["labels"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                              "uid": ds["metadata"]["uid"], "controller": True}]},
            "spec": {k: v for k, v in spec.items() if v is not None}, "status": {"phase": "Pending"}}

    def _post_status(self, node_name: str, devices: int, now: float) -> None:
        ep = self.endpoints[node_name]
        if not ep["registered"]:
            return
        if ep["stopped_at"] is None:
            cap, alloc = devices, devices
        elif now - ep["stopped_at"] > self.stop_grace_s:
            cap, alloc = 0, 0  # GetCapacity's deleted resource: the setter writes capacity 0
        else:
            cap, alloc = devices, 0  # every device unhealthy
        obj = self.nodes[node_name]
        status = obj.setdefault("status", {})
        before = (dict(status.get("capacity") or {}), dict(status.get("allocatable") or {}))
        status.setdefault("capacity", {})[RESOURCE] = str(cap)
        status.setdefault("allocatable", {})[RESOURCE] = str(alloc)
        if (status["capacity"], status["allocatable"]) != before:
            meta = obj["metadata"]
            meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
            self.events.append((now, node_name, f"status: capacity {cap}, allocatable {alloc}"))

    # ---------------------------------------------------------------- the scheduler, with NodeResourcesFit
    def room(self, node_name: str) -> int:
        """The node's allocatable GPUs less what the pods bound there ask for."""
        alloc = int(((self.nodes[node_name].get("status") or {}).get("allocatable") or {}).get(RESOURCE, 0))
        used = sum(gpus_of(p) for p in list(self.pods.values()) + list(self.other_pods.values())
                   if (p.get("spec") or {}).get("nodeName") == node_name
                   and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
        return alloc - used

    def schedule(self) -> list[str]:
        """Bind every Pending pod to the first node it fits (the base's filters, and room for the GPUs it asks
        for); one that fits nowhere gets the scheduler's PodScheduled condition, and stays Pending."""
        bound = []
        for name, pod in sorted(self.pods.items()):
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            eligible = [n for n, obj in sorted(self.nodes.items()) if node_fits(self, pod, obj)]
            fits = [n for n in eligible if self.room(n) >= gpus_of(pod)]
            if not fits:
                reasons = [f"{len(eligible)} Insufficient {RESOURCE}"] if eligible else []
                if len(self.nodes) - len(eligible):
                    reasons.append(f"{len(self.nodes) - len(eligible)} node(s) didn't match Pod's node "
                                   "affinity/selector")
                pod["status"] = {"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": f"0/{len(self.nodes)} nodes are available: {', '.join(reasons)}."}]}
                continue
            spec["nodeName"] = fits[0]
            n = next(self._names)
            pod["status"] = running_status(spec, n)
            bound.append(name)
        return bound


def gpu_pod(name: str, node_name: str | None, ip: str | None, group: str, gpus: int = 1, **kw) -> dict:
    """A Ray worker pod of the GPU overlay: its container asks for ``gpus`` GPUs."""
    p = ray_pod(name, node_name, ip, group=group, **kw)
    p["spec"]["containers"][0]["resources"] = {k: {"cpu": "6", "memory": "24Gi", RESOURCE: str(gpus)}
                                               for k in ("limits", "requests")}
    p["spec"]["tolerations"] = [{"key": RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    return p


def gpu_cluster_server(gpus_per_node: int = 2) -> GpuServer:
    """The GPU overlay on a GPU operator's cluster: a CPU control-plane node (head, Redis), one GPU node per zone
    (``gpus_per_node`` each, the operator's labels), the operator's device plugin DaemonSet (nodeSelector
    ``nvidia.com/gpu.deploy.device-plugin: "true"``) and its DCGM exporter (a label of its own), kube-proxy on
    every node (``kubernetes.io/os: linux``); a Ray worker on each GPU node holding one GPU."""
    s = GpuServer()
    s.nodes["k-cp"] = node("k-cp", "control", "region-1")
    gpu_labels = {"nvidia.com/gpu.present": "true", OPERATOR_LABEL: "true",
                  "nvidia.com/gpu.deploy.dcgm-exporter": "true", "kubernetes.io/os": "linux"}
    for name, zone in (("k-a", "zone-a"), ("k-b", "zone-b"), ("k-c", "zone-c")):
        s.add_gpu_node(node(name, zone, "region-1", labels=gpu_labels,
                            taints=[{"key": RESOURCE, "value": "present", "effect": "NoSchedule"}]), gpus_per_node)
    s.nodes["k-cp"]["metadata"]["labels"]["kubernetes.io/os"] = "linux"
    s.add_daemonset("gpu-operator", "nvidia-device-plugin-daemonset", PLUGIN, {OPERATOR_LABEL: "true"},
                    device_plugin=True)
    s.add_daemonset("gpu-operator", "nvidia-dcgm-exporter", {"app": "nvidia-dcgm-exporter"},
                    {"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    s.add_daemonset("kube-system", "kube-proxy", {"k8s-app": "kube-proxy"}, {"kubernetes.io/os": "linux"})
    s.settle()
    for p in (ray_pod("head", "k-cp", "10.0.0.1", node_type="head", group="headgroup"),
              gpu_pod("wa-1", "k-a", "10.0.1.1", "workers-zone-a"),
              gpu_pod("wb-1", "k-b", "10.0.2.1", "workers-zone-b"),
              gpu_pod("wc-1", "k-c", "10.0.3.1", "workers-zone-c")):
        s.pods[p["metadata"]["name"]] = p
    return s


CLUSTER = "availproof-x7k2p"


def gpu_cluster(gpus_per_node: int = 2):
    """(server, backend, exec stream): the KubeRay backend over :func:`gpu_cluster_server`'s cluster, its RayService
    and RayCluster (one GPU worker group per zone, as the GPU overlay's)."""
    from chaos.backends import kuberay as kb

    s = gpu_cluster_server(gpus_per_node)
    s.custom[("rayservices", "availproof")] = {"apiVersion": "ray.io/v1", "kind": "RayService",
                                               "metadata": {"name": "availproof"},
                                               "status": {"activeServiceStatus": {"rayClusterName": CLUSTER}}}
    groups = [{"groupName": f"workers-{z}", "replicas": 1, "template": {"spec": {
        "nodeSelector": {kb.ZONE_LABEL: z},
        "tolerations": [{"key": RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "ray-worker", "image": "availproof-vllm",
                        "resources": {k: {RESOURCE: "1"} for k in ("limits", "requests")}}]}}}
        for z in ("zone-a", "zone-b", "zone-c")]
    s.custom[("rayclusters", CLUSTER)] = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                          "metadata": {"name": CLUSTER}, "spec": {"workerGroupSpecs": groups}}
    stream = FakeStream(s.kubelet.exec)
    core, net, custom = s.apis()
    b = kb.KubeRayBackend("availproof", "gke-gpu", "availproof", max_pods=1, serve_url="http://s",
                          dashboard_url="http://d", core=core, networking=net, custom=custom, stream_fn=stream)
    b.run_id = "run1"
    b.resolve_cluster()
    return s, b, stream
