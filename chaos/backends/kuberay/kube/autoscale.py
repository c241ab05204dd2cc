"""What may add nodes in a lost zone by itself: the node autoscalers a zone or region loss looks for.

A node autoscaler adds a node in the lost zone for KubeRay's replacement pods, which are pinned there and
Pending; a node added after the cordon is not cordoned, so the zone comes back before the heal. Before a
zone or region loss the backend (:meth:`chaos.backends.kuberay.KubeRayBackend.autoscaling`) makes these
reads, each cluster-wide, and counts what they show:

- **cluster-autoscaler's status ConfigMap**, wherever it lives: ``list configmaps`` in every namespace with
  ``fieldSelector=metadata.name=cluster-autoscaler-status`` (cluster-autoscaler writes it, ``--write-status-configmap``
  on by default, in the namespace given by its ``--namespace``, which the upstream Helm chart sets to the
  release's namespace, under ``--status-config-map-name``, default ``cluster-autoscaler-status``:
  ``cluster-autoscaler/config/flags``, ``clusterstate/utils/status.go``). GKE's and AKS's managed autoscalers
  run off the cluster and write it in ``kube-system``.
- **cluster-autoscaler's pods**, whatever the ConfigMap is called: ``list pods`` in every namespace, a
  container whose image is ``.../cluster-autoscaler:TAG`` (its ``--status-config-map-name`` named when set).
- **Karpenter NodePools** that admit the zone: ``list nodepools.karpenter.sh`` (``karpenter.sh/v1``, else
  ``v1beta1``; no such resource: no Karpenter), each NodePool's ``spec.template.spec.requirements`` on
  ``topology.kubernetes.io/zone`` (none: any zone its NodeClass reaches) and its taints, which one of the
  cluster's pod templates must tolerate for Karpenter to use it. A NodePool with no node in the zone yet
  is as much a sign as one with.

A read the API server refuses (403) or fails leaves the answer **unknown**: that is a sign too (an
autoscaler there would not be seen), so the loss is refused unless acknowledged, as for an autoscaler
found. 404 means the resource does not exist (no ConfigMap, no Karpenter CRD): nothing found.
"""

from __future__ import annotations

from chaos.backends.kuberay.kube.labels import ZONE_LABEL

STATUS_NAME = "cluster-autoscaler-status"  # cluster-autoscaler's --status-config-map-name default
KARPENTER = ("karpenter.sh", ("v1", "v1beta1"), "nodepools")


def _image_name(image: str) -> str:
    """``registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.0@sha256:...`` -> ``cluster-autoscaler``."""
    return str(image or "").split("@")[0].rsplit("/", 1)[-1].split(":")[0]


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def status_configmap_signs(configmaps: list[dict]) -> list[str]:
    return [f"a cluster-autoscaler's status ConfigMap {_meta(c).get('namespace')}/{_meta(c).get('name')}"
            for c in configmaps]


def autoscaler_pod_signs(pods: list[dict]) -> list[str]:
    """Pods running cluster-autoscaler's image, each with the status ConfigMap name it was given (if any)."""
    out = []
    for p in pods:
        for c in (p.get("spec") or {}).get("containers") or []:
            if not _image_name(c.get("image")).startswith("cluster-autoscaler"):  # -amd64 on old registries
                continue
            args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
            named = next((a.split("=", 1)[1] for a in args if a.startswith("--status-config-map-name=")), None)
            out.append(f"a cluster-autoscaler pod {_meta(p).get('namespace')}/{_meta(p).get('name')}"
                       + (f" (status ConfigMap {named})" if named else ""))
            break
    return out


def zone_admitted(requirements: list[dict], labels: dict, zone: str) -> bool:
    """Whether a NodePool's requirements (and template labels) let it make a node in ``zone``."""
    if labels.get(ZONE_LABEL) is not None and labels.get(ZONE_LABEL) != zone:
        return False
    for r in requirements or []:
        if r.get("key") != ZONE_LABEL:
            continue
        op, values = r.get("operator"), [str(v) for v in r.get("values") or []]
        if (op == "In" and zone not in values) or (op == "NotIn" and zone in values) or op == "DoesNotExist":
            return False
    return True


def nodepool_signs(nodepools: list[dict], zones: list[str] | None, templates: list[tuple[str, dict]]) -> list[str]:
    """Karpenter NodePools that admit one of ``zones`` (any zone when None) and whose taints one of the
    cluster's pod ``templates`` tolerates (:func:`chaos.backends.kuberay.kube.zone.tolerates`)."""
    from chaos.backends.kuberay.kube.zone import BLOCKING_EFFECTS, tolerates

    out = []
    for np_ in nodepools:
        spec = ((np_.get("spec") or {}).get("template") or {})
        tspec, tmeta = spec.get("spec") or {}, spec.get("metadata") or {}
        reqs, labels = tspec.get("requirements") or [], tmeta.get("labels") or {}
        admitted = [z for z in (zones or [None]) if z is None or zone_admitted(reqs, labels, z)]
        if not admitted:
            continue
        taints = [t for t in tspec.get("taints") or [] if t.get("effect") in BLOCKING_EFFECTS]
        if taints and templates and not any(all(tolerates((t_spec or {}).get("tolerations"), t) for t in taints)
                                            for _, t_spec in templates):
            continue
        where = ", ".join(z for z in admitted if z) or "any zone"
        out.append(f"Karpenter NodePool {_meta(np_).get('name')} admits {where}")
    return out


def unknown(what: str, e: Exception) -> str:
    status = getattr(e, "status", None)
    why = f"HTTP {status}" if status is not None else type(e).__name__
    return f"unknown: {what} could not be read ({why}), so an autoscaler there would not be seen"
