"""Issue 23, what the KubeRay backend checks before any fault and what it shows without acting: the
permissions preflight (SelfSubjectAccessReviews, tested against the calls each fault really makes), the
refusal of a zone loss on an autoscaled cluster, a ``cluster`` upgrade KubeRay would not roll out,
``availproof run --plan`` (reads only), and the actor kill's connection made before the fault's instant.
Over the real kubernetes client and the in-memory API server (tests/unit/kube_fake.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.commands import cli
from chaos.scopes import faults, faults_accelerator
from chaos.core import plan, provision
from chaos.system import ray_actor
from chaos.recording import records as rec
from chaos import scopes as scope_registry
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.local import state as st
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.cluster import LocalCluster
from chaos.backends.kuberay.kube import client as kube_client
from chaos.commands.common import kube_flags
from chaos.base.errors import ClusterError, SetupError, UsageError
from chaos.core.experiment import load
from chaos.scopes.device_loss import lose_device
from chaos.scopes.drain import drain_node
from chaos.scopes.engine import hang_engine
from chaos.scopes.engine_crash import crash_engine
from chaos.scopes.engine_error import error_engine
from chaos.scopes.engine_slow import slow_engine
from chaos.scopes.engine_stutter import stutter_engine
from chaos.scopes.engine_garbage import garble_engine
from chaos.scopes.engine_stall import stall_engine
from chaos.scopes.restart_fails import fail_restart
from chaos.scopes.engine_wedge import wedge_engine
from chaos.scopes.rank_death import kill_rank
from chaos.scopes.rank_hang import hang_rank
from chaos.scopes.head import kill_head
from chaos.scopes.node import kill_node
from chaos.scopes.partition import partition_zone
from chaos.scopes.redis import kill_redis
from chaos.scopes.region import kill_region
from chaos.scopes.replica import kill_replica
from chaos.scopes.upgrade import upgrade_app
from chaos.scopes.zone import kill_zone
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import node
from tests.unit.kube_fake_gpu import gpu_cluster
from tests.unit.test_kuberay_backend import CLUSTER, cluster, replica, writes
from tests.unit.test_kuberay_upgrade_drain import RS_PATH, rayservice, service

ROOT = Path(__file__).resolve().parents[2]
SCOPES = scope_registry.names()  # every registered scope: a new one without its accesses fails below


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(kube_client, "DEFAULT_CLOCK", kube_client.Clock(sleep=lambda s: None))  # the backends' waits
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", dict.fromkeys(SCOPES, 0.0), raising=False)
    fake_dashboard(monkeypatch)  # the GCS answers


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def details(reps):
    """Serve's details as the dashboard gives them: (replica id, pod IP, pid) each, RUNNING."""
    return {"applications": {"llm": {"status": "RUNNING", "deployments": {"StreamTarget": {"replicas": [
        {"replica_id": r, "state": "RUNNING", "node_ip": ip, "pid": pid, "actor_name": f"SERVE_REPLICA::llm#S#{r}"}
        for r, ip, pid in reps]}}}}}


SERVE = details([("r1", "10.0.1.1", 41), ("r2", "10.0.2.1", 41), ("r3", "10.0.3.1", 41)])


# ------------------------------------------------------------------ 1. permissions
def api_accesses(s, stream, namespace="availproof") -> set[tuple[str, str, str, str, bool]]:
    """(verb, resource, group, subresource, namespaced) of every call the backend made: its HTTP calls as
    the API server's request-info resolver reads them (GET of a collection: list, of a name: get; POST:
    create; PATCH: patch; DELETE: delete), and each exec (a websocket GET of pods/exec, also authorized
    as create from Kubernetes 1.35). The reviews themselves are left out."""
    out = set()
    verbs = {"POST": "create", "PATCH": "patch", "DELETE": "delete"}
    for method, path, _ in s.calls:
        path = path.split("?")[0]
        if path.startswith("/apis/authorization.k8s.io/"):
            continue
        m = re.fullmatch(r"/api/v1/nodes(/[^/]+)?", path)
        if m:
            out.add((verbs.get(method, "get" if m.group(1) else "list"), "nodes", "", "", False))
            continue
        m = re.fullmatch(r"/apis?/(?:v1|([^/]+)/[^/]+)/([^/]+)", path)  # a cluster-wide collection
        if m and m.group(2) != "namespaces":
            out.add((verbs.get(method, "list"), m.group(2), m.group(1) or "", "", False))
            continue
        m = re.fullmatch(r"/apis?/(?:v1|([^/]+)/v1)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?(?:/([^/]+))?", path)
        assert m, path
        group, ns, resource, name, sub = m.groups()
        if ns != namespace:  # a read outside the namespace (the autoscaler's status): optional, not reviewed
            continue
        out.add((verbs.get(method, "get" if name else "list"), resource, group or "", sub or "", True))
    if stream.calls:
        out |= {("get", "pods", "", "exec", True), ("create", "pods", "", "exec", True)}
    return out


def reviewed(scopes, method="node-filter") -> set[tuple[str, str, str, str, bool]]:
    return {(a.verb, a.resource, a.group, a.subresource, a.namespaced) for a in kube_access.needed(scopes, method)}


