"""Upgrades and drains, the disruptions users cause themselves: the RayService patched as a user's
``kubectl apply`` does (KubeRay's answer read, the patch reverted when it will not roll it out), and a
worker pod evicted with the deadline as its grace period."""

from __future__ import annotations

import copy
import math

from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.rollback import Rollbacks
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import (DEFAULT_UPGRADE_STRATEGY, KUBERAY_ANSWER_S, KUBERAY_POLL_S,
                                           SERVE_SHUTDOWN_DEFAULTS, UPGRADE_VARIANTS, VERSION_ANNOTATION, VERSION_ENV,
                                           api_message, limit, name_of, node_of)
from chaos.base.errors import ClusterError, UsageError


def _load_serve_config(text: str | None, where: str) -> dict:
    import yaml

    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError as e:
        raise ClusterError(f"{where}: spec.serveConfigV2 is not YAML ({' '.join(str(e).split())[:160]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("applications"), list) or not doc["applications"]:
        raise ClusterError(f"{where}: spec.serveConfigV2 has no applications")
    return doc


def serve_config_with_version(text: str, version: str, where: str = "RayService") -> tuple[str, dict]:
    """``serveConfigV2`` with ``runtime_env.env_vars.AVAILPROOF_APP_VERSION = version`` on every
    application (everything else as it was), and {application: previous value}."""
    import yaml

    doc = _load_serve_config(text, where)
    previous = {}
    for app in doc["applications"]:
        env = app.setdefault("runtime_env", {}) or {}
        app["runtime_env"] = env
        env_vars = env.setdefault("env_vars", {}) or {}
        env["env_vars"] = env_vars
        previous[app.get("name", "default")] = env_vars.get(VERSION_ENV)
        env_vars[VERSION_ENV] = str(version)
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), previous


def _annotated(template: dict | None, marks: dict) -> dict:
    template = copy.deepcopy(template or {})
    meta = template.setdefault("metadata", {}) or {}
    template["metadata"] = meta
    meta["annotations"] = {**(meta.get("annotations") or {}), **marks}
    return template


def cluster_config_patch(ray_cluster_config: dict, version: str, run_id: str | None = None,
                         deadline_s: float | None = None) -> dict:
    """The merge patch of ``spec.rayClusterConfig`` that annotates the head's and every worker
    group's pod template with the version (and, given ``run_id``, the run id and its deadline: the pending
    RayCluster KubeRay makes of it carries them, :mod:`chaos.backends.kuberay.kube.marks`). A JSON merge patch
    replaces lists whole, so ``workerGroupSpecs`` is the list as read with only the annotations added."""
    marks = {VERSION_ANNOTATION: str(version)}
    if run_id:
        marks.update(km.stamped(run_id, deadline_s or 3600))
    groups = []
    for g in ray_cluster_config.get("workerGroupSpecs") or []:
        g = copy.deepcopy(g)
        g["template"] = _annotated(g.get("template"), marks)
        groups.append(g)
    out: dict = {"headGroupSpec": {"template": {"metadata": {"annotations": dict(marks)}}}}
    if groups:
        out["workerGroupSpecs"] = groups
    return out


def graceful_shutdown_settings(text: str | None, where: str = "RayService") -> dict[str, dict]:
    """Per deployment of ``serveConfigV2``: its application and its graceful-shutdown settings as
    written (None: unset, Serve's default applies). Keyed by deployment name (``app/name`` when two
    applications have a deployment of the same name)."""
    doc = _load_serve_config(text, where)
    rows = [(app.get("name", "default"), d) for app in doc["applications"] for d in app.get("deployments") or []]
    names = [d.get("name") for _, d in rows]
    out = {}
    for app, d in rows:
        key = d.get("name") if names.count(d.get("name")) == 1 else f"{app}/{d.get('name')}"
        out[key] = {"application": app, **{k: d.get(k) for k in SERVE_SHUTDOWN_DEFAULTS}}
    return out


