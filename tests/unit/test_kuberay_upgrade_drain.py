"""The KubeRay backend's upgrades and drains (issue 16), over the real kubernetes client and the in-memory
API server (tests/unit/kube_fake.py): what each upgrade variant patches in the RayService (and nothing
else), what the drain's eviction carries, what is refused, and the faults ``upgrade_app`` and
``drain_node`` end to end against a fake Serve whose replicas change as KubeRay and Serve would."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from chaos import analysis
from chaos.scopes import faults
from chaos.system import placement
from chaos.recording import records as rec
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import marks as km
from chaos.base.errors import ClusterError, SetupError, UsageError
from chaos.scopes.drain import drain_node
from chaos.scopes.upgrade import upgrade_app
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import ray_pod
from tests.unit.test_kuberay_backend import CLUSTER, cluster, writes

ROOT = Path(__file__).resolve().parents[2]
RS_PATH = "/apis/ray.io/v1/namespaces/availproof/rayservices/availproof"
CM_PATH = "/api/v1/namespaces/availproof/configmaps"
NEW_CLUSTER = "availproof-b6d4f"


def service(strategy=None, serve_config=None, max_pods=3):
    """The fake cluster with the rig's own RayService spec (kuberay/base/rayservice.yaml)."""
    s, b, _ = cluster(max_pods=max_pods)
    manifest = yaml.safe_load((ROOT / "kuberay/base/rayservice.yaml").read_text())
    rs = s.custom[("rayservices", "availproof")]
    rs["metadata"]["resourceVersion"] = "7"
    rs["spec"] = copy.deepcopy(manifest["spec"])
    if strategy is not None:
        rs["spec"]["upgradeStrategy"] = {"type": strategy}
    if serve_config is not None:
        rs["spec"]["serveConfigV2"] = serve_config
    return s, b


def rayservice(s):
    return s.custom[("rayservices", "availproof")]


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------ serve_config
def test_serve_config_upgrade_sets_the_version_on_every_app_and_nothing_else():
    two_apps = yaml.safe_dump({"proxy_location": "EveryNode", "applications": [
        {"name": "llm", "import_path": "a:b", "runtime_env": {"pip": ["x"], "env_vars": {"OTHER": "1",
                                                                                      kb.VERSION_ENV: "v1"}},
         "deployments": [{"name": "A", "num_replicas": 3}]},
        {"name": "side", "import_path": "c:d", "deployments": [{"name": "B"}]}]})
    s, b = service(serve_config=two_apps)
    before = copy.deepcopy(rayservice(s))
    out = b.upgrade_app("serve_config", "v2")
    assert out == {"variant": "serve_config", "version": "v2", "rayservice": "availproof", "cluster_before": CLUSTER,
                   "upgrade_strategy": None, "patched": "spec.serveConfigV2",
                   "previous_versions": {"llm": "v1", "side": None},
                   "changed": f"applications[*].runtime_env.env_vars.{kb.VERSION_ENV}", "version_served": True}
    # one write: a JSON merge patch of the RayService, with the resourceVersion read as its precondition
    assert writes(s) == [("PATCH", RS_PATH)]
    assert s.content_types[-1] == ("PATCH", RS_PATH, "application/merge-patch+json")
    body = s.calls[-1][2]
    assert set(body) == {"metadata", "spec"} and body["metadata"] == {"resourceVersion": "7"}
    assert set(body["spec"]) == {"serveConfigV2"}
    after = rayservice(s)
    want = yaml.safe_load(two_apps)
    want["applications"][0]["runtime_env"]["env_vars"][kb.VERSION_ENV] = "v2"
    want["applications"][1]["runtime_env"] = {"env_vars": {kb.VERSION_ENV: "v2"}}
    assert yaml.safe_load(after["spec"]["serveConfigV2"]) == want
    # everything else as it was (the server bumped the resourceVersion)
    rest_before, rest_after = copy.deepcopy(before), copy.deepcopy(after)
    for o in (rest_before, rest_after):
        o["spec"].pop("serveConfigV2")
        o["metadata"].pop("resourceVersion")
        o["metadata"].pop("generation", None)  # the API server counts spec changes
        o.pop("status", None)  # KubeRay's answer (observedGeneration, the pending cluster)
    assert rest_after == rest_before and after["metadata"]["resourceVersion"] == "8"


