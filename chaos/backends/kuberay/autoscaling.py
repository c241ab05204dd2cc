"""Whether a lost zone could come back by itself: Ray's in-tree autoscaling, Karpenter, a
cluster-autoscaler (:mod:`chaos.backends.kuberay.kube.autoscale`); a zone loss on an autoscaled cluster is refused."""

from __future__ import annotations

from typing import Callable

from chaos.backends.kuberay.kube import autoscale as ka
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.kube import zone as kz
from chaos.backends.kuberay.common import (KARPENTER_LABELS, UNSET_MAX_REPLICAS, ZONE_LABEL, is_not_found, labels_of,
                                           name_of)
from chaos.base.errors import SetupError


def autoscaling_signs(cluster_spec: dict | None) -> list[str]:
    """Why a RayCluster spec (or a RayService's ``rayClusterConfig``) may add Ray pods by itself:
    ``enableInTreeAutoscaling: true`` (KubeRay v1.7 ``utils.IsAutoscalingEnabled``: the Ray autoscaler
    then sets each group's replicas) and, with it, each worker group whose ``maxReplicas`` is set above its
    ``replicas`` (its room to grow; the CRD's default, 2147483647, means none was set and is not counted).
    Without in-tree autoscaling nothing in KubeRay changes a group's replicas: ``GetWorkerGroupDesiredReplicas``
    (``utils/util.go``) only clamps ``replicas`` to [minReplicas, maxReplicas], so a ``maxReplicas`` above
    ``replicas`` is no sign there."""
    spec = cluster_spec or {}
    if not spec.get("enableInTreeAutoscaling"):
        return []
    out = ["enableInTreeAutoscaling: true"]
    for g in spec.get("workerGroupSpecs") or []:
        top, replicas = g.get("maxReplicas"), g.get("replicas")
        if top is None or int(top) >= UNSET_MAX_REPLICAS:
            continue
        if int(top) > int(replicas if replicas is not None else g.get("minReplicas") or 0):
            out.append(f"worker group {g.get('groupName')}: maxReplicas {top} > replicas {replicas}")
    return out