def inject_and_heal(scope, s, b, monkeypatch):
    """One fault of ``scope`` and its heal, as a run does them (heal_all's waits skipped)."""
    marker = faults.Marker()
    fake_dashboard(monkeypatch, serve=SERVE)
    monkeypatch.setattr(b, "wait_healthy", lambda timeout=300.0: None)
    monkeypatch.setattr(b, "restart_head", lambda: None)
    if scope == "replica":
        for method in ("sigkill", "pod"):
            kill_replica(b, marker, replica=replica(node="wb-1" if method == "pod" else "wa-1"), method=method)
    elif scope == "engine":
        hang_engine(b, marker, zone="zone-b")
    elif scope == "engine-crash":
        crash_engine(b, marker, zone="zone-b")
    elif scope == "engine-error":
        error_engine(b, marker, zone="zone-b")
    elif scope == "engine-stutter":
        stutter_engine(b, marker, zone="zone-b", duration_s=0.1)
    elif scope == "engine-slow":
        slow_engine(b, marker, zone="zone-b", duration_s=0.1)
    elif scope == "engine-wedge":
        wedge_engine(b, marker, zone="zone-b")
    elif scope == "engine-garbage":
        garble_engine(b, marker, zone="zone-b")
    elif scope == "engine-stall":
        stall_engine(b, marker, zone="zone-b")
    elif scope in ("rank-hang", "rank-death"):  # a two-rank engine in the pod (tests/unit/kube_fake.py)
        s.kubelet.add_rank(s.pods["wb-1"])
        (hang_rank if scope == "rank-hang" else kill_rank)(b, marker, zone="zone-b")
    elif scope == "restart-fails":  # the stream target's weights (the fake dashboard's details name no app config)
        monkeypatch.setattr(b.engines.weights, "weights_of_app", lambda: {"app": "stream", "path": "stream-default", "checkpoint": None})
        fail_restart(b, marker, zone="zone-b", outage_s=None)
    elif scope == "node":
        kill_node(b, marker, node="wb-1")
    elif scope == "head":
        kill_head(b, marker, outage_s=None, method="gcs")
    elif scope == "redis":
        kill_redis(b, marker, outage_s=None)
    elif scope in ("zone", "region"):
        kill_zone(b, marker, "zone-a") if scope == "zone" else kill_region(b, marker, "region-2")
    elif scope == "partition":
        partition_zone(b, marker, "zone-b")
    elif scope == "drain":
        drain_node(b, marker, node="wb-1", deadline_s=0.0, outage_s=None, poll_s=0.0)
    elif scope == "upgrade":
        b.upgrade_app("cluster", "v9")
    elif scope == "accelerator":
        faults_accelerator.lose_accelerator(b, marker, zone="zone-b")
    elif scope == "device-loss":  # with its remedy: the cordon and the pod's eviction are its calls too
        lose_device(b, marker, zone="zone-b", remedy="cordon", outage_s=0.05, poll_s=0.001)
    elif scope_registry.get(scope).touches_nothing:  # its fault makes no call: nothing beyond the reads to review
        return
    else:
        raise AssertionError(f"scope {scope}: no injection here; add its fault (and its accesses to kube_access)")
    attempted = [f for f in marker.attempted.values()]
    b.heal(attempted, timeout=1.0)


@pytest.mark.parametrize("scope", SCOPES)
def test_every_registered_scope_has_its_accesses_declared(scope):
    """The reviewed accesses per scope come from chaos.scopes' registry, not a list kept beside it: a scope
    with no entry in kube_access.BY_SCOPE (partition: by method) would be reviewed for the reads alone."""
    extra = set(kube_access.needed({scope})) - set(kube_access.READS)
    if scope_registry.get(scope).touches_nothing:  # said in its module: the load's own step (overload)
        assert not extra, f"scope {scope} says it touches nothing, yet declares {extra}"
        return
    assert extra, f"scope {scope}: kube_access.BY_SCOPE has no entry, so its fault's accesses are never reviewed"


@pytest.mark.parametrize("scope,method", [(s, "node-filter") for s in SCOPES] + [("partition", "networkpolicy")])
def test_the_reviewed_accesses_cover_every_call_the_fault_and_its_heal_make(scope, method, monkeypatch):
    """Derived from what the backend does, not declared beside it: every API call a fault of the scope and
    its heal made against the fake server (and every exec) is among the accesses reviewed for the scope."""
    if scope == "upgrade":
        s, b = service()
        stream = b.stream_fn
    elif scope == "accelerator":  # a GPU cluster (tests/unit/kube_fake_gpu.py); the heal puts the label back, unwaited
        s, b, stream = gpu_cluster()
        b.accelerator_restore_s = 0.0
    else:
        s, b, stream = cluster(partition_method=method)
        s.kubelet.cni_cuts_established = True  # a networkpolicy cut in effect: its proof passes
    s.calls.clear()
    stream.calls.clear()
    b.prepare("run1", scope)  # the leftovers check's reads and the partition's dry run are the run's too
    inject_and_heal(scope, s, b, monkeypatch)
    made = api_accesses(s, stream)
    assert made, scope
    assert made - reviewed({scope}, method) == set(), f"{scope}: calls made but not reviewed"


def test_prepare_reviews_every_access_and_refuses_one_denied_in_one_line_before_anything():
    s, b, stream = cluster()
    b.prepare("run7", "zone")
    reviews = [body for method, path, body in s.calls if path.endswith("/selfsubjectaccessreviews")]
    asked = {(r["spec"]["resourceAttributes"]["verb"], r["spec"]["resourceAttributes"]["resource"],
              r["spec"]["resourceAttributes"].get("subresource", "")) for r in reviews}
    assert {("patch", "nodes", ""), ("create", "pods", "exec"), ("get", "pods", "exec"), ("delete", "pods", "")} <= asked
    nodes_review = next(r for r in reviews if r["spec"]["resourceAttributes"]["resource"] == "nodes")
    assert "namespace" not in nodes_review["spec"]["resourceAttributes"]  # nodes are cluster-scoped
    assert all(r["apiVersion"] == "authorization.k8s.io/v1" and r["kind"] == "SelfSubjectAccessReview"
               for r in reviews)
    # the rig may not uncordon: a zone loss it could not heal is refused, nothing injected or changed
    s.denied_access.add(("patch", "nodes", "", ""))
    s.calls.clear()
    stream.calls.clear()  # the allowed preparation looked into the pods for leftovers (held engine faults)
    with pytest.raises(SetupError) as e:
        b.prepare("run8", "zone")
    text = one_line(e)
    assert "may not patch nodes (cluster-wide) [cordon and uncordon" in text and "nothing is injected" in text
    assert "kuberay/rbac/" in text
    assert [m for m, p in writes(s) if not p.endswith("/selfsubjectaccessreviews")] == [] and stream.calls == []
    # exec denied refuses every scope that execs; a policy denied only the partition method that creates one
    s.denied_access = {("create", "pods", "", "exec")}
    with pytest.raises(SetupError, match=r"may not create pods/exec in namespace availproof \[exec: Kubernetes 1.35"):
        b.prepare("run9", "engine")
    s.denied_access = {("create", "networkpolicies", "networking.k8s.io", "")}
    b.prepare("run9", "partition")  # node-filter creates no policy
    b.partition_method = "networkpolicy"
    with pytest.raises(SetupError, match=r"create networkpolicies.networking.k8s.io in namespace availproof"):
        b.prepare("run9", "partition")


