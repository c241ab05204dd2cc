"""What the KubeRay backend must be allowed to do on a cluster, asked before it does anything.

A fault the rig injected but may not heal (a cordon it may not lift, a helper pod it may not
delete) is worse than no run. So before any fault, one SelfSubjectAccessReview
(``authorization.k8s.io/v1``: the API server answers whether the caller's own credentials allow
one verb on one resource, and stores nothing) is sent for every verb and resource the scope's
fault *and* its heal call; one denial refuses the run in one line, with nothing injected.

The groups below are what :mod:`chaos.backends.kuberay` calls (every call named with the method
making it), not what might be convenient; each scope's module (:mod:`chaos.scopes`) says which it needs
(:attr:`chaos.scopes.Scope.kube_access`):

- every run reads pods and nodes (selection, health, the sampler), the RayService and its
  RayCluster, and NetworkPolicies (the leftovers check of :meth:`KubeRayBackend.prepare`);
- exec (``pods/exec``): the crash of a pod's processes, ``kill -9`` of a replica or of its engine's
  children (``crash_engine``), SIGSTOP/SIGCONT of an engine, the GCS kill, the actor kill's driver, the partition's probe and nft table. The
  kubernetes Python client opens exec as a websocket ``GET`` (verb ``get``), and from Kubernetes
  1.35 the API server also requires ``create`` on the upgrade (KEP-4006, feature gate
  ``AuthorizePodWebsocketUpgradeCreatePermission``, on by default): both are reviewed;
- pod deletes (grace 0) after each crash, and for a drain's deadline;
- node patches: the cordon of a zone or region loss and its uncordon at the heal;
- before a zone or region loss, unless it is acknowledged (``allow_autoscaled_zone_loss``), the node
  autoscalers it looks for, cluster-wide (:mod:`chaos.backends.kuberay.kube.autoscale`): ConfigMaps listed by name
  (cluster-autoscaler's status), pods listed (cluster-autoscaler's), Karpenter's NodePools listed;
- the partition: helper pods created and deleted (``node-filter``), or the zone's pods labelled and a
  NetworkPolicy created and deleted (``networkpolicy``), the policy read at every heal;
- ``pods/eviction`` create for a drain; a RayService patch for an upgrade;
- with the load workers in the cluster (``kubernetes.load.in_cluster``, :mod:`chaos.backends.kuberay.kube.load_pool`):
  the Job created (and dry-run at the set-up), read and deleted, one ConfigMap per worker created and
  deleted, the pods' logs followed (``pods/log``), exec into them for their clocks and signals.

:data:`RBAC_DOC` points at the Role and ClusterRole in ``kuberay/rbac/`` that grant exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

RBAC_DOC = "kuberay/rbac/ (the Role and ClusterRole the rig needs; kuberay/README.md, Permissions)"


@dataclass(frozen=True, order=True)
class Access:
    """One verb on one resource (``resource/subresource`` of API ``group``; cluster-scoped unless
    ``namespaced``), and what in the backend needs it."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespaced: bool = True
    why: str = ""

    def text(self, namespace: str) -> str:
        """As ``kubectl auth can-i`` words it: ``create pods/exec in namespace availproof``."""
        what = self.resource + (f".{self.group}" if self.group else "") + (f"/{self.subresource}" if self.subresource else "")
        where = f"in namespace {namespace}" if self.namespaced else "(cluster-wide)"
        return f"{self.verb} {what} {where}"


def _a(verb, resource, group="", subresource="", namespaced=True, why=""):
    return Access(verb, resource, group, subresource, namespaced, why)