def test_serve_config_upgrade_of_the_rigs_own_manifest_keeps_every_other_setting():
    s, b = service()
    text = rayservice(s)["spec"]["serveConfigV2"]
    b.upgrade_app("serve_config", "abc123")
    got = yaml.safe_load(rayservice(s)["spec"]["serveConfigV2"])
    want = yaml.safe_load(text)
    want["applications"][0]["runtime_env"] = {"env_vars": {kb.VERSION_ENV: "abc123"}}
    assert got == want


# ------------------------------------------------------------------ cluster
def muted_hash_input(rcc: dict) -> str:
    """What KubeRay hashes to decide on a new RayCluster (generateHashWithoutReplicasAndWorkersToDelete):
    rayClusterConfig without each worker group's replicas, minReplicas, maxReplicas, workersToDelete."""
    rcc = copy.deepcopy(rcc)
    for g in rcc.get("workerGroupSpecs") or []:
        for k in ("replicas", "minReplicas", "maxReplicas"):
            g.pop(k, None)
        (g.get("scaleStrategy") or {}).pop("workersToDelete", None)
    return json.dumps(rcc, sort_keys=True)


def without_annotation(rcc: dict) -> dict:
    rcc = copy.deepcopy(rcc)
    for t in [rcc["headGroupSpec"]["template"]] + [g["template"] for g in rcc["workerGroupSpecs"]]:
        ann = t["metadata"]["annotations"]
        assert ann.pop(kb.VERSION_ANNOTATION) == "v3"
        assert ann.pop(km.RUN) and ann.pop(km.EXPIRES)  # the pending RayCluster made of it carries the run id
        if not ann:
            del t["metadata"]["annotations"]
        if not t["metadata"]:
            del t["metadata"]
    return rcc


def test_cluster_upgrade_annotates_every_pod_template_and_nothing_else():
    s, b = service()
    before = copy.deepcopy(rayservice(s))
    out = b.upgrade_app("cluster", "v3")
    assert out["patched"] == "spec.rayClusterConfig" and out["effective_strategy"] == "NewCluster"
    assert out["upgrade_strategy"] is None and out["cluster_before"] == CLUSTER
    assert "workers-zone-a, workers-zone-b, workers-zone-c" in out["changed"]
    assert out["version_served"] is False  # the pods change, the version the app reports does not
    assert writes(s) == [("POST", CM_PATH), ("PATCH", RS_PATH)]  # its record first (a rollback's), then the patch
    assert s.content_types[-1][2] == "application/merge-patch+json"
    body = next(body for method, _, body in s.calls if method == "PATCH")  # then KubeRay's answer is read
    assert body["metadata"] == {"resourceVersion": "7"} and set(body["spec"]) == {"rayClusterConfig"}
    assert out["pending_cluster"] == NEW_CLUSTER  # KubeRay prepares a new RayCluster (zero-downtime on)
    after = rayservice(s)
    rcc_before, rcc_after = before["spec"]["rayClusterConfig"], after["spec"]["rayClusterConfig"]
    # exactly the annotation on the head's and every worker group's pod template ...
    assert without_annotation(rcc_after) == rcc_before
    # ... which KubeRay's hash sees (a new RayCluster), the fields it mutes untouched
    assert muted_hash_input(rcc_after) != muted_hash_input(rcc_before)
    assert [g.get("replicas") for g in rcc_after["workerGroupSpecs"]] == \
        [g.get("replicas") for g in rcc_before["workerGroupSpecs"]]
    # nothing else in the RayService
    for o in (before, after):
        o["spec"].pop("rayClusterConfig")
        o["metadata"].pop("resourceVersion")
        o["metadata"].pop("generation", None)  # the API server counts spec changes
        o.pop("status", None)  # KubeRay's answer (observedGeneration, the pending cluster)
    assert after == before