def test_the_planned_faults_add_their_scopes_to_what_is_reviewed():
    """head-outage-second-fault's scope is the head, but its method kills a replica too."""
    s, b, _ = cluster()
    planned = plan.faults_of(load(ROOT / "experiments" / "head-outage-second-fault.json"))
    assert [f["scope"] for f in planned] == ["head", "replica"]
    s.denied_access = {("delete", "pods", "", "")}
    with pytest.raises(SetupError, match="may not delete pods"):
        b.prepare("run1", "head", planned)


def test_the_fake_answers_reviews_as_the_api_server_does():
    s, b, _ = cluster()
    from kubernetes import client

    api = client.AuthorizationV1Api(b.core.api_client)
    ok = api.create_self_subject_access_review(kube_access.review_body(kube_access.CORDON[0], "availproof"))
    assert ok.status.allowed is True and ok.status.reason.startswith("RBAC: allowed by ClusterRoleBinding")
    s.denied_access.add(("patch", "nodes", "", ""))
    no = api.create_self_subject_access_review(kube_access.review_body(kube_access.CORDON[0], "availproof"))
    assert no.status.allowed is False and not no.status.reason and not no.status.denied  # RBAC: no opinion


def test_the_shipped_rbac_grants_exactly_what_is_reviewed():
    """kuberay/rbac/: the Role (the namespace) and ClusterRole (nodes) the rig's user needs."""
    import yaml

    docs = [d for f in sorted((ROOT / "kuberay" / "rbac").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    granted = set()
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in d["rules"]:
            if rule.get("resourceNames"):  # the optional read of the autoscaler's status ConfigMap
                continue
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    resource, _, sub = res.partition("/")
                    for verb in rule["verbs"]:
                        granted.add((verb, resource, group, sub, d["kind"] == "Role"))
    every = reviewed(set(SCOPES), "node-filter") | reviewed({"partition"}, "networkpolicy")
    load = {(a.verb, a.resource, a.group, a.subresource, a.namespaced) for a in kube_access.LOAD_JOB}
    assert granted == every | load  # the load workers' Job: its own Role (availproof-rig-load)


# ------------------------------------------------------------------ 3. autoscaling
def raycluster(s):
    return s.custom[("rayclusters", CLUSTER)]


def test_zone_and_region_loss_on_an_autoscaled_cluster_are_refused_unless_acknowledged():
    s, b, stream = cluster()
    b.prepare("run1", "zone")  # fixed replicas, no autoscaler: allowed
    raycluster(s)["spec"]["enableInTreeAutoscaling"] = True
    for scope in ("zone", "region"):
        with pytest.raises(SetupError) as e:
            b.prepare("run1", scope)
        text = one_line(e)
        assert f"RayCluster {CLUSTER}: enableInTreeAutoscaling: true" in text
        assert "--allow-autoscaled-zone-loss" in text and "adds nodes there" in text
    b.prepare("run1", "partition")  # other scopes are not refused for it
    # its only commands in pods: the looks for leftovers inside them (held engine faults; restart-fails' weights,
    # its state read only), nothing written
    assert {c[2].split(";")[0] for c in stream.calls} <= {": availproof-engine-marks look",
                                                         ": availproof-restart-fails"} and not [m for m, p in writes(s) if "selfsubjectaccessreviews" not in p
                                       and "dryRun" not in p]
    b.allow_autoscaled_zone_loss = True
    b.prepare("run1", "zone")


def test_what_counts_as_autoscaling():
    groups = [{"groupName": "g", "replicas": 1, "minReplicas": 1, "maxReplicas": 1},
              {"groupName": "h", "replicas": 1}, {"groupName": "i", "replicas": 1, "maxReplicas": 2147483647}]
    assert kb.autoscaling_signs({"workerGroupSpecs": groups}) == []  # unset maxReplicas: the CRD's default
    groups[0]["maxReplicas"] = 3
    # without in-tree autoscaling nothing changes replicas (GetWorkerGroupDesiredReplicas only clamps them)
    assert kb.autoscaling_signs({"workerGroupSpecs": groups}) == []
    assert kb.autoscaling_signs({"enableInTreeAutoscaling": False, "workerGroupSpecs": groups}) == []
    assert kb.autoscaling_signs({"enableInTreeAutoscaling": True, "workerGroupSpecs": groups}) == [
        "enableInTreeAutoscaling: true", "worker group g: maxReplicas 3 > replicas 1"]
    s, b, _ = cluster()
    assert b.autoscaling() == []
    raycluster(s)["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 5  # fixed replicas 2: no Ray autoscaler
    assert b.autoscaling() == []
    b.prepare("run1", "zone")  # not refused
    s.nodes["k-a2"]["metadata"]["labels"]["karpenter.sh/nodepool"] = "gpu"
    assert b.autoscaling(["zone-b"]) == [] and b.autoscaling(["zone-a"]) == ["Karpenter nodes in the zone(s): k-a2"]
    s.configmaps[("kube-system", "cluster-autoscaler-status")] = {"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "metadata": {"name": "cluster-autoscaler-status"}}
    assert b.autoscaling(["zone-b"]) == ["a cluster-autoscaler's status ConfigMap kube-system/cluster-autoscaler-status"]


def _nodepool(name, requirements=(), taints=()):
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"requirements": list(requirements), "taints": list(taints),
                                           "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"}}}}}