class Autoscaling:
    """The autoscalers that would end a zone loss early, looked for before it: held by the domains part
    (``backend.domains.autoscalers``). ``cluster`` (its name), ``raycluster``, ``rayservice`` (its name, or None: ``service``) and ``nodes`` read
    the backend's cluster when called; ``allowed``: whether the backend acknowledges an autoscaled zone loss."""

    def __init__(self, kube: KubeClient, cluster: Callable[[], str], raycluster: Callable[[], dict | None],
                 service: Callable[[], str | None], rayservice: Callable[[], dict | None],
                 nodes: Callable[[], list[dict]], allowed: Callable[[], bool]):
        self.kube, self.cluster, self.raycluster, self.service = kube, cluster, raycluster, service
        self.rayservice, self.nodes, self.allowed = rayservice, nodes, allowed

    def signs(self, zones: list[str] | None = None) -> list[str]:
        """What may add nodes or Ray pods in ``zones`` (all when None) by itself, each sign in a few words:
        Ray's in-tree autoscaling on this RayCluster or its RayService's ``rayClusterConfig``
        (:func:`autoscaling_signs`), nodes of those zones made by Karpenter (:data:`KARPENTER_LABELS`), and
        (:mod:`chaos.backends.kuberay.kube.autoscale`) a cluster-autoscaler's status ConfigMap in any namespace, a
        cluster-autoscaler's pod in any namespace, a Karpenter NodePool that admits one of the zones (with no
        node there yet too). A read refused or failed is a sign too ("unknown": an autoscaler there would
        not be seen). Read-only: one list of configmaps (by name), of pods and of NodePools, cluster-wide.
        A node autoscaler running off the cluster that writes no status ConfigMap is not visible through the
        Kubernetes API: none found is not proof that none runs."""
        signs: list[str] = []
        specs = [(f"RayCluster {self.cluster()}", (self.raycluster() or {}).get("spec"))]
        if self.service():
            specs.append((f"RayService {self.service()}", ((self.rayservice() or {}).get("spec") or {})
                          .get("rayClusterConfig")))
        seen = set()  # the RayService's rayClusterConfig usually says what its RayCluster says: once
        for where, spec in specs:
            for sign in autoscaling_signs(spec):
                if sign not in seen:
                    seen.add(sign)
                    signs.append(f"{where}: {sign}")
        wanted = set(zones) if zones else None
        karpenter = sorted(name_of(n) for n in self.nodes()
                           if (wanted is None or labels_of(n).get(ZONE_LABEL) in wanted)
                           and any(k in labels_of(n) for k in KARPENTER_LABELS))
        if karpenter:
            signs.append(f"Karpenter nodes in the zone(s): {', '.join(karpenter[:3])}{' ...' if len(karpenter) > 3 else ''}")
        return signs + self.node_autoscaler_signs(zones)

    def node_autoscaler_signs(self, zones: list[str] | None) -> list[str]:
        """The cluster-wide reads of :mod:`chaos.backends.kuberay.kube.autoscale`; each refused or failed one: unknown."""
        signs: list[str] = []
        try:
            cms = self.kube.core.list_config_map_for_all_namespaces(field_selector=f"metadata.name={ka.STATUS_NAME}")
            signs += ka.status_configmap_signs([c.to_dict() for c in cms.items])
        except Exception as e:  # noqa: BLE001 - ApiException: refused or failed, the answer is unknown
            if getattr(e, "status", None) is None:
                raise
            signs.append(ka.unknown(f"ConfigMaps named {ka.STATUS_NAME} (list configmaps, all namespaces)", e))
        try:
            signs += ka.autoscaler_pod_signs([p.to_dict() for p in self.kube.core.list_pod_for_all_namespaces().items])
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) is None:
                raise
            signs.append(ka.unknown("cluster-autoscaler's pods (list pods, all namespaces)", e))
        group, versions, plural = ka.KARPENTER
        for version in versions:
            try:
                pools = self.kube.custom.list_cluster_custom_object(group, version, plural)
            except Exception as e:  # noqa: BLE001
                if is_not_found(e):
                    continue  # no such resource (this version of the CRD, or no Karpenter)
                if getattr(e, "status", None) is None:
                    raise
                signs.append(ka.unknown(f"Karpenter NodePools (list {plural}.{group}/{version})", e))
                break
            signs += ka.nodepool_signs((pools or {}).get("items") or [], zones,
                                       kz.cluster_templates(self.raycluster()))
            break
        return signs

    def refuse_zone_loss(self, zones: list[str] | None = None) -> None:
        """A zone or region loss on an autoscaled cluster is refused (one line), unless acknowledged
        (``allow_autoscaled_zone_loss``: ``--allow-autoscaled-zone-loss``). The loss cordons the zone's nodes
        and crashes its Ray pods; KubeRay's replacements are pinned to the zone (their group's
        nodeSelector) and stay Pending there. A Ray autoscaler asks for more pods of the zone's group for
        the replicas it cannot place, and a node autoscaler (cluster-autoscaler, Karpenter, GKE's) adds a
        node in that zone for Pending pods pinned to it: a new node is not cordoned, so the zone comes back
        before the heal and the loss is not what the run says it measured."""
        if self.allowed():
            return
        signs = self.signs(zones)
        if signs:
            raise SetupError(f"zone or region loss on an autoscaled cluster ({'; '.join(signs)}): KubeRay's "
                             f"replacement pods stay Pending in the lost zone and an autoscaler adds nodes there "
                             f"for them (new nodes are not cordoned), which ends the loss early: refusing. Run where "
                             f"autoscaling of those zones is off, or acknowledge it with --allow-autoscaled-zone-loss "
                             f"(kubernetes.allow_autoscaled_zone_loss: true; a zone that comes back makes the "
                             f"zone's effect check fail, an ERROR, not a PASS)")