# ------------------------------------------------------------------ refusals
def test_unknown_variant_bare_raycluster_strategy_none_and_a_running_upgrade_are_refused_in_one_line():
    s, b = service()
    with pytest.raises(UsageError, match="upgrade variant must be one of serve_config, cluster on KubeRay, got 'code'") as e:
        b.upgrade_app("code", "v2")
    one_line(e)
    marker = faults.Marker()
    with pytest.raises(UsageError, match="must be one of serve_config, cluster, got 'code'"):
        upgrade_app(b, marker, variant="code")
    assert marker.marks == []

    s2, b2 = service(strategy="None")
    with pytest.raises(UsageError, match="upgradeStrategy.type None: KubeRay would not roll out") as e:
        b2.upgrade_app("cluster", "v2")
    one_line(e)
    b2.upgrade_app("serve_config", "v2")  # applied in place whatever the strategy
    assert writes(s2) == [("PATCH", RS_PATH)]

    rayservice(s)["status"]["pendingServiceStatus"] = {"rayClusterName": NEW_CLUSTER}
    with pytest.raises(ClusterError, match=f"already upgrading \\(pending RayCluster {NEW_CLUSTER}\\)") as e:
        b.upgrade_app("serve_config", "v2")
    one_line(e)

    del s.custom[("rayservices", "availproof")]  # a bare RayCluster: no RayService
    bare = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", core=b.core, networking=b.net,
                             custom=b.custom, dashboard_url="http://d")
    assert bare.resolve_cluster() == CLUSTER and bare.service is None
    for variant in bare.upgrade_variants():
        with pytest.raises(UsageError, match=f"{CLUSTER} is a bare RayCluster, not a RayService's") as e:
            bare.upgrade_app(variant, "v2")
        one_line(e)
    assert writes(s) == []


def test_a_concurrent_change_of_the_rayservice_fails_the_patch_instead_of_overwriting_it():
    s, b = service()
    stale = copy.deepcopy(rayservice(s))
    rayservice(s)["metadata"]["resourceVersion"] = "8"  # someone applied a change after our read
    rayservice(s)["spec"]["serveConfigV2"] = "applications: [{name: llm, import_path: 'x:y'}]\n"
    b.pods.get_rayservice = lambda: stale
    with pytest.raises(ClusterError, match="HTTP 409: Operation cannot be fulfilled") as e:
        b.upgrade_app("serve_config", "v2")
    one_line(e)
    assert rayservice(s)["spec"]["serveConfigV2"] == "applications: [{name: llm, import_path: 'x:y'}]\n"


# ------------------------------------------------------------------ drain
def test_drain_evicts_the_worker_pod_with_the_deadline_as_its_grace_period():
    s, b, _ = cluster()
    out = b.drain_node("wb-1", 30)
    assert out == {"method": "eviction", "pods": ["wb-1"], "grace_period_s": 30, "k8s_node": "k-b"}
    assert writes(s) == [("POST", "/api/v1/namespaces/availproof/pods/wb-1/eviction")]
    assert s.calls[-1][2] == {"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": "wb-1", "namespace": "availproof"},
                              "deleteOptions": {"gracePeriodSeconds": 30}}
    assert s.pods["wb-1"]["metadata"]["deletionGracePeriodSeconds"] == 30  # terminating, not gone
    assert b.nodes_in(zone="zone-b") == []  # a terminating pod is no target any more
    # a sub-second deadline rounds up to 1 s: a grace period of 0 would be a force delete
    assert b.drain_node("wc-1", 0.3)["grace_period_s"] == 1
    assert s.calls[-1][2]["deleteOptions"] == {"gracePeriodSeconds": 1}