def test_an_autoscaler_status_that_cannot_be_read_is_unknown_and_refused_unless_acknowledged():
    """Before: a 403 on kube-system/cluster-autoscaler-status was swallowed (no sign, the loss allowed)."""
    s, b, _ = cluster()
    assert b.autoscaling(["zone-a"]) == []
    s.forbidden.add("/api/v1/configmaps")  # RBAC: the cluster-wide list of ConfigMaps denied
    signs = b.autoscaling(["zone-a"])
    assert signs == ["unknown: ConfigMaps named cluster-autoscaler-status (list configmaps, all namespaces) could "
                     "not be read (HTTP 403), so an autoscaler there would not be seen"]
    s.denied_access = set()
    b.allow_autoscaled_zone_loss = False
    with pytest.raises(SetupError) as e:
        b.refuse_autoscaled_zone_loss(["zone-a"])
    assert "unknown: ConfigMaps named cluster-autoscaler-status" in one_line(e) and "--allow-autoscaled-zone-loss" in one_line(e)
    s.forbidden = {"/api/v1/pods"}
    assert b.autoscaling(["zone-a"])[0].startswith("unknown: cluster-autoscaler's pods (list pods, all namespaces)")
    s.forbidden = {"/apis/karpenter.sh/v1/nodepools"}
    s.nodepools = []
    assert b.autoscaling(["zone-a"])[0].startswith("unknown: Karpenter NodePools (list nodepools.karpenter.sh/v1)")
    b.allow_autoscaled_zone_loss = True
    b.refuse_autoscaled_zone_loss(["zone-a"])  # acknowledged: not refused


def test_cluster_autoscaler_is_found_wherever_it_lives():
    s, b, _ = cluster()
    # a Helm install in its own namespace: the status ConfigMap there, under the default name
    s.configmaps[("autoscaling", "cluster-autoscaler-status")] = {"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "metadata": {"name": "cluster-autoscaler-status"}}
    s.configmaps[("autoscaling", "unrelated")] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated"}}
    assert b.autoscaling(["zone-a"]) == ["a cluster-autoscaler's status ConfigMap autoscaling/cluster-autoscaler-status"]
    # one whose status ConfigMap is named otherwise: its pod, by its image
    s.configmaps.clear()
    s.other_pods[("infra", "ca-aws-cluster-autoscaler-7d9f")] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ca-aws-cluster-autoscaler-7d9f", "labels": {}},
        "spec": {"containers": [{"name": "aws-cluster-autoscaler",
                                 "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.0",
                                 "command": ["./cluster-autoscaler", "--cloud-provider=aws",
                                             "--status-config-map-name=ca-status"]}]},
        "status": {"phase": "Running"}}
    assert b.autoscaling(["zone-a"]) == ["a cluster-autoscaler pod infra/ca-aws-cluster-autoscaler-7d9f "
                                         "(status ConfigMap ca-status)"]
    reads = {p.split("?")[0] for m, p, _ in s.calls if m == "GET"}
    assert {"/api/v1/configmaps", "/api/v1/pods", "/apis/karpenter.sh/v1/nodepools"} <= reads
    assert any(p == "/api/v1/configmaps?fieldSelector=metadata.name%3Dcluster-autoscaler-status"
               for m, p, _ in s.calls)


def test_karpenter_nodepools_that_admit_the_zone_count_with_no_node_there_yet():
    s, b, _ = cluster()
    s.nodepools = [_nodepool("elsewhere", [{"key": kb.ZONE_LABEL, "operator": "In", "values": ["zone-c"]}]),
                   _nodepool("not-a", [{"key": kb.ZONE_LABEL, "operator": "NotIn", "values": ["zone-a"]}]),
                   _nodepool("tainted", taints=[{"key": "team", "value": "ml", "effect": "NoSchedule"}])]
    assert b.autoscaling(["zone-a"]) == []  # none admits zone-a for our pods (the taint is not tolerated)
    assert b.autoscaling(["zone-c"]) == ["Karpenter NodePool elsewhere admits zone-c",
                                         "Karpenter NodePool not-a admits zone-c"]
    s.nodepools.append(_nodepool("gpu", [{"key": kb.ZONE_LABEL, "operator": "In", "values": ["zone-a", "zone-b"]},
                                         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]))
    s.nodepools.append(_nodepool("anywhere", [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]))
    assert b.autoscaling(["zone-a"]) == ["Karpenter NodePool gpu admits zone-a", "Karpenter NodePool anywhere admits zone-a"]
    assert not any("karpenter" in (n["metadata"].get("labels") or {}) for n in s.nodes.values())  # no node yet
    with pytest.raises(SetupError, match="Karpenter NodePool gpu admits zone-a"):
        b.prepare("run1", "zone", [{"scope": "zone", "arguments": {"zone": "zone-a"}}])
    # Karpenter before v1 serves karpenter.sh/v1beta1 only; no Karpenter at all: no CRD, nothing found
    s.karpenter_versions = ("v1beta1",)
    assert "Karpenter NodePool gpu admits zone-a" in b.autoscaling(["zone-a"])
    s.nodepools = None
    assert b.autoscaling(["zone-a"]) == []


def test_the_autoscaler_reads_are_reviewed_unless_the_loss_is_acknowledged():
    s, b, _ = cluster()
    s.denied_access = {("list", "nodepools", "karpenter.sh", "")}
    with pytest.raises(SetupError) as e:
        b.prepare("run1", "zone")
    assert "may not list nodepools.karpenter.sh (cluster-wide) [Karpenter NodePools admitting the zone" in one_line(e)
    assert "--allow-autoscaled-zone-loss" in one_line(e)
    b.allow_autoscaled_zone_loss = True
    b.prepare("run1", "zone")  # acknowledged: neither reviewed nor read
    assert ("list", "nodepools", "karpenter.sh", "", False) not in {
        (a.verb, a.resource, a.group, a.subresource, a.namespaced)
        for a in kube_access.needed({"zone"}, autoscalers=False)}