READS = (
    _a("list", "pods", why="selection, health and the sampler (list_namespaced_pod)"),
    _a("list", "nodes", namespaced=False, why="zones of pods and nodes (list_node)"),
    _a("get", "rayservices", "ray.io", why="the active RayCluster, upgrades (get_namespaced_custom_object)"),
    _a("get", "rayclusters", "ray.io", why="zones and expected pods (get_namespaced_custom_object)"),
    _a("list", "networkpolicies", "networking.k8s.io", why="leftovers of a crashed run (prepare)"),
    _a("list", "configmaps", why="leftovers: a crashed run's upgrade record (_upgrade_leftovers)"),
)
EXEC = (
    _a("get", "pods", subresource="exec", why="exec: the client's websocket GET (kube_exec.run)"),
    _a("create", "pods", subresource="exec", why="exec: Kubernetes 1.35+ also requires create (KEP-4006)"),
)
DELETE_PODS = (_a("delete", "pods", why="the crashed pod's removal, grace 0 (_delete)"),)
CORDON = (_a("patch", "nodes", namespaced=False, why="cordon and uncordon (_cordon, _uncordon)"),)
AUTOSCALERS = (  # what may bring a lost zone back (kube_autoscale); not needed once the loss is acknowledged
    _a("list", "configmaps", namespaced=False, why="a cluster-autoscaler's status ConfigMap in any namespace "
       "(autoscaling; or acknowledge an autoscaled zone loss: --allow-autoscaled-zone-loss)"),
    _a("list", "pods", namespaced=False, why="a cluster-autoscaler's pod in any namespace (autoscaling; or "
       "--allow-autoscaled-zone-loss)"),
    _a("list", "nodepools", "karpenter.sh", namespaced=False, why="Karpenter NodePools admitting the zone "
       "(autoscaling; or --allow-autoscaled-zone-loss)"),
)
NODE_FILTER = (
    _a("create", "pods", why="the partition's helper pods (_filter; dry-run in preflight_partition)"),
    _a("patch", "nodes", namespaced=False, why="the nft table recorded on its node, for recover (_mark_table)"),
    _a("delete", "pods", why="the helper pods at the heal (_remove_helpers)"),
    _a("get", "networkpolicies", "networking.k8s.io", why="the heal looks for a policy of either method (heal_zone)"),
)
NETWORK_POLICY = (
    _a("patch", "pods", why="the zone's pods labelled and unlabelled (_isolate, _unlabel)"),
    _a("create", "networkpolicies", "networking.k8s.io", why="the partition's policy (_isolate)"),
    _a("get", "networkpolicies", "networking.k8s.io", why="the heal and the effect check (heal_zone)"),
    _a("delete", "networkpolicies", "networking.k8s.io", why="the heal (heal_zone)"),
)
DRAIN = (
    _a("create", "pods", subresource="eviction", why="the drain's eviction (drain_node)"),
    _a("delete", "pods", why="the force delete at the drain's deadline (_end_drain)"),
)
UPGRADE = (
    _a("patch", "rayservices", "ray.io", why="the upgrade's merge patch, and its revert (upgrade_app, roll_back_upgrade)"),
    _a("create", "configmaps", why="the upgrade's record, what undoing it needs (_record_upgrade)"),
    _a("get", "configmaps", why="the record read at the rollback (roll_back_upgrade)"),
    _a("delete", "configmaps", why="the record at the heal or the rollback (_drop_record)"),
    _a("delete", "rayclusters", "ray.io", why="the pending RayCluster of a failed upgrade (_roll_back_record)"),
    _a("list", "pods", namespaced=False, why="what the nodes' pods request: room for a second RayCluster "
       "(second_cluster_room)"),
)
LOAD_JOB = (
    _a("create", "jobs", "batch", why="the load workers' Job (JobPool._start; dry-run in preflight_load)"),
    _a("get", "jobs", "batch", why="the Job gone once deleted (JobPool._delete_job)"),
    _a("delete", "jobs", "batch", why="the Job at the load's end, its pods with it (JobPool._delete_job)"),
    _a("create", "configmaps", why="each worker's share of the plan (JobPool._start)"),
    _a("delete", "configmaps", why="the shares at the load's end (JobPool._delete_job)"),
    _a("get", "pods", subresource="log", why="the workers' records, followed (JobPool._follow)"),
) + EXEC  # each pod's clock at the start and the end, the start, stop and exit signals (JobPool._exec)

ZONE_LOSS = EXEC + DELETE_PODS + CORDON  # the crash of the zone's pods, the cordon and its uncordon
# ``availproof recover`` (KubeRayBackend.heal_all): the leftovers read, and each kind undone; asked first, each
# missing one said in one line (what then stays undone), recover doing what it may
RECOVER = READS + EXEC + (
    _a("patch", "nodes", namespaced=False, why="cordons lifted, device plugins' labels put back, nft table marks "
       "and device-loss marks dropped (_uncordon, restore_accelerator, _unmark_table, Devices.remove)"),
    _a("create", "pods", why="a clean-up helper for an nft table whose helper died (_remove_table)"),
    _a("delete", "pods", why="partition helpers (_remove_helpers)"),
    _a("patch", "pods", why="the pods' partition labels removed (_unlabel)"),
    _a("delete", "networkpolicies", "networking.k8s.io", why="partition policies (remove_leftovers)"),
    _a("delete", "jobs", "batch", why="load workers' Jobs (remove_leftovers)"),
    _a("patch", "rayservices", "ray.io", why="a failed cluster upgrade reverted (_roll_back_record)"),
    _a("delete", "rayclusters", "ray.io", why="a failed cluster upgrade's pending RayCluster (_roll_back_record)"),
    _a("delete", "configmaps", why="an upgrade's record (_drop_record)"),
)