def test_a_disruption_budget_refusal_raises_one_line_and_records_no_injection(monkeypatch):
    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve={"applications": {}})  # it answers
    s.pdbs["zone-c"] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "zone-c"},
                        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"ray.io/group": "workers-zone-c"}}}}
    marker = faults.Marker()
    with pytest.raises(ClusterError) as e:
        drain_node(b, marker, node="wc-1", deadline_s=5)
    assert one_line(e) == ("drain of wc-1: the eviction was refused by a PodDisruptionBudget (HTTP 429: Cannot evict "
                           "pod as it would violate the pod's disruption budget. The disruption budget zone-c needs 1 "
                           "healthy pods and has 1 currently)")
    assert marker.marks == [] and b.drained == set()
    assert "deletionTimestamp" not in s.pods["wc-1"]["metadata"]
    # a budget with room lets the eviction through
    s.pdbs["zone-a"] = {"metadata": {"name": "zone-a"},
                        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"ray.io/group": "workers-zone-a"}}}}
    assert b.drain_node("wa-1", 5)["pods"] == ["wa-1"]


def test_drain_is_held_to_the_blast_radius_check():
    s, b, _ = cluster(max_pods=1)
    for name in ("head", "stranger", "nope"):
        with pytest.raises(UsageError, match=f"drain of worker pod {name}: the selector matches no pod") as e:
            b.drain_node(name, 30)
        one_line(e)
    assert writes(s) == []


def test_the_deadline_after_a_drain_force_deletes_what_is_left_and_accepts_a_pod_already_gone():
    s, b, _ = cluster()
    b.drain_node("wb-1", 30)
    assert b.kill_node("wb-1") == ["wb-1"]  # still terminating at the deadline: it goes now
    assert writes(s)[-1] == ("DELETE", "/api/v1/namespaces/availproof/pods/wb-1?gracePeriodSeconds=0")
    b.drain_node("wc-1", 30)
    del s.pods["wc-1"]  # the kubelet finished before the deadline
    assert b.kill_node("wc-1") == [] and writes(s)[-1][0] == "POST"
    with pytest.raises(UsageError, match="matches no pod"):  # not drained (any more): the usual refusal
        b.kill_node("wc-1")


# ------------------------------------------------------------------ environment
def test_graceful_shutdown_reads_serve_config_with_and_without_the_fields():
    s, b = service()
    got = b.graceful_shutdown()  # the rig's manifest sets both (serve_apps/config.py)
    assert got["deployments"] == {"StreamTarget": {"application": "llm", "graceful_shutdown_timeout_s": 2.0,
                                                   "graceful_shutdown_wait_loop_s": 2.0}}
    assert {k: got["defaults"][k] for k in kb.SERVE_SHUTDOWN_DEFAULTS} == {"graceful_shutdown_timeout_s": 20.0,
                                                                           "graceful_shutdown_wait_loop_s": 2.0}
    assert got["upgrade_strategy"] is None and got["effective_strategy"] == "NewCluster"
    both = yaml.safe_dump({"applications": [
        {"name": "a", "import_path": "x:y", "deployments": [
            {"name": "D", "graceful_shutdown_timeout_s": 30, "graceful_shutdown_wait_loop_s": 1}]},
        {"name": "b", "import_path": "x:z", "deployments": [{"name": "D"}]}]})
    s2, b2 = service(strategy="NewClusterWithIncrementalUpgrade", serve_config=both)
    got = b2.graceful_shutdown()
    assert got["deployments"] == {
        "a/D": {"application": "a", "graceful_shutdown_timeout_s": 30, "graceful_shutdown_wait_loop_s": 1},
        "b/D": {"application": "b", "graceful_shutdown_timeout_s": None, "graceful_shutdown_wait_loop_s": None}}
    assert got["upgrade_strategy"] == got["effective_strategy"] == "NewClusterWithIncrementalUpgrade"
    assert got["strategy_note"] is None
    s3, b3 = service(serve_config="applications: [")
    with pytest.raises(ClusterError, match="spec.serveConfigV2 is not YAML"):
        b3.graceful_shutdown()