def test_the_acknowledgement_comes_from_the_flag_or_the_experiment():
    args = cli.build_parser().parse_args(["run", "x.json", "--backend", "kuberay", "--allow-autoscaled-zone-loss"])
    assert kube_flags(args)["allow_autoscaled_zone_loss"] is True
    args = cli.build_parser().parse_args(["run", "x.json", "--backend", "kuberay"])
    merged = provision.kube_settings(kube_flags(args), {"context": "c", "namespace": "n", "serve_url": "s",
                                                        "dashboard_url": "d", "allow_autoscaled_zone_loss": True})
    assert merged["allow_autoscaled_zone_loss"] is True  # the flag not given does not override the file


# ------------------------------------------------------------------ 5. a cluster upgrade KubeRay would not roll out
def test_a_cluster_upgrade_under_strategy_none_is_refused_at_prepare_before_any_load():
    s, b = service(strategy="None")
    cluster_upgrade = plan.faults_of(load(ROOT / "experiments" / "kuberay-upgrade-cluster.json"))
    serve_upgrade = plan.faults_of(load(ROOT / "experiments" / "kuberay-upgrade-serve-config.json"))
    with pytest.raises(UsageError, match="upgradeStrategy.type None: KubeRay would not roll out") as e:
        b.prepare("run1", "upgrade", cluster_upgrade)
    one_line(e)
    b.prepare("run1", "upgrade", serve_upgrade)  # applied in place whatever the strategy
    assert writes(s) == [(m, p) for m, p in writes(s) if p.endswith("/selfsubjectaccessreviews")]


@pytest.mark.parametrize("operator", ["ENABLE_ZERO_DOWNTIME=false", "incremental without its gate", "down"])
def test_a_cluster_upgrade_kuberay_ignores_is_reverted_and_raised_at_once_not_waited_for(operator):
    s, b = service(strategy="NewClusterWithIncrementalUpgrade" if operator.startswith("incremental") else None)
    if operator == "down":
        s.kuberay.answers = False
    else:
        s.kuberay.zero_downtime_env = False
    before = json.loads(json.dumps(rayservice(s)["spec"]))
    with pytest.raises(ClusterError) as e:
        b.upgrade_app("cluster", "v3")
    text = one_line(e)
    if operator == "down":
        assert "did not reconcile the change within 30 s" in text
        polls = -(-kb.KUBERAY_ANSWER_S // kb.KUBERAY_POLL_S)
        after = s.calls[next(i for i, c in enumerate(s.calls) if c[0] == "PATCH"):]
        assert len([1 for m, p, _ in after if m == "GET" and p == RS_PATH]) <= polls + 1  # bounded, then the revert
    else:
        assert "prepared no new RayCluster: zero-downtime upgrades are off" in text
        # KubeRay's answer is the first read after the patch (the status it wrote), not a 30 s wait
        after = s.calls[next(i for i, c in enumerate(s.calls) if c[0] == "PATCH"):]
        assert [m for m, p, _ in after if p == RS_PATH] == ["PATCH", "GET", "GET", "PATCH"]  # answer, revert
        assert s.kuberay.status_writes == [("availproof", 2)]  # the patch's generation, written with no pending cluster
    assert "the patch was reverted" in text
    assert rayservice(s)["spec"] == before  # back as it was: KubeRay will not apply it later
    # the record (what a rollback needs) first, the patch and its revert, the record deleted
    assert [m for m, _ in writes(s)] == ["POST", "PATCH", "PATCH", "DELETE"] and not s.configmaps


def test_the_fake_operator_writes_the_rayservice_status_only_when_kuberay_v17_would():
    """KubeRay v1.7.0 ``Reconcile`` writes the status only when ``utils.InconsistentRayServiceStatuses`` says it
    changed; that check ignores ``observedGeneration`` and ``lastUpdateTime``, but ``setCondition`` stamps every
    condition with the generation reconciled (``meta.SetStatusCondition`` updates it), so a new generation is
    written even when KubeRay does nothing with it (``ENABLE_ZERO_DOWNTIME=false``), and a reconcile with nothing
    new writes nothing (no resourceVersion bump, no lastUpdateTime)."""
    s, b = service()
    s.kuberay.zero_downtime_env = False
    settled = json.loads(json.dumps(b.pods.get_rayservice()))
    assert settled["status"]["observedGeneration"] == 1 and "lastUpdateTime" not in settled["status"]
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in settled["status"]["conditions"]] == [
        ("Ready", "True", 1), ("UpgradeInProgress", "False", 1)]
    for _ in range(3):  # requeues with nothing new
        assert b.pods.get_rayservice() == settled
    assert s.kuberay.status_writes == []
    rcc = settled["spec"]["rayClusterConfig"]
    b.lifecycle.rollbacks.patch_rayservice({"spec": {"rayClusterConfig": kb.cluster_config_patch(rcc, "v3")}}, "test")
    status = b.pods.get_rayservice()["status"]
    assert s.kuberay.status_writes == [("availproof", 2)]  # written: the conditions' generation changed
    assert status["observedGeneration"] == 2 and not (status.get("pendingServiceStatus") or {}).get("rayClusterName")
    assert [c["observedGeneration"] for c in status["conditions"]] == [2, 2] and status["lastUpdateTime"]
    strip = lambda st: {**{k: v for k, v in st.items() if k not in ("observedGeneration", "lastUpdateTime")},  # noqa: E731
                        "conditions": [{k: v for k, v in c.items() if k != "observedGeneration"} for c in st["conditions"]]}
    assert strip(status) == strip(settled["status"])  # nothing else changed
    b.pods.get_rayservice()
    assert s.kuberay.status_writes == [("availproof", 2)]  # once
    # zero-downtime on: the same write names the pending cluster, UpgradeInProgress true
    s2, b2 = service()
    rcc = b2.pods.get_rayservice()["spec"]["rayClusterConfig"]
    b2.lifecycle.rollbacks.patch_rayservice({"spec": {"rayClusterConfig": kb.cluster_config_patch(rcc, "v3")}}, "test")
    status = b2.pods.get_rayservice()["status"]
    assert status["pendingServiceStatus"] == {"rayClusterName": "availproof-b6d4f"} and status["observedGeneration"] == 2
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Ready", "True"), ("UpgradeInProgress", "True")]
    assert s2.kuberay.status_writes == [("availproof", 2)]