class Upgrades:
    """``upgrade_app`` (serve_config, cluster) and ``drain_node``: held by the lifecycle part (``backend.lifecycle.upgrades``);
    a drain's evicted pods are the kills part's to end at their deadline (``kills.drained``)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, kills: Kills, rollbacks: Rollbacks,
                 load: LoadJob):
        self.kube, self.target, self.pods, self.kills, self.rollbacks, self.load = kube, target, pods, kills, rollbacks, load

    def preflight_upgrade(self, variant: str) -> dict:
        """Before a run whose method upgrades: refuse what KubeRay would not roll out, before any load.
        ``cluster`` under ``upgradeStrategy.type: None`` (KubeRay v1.7 ``rayservice_controller.go``
        ``isZeroDowntimeUpgradeEnabled``: false, so ``shouldPrepareNewCluster`` never prepares a new
        RayCluster and the change is never applied), or while an upgrade is under way (a pending
        RayCluster). What the API does not show (the operator's ``ENABLE_ZERO_DOWNTIME=false`` when the
        type is unset; ``NewClusterWithIncrementalUpgrade`` without its feature gate) :meth:`upgrade_app`
        learns from KubeRay's answer to the patch itself. Returns the strategy as read."""
        what = f"upgrade ({variant})"
        rs = self.pods.rayservice(what)
        spec, status = rs.get("spec") or {}, rs.get("status") or {}
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if pending:
            raise ClusterError(f"{what}: RayService {self.target.service} is already upgrading (pending RayCluster "
                               f"{pending}): wait for it to finish")
        if variant == "cluster" and strategy == "None":
            raise UsageError(f"{what}: RayService {self.target.service} has upgradeStrategy.type None: KubeRay would not "
                             f"roll out a rayClusterConfig change (use the serve_config variant)")
        out = {"upgrade_strategy": strategy, "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY}
        if variant == "cluster":
            out["room"] = self.rollbacks.second_cluster_room(spec.get("rayClusterConfig") or {})
        return out

    def upgrade_variants(self) -> tuple[str, ...]:
        return UPGRADE_VARIANTS

    def upgrade_app(self, variant: str, version: str) -> dict:
        """Start a rolling upgrade by changing the RayService, as a user's ``kubectl apply`` does; what
        KubeRay and Serve do with it is what the run measures.

        ``serve_config``: ``spec.serveConfigV2`` with ``AVAILPROOF_APP_VERSION=version`` in every
        application's ``runtime_env.env_vars``: KubeRay applies it in place to the active cluster
        (no new RayCluster); Serve sees a new code version and replaces every replica in a rolling
        update. ``cluster``: the head's and every worker group's pod template annotated
        ``availproof.io/app-version: version`` in ``spec.rayClusterConfig``: the hash KubeRay keeps
        of that spec (without replicas, min/maxReplicas, workersToDelete) changes, so under the
        NewCluster strategy (the default) it brings up a new RayCluster, switches the serve and head
        Services to it once its Serve apps are RUNNING, and deletes the old one 60 s later.

        One JSON merge patch of the RayService, with the resourceVersion read as its precondition
        (a concurrent change makes it fail rather than be overwritten). Refused: an unknown variant,
        a bare RayCluster, an upgrade already in progress, and ``cluster`` under
        ``upgradeStrategy.type: None`` (KubeRay would ignore the change: :meth:`preflight_upgrade`, which
        the run's :meth:`prepare` calls before any load). After a ``cluster`` patch, KubeRay's answer is read
        (:meth:`_kuberay_answer`): a change it will not roll out (zero-downtime upgrades off in the
        operator) is reverted and raised at once, not waited for until the upgrade's timeout. No pod is
        deleted here.
        """
        if variant not in UPGRADE_VARIANTS:
            raise UsageError(f"upgrade variant must be one of {', '.join(UPGRADE_VARIANTS)} on KubeRay, got {variant!r}")
        what = f"upgrade ({variant})"
        strategy = self.preflight_upgrade(variant)["upgrade_strategy"]
        rs = self.pods.rayservice(what)
        spec = rs.get("spec") or {}
        rv = (rs.get("metadata") or {}).get("resourceVersion")
        meta = {"metadata": {"resourceVersion": rv}} if rv else {}
        out = {"variant": variant, "version": str(version), "rayservice": self.target.service, "cluster_before": self.target.cluster,
               "upgrade_strategy": strategy}
        if variant == "serve_config":
            text, previous = serve_config_with_version(spec.get("serveConfigV2"), version, f"RayService {self.target.service}")
            self.rollbacks.patch_rayservice({**meta, "spec": {"serveConfigV2": text}}, what)
            return {**out, "patched": "spec.serveConfigV2", "previous_versions": previous,
                    "changed": f"applications[*].runtime_env.env_vars.{VERSION_ENV}",
                    "version_served": True}  # the responses' x-availproof-version names it once it serves
        rcc = spec.get("rayClusterConfig") or {}
        patch = cluster_config_patch(rcc, version, self.target.run_id, self.target.helper_deadline_s)
        record = self.rollbacks.record(rcc, patch)  # first: a crash after the patch leaves it found
        try:
            patched = self.rollbacks.patch_rayservice({**meta, "spec": {"rayClusterConfig": patch}}, what)
            pending = self._kuberay_answer(int(((patched or {}).get("metadata") or {}).get("generation") or 0), rcc,
                                           patch, what)
        except BaseException:
            self.rollbacks.drop_record(record)  # not patched, or reverted: nothing to roll back
            raise
        groups = [g.get("groupName") for g in rcc.get("workerGroupSpecs") or []]
        return {**out, "patched": "spec.rayClusterConfig",
                "version_served": False,  # new pods, the app's AVAILPROOF_APP_VERSION unchanged: responses can't tell
                "changed": f"headGroupSpec and workerGroupSpecs[{', '.join(map(str, groups))}]"
                           f".template.metadata.annotations[{VERSION_ANNOTATION}]",
                "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY, "pending_cluster": pending,
                "record": record}

    def _kuberay_answer(self, generation: int, rcc_before: dict, patch: dict, what: str) -> str | None:
        """After a ``cluster`` upgrade's patch: KubeRay's answer, read as it gives it.

        What KubeRay v1.7.0 writes (``ray-operator/controllers/ray/rayservice_controller.go``): a new
        generation of the RayService is reconciled (its watch has ``GenerationChangedPredicate``; else the
        2 s requeue, ``ServiceDefaultRequeueDuration``); ``calculateStatus`` sets ``status.observedGeneration``
        to it and names a pending RayCluster when it will roll the change out (``shouldPrepareNewCluster`` ->
        ``isZeroDowntimeUpgradeEnabled``); ``calculateConditions`` sets ``Ready`` and ``UpgradeInProgress``
        through ``setCondition``, which stamps each condition with that ``observedGeneration``. ``Reconcile``
        writes the status only when ``utils.InconsistentRayServiceStatuses`` (``utils/consistency.go``) says it
        changed. That check ignores ``observedGeneration`` and ``lastUpdateTime`` themselves but compares the
        conditions whole, and ``meta.SetStatusCondition`` (k8s.io/apimachinery v0.36.0, KubeRay v1.7.0's
        go.mod) updates a condition's ``observedGeneration``, so a new generation is always written, in one
        update with the pending cluster if any, even when nothing else changes (``ENABLE_ZERO_DOWNTIME=false``).
        So ``status.observedGeneration`` reaching the patch's generation is the reconcile, and the pending
        cluster (or none) in that status is the answer. tests/unit/kube_fake.py (``KubeRay``) writes the status
        only when that check says it changed.

        Read every ``KUBERAY_POLL_S`` for at most ``KUBERAY_ANSWER_S``: a pending (or new active) cluster
        is the answer; the generation reconciled with none means zero-downtime upgrades are off (the
        operator's ``ENABLE_ZERO_DOWNTIME=false``, or NewClusterWithIncrementalUpgrade without its feature
        gate) and KubeRay will never apply the change; no answer at all, an operator that is not
        reconciling (down, or failing before ``calculateStatus``: its Events on the RayService say why). Either
        way the patch is reverted and one line raised, instead of waiting for the upgrade's timeout.
        ``generation`` 0 (an API server that counts none) is not waited for."""
        if not generation:
            return None
        status: dict = {}
        for _ in range(max(1, math.ceil(KUBERAY_ANSWER_S / KUBERAY_POLL_S))):
            status = self.pods.get_rayservice().get("status") or {}
            pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
            active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
            if pending or (active and active != self.target.cluster):
                return pending or active
            if int(status.get("observedGeneration") or 0) >= generation:
                why = ("KubeRay reconciled the change and prepared no new RayCluster: zero-downtime upgrades are "
                       "off (the operator's ENABLE_ZERO_DOWNTIME=false, or NewClusterWithIncrementalUpgrade "
                       "without its feature gate), so it would never apply it")
                break
            self.kube.sleep(KUBERAY_POLL_S)
        else:
            why = (f"KubeRay did not reconcile the change within {KUBERAY_ANSWER_S:.0f} s (observedGeneration "
                   f"{status.get('observedGeneration')} < {generation}): is the operator running? (its Events on "
                   f"the RayService say why a reconcile failed)")
        self.rollbacks.revert_cluster_patch(rcc_before, patch)
        raise ClusterError(f"{what}: RayService {self.target.service}: {why}; the patch was reverted")

    def drain_node(self, node: str, deadline_s: float) -> dict:
        """A graceful drain of one worker pod with a deadline: a policy/v1 Eviction with
        ``deleteOptions.gracePeriodSeconds`` = the deadline (whole seconds, rounded up, at least 1:
        0 would be a force delete). The API server checks the pod's PodDisruptionBudgets (a refusal,
        HTTP 429, raises: no injection recorded), then deletes the pod gracefully: the kubelet sends
        SIGTERM to its containers and SIGKILL when the grace period ends. Ray 2.60's ``ray start
        --block`` handles that SIGTERM as a drain notice: it marks its node draining (reason
        PREEMPTION) for up to RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S (default 30 s) before tearing
        the node down (ray/_private/node.py). KubeRay v1.7 does not replace the pod meanwhile: its
        reconcilePods counts the group's pods terminating ones included (raycluster_controller.go:
        the list is by labels, ``diff`` = desired - listed), so the replacement is created once the
        evicted pod is gone.

        At the deadline :func:`chaos.scopes.drain.drain_node` calls :meth:`kill_node`: for a pod drained
        here it force-deletes what is left of it and accepts that it is gone already."""
        pods = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == node], min(1, self.target.max_pods),
                     f"drain of worker pod {node}")
        self.load.refuse_reaching(f"drain of worker pod {node}", nodes=[node_of(p) for p in pods])
        grace = max(1, math.ceil(deadline_s))
        from kubernetes import client as k8s

        body = k8s.V1Eviction(api_version="policy/v1", kind="Eviction",
                              metadata=k8s.V1ObjectMeta(name=node, namespace=self.target.namespace),
                              delete_options=k8s.V1DeleteOptions(grace_period_seconds=grace))
        try:
            self.kube.core.create_namespaced_pod_eviction(node, self.target.namespace, body)
        except Exception as e:  # noqa: BLE001 - ApiException: one line, no injection recorded
            status = getattr(e, "status", None)
            if status is None:
                raise
            why = "refused by a PodDisruptionBudget" if status == 429 else "failed"
            raise ClusterError(f"drain of {node}: the eviction was {why} (HTTP {status}: {api_message(e)})") from None
        self.kills.drained.add(node)
        return {"method": "eviction", "pods": [name_of(p) for p in pods], "grace_period_s": grace,
                "k8s_node": node_of(pods[0])}

    def graceful_shutdown(self) -> dict:
        """For the environment record: each deployment's graceful-shutdown settings as the RayService's
        ``serveConfigV2`` writes them (None: unset, Serve's default in ``defaults`` applies), and the
        RayService's upgrade strategy (None: unset, KubeRay's default in ``effective_strategy``)."""
        where = f"RayService {self.target.service}"
        rs = self.pods.rayservice("graceful_shutdown")
        spec = rs.get("spec") or {}
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        return {"source": f"{where} spec.serveConfigV2",
                "deployments": graceful_shutdown_settings(spec.get("serveConfigV2"), where),
                "defaults": {**SERVE_SHUTDOWN_DEFAULTS,
                             "source": "Ray Serve (ray/serve/_private/constants.py DEFAULT_GRACEFUL_SHUTDOWN_*)"},
                "upgrade_strategy": strategy, "effective_strategy": strategy or DEFAULT_UPGRADE_STRATEGY,
                "strategy_note": None if strategy else
                "unset: KubeRay's default, NewCluster unless the operator runs with ENABLE_ZERO_DOWNTIME=false"}