def test_front_door_is_kuberays_serve_service():
    s, b = service()
    door = b.front_door()
    assert door["kind"] == "kubernetes-service" and door["service"] == "availproof-serve-svc"
    assert door["selector"] == {"ray.io/cluster": CLUSTER, "ray.io/serve": "true"}
    assert "readiness probe" in door["detection"] and door["serve_url"] == "http://s"


# ------------------------------------------------------------------ the faults, end to end
class FakeServe:
    """Serve's details as the dashboard gives them, one step further at each read: ``script(n)`` says
    what the n-th read shows (replicas as (id, state, ip) and the app's status)."""

    def __init__(self, script):
        self.script, self.n = script, 0

    def __call__(self):
        reps, status = self.script(self.n)
        self.n += 1
        return {"applications": {"llm": {"status": status, "deployments": {"StreamTarget": {"replicas": [
            {"replica_id": r, "state": st, "node_ip": ip, "pid": 7, "actor_name": f"SERVE_REPLICA::llm#{r}"}
            for r, st, ip in reps]}}}}}


OLD = [("r1", "RUNNING", "10.0.1.1"), ("r2", "RUNNING", "10.0.2.1"), ("r3", "RUNNING", "10.0.3.1")]


def collected():
    events, seen = rec.Events(), []
    events.fault_marked.append(seen.append)
    return faults.Marker(events), seen


def test_upgrade_app_serve_config_end_to_end(monkeypatch):
    s, b = service()
    patched = lambda: kb.VERSION_ENV in rayservice(s)["spec"]["serveConfigV2"]  # noqa: E731
    steps = []

    def script(n):
        # before the patch: the old replicas; after it Serve replaces one replica per read (rolling)
        if not patched():
            return OLD, "RUNNING"
        steps.append(n)
        k = len(steps)
        new = [(f"n{i}", "RUNNING", ip) for i, (_, _, ip) in enumerate(OLD[:k], 1)]
        return new + OLD[k:], "RUNNING" if k >= 3 else "DEPLOYING"

    fake_dashboard(monkeypatch, serve=FakeServe(script))
    marker, seen = collected()
    f = upgrade_app(b, marker, variant="serve_config", version="v2", timeout_s=10, poll_s=0.01)
    assert [m.event for m in seen] == [rec.INJECT_START, rec.INJECT_END, rec.HEAL_START, rec.HEAL_END]
    assert {(m.scope, m.target) for m in seen} == {("upgrade", "serve_config")} and len({m.fault_id for m in seen}) == 1
    assert seen[0].detail == {"replicas_before": ["r1", "r2", "r3"], "version": "v2"}
    assert seen[1].detail["patched"] == "spec.serveConfigV2" and seen[1].detail["variant"] == "serve_config"
    assert seen[3].detail["complete"] is True and seen[3].detail["replicas_after"] == ["n1", "n2", "n3"]
    assert f["complete"] is True and writes(s) == [("PATCH", RS_PATH)]
    assert seen[0].t_ns <= seen[1].t_ns <= seen[2].t_ns <= seen[3].t_ns


