"""Reads: the pods, the nodes, the RayService and its active RayCluster, the domains, health and
the sampler's look at the control plane. Nothing here writes to the cluster."""

from __future__ import annotations


from chaos.backends.kuberay.common import (RAYSERVICE, ZONE_LABEL, cluster_name, expected_pods, is_not_found, labels_of,
                                           limit, name_of, node_of, node_regions, node_zones, pod_ready, ray_pods,
                                           select)
from chaos.errors import ClusterError, UsageError


class Reads:
    """What the backend reads: pods and nodes, the RayService (its active cluster followed), health."""

    def _pods(self, label_selector: str | None = None) -> list[dict]:
        kw = {"label_selector": label_selector} if label_selector else {}
        return [p.to_dict() for p in self.core.list_namespaced_pod(self.namespace, **kw).items]

    def _nodes(self) -> list[dict]:
        return [n.to_dict() for n in self.core.list_node().items]

    def resolve_cluster(self) -> str:
        """The RayCluster to act on: the active cluster of the RayService named ``cluster``
        (``status.activeServiceStatus.rayClusterName``), else the one Ray cluster whose pods
        carry that name or KubeRay's ``<service>-<5 chars>`` form of it."""
        try:
            rs = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayservices", self.cluster)
        except Exception as e:  # noqa: BLE001 - ApiException; only "no such RayService" falls through
            if not is_not_found(e):
                raise
            rs = {}
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if rs:
            self.service = self.cluster  # the RayService, whose conditions the sampler reads
        if active:
            self.cluster = active
            return active
        names = sorted({labels_of(p).get("ray.io/cluster", "") for p in ray_pods(self._pods())} - {""})
        match = cluster_name(self.cluster, names)
        if len(match) != 1:
            raise UsageError(f"RayCluster {self.cluster!r} in namespace {self.namespace}: "
                             f"{'no' if not match else len(match)} matching cluster(s) ({', '.join(names) or 'none'})")
        self.cluster = match[0]
        return self.cluster

    def _ray(self, **kw) -> list[dict]:
        return select(self._pods(), self._nodes(), cluster=self.cluster, **kw)

    def _head(self) -> dict:
        return limit(self._ray(node_type="head"), 1, "head pod")[0]

    def _raycluster(self) -> dict:
        return self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayclusters", self.cluster)

    def zones(self) -> list[str]:
        """The zones the RayCluster's worker groups are pinned to (nodeSelector), else every labelled zone."""
        pinned = {((g.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get(ZONE_LABEL)
                  for g in (self._raycluster().get("spec") or {}).get("workerGroupSpecs") or []} - {None}
        return sorted(pinned) or sorted({z for z in node_zones(self._nodes()).values() if z})

    def regions(self) -> list[str]:
        return sorted({r for r in node_regions(self._nodes()).values() if r})

    def zones_in_region(self, region: str) -> list[str]:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        return sorted({zones[n] for n in zones if regions.get(n) == region and zones[n]})

    def ray_pod_names(self) -> list[str]:
        """Every Ray pod of the cluster (head and workers) not being deleted, by name."""
        return [name_of(p) for p in self._ray()]

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        """Worker pods of a zone or region (a "node" of the rig is a Ray pod here)."""
        zones = [zone] if zone else (self.zones_in_region(region) if region else None)
        if zones == []:
            return []
        return [name_of(p) for p in self._ray(zones=zones, node_type="worker")]

    def zone_of(self, node: str) -> str | None:
        zones = node_zones(self._nodes())
        for p in self._pods():
            if name_of(p) == node:
                return zones.get(node_of(p))
        return None

    def targets(self) -> list[tuple[str, str, str | None, str | None]]:
        if not self.serve_url:
            raise UsageError("the Kubernetes backend needs the serve Service's URL (--serve-url)")
        return [("serve-svc", self.serve_url, None, None)]

    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]:
        """The front door's listeners: on KubeRay the serve Service itself (see :meth:`front_door`)."""
        return self.targets()

    def head_target(self) -> tuple[str, str, str | None, str | None]:
        raise UsageError("targets: head: the head serves no traffic on KubeRay (excludeHeadPodFromServeSvc)")

    def own_hosts(self) -> tuple[str, ...]:
        return ()

    @property
    def dashboard_url(self) -> str:
        if not self._dashboard_url:
            raise UsageError("the Kubernetes backend needs the head's dashboard URL (--dashboard-url)")
        return self._dashboard_url

    def describe(self) -> dict:
        return {"backend": "kuberay", "context": self.context, "namespace": self.namespace, "cluster": self.cluster,
                "gcs_fault_tolerance": True, "network": "kubernetes", "partition_method": self.partition_method,
                "run_id": self.run_id, "max_pods": self.max_pods, "max_nodes": self.max_nodes,
                "load_workers": ({"where": "pods of a Kubernetes Job", "image": self.load_job.image,
                                  "node_selector": self.load_job.node_selector}
                                 if self.load_job is not None else {"where": "processes of the rig"})}

    def topology_doc(self) -> dict:
        nodes = self._nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        tree: dict[str, dict[str, list]] = {}
        for p in self._ray(node_type="worker"):
            n = node_of(p)
            tree.setdefault(regions.get(n) or "-", {}).setdefault(zones.get(n) or "-", []).append({"name": name_of(p)})
        return {"name": f"kuberay:{self.cluster}", "regions": [
            {"name": r, "zones": [{"name": z, "nodes": ns} for z, ns in sorted(zs.items())]}
            for r, zs in sorted(tree.items())]}

    def front_door(self) -> dict:
        """What stands between the client and the Serve proxies: KubeRay's serve Service."""
        svc = f"{self.service}-serve-svc" if self.service else None
        return {"kind": "kubernetes-service", "shape": "lb", "service": svc, "namespace": self.namespace,
                "serve_url": self.serve_url,
                "selector": {"ray.io/cluster": self.cluster, "ray.io/serve": "true"},
                "detection": "endpoints follow the pod readiness probe (KubeRay's on RayService workers: the "
                             "raylet's health and the Serve proxy's /-/healthz)",
                "what": "a Kubernetes Service over the active RayCluster's serve-ready pods (the head excluded: "
                        "excludeHeadPodFromServeSvc); KubeRay moves its selector to the new RayCluster when it "
                        "promotes one. serve_url is what the client sends to: it must reach this Service (or a "
                        "Service that follows the active cluster the same way) for an upgrade that replaces "
                        "the cluster"}

    def _get_rayservice(self) -> dict:
        return self.custom.get_namespaced_custom_object(*RAYSERVICE[:2], self.namespace, RAYSERVICE[2], self.service)

    def _adopt_active(self, rs: dict | None) -> None:
        """Act on the RayService's active cluster: after a ``cluster`` upgrade KubeRay promotes the new
        RayCluster (and deletes the old one 60 s later, RayClusterDeletionDelayDuration)."""
        active = (((rs or {}).get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        if active and active != self.cluster:
            self.cluster = active

    def _follow_active(self) -> None:
        if self.service:
            self._adopt_active(self._get_rayservice())

    def _rayservice(self, what: str) -> dict:
        """The RayService, read for ``what``; a bare RayCluster (no RayService) is refused."""
        if not self.service:
            raise UsageError(f"{what}: {self.cluster} is a bare RayCluster, not a RayService's: KubeRay upgrades "
                             f"only RayServices (--ray-cluster must name the RayService)")
        return self._get_rayservice()

    def healthy(self) -> bool:
        self._follow_active()
        pods = self._ray()
        redis = self._redis_pods()
        return (len([p for p in pods if pod_ready(p)]) >= expected_pods(self._raycluster())
                and all(pod_ready(p) for p in pods) and (not redis or any(pod_ready(p) for p in redis)))

    def _wait(self, ok, timeout: float, what: str) -> None:
        deadline = self.kube.monotonic() + timeout
        while not ok():
            if self.kube.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
            self.kube.sleep(2)

    def wait_healthy(self, timeout: float = 300.0) -> None:
        self._wait(self.healthy, timeout, f"every Ray pod of {self.cluster} to be ready")

    def observe(self, timeout: float):
        """One sample of the control plane and capacity: GCS, controller and replicas through the
        head's dashboard (as locally); nodes alive are the Ray worker pods Ready per zone, from
        the Kubernetes API (a pod the kubelet reports Ready, as the serve Service's endpoints do)."""
        from dataclasses import replace

        from chaos import sampler
        from serve_apps.config import APP_NAME

        try:
            nodes = self._nodes()
            zones = node_zones(nodes)
            # a terminating pod (evicted by a drain) still hosts its replicas until it is gone: its
            # zone is known, but it is no capacity any more
            pods = select(self._pods(), nodes, cluster=self.cluster, terminating=True)
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
                       conditions=self._service_conditions(errors))

    def _service_conditions(self, errors: dict[str, str]) -> dict[str, str] | None:
        """The RayService's status conditions (``Ready``, ``UpgradeInProgress``: type -> status), when
        the cluster is a RayService's; None when not known."""
        if not self.service:
            return None
        try:
            rs = self.custom.get_namespaced_custom_object("ray.io", "v1", self.namespace, "rayservices", self.service)
        except Exception as e:  # noqa: BLE001 - the API server not answering is a sample saying so
            errors["rayservice"] = f"{type(e).__name__}: {e}"[:160]
            return None
        self._adopt_active(rs)
        return {c.get("type", "?"): c.get("status", "?") for c in ((rs or {}).get("status") or {}).get("conditions") or []}

    def app_status(self) -> str | None:
        from chaos import deploy

        return deploy.app_status(self.dashboard_url)
