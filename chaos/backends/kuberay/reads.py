"""The pods part, the base every other part uses: the pods, the nodes, the RayService and its active RayCluster, the
domains, health and the sampler's look at the control plane; what every other part does to a pod: a command in it
(exit status checked), its delete, a node's patch; and the load workers' Job every fault that reaches nodes is
checked against (:mod:`.load`, held as ``load``)."""

from __future__ import annotations

from chaos.backends.kuberay.kube import load as kl, pod_exec as kube_exec
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import (RAYSERVICE, api_message, ZONE_LABEL, cluster_name, expected_pods, is_not_found, labels_of,
                                           limit, name_of, node_of, node_regions, node_zones, pod_ready, ray_pods,
                                           select)
from chaos.base.errors import ClusterError, UsageError


class Pods:
    """The cluster as every part sees it: pods and nodes, the RayService (its active cluster followed), health;
    commands run in pods and pods deleted. A part the backend holds (``backend.pods``), given the kube client and
    the :class:`~chaos.backends.kuberay.target.Target`; it holds the load workers' Job (``load``,
    :class:`~chaos.backends.kuberay.load.LoadJob`: ``load_settings`` is ``kubernetes.load`` when ``in_cluster``, else
    None), which reads the cluster through it."""

    def __init__(self, kube: KubeClient, target: Target, load_settings: kl.LoadJobSettings | None = None):
        self.kube, self.target = kube, target
        self.load = LoadJob(kube, target.namespace, lambda: target.cluster, load_settings,
                            run_id=lambda: target.run_id, pods=self.pods, nodes=self.nodes)

    def pods(self, label_selector: str | None = None) -> list[dict]:
        kw = {"label_selector": label_selector} if label_selector else {}
        return [p.to_dict() for p in self.kube.core.list_namespaced_pod(self.target.namespace, **kw).items]

    def nodes(self) -> list[dict]:
        return [n.to_dict() for n in self.kube.core.list_node().items]

    def resolve_cluster(self) -> str:
        """The RayCluster to act on: the active cluster of the RayService named ``cluster``
        (``status.activeServiceStatus.rayClusterName``), else the one Ray cluster whose pods
        carry that name or KubeRay's ``<service>-<5 chars>`` form of it."""
        try:
            rs = self.kube.custom.get_namespaced_custom_object("ray.io", "v1", self.target.namespace, "rayservices", self.target.cluster)
        except Exception as e:  # noqa: BLE001 - ApiException; only "no such RayService" falls through
            if not is_not_found(e):
                raise
            rs = {}
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if rs:
            self.target.service = self.target.cluster  # the RayService, whose conditions the sampler reads
        if active:
            self.target.cluster = active
            return active
        names = sorted({labels_of(p).get("ray.io/cluster", "") for p in ray_pods(self.pods())} - {""})
        match = cluster_name(self.target.cluster, names)
        if len(match) != 1:
            raise UsageError(f"RayCluster {self.target.cluster!r} in namespace {self.target.namespace}: "
                             f"{'no' if not match else len(match)} matching cluster(s) ({', '.join(names) or 'none'})")
        self.target.cluster = match[0]
        return self.target.cluster

    def ray(self, **kw) -> list[dict]:
        return select(self.pods(), self.nodes(), cluster=self.target.cluster, **kw)

    def head(self) -> dict:
        return limit(self.ray(node_type="head"), 1, "head pod")[0]

    def raycluster(self) -> dict:
        return self.kube.custom.get_namespaced_custom_object("ray.io", "v1", self.target.namespace, "rayclusters", self.target.cluster)

    def zones(self) -> list[str]:
        """The zones the RayCluster's worker groups are pinned to (nodeSelector), else every labelled zone."""
        pinned = {((g.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get(ZONE_LABEL)
                  for g in (self.raycluster().get("spec") or {}).get("workerGroupSpecs") or []} - {None}
        return sorted(pinned) or sorted({z for z in node_zones(self.nodes()).values() if z})

    def regions(self) -> list[str]:
        return sorted({r for r in node_regions(self.nodes()).values() if r})

    def zones_in_region(self, region: str) -> list[str]:
        nodes = self.nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        return sorted({zones[n] for n in zones if regions.get(n) == region and zones[n]})

    def ray_pod_names(self) -> list[str]:
        """Every Ray pod of the cluster (head and workers) not being deleted, by name."""
        return [name_of(p) for p in self.ray()]

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        """Worker pods of a zone or region (a "node" of the rig is a Ray pod here)."""
        zones = [zone] if zone else (self.zones_in_region(region) if region else None)
        if zones == []:
            return []
        return [name_of(p) for p in self.ray(zones=zones, node_type="worker")]

    def zone_of(self, node: str) -> str | None:
        zones = node_zones(self.nodes())
        for p in self.pods():
            if name_of(p) == node:
                return zones.get(node_of(p))
        return None

    def targets(self) -> list[tuple[str, str, str | None, str | None]]:
        if not self.target.serve_url:
            raise UsageError("the Kubernetes backend needs the serve Service's URL (--serve-url)")
        return [("serve-svc", self.target.serve_url, None, None)]

    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]:
        """The front door's listeners: on KubeRay the serve Service itself (see :meth:`front_door`)."""
        return self.targets()

    def head_target(self) -> tuple[str, str, str | None, str | None]:
        raise UsageError("targets: head: the head serves no traffic on KubeRay (excludeHeadPodFromServeSvc)")

    def own_hosts(self) -> tuple[str, ...]:
        return ()

    @property
    def dashboard_url(self) -> str:
        if not self.target.dashboard_url:
            raise UsageError("the Kubernetes backend needs the head's dashboard URL (--dashboard-url)")
        return self.target.dashboard_url

    def topology_doc(self) -> dict:
        nodes = self.nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        tree: dict[str, dict[str, list]] = {}
        for p in self.ray(node_type="worker"):
            n = node_of(p)
            tree.setdefault(regions.get(n) or "-", {}).setdefault(zones.get(n) or "-", []).append({"name": name_of(p)})
        return {"name": f"kuberay:{self.target.cluster}", "regions": [
            {"name": r, "zones": [{"name": z, "nodes": ns} for z, ns in sorted(zs.items())]}
            for r, zs in sorted(tree.items())]}

    def front_door(self) -> dict:
        """What stands between the client and the Serve proxies: KubeRay's serve Service."""
        svc = f"{self.target.service}-serve-svc" if self.target.service else None
        return {"kind": "kubernetes-service", "shape": "lb", "service": svc, "namespace": self.target.namespace,
                "serve_url": self.target.serve_url,
                "selector": {"ray.io/cluster": self.target.cluster, "ray.io/serve": "true"},
                "detection": "endpoints follow the pod readiness probe (KubeRay's on RayService workers: the "
                             "raylet's health and the Serve proxy's /-/healthz)",
                "what": "a Kubernetes Service over the active RayCluster's serve-ready pods (the head excluded: "
                        "excludeHeadPodFromServeSvc); KubeRay moves its selector to the new RayCluster when it "
                        "promotes one. serve_url is what the client sends to: it must reach this Service (or a "
                        "Service that follows the active cluster the same way) for an upgrade that replaces "
                        "the cluster"}

    def get_rayservice(self) -> dict:
        return self.kube.custom.get_namespaced_custom_object(*RAYSERVICE[:2], self.target.namespace, RAYSERVICE[2], self.target.service)

    def adopt_active(self, rs: dict | None) -> None:
        """Act on the RayService's active cluster: after a ``cluster`` upgrade KubeRay promotes the new
        RayCluster (and deletes the old one 60 s later, RayClusterDeletionDelayDuration)."""
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if active and active != self.target.cluster:
            self.target.cluster = active

    def follow_active(self) -> None:
        if self.target.service:
            self.adopt_active(self.get_rayservice())

    def rayservice(self, what: str) -> dict:
        """The RayService, read for ``what``; a bare RayCluster (no RayService) is refused."""
        if not self.target.service:
            raise UsageError(f"{what}: {self.target.cluster} is a bare RayCluster, not a RayService's: KubeRay upgrades "
                             f"only RayServices (--ray-cluster must name the RayService)")
        return self.get_rayservice()

    def healthy(self) -> bool:
        self.follow_active()
        pods = self.ray()
        redis = self.redis_pods()
        return (len([p for p in pods if pod_ready(p)]) >= expected_pods(self.raycluster())
                and all(pod_ready(p) for p in pods) and (not redis or any(pod_ready(p) for p in redis)))

    def wait(self, ok, timeout: float, what: str) -> None:
        deadline = self.kube.monotonic() + timeout
        while not ok():
            if self.kube.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
            self.kube.sleep(2)

    def wait_healthy(self, timeout: float = 300.0) -> None:
        self.wait(self.healthy, timeout, f"every Ray pod of {self.target.cluster} to be ready")

    def observe(self, timeout: float):
        """One sample of the control plane and capacity: GCS, controller and replicas through the
        head's dashboard (as locally); nodes alive are the Ray worker pods Ready per zone, from
        the Kubernetes API (a pod the kubelet reports Ready, as the serve Service's endpoints do)."""
        from dataclasses import replace

        from chaos.system import sampler
        from serve_apps.config import APP_NAME

        try:
            nodes = self.nodes()
            zones = node_zones(nodes)
            # a terminating pod (evicted by a drain) still hosts its replicas until it is gone: its
            # zone is known, but it is no capacity any more
            pods = select(self.pods(), nodes, cluster=self.target.cluster, terminating=True)
        except Exception as e:  # noqa: BLE001 - the API server not answering is a sample saying so
            zones, pods, k8s_error = {}, [], f"{type(e).__name__}: {e}"[:160]
        else:
            k8s_error = None
        zone_of_ip = {}
        ready: dict[str, int] = {}
        for p in pods:
            if labels_of(p).get("ray.io/node-type") == "head":
                continue
            z = zones.get(node_of(p))
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                zone_of_ip[ip] = z
            if z:
                going = bool((p.get("metadata") or {}).get("deletion_timestamp"))
                ready[z] = ready.get(z, 0) + (1 if pod_ready(p) and not going else 0)
        smp = sampler.observe_dashboard(self.dashboard_url, zone_of_ip, APP_NAME, timeout, nodes=False)
        errors = dict(smp.errors)
        if k8s_error:
            errors["kubernetes"] = k8s_error
        return replace(smp, nodes_alive=None if k8s_error else ready, errors=errors,
                       conditions=self.service_conditions(errors))

    def service_conditions(self, errors: dict[str, str]) -> dict[str, str] | None:
        """The RayService's status conditions (``Ready``, ``UpgradeInProgress``: type -> status), when
        the cluster is a RayService's; None when not known."""
        if not self.target.service:
            return None
        try:
            rs = self.kube.custom.get_namespaced_custom_object("ray.io", "v1", self.target.namespace, "rayservices", self.target.service)
        except Exception as e:  # noqa: BLE001 - the API server not answering is a sample saying so
            errors["rayservice"] = f"{type(e).__name__}: {e}"[:160]
            return None
        self.adopt_active(rs)
        return {c.get("type", "?"): c.get("status", "?") for c in ((rs or {}).get("status") or {}).get("conditions") or []}

    def app_status(self) -> str | None:
        from chaos.system import deploy

        return deploy.app_status(self.dashboard_url)

    def exec(self, pod: str, script: str, container: str | None = None, ok_codes: tuple[int, ...] = (0,),
             core=None, status: dict | None = None, timeout: float = 60.0) -> str:
        """Run ``script`` in ``pod`` (its Ray container, the first, unless named); stdout, or ExecError
        unless it exited with one of ``ok_codes``. Through exec's own ApiClient (:attr:`exec_core`, or
        ``core``: execs run in parallel each need their own, stream() patching the one it is given)."""
        if container is None:
            found = [p for p in self.pods() if name_of(p) == pod]
            containers = ((found[0].get("spec") or {}).get("containers") or []) if found else []
            container = containers[0].get("name") if containers else None
        return kube_exec.run(core or self.kube.exec_core, self.target.namespace, pod, script, container=container,
                             stream_fn=self.kube.stream_fn, ok_codes=ok_codes, status=status, timeout=timeout)

    def exec_in(self, pod: dict, script: str, ok_codes: tuple[int, ...] = (0,), core=None,
                 status: dict | None = None, timeout: float = 60.0) -> str:
        """:meth:`exec` in the first container of a pod already read (no second read of the pod)."""
        containers = (pod.get("spec") or {}).get("containers") or []
        return self.exec(name_of(pod), script, container=containers[0].get("name") if containers else None,
                         ok_codes=ok_codes, core=core, status=status, timeout=timeout)

    def delete(self, pods: list[dict]) -> list[str]:
        for p in pods:
            try:
                self.kube.core.delete_namespaced_pod(name_of(p), self.target.namespace, grace_period_seconds=0)
            except Exception as e:  # noqa: BLE001 - ApiException; a pod already gone is what we wanted
                if not is_not_found(e):
                    raise
        return [name_of(p) for p in pods]

    def patch_node(self, node: dict, body: dict) -> None:
        """A patch of a node read before, with its resourceVersion as precondition: a node changed
        meanwhile (someone cordoned or uncordoned it) fails it (409) instead of being overwritten."""
        rv = (node.get("metadata") or {}).get("resource_version")
        if rv:
            body = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": rv}}
        try:
            self.kube.core.patch_node(name_of(node), body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise ClusterError(f"node {name_of(node)}: the patch failed (HTTP {status}: {api_message(e)})") from None

    def redis_pods(self) -> list[dict]:
        return [p for p in self.pods() if labels_of(p).get("app") == "redis"]