@dataclass(frozen=True)
class Asked:
    """What a scope's accesses depend on besides the scope: the backend's partition method
    (:data:`chaos.backends.kuberay.kube.partition.METHODS`), and whether a zone or region loss looks for node
    autoscalers first (not when acknowledged as autoscaled)."""

    partition_method: str = "node-filter"
    autoscalers: bool = True


def zone_loss(asked: Asked) -> tuple[Access, ...]:
    """A zone or region loss: :data:`ZONE_LOSS`, and the autoscaler reads unless acknowledged."""
    return ZONE_LOSS + (AUTOSCALERS if asked.autoscalers else ())


def partition(asked: Asked) -> tuple[Access, ...]:
    """A partition: the probe's exec, and the cut's own accesses by method."""
    return EXEC + (NETWORK_POLICY if asked.partition_method == "networkpolicy" else NODE_FILTER)


def needed(scopes: Iterable[str], partition_method: str = "node-filter", load_in_cluster: bool = False,
           autoscalers: bool = True) -> list[Access]:
    """Every access the faults of ``scopes`` and their heals need (each scope's own,
    :meth:`chaos.scopes.Scope.accesses`: its module says them), the reads every run makes first (and, with
    ``load_in_cluster``, what the load workers' Job needs: :data:`LOAD_JOB`; for a zone or region loss, with
    ``autoscalers`` (not acknowledged as autoscaled), the autoscaler reads: :data:`AUTOSCALERS`); each once. A
    scope that declares none adds nothing: every registered scope must declare some
    (tests/unit/test_kuberay_preflight.py checks :func:`chaos.scopes.names`)."""
    from chaos.base import scope_registry as registry

    asked = Asked(partition_method, autoscalers)
    out: list[Access] = list(READS) + (list(LOAD_JOB) if load_in_cluster else [])
    for scope in sorted(set(scopes)):
        out += registry.get(scope).accesses(asked)
    seen, unique = set(), []
    for a in out:
        key = (a.verb, a.resource, a.group, a.subresource, a.namespaced)
        if key not in seen:
            seen.add(key)
            unique.append(a)
    return unique


def review_body(access: Access, namespace: str):
    """The SelfSubjectAccessReview asking about ``access`` (the namespace left out for cluster-scoped resources)."""
    from kubernetes import client

    attrs = client.V1ResourceAttributes(verb=access.verb, resource=access.resource, group=access.group,
                                        subresource=access.subresource or None,
                                        namespace=namespace if access.namespaced else None)
    return client.V1SelfSubjectAccessReview(api_version="authorization.k8s.io/v1", kind="SelfSubjectAccessReview",
                                            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))


def denied(authz, namespace: str, accesses: list[Access]) -> list[tuple[Access, str]]:
    """The accesses the API server does not allow the caller, each with what it said (``status.reason``,
    or ``status.evaluationError``; RBAC says nothing when no rule allows: its authorizer has no opinion).
    ``authz`` is an ``AuthorizationV1Api``."""
    out = []
    for a in accesses:
        status = authz.create_self_subject_access_review(review_body(a, namespace)).status
        if not (status and status.allowed):
            why = (status.reason or status.evaluation_error or "") if status else "no status"
            out.append((a, why))
    return out


def refusal(context: str, namespace: str, missing: list[tuple[Access, str]]) -> str:
    """One line naming every missing access (and why the rig needs it)."""
    shown = "; ".join(f"{a.text(namespace)} [{a.why}]" + (f" ({why})" if why else "") for a, why in missing)
    return (f"kube context {context} may not {shown}: the rig could not inject or could not heal this "
            f"experiment's faults, so nothing is injected (grant them: {RBAC_DOC})")