def test_an_ignored_cluster_upgrade_records_no_injection(monkeypatch):
    s, b = service()
    s.kuberay.zero_downtime_env = False
    fake_dashboard(monkeypatch, serve=SERVE)
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="zero-downtime upgrades are off"):
        upgrade_app(b, marker, variant="cluster", version="v3", timeout_s=900, poll_s=0.01)
    assert marker.marks == []


# ------------------------------------------------------------------ 2. the plan
def plan_of(b, name):
    return plan.objects(b, plan.faults_of(load(ROOT / "experiments" / name)))


def test_the_plan_names_every_object_and_makes_no_mutating_call_and_no_exec(monkeypatch):
    fake_dashboard(monkeypatch, serve=SERVE)
    s, b, stream = cluster()
    s.calls.clear()
    rows = plan_of(b, "zone-loss.json")
    assert {(r["kind"], r["name"]) for r in rows} == {("Node", "k-a1"), ("Node", "k-a2"), ("Pod", "wa-1"), ("Pod", "wa-2")}
    assert all(r["activity"] == "kill-zone-a" and r["scope"] == "zone" for r in rows)
    rows = plan_of(b, "zone-partition.json")  # zone-c: its pod, the helper on its node, the far end of the probe
    assert {(r["kind"], r["name"]) for r in rows} == {("Pod", "availproof-partition-k-c"), ("Pod", "wc-1"),
                                                     ("Pod", "head")}
    rows = plan_of(b, "replica-kill.json") + plan_of(b, "engine-hang.json") + plan_of(b, "worker-node-kill.json")
    rows += plan_of(b, "head-kill-gcs-ft.json") + plan_of(b, "redis-loss.json") + plan_of(b, "drain.json")
    rows += plan_of(b, "head-outage-second-fault.json")
    crash = plan_of(b, "engine-crash.json")  # zone-a's replica r1 (pid 41) in wa-1: the pod, its engine children
    assert [(r["kind"], r["name"]) for r in crash] == [("Pod", "wa-1"), ("Process", "EngineCore children of 41")]
    assert all(r["activity"] == "crash-engine-in-zone-a" and r["scope"] == "engine-crash" for r in crash)
    assert "pgrep -P 41 -f EngineCore" in crash[0]["does"] and "SIGKILL" in crash[1]["does"]
    assert crash[1]["where"] == "availproof, pod wa-1, node k-a1"
    rows += crash
    assert not plan.refused(rows), plan.refused(rows)
    region = plan.objects(b, [{"activity": "lose-region-2", "scope": "region", "arguments": {"region": "region-2"}}])
    assert {(r["kind"], r["name"]) for r in region} == {("Node", "k-c"), ("Pod", "wc-1")}
    assert plan.refused(plan_of(b, "region-loss.json"))[0]["does"] == "region 'region-east' has no zone"
    assert ("Pod", "redis-1") in {(r["kind"], r["name"]) for r in rows}
    b.partition_method = "networkpolicy"
    rows = plan_of(b, "zone-partition.json")
    assert ("NetworkPolicy", "availproof-partition-zone-c") in {(r["kind"], r["name"]) for r in rows}
    # reads only: no POST, PATCH or DELETE reached the API server, no command ran in a pod
    assert {m for m, _, _ in s.calls} == {"GET"} and stream.calls == []
    assert s.nodes["k-a1"]["spec"] == {} and "wa-1" in s.pods and not s.netpols


def test_the_plan_says_what_a_guard_would_refuse(monkeypatch):
    s, b, _ = cluster(max_pods=1)
    rows = plan_of(b, "zone-loss.json")
    assert [r["kind"] for r in rows] == [plan.REFUSED] and "more than the limit of 1" in rows[0]["does"]
    s2, b2 = service(strategy="None")
    rows = plan_of(b2, "kuberay-upgrade-cluster.json")
    assert [r["kind"] for r in rows] == [plan.REFUSED] and "upgradeStrategy.type None" in rows[0]["does"]
    rows = plan_of(b2, "kuberay-upgrade-serve-config.json")
    assert [(r["kind"], r["name"]) for r in rows] == [("RayService", "availproof")]
    assert {m for m, _, _ in s.calls + s2.calls} == {"GET"}


def test_availproof_run_plan_prints_the_table_and_exits_by_what_would_be_refused(monkeypatch, capsys):
    s, b, stream = cluster()
    monkeypatch.setattr(provision, "kuberay_backend", lambda k: b)
    flags = ["--backend", "kuberay", "--front", "direct", "--kube-context", "kind-availproof", "--kube-namespace",
             "availproof", "--serve-url", "http://s", "--dashboard-url", "http://d"]
    s.calls.clear()
    assert cli.main(["run", str(ROOT / "experiments" / "zone-loss.json"), "--plan", *flags]) == 0
    out = capsys.readouterr().out
    assert "nothing was changed" in out and "| kill-zone-a | zone | Node | k-a1 |" in out and "| Pod | wa-2 |" in out
    raycluster(s)["spec"]["enableInTreeAutoscaling"] = True
    assert cli.main(["run", str(ROOT / "experiments" / "zone-loss.json"), "--plan", *flags]) == 2
    assert "the run would be refused at kill-zone-a (zone): zone or region loss on an autoscaled" in capsys.readouterr().err
    assert cli.main(["run", str(ROOT / "experiments" / "zone-loss.json"), "--plan", *flags,
                     "--allow-autoscaled-zone-loss"]) == 2  # the fake stands in for the flags' backend: still on
    assert {m for m, _, _ in s.calls} == {"GET"} and stream.calls == []