def test_upgrade_app_cluster_end_to_end_follows_kuberay_to_the_new_cluster(monkeypatch):
    s, b = service()
    patched = lambda: kb.VERSION_ANNOTATION in json.dumps(rayservice(s)["spec"]["rayClusterConfig"])  # noqa: E731
    new_ips = ["10.0.5.1", "10.0.5.2", "10.0.5.3"]
    state = {"reads_after_patch": 0}

    def kuberay_and_serve(n):
        """KubeRay: a pending cluster, then (3rd read) the switch: the RayService's active cluster is the
        new one, whose head the dashboard Service now reaches; the old pods go."""
        if not patched():
            return OLD, "RUNNING"
        state["reads_after_patch"] += 1
        status = rayservice(s)["status"]
        if state["reads_after_patch"] == 1:
            status["pendingServiceStatus"] = {"rayClusterName": NEW_CLUSTER}
            for i, (node_name, ip) in enumerate(zip(("k-a1", "k-b", "k-c"), new_ips), 1):
                s.pods[f"new-{i}"] = ray_pod(f"new-{i}", node_name, ip, cluster=NEW_CLUSTER)
            return OLD, "RUNNING"
        if state["reads_after_patch"] == 2:
            return OLD, "RUNNING"
        status["activeServiceStatus"] = {"rayClusterName": NEW_CLUSTER}
        status["pendingServiceStatus"] = {}
        for name in ("wa-1", "wa-2", "wb-1", "wc-1"):
            s.pods.pop(name, None)
        return [(f"n{i}", "RUNNING", ip) for i, ip in enumerate(new_ips, 1)], "RUNNING"

    fake_dashboard(monkeypatch, serve=FakeServe(kuberay_and_serve))
    marker, seen = collected()
    f = upgrade_app(b, marker, variant="cluster", version="v3", timeout_s=10, poll_s=0.01)
    assert [m.event for m in seen] == [rec.INJECT_START, rec.INJECT_END, rec.HEAL_START, rec.HEAL_END]
    assert seen[1].detail["patched"] == "spec.rayClusterConfig" and seen[1].detail["cluster_before"] == CLUSTER
    assert f["complete"] is True and f["replicas_after"] == ["n1", "n2", "n3"]
    # from its next read on, the backend acts on the promoted cluster (pods, health, replicas' pods)
    assert [(r.replica_id, r.node) for r in b.replicas()] == [("n1", "new-1"), ("n2", "new-2"), ("n3", "new-3")]
    assert b.cluster == NEW_CLUSTER and b.nodes_in(zone="zone-b") == ["new-2"]
    # KubeRay replaced the pods, the rig deleted none (its record, written before the patch, goes at the heal)
    assert writes(s) == [("POST", CM_PATH), ("PATCH", RS_PATH)]


def drain_script(s, moves_after=None, gone_after=None):
    """r2 lives on wb-1 (10.0.2.1); after ``moves_after`` reads it is replaced elsewhere (Serve reacting
    to the drain); after ``gone_after`` reads the kubelet is done with the evicted pod."""
    def script(n):
        if gone_after is not None and n >= gone_after:
            s.pods.pop("wb-1", None)
        if moves_after is not None and n >= moves_after:
            return [OLD[0], ("r4", "RUNNING", "10.0.1.2"), OLD[2]], "RUNNING"
        return OLD, "RUNNING"
    return script


def test_drain_node_end_to_end_replicas_moved_before_the_deadline(monkeypatch):
    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve=FakeServe(drain_script(s, moves_after=3)))
    marker, seen = collected()
    f = drain_node(b, marker, node="wb-1", deadline_s=0.3, outage_s=0.01, poll_s=0.01)
    assert [m.event for m in seen] == [rec.INJECT_START, rec.INJECT_END, rec.HEAL_START, rec.HEAL_END]
    assert {(m.scope, m.target, tuple(m.zones)) for m in seen} == {("drain", "wb-1", ("zone-b",))}
    assert seen[0].detail == {"deadline_s": 0.3, "replicas_at_notice": ["r2"]}
    # the inject span runs from the notice to the node's going: its end mark carries the deadline's facts
    end = seen[1].detail
    assert {k: end[k] for k in ("method", "pods", "grace_period_s", "k8s_node")} == {
        "method": "eviction", "pods": ["wb-1"], "grace_period_s": 1, "k8s_node": "k-b"}
    assert end["replicas_left_at_deadline"] == [] and 0 < end["moved_before_deadline_s"] < 0.3
    assert end["killed_at_s"] >= 0.3 and end["pids"] == f["pids"] == 1
    assert seen[1].t_ns - seen[0].t_ns >= 0.3e9  # the notice's instant, then the deadline
    # and what the analysis reads back from the marks has it all (the summary's detail)
    (fault,) = analysis.faults_from_marks(seen)
    assert fault.detail["pids"] == 1 and fault.detail["replicas_at_notice"] == ["r2"]
    assert fault.detail["replicas_left_at_deadline"] == [] and fault.detail["killed_at_s"] >= 0.3
    assert writes(s) == [("POST", "/api/v1/namespaces/availproof/pods/wb-1/eviction"),
                         ("DELETE", "/api/v1/namespaces/availproof/pods/wb-1?gracePeriodSeconds=0")]


def test_drain_node_end_to_end_replica_still_there_and_pod_gone_at_the_deadline(monkeypatch):
    s, b, _ = cluster()
    # the evicted pod's replica stays mapped to it while it terminates, until the pod is gone
    fake_dashboard(monkeypatch, serve=FakeServe(drain_script(s, gone_after=10**9)))
    marker, seen = collected()
    f = drain_node(b, marker, node="wb-1", deadline_s=0.2, outage_s=None, poll_s=0.01)
    assert [m.event for m in seen] == [rec.INJECT_START, rec.INJECT_END]
    assert f["replicas_left_at_deadline"] == ["r2"] and f["moved_before_deadline_s"] is None and f["pids"] == 1
    # no heal in the fault (the rollback heals): the deadline's facts are in the marks all the same
    (fault,) = analysis.faults_from_marks(seen)
    assert fault.detail["pids"] == 1 and fault.detail["replicas_left_at_deadline"] == ["r2"]
    s2, b2, _ = cluster()
    fake_dashboard(monkeypatch, serve=FakeServe(drain_script(s2, gone_after=2)))
    f = drain_node(b2, faults.Marker(), node="wb-1", deadline_s=0.2, outage_s=None, poll_s=0.01)
    # the pod left before its deadline: its replica is no longer on it, and nothing is left to kill
    assert f["pids"] == 0 and f["replicas_left_at_deadline"] == []
    assert writes(s2) == [("POST", "/api/v1/namespaces/availproof/pods/wb-1/eviction")]


def test_a_dashboard_that_does_not_answer_is_placement_unknown_not_no_replica(monkeypatch):
    s, b, _ = cluster()
    fake_dashboard(monkeypatch, serve=None)
    with pytest.raises(placement.PlacementUnknown):
        b.replicas(state=None)
    marker = faults.Marker()
    with pytest.raises(placement.PlacementUnknown):  # no drain whose replicas' moves nobody could see
        drain_node(b, marker, node="wb-1", deadline_s=5)
    assert marker.marks == [] and writes(s) == []


# ------------------------------------------------------------------ a failed cluster upgrade (issue 34)
RC_PATH = "/apis/ray.io/v1/namespaces/availproof/rayclusters"