def test_the_local_plan_names_nodes_processes_and_links_without_touching_them(tmp_path):
    from chaos.system import topology

    state = st.ClusterState(cluster_id="ap0c0ffe", topology=topology.load().to_doc(), topology_source="default.yaml",
                            gcs_fault_tolerance=True, temp_root=str(tmp_path), base_port=20000, netns_mode=True,
                            bridge="apbr0", links={"zone-a": "apv-a"})
    from chaos.backends.local import ports

    for i, (name, zone) in enumerate((("head", None), ("w-a", "zone-a"), ("w-b", "zone-b")), 1):
        state.nodes[name] = st.NodeState(name=name, role="head" if zone is None else "worker", ip=f"10.9.0.{i}",
                                         ports=ports.node_ports(20000, i), temp_dir=str(tmp_path / name),
                                         labels={}, zone=zone, region="region-1" if zone else None)
    state.redis = st.RedisState(host="10.9.0.1", port=20010, dir=str(tmp_path), pid=None)
    b = LocalBackend(LocalCluster(tmp_path, state))
    rows = b.plan("zone", {"zone": "zone-a"})
    assert [(r["kind"], r["name"]) for r in rows] == [("node", "w-a")] and "SIGKILL" in rows[0]["does"]
    assert [(r["kind"], r["name"]) for r in b.plan("partition", {"zone": "zone-a"})] == [("link", "apv-a"), ("node", "w-a")]
    assert b.plan("head", {"method": "gcs"})[0]["does"].startswith("SIGKILL of gcs_server")
    assert b.plan("redis", {})[0]["where"] == "redis-server 10.9.0.1:20010"
    with pytest.raises(UsageError):
        b.plan("nonsense", {})


def test_faults_of_every_shipped_experiment():
    want = {"replica-kill": ["replica"], "engine-hang": ["engine"], "worker-node-kill": ["node"],
            "head-kill-gcs-ft": ["head"], "head-kill-no-ft": ["head"], "zone-loss": ["zone"],
            "region-loss": ["region"], "zone-partition": ["partition"], "redis-loss": ["redis"],
            "head-outage-second-fault": ["head", "replica"], "upgrade": ["upgrade"], "drain": ["drain"],
            "kuberay-upgrade-cluster": ["upgrade"], "kuberay-upgrade-serve-config": ["upgrade"],
            "engine-crash": ["engine-crash"]}
    for path in sorted((ROOT / "experiments").glob("*.json")):
        exp = load(path)
        if path.stem in want:
            assert [f["scope"] for f in plan.faults_of(exp)] == want[path.stem], path.stem
        ext = next(e for e in exp["extensions"] if e["name"] == "availproof")
        assert {f["scope"] for f in plan.faults_of(exp)} >= {ext["scope"]}
    zone = plan.faults_of(load(ROOT / "experiments" / "zone-loss.json"))[0]
    assert zone == {"activity": "kill-zone-a", "action": "kill_zone", "scope": "zone",
                    "arguments": {"zone": "zone-a", "outage_s": 20}}


# ------------------------------------------------------------------ 4. the actor kill connects before the fault
def test_the_actor_kills_driver_connects_before_the_faults_instant(monkeypatch):
    s, b, stream = cluster()
    s.kubelet.actors["SERVE_REPLICA::a#S#r1"] = ("wa-1", 41)
    at = []
    handler = stream.handler
    stream.handler = lambda pod, c, script: (at.append((rec.now_ns(), script)), handler(pod, c, script))[1]
    events, seen = rec.Events(), []
    events.fault_marked.append(seen.append)
    kill_replica(b, faults.Marker(events), replica=replica(), method="actor")
    arm = next(t for t, script in at if script.startswith(": availproof-actor-kill arm"))
    fire = next(t for t, script in at if script.startswith(": availproof-actor-kill fire"))
    inject = next(m for m in seen if m.event == rec.INJECT_START)
    assert arm < inject.t_ns <= fire  # the connection (ray.init, the actor's lookup) before the fault's instant
    fire_script = next(script for _, script in at if "actor-kill fire" in script)
    assert "ray.init" not in fire_script and "python" not in fire_script  # the timed part is the kill alone
    assert s.kubelet.fates["wa-1"] == [("ray::ServeRepli", "SIGKILL")]


def test_an_actor_kill_whose_driver_cannot_connect_raises_before_any_mark():
    s, b, stream = cluster()
    s.kubelet.actors["SERVE_REPLICA::other"] = ("wa-1", 41)  # the replica's actor is not there
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="is not ready to kill actor SERVE_REPLICA::a#S#r1 .error Failed to look up"):
        kill_replica(b, marker, replica=replica(), method="actor")
    assert marker.marks == [] and s.kubelet.fates.get("wa-1") is None


STAND_IN_DRIVER = ray_actor.ARMED.replace(
    """    import ray
    ray.init(address="auto", namespace="serve", logging_level="ERROR", log_to_driver=False)
    handle = ray.get_actor(name, namespace="serve")
""", """    handle = name
""").replace("        ray.kill(handle, no_restart=True)\n", "        open(path + '.victim', 'w').write(handle)\n")


def test_the_armed_driver_scripts_work_through_a_real_shell(tmp_path, monkeypatch):
    """The two execs' shell and FIFO choreography, run by sh with a stand-in for Ray (the same files, the
    ``ray`` calls replaced): armed, it waits; fired, it acts once and reports; fired again, it is gone."""
    assert "ray.init" not in STAND_IN_DRIVER and STAND_IN_DRIVER.count("put(") == ray_actor.ARMED.count("put(")
    kill_id = f"availproof-actor-kill-test-{os.getpid()}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = lambda script: subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, env=env)  # noqa: E731
    try:
        armed = run(ray_actor.arm_script(kill_id, "SERVE_REPLICA::x", life_s=20, driver=STAND_IN_DRIVER))
        ok, line = ray_actor.parse_word(armed.stdout, "ready")
        assert ok, (armed.stdout, armed.stderr)
        assert not Path(f"/tmp/{kill_id}.victim").exists()  # armed, nothing done yet
        fired = run(ray_actor.fire_script(kill_id, int(line.split()[1])))
        assert ray_actor.parse_word(fired.stdout, "killed") == (True, "killed"), (fired.stdout, fired.stderr)
        assert Path(f"/tmp/{kill_id}.victim").read_text() == "SERVE_REPLICA::x"
        again = run(ray_actor.fire_script(kill_id, int(line.split()[1])))
        assert again.returncode == 3 and "gone" in again.stderr  # no write to a FIFO nobody reads
    finally:
        for suffix in (".ready", ".done", ".fifo", ".victim"):
            Path(f"/tmp/{kill_id}{suffix}").unlink(missing_ok=True)