def test_a_cluster_upgrade_that_does_not_complete_is_rolled_back_at_the_heal(monkeypatch):
    """KubeRay prepares the pending RayCluster (from the patched templates: it carries the run id) but the
    upgrade never completes: the heal reverts the patch, deletes that pending cluster and the record."""
    s, b = service()
    before = copy.deepcopy(rayservice(s)["spec"])
    fake_dashboard(monkeypatch, serve=FakeServe(lambda n: (OLD, "RUNNING")))  # nothing moves
    monkeypatch.setattr(b, "wait_healthy", lambda timeout=300.0: None)
    marker, _ = collected()
    f = upgrade_app(b, marker, variant="cluster", version="v3", timeout_s=0.05, poll_s=0.01)
    assert f["complete"] is False and f["pending_cluster"] == NEW_CLUSTER and f["record"] == "availproof-upgrade-run1"
    pending = s.custom[("rayclusters", NEW_CLUSTER)]
    assert pending["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][km.RUN] == "run1"
    assert ("availproof", "availproof-upgrade-run1") in s.configmaps
    done = b.heal([f])
    assert done["rolled_back"] == [{"reverted": "availproof", "pending_removed": NEW_CLUSTER}]
    assert rayservice(s)["spec"] == before  # the patch reverted: the spec as it was read
    assert ("rayclusters", NEW_CLUSTER) not in s.custom and ("rayclusters", CLUSTER) in s.custom
    assert ("DELETE", f"{RC_PATH}/{NEW_CLUSTER}") in writes(s) and not s.configmaps


def test_a_crashed_runs_cluster_upgrade_is_rolled_back_by_recover_and_a_pending_cluster_not_ours_is_kept():
    s, b = service()
    before = copy.deepcopy(rayservice(s)["spec"])
    b.upgrade_app("cluster", "v3")  # ... and the run died
    other = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", core=b.core, networking=b.net,
                              custom=b.custom, stream_fn=b.stream_fn, run_id="run2", dashboard_url="http://d")
    other.resolve_cluster()
    found = [x for x in other.leftovers() if x["kind"] == "Upgrade"]
    assert [(x["name"], x["run_id"]) for x in found] == [("availproof-upgrade-run1", "run1")] and found[0]["expires"]
    other.remove_leftovers()
    assert rayservice(s)["spec"] == before and ("rayclusters", NEW_CLUSTER) not in s.custom and not s.configmaps
    assert other.leftovers() == []
    # a pending RayCluster that does not carry the record's run id (someone else's upgrade) is left alone
    s2, b2 = service()
    b2.upgrade_app("cluster", "v4")
    s2.custom[("rayclusters", NEW_CLUSTER)]["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][km.RUN] = "x"
    assert b2.roll_back_upgrade({"record": "availproof-upgrade-run1"})["pending_removed"] is None
    assert ("rayclusters", NEW_CLUSTER) in s2.custom


def _gpu_cluster(s, gpus_per_node: int):
    """The GPU overlay's shape: one GPU per worker, one worker per zone, the nodes' allocatable GPUs."""
    for n in s.nodes.values():
        n["status"] = {"allocatable": {"cpu": "8", "memory": "32Gi",
                                       "nvidia.com/gpu": str(gpus_per_node if n["metadata"]["name"] != "k-cp" else 0)}}
    rcc = rayservice(s)["spec"]["rayClusterConfig"]
    for g in rcc["workerGroupSpecs"]:
        for c in g["template"]["spec"]["containers"]:
            c.setdefault("resources", {})["limits"] = {"nvidia.com/gpu": "1"}
            c["resources"].setdefault("requests", {})["cpu"] = "1"
    for name in ("wa-1", "wa-2", "wb-1", "wc-1"):  # the running cluster's workers hold their GPU
        s.pods[name]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}


def test_the_preflight_refuses_a_cluster_upgrade_whose_second_cluster_cannot_fit():
    s, b = service()
    _gpu_cluster(s, gpus_per_node=1)  # every GPU taken by the running cluster: NewCluster needs as many again
    planned = [{"scope": "upgrade", "arguments": {"variant": "cluster"}}]
    with pytest.raises(SetupError, match=r"second RayCluster beside .* cannot fit: nvidia.com/gpu needs 3, "
                                         r"0 free of 4 allocatable") as e:
        b.prepare("run1", "upgrade", planned)
    assert "\n" not in str(e.value)
    assert [w for w in writes(s) if "selfsubjectaccessreviews" not in w[1]] == []  # refused before anything
    s2, b2 = service()
    _gpu_cluster(s2, gpus_per_node=2)  # twice the GPUs: it fits
    b2.prepare("run1", "upgrade", planned)
    room = b2.preflight_upgrade("cluster")["room"]
    assert room["fits"] is True and room["need"]["nvidia.com/gpu"] == 3 and room["free"]["nvidia.com/gpu"] == 8 - 4