# ------------------------------------------------------------------ 6. KubeRay's replacements during a zone loss
def test_a_zone_losss_replacements_stay_pending_until_the_heal_and_the_check_sees_one_that_is_not():
    s, b, _ = cluster()
    zone = {"scope": "zone", "target": "zone-a", "zones": ["zone-a"], "pids": 2}
    b.kill_zones(["zone-a"])
    new = s.kuberay.reconcile_pods()  # the crashed pods are gone: KubeRay recreates them, pinned to zone-a
    assert len(new) == 2 and s.schedule() == []  # both of zone-a's nodes cordoned: Pending
    assert [c["ok"] for c in b.effect_checks(zone)] == [True, True, True]
    b.restore_zones(["zone-a"])  # the heal: they schedule
    assert s.schedule() == new
    # had an autoscaler added a node in the lost zone, the replacements would have come up there: not in effect
    s2, b2, _ = cluster()
    b2.kill_zones(["zone-a"])
    new = s2.kuberay.reconcile_pods()
    s2.nodes["k-a9"] = node("k-a9", "zone-a", "region-1")
    assert s2.schedule() == new
    checks = b2.effect_checks(zone)
    assert [c["ok"] for c in checks] == [False, True, False] and "2 Ready" in checks[0]["seen"]
    assert "a node added after the loss began" in checks[2]["seen"]


# ------------------------------------------------------------------ restart-fails' weights in the pods
def restart_fails_cluster(monkeypatch, fail_break_after=None):
    """zone-a's two pods (wa-1, wa-2) with the stream target's weights; the break refused in the pods after the
    first ``fail_break_after`` (as a full disk would)."""
    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve=SERVE)
    monkeypatch.setattr(b.engines.weights, "weights_of_app", lambda: {"app": "stream", "path": "stream-default", "checkpoint": None})
    real, broken = b.pods.exec, []

    def exec_(pod, script, *a, **k):
        if "weights_swap break " in script and fail_break_after is not None:
            if len(broken) >= fail_break_after:
                return json.dumps({"error": "weights: no space left on device"}) + "\n"
            broken.append(pod)
        return real(pod, script, *a, **k)
    monkeypatch.setattr(b.pods, "exec", exec_)
    b.run_id = "run-1"
    return s, b, broken


def pod_state(b, pod):
    return kb.weights.parse(b.exec(pod, kb.weights.swap_script("state", "stream-default", ""), ok_codes=(0, 1)))


def test_a_swap_failing_in_one_pod_leaves_the_pods_swapped_before_it_in_the_fault_and_the_rollback_restores_them(
        monkeypatch):
    s, b, broken = restart_fails_cluster(monkeypatch, fail_break_after=1)
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="the rollback restores them"):
        fail_restart(b, marker, zone="zone-a", outage_s=None)
    assert len(broken) == 1 and pod_state(b, broken[0])["state"] == "truncated"
    f = next(iter(marker.attempted.values()))
    assert broken[0] in f["weights"]["pods"]
    faults.heal(b, marker, timeout=1.0)
    assert f["weights_restored"]["restored"] and f["weights_restored"]["pods"][broken[0]]["state"] == "original"
    assert pod_state(b, broken[0])["mark"] is None  # no mark left: a later run is not refused


def test_recover_puts_back_any_runs_weights_in_the_pods_and_lists_them_as_leftovers_until_then(monkeypatch):
    s, b, _ = restart_fails_cluster(monkeypatch)
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=None)  # the run killed before its restore
    swapped = sorted(f["weights"]["pods"])
    assert swapped == ["wa-1", "wa-2"]
    b.run_id = "run-2"  # a later `availproof recover`
    left = kb.weights.leftover_pods(b)
    assert sorted(x["pod"] for x in left) == swapped and {x["run_id"] for x in left} == {"run-1"}
    assert {x["state"] for x in left} == {"truncated"}
    done = kb.weights.recover_pods(b)
    assert sorted(d["pod"] for d in done) == swapped and all(d["restored"] for d in done)
    assert kb.weights.leftover_pods(b) == [] and kb.weights.recover_pods(b) == []


def test_the_backends_leftovers_and_recover_see_the_swapped_weights_in_the_pods(monkeypatch):
    """Wired into the backend (leftovers.IN_POD_LEFTOVERS): a killed run's swapped weights are a leftover (the next
    preparation refuses while they are there) until `availproof recover` (remove_leftovers) puts them back."""
    s, b, _ = restart_fails_cluster(monkeypatch)
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=None)  # the run killed before its restore
    b.run_id = "run-2"
    rows = [x for x in b.leftovers() if x["kind"] == "Weights"]
    assert sorted(x["pod"] for x in rows) == sorted(f["weights"]["pods"]) and {x["run_id"] for x in rows} == {"run-1"}
    done = b.remove_leftovers()
    assert not done["failed"] and [x for x in done["removed"] if x["kind"] == "Weights"]
    assert all(pod_state(b, p)["mark"] is None for p in f["weights"]["pods"])  # put back: no mark left
    assert not [x for x in b.leftovers() if x["kind"] == "Weights"]


def test_a_restore_at_the_outage_is_not_overwritten_by_the_rollbacks_on_kuberay(monkeypatch):
    s, b, _ = restart_fails_cluster(monkeypatch)
    # no replacement's start fails in the fake (its Serve details stay as they are): held to the cap, restored then
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.0, max_outage_s=0.1, poll_s=0.01)
    assert f["weights_restored"]["restored"] and f["held_until"] == "cap" and f["effect"]["verified"] is False
    assert f["hold"]["looks"] > 0 and f["hold"]["unknown"] == 0  # KubeRay's replica_states answered by the dashboard
    f["weights_restored"] = b.restore_weights(f)  # the rollback's second call (prepare.heal)
    assert f["weights_restored"]["restored"]
