"""Selection logic of the Kubernetes backend, on plain pod/node dicts (no cluster)."""

import pytest

from chaos.backends import kuberay as kb
from chaos.errors import UsageError


def node(name, zone):
    return {"metadata": {"name": name, "labels": {kb.ZONE_LABEL: zone}}}


def pod(name, node_name, node_type="worker", group="workers-zone-a", cluster="availproof", ray=True, deleting=False):
    labels = {"ray.io/cluster": cluster, "ray.io/node-type": node_type, "ray.io/group": group}
    if ray:
        labels["ray.io/is-ray-node"] = "yes"
    md = {"name": name, "labels": labels}
    if deleting:
        md["deletion_timestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "spec": {"node_name": node_name}}


NODES = [node("k-cp", "control"), node("k-a", "zone-a"), node("k-b", "zone-b"), node("k-c", "zone-c")]
PODS = [
    pod("head-x", "k-cp", node_type="head", group="headgroup"),
    pod("wa-1", "k-a", group="workers-zone-a"),
    pod("wa-2", "k-a", group="workers-zone-a"),
    pod("wb-1", "k-b", group="workers-zone-b"),
    pod("wc-1", "k-c", group="workers-zone-c", deleting=True),
    pod("other-cluster", "k-a", cluster="someone-else"),
    pod("redis", "k-cp", ray=False),
]


def test_zone_loss_selects_only_ray_pods_of_the_cluster_on_the_zone_nodes():
    names = [p["metadata"]["name"] for p in kb.select(PODS, NODES, cluster="availproof", zone="zone-a")]
    assert names == ["wa-1", "wa-2"]
    assert kb.zone_nodes(NODES, "zone-a") == ["k-a"]


def test_terminating_and_foreign_pods_are_never_selected():
    assert kb.select(PODS, NODES, cluster="availproof", zone="zone-c") == []
    all_names = [p["metadata"]["name"] for p in kb.select(PODS, NODES, cluster="availproof")]
    assert "other-cluster" not in all_names and "redis" not in all_names


def test_head_selection():
    heads = kb.select(PODS, NODES, cluster="availproof", node_type="head")
    assert [p["metadata"]["name"] for p in heads] == ["head-x"]


def test_blast_radius_limit_refuses_too_many_and_none():
    sel = kb.select(PODS, NODES, cluster="availproof")
    with pytest.raises(UsageError, match="matches 4 pods, more than the limit of 2"):
        kb.limit(sel, 2, "zone x")
    with pytest.raises(UsageError, match="matches no pod"):
        kb.limit([], 2, "zone y")
    assert kb.limit(sel[:2], 2, "ok") == sel[:2]


def test_partition_policy_isolates_the_zone_groups():
    pol = kb.partition_policy("zone-a", "availproof", ["workers-zone-a"])
    assert pol["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert pol["spec"]["ingress"] == [] and pol["spec"]["egress"] == []
    expr = pol["spec"]["podSelector"]["matchExpressions"][0]
    assert expr == {"key": "ray.io/group", "operator": "In", "values": ["workers-zone-a"]}


class FakeObj:
    def __init__(self, d):
        self.d = d

    def to_dict(self):
        return self.d


class FakeList:
    def __init__(self, items):
        self.items = [FakeObj(i) for i in items]


def ready(p, ip, restarts=0):
    p = {**p, "status": {"phase": "Running", "pod_ip": ip, "conditions": [{"type": "Ready", "status": "True"}],
                         "container_statuses": [{"restart_count": restarts}]}}
    return p


class FakeCore:
    def __init__(self, pods=None, nodes=None):
        self.deleted, self.patched = [], []
        self.pods = PODS if pods is None else pods
        self.nodes = NODES if nodes is None else nodes

    def list_namespaced_pod(self, ns):
        assert ns == "availproof"
        return FakeList(self.pods)

    def list_node(self):
        return FakeList(self.nodes)

    def delete_namespaced_pod(self, name, ns, grace_period_seconds=None):
        self.deleted.append((name, ns, grace_period_seconds))

    def patch_node(self, name, body):
        self.patched.append((name, body))


class FakeCustom:
    def get_namespaced_custom_object(self, group, version, ns, plural, name):
        assert (group, version, ns, plural) == ("ray.io", "v1", "availproof", "rayclusters")
        return {"spec": {"workerGroupSpecs": [{"replicas": 1}, {"replicas": 1}, {"replicas": 1}]}}


class Exec:
    def __init__(self, answer=""):
        self.calls, self.answer = [], answer

    def __call__(self, pod, command):
        self.calls.append((pod, command))
        return self.answer


def backend(core=None, max_pods=3, exec_fn=None, **kw):
    return kb.KubeRayBackend("availproof", "kind-availproof", "availproof", max_pods=max_pods, core=core or FakeCore(),
                             networking=object(), custom=FakeCustom(), exec_fn=exec_fn or Exec(), **kw)


def test_backend_zone_loss_cordons_and_force_deletes_within_its_namespace():
    core = FakeCore()
    b = backend(core)
    assert b.kill_zone("zone-a") == ["wa-1", "wa-2"]
    assert core.deleted == [("wa-1", "availproof", 0), ("wa-2", "availproof", 0)]
    assert core.patched == [("k-a", {"metadata": {"annotations": {kb.CORDON_MARK: "true"}},
                                     "spec": {"unschedulable": True}})]
    with pytest.raises(UsageError, match="more than the limit"):
        backend(FakeCore(), max_pods=1).kill_zone("zone-a")


def test_heal_uncordons_only_the_nodes_the_backend_cordoned():
    nodes = [node("k-a", "zone-a"), node("k-b", "zone-b")]
    nodes[0]["metadata"]["annotations"] = {kb.CORDON_MARK: "true"}
    nodes[1]["spec"] = {"unschedulable": True}  # cordoned by someone else: left alone
    core = FakeCore(nodes=nodes)
    assert backend(core).heal_zone_nodes() == ["k-a"]
    assert [n for n, _ in core.patched] == ["k-a"]


def test_backend_needs_explicit_context_and_namespace():
    with pytest.raises(UsageError):
        kb.KubeRayBackend("", "ctx", "c", core=FakeCore(), networking=object(), custom=FakeCustom())


def test_region_loss_selects_the_pods_of_every_zone_in_the_region():
    nodes = [node("k-a", "zone-a"), node("k-b", "zone-b"), node("k-c", "zone-c")]
    for n, region in zip(nodes, ("r1", "r1", "r2")):
        n["metadata"]["labels"][kb.REGION_LABEL] = region
    pods = [pod("wa", "k-a"), pod("wb", "k-b"), pod("wc", "k-c"), pod("h", "k-c", node_type="head", group="headgroup")]
    b = backend(FakeCore(pods=pods, nodes=nodes))
    assert b.regions() == ["r1", "r2"] and b.zones_in_region("r1") == ["zone-a", "zone-b"]
    assert b.nodes_in(region="r1") == ["wa", "wb"]
    assert b.nodes_in(region="r2") == ["wc"]  # the head is never a "node" to kill


def test_gcs_kill_in_place_execs_in_the_head_pod_only():
    ex = Exec()
    core = FakeCore()
    b = backend(core, exec_fn=ex)
    assert b.kill_head(method="gcs") == ["head-x/gcs_server"]
    assert ex.calls == [("head-x", "kill -9 $(pgrep -f gcs_server | head -n 1)")] and core.deleted == []
    assert b.kill_head() == ["head-x"] and core.deleted == [("head-x", "availproof", 0)]


def test_replica_kill_methods_and_engine_pause_aim_at_the_replica_pod():
    from chaos.placement import Replica

    r = Replica(app="a", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name="SERVE_REPLICA::a#S#r1",
                actor_id="x", pid=41, node_ip="10.0.0.5", node="wa-1", zone="zone-a", region=None)
    ex = Exec(answer="57\n")
    core = FakeCore()
    b = backend(core, exec_fn=ex)
    assert b.replica_killer(r, "sigkill")() == ["wa-1/41"] and ex.calls[-1] == ("wa-1", "kill -9 41")
    b.replica_killer(r, "actor")()
    assert ex.calls[-1][0] == "head-x" and "ray.kill" in ex.calls[-1][1] and "SERVE_REPLICA::a#S#r1" in ex.calls[-1][1]
    assert b.replica_killer(r, "pod")() == ["wa-1"] and core.deleted == [("wa-1", "availproof", 0)]
    assert b.pause_engine(r) == ["wa-1/57"] and "kill -STOP" in ex.calls[-1][1]
    assert b.paused == ["wa-1/57"]
    assert b.resume_engine(b.paused) == ["wa-1/57"] and ex.calls[-1] == ("wa-1", "kill -CONT 57")
    assert b.paused == []


def test_replicas_map_to_pods_and_zones_by_pod_ip(monkeypatch):
    from chaos import placement

    pods = [ready(pod("head-x", "k-cp", node_type="head", group="headgroup"), "10.0.0.1"),
            ready(pod("wa-1", "k-a"), "10.0.0.5"), ready(pod("wb-1", "k-b"), "10.0.0.6")]
    details = {"applications": {"app": {"deployments": {"StreamTarget": {"replicas": [
        {"replica_id": "r1", "state": "RUNNING", "node_ip": "10.0.0.5", "pid": 3, "actor_name": "n1"},
        {"replica_id": "r2", "state": "RUNNING", "node_ip": "10.0.0.6", "pid": 4, "actor_name": "n2"}]}}}}}
    monkeypatch.setattr(placement, "serve_details", lambda url, timeout=5.0: details)
    b = backend(FakeCore(pods=pods), dashboard_url="http://127.0.0.1:8265")
    rows = b.replicas()
    assert [(r.replica_id, r.node, r.zone) for r in rows] == [("r1", "wa-1", "zone-a"), ("r2", "wb-1", "zone-b")]
    assert b.pick_replica(zone="zone-b").replica_id == "r2"
    assert b.healthy() is False  # the RayCluster asks for 1 head + 3 workers; 3 pods are ready
    pods.append(ready(pod("wc-1", "k-c"), "10.0.0.7"))
    assert b.healthy() is True


def test_redis_restart_reports_whether_the_head_restarted(monkeypatch):
    monkeypatch.setattr(kb.time, "sleep", lambda s: None)
    head = ready(pod("head-x", "k-cp", node_type="head", group="headgroup"), "10.0.0.1", restarts=0)
    redis = ready({"metadata": {"name": "redis-1", "labels": {"app": "redis"}}, "spec": {}}, "10.0.0.9")
    pods = [head, redis]
    b = backend(FakeCore(pods=pods))
    assert b.kill_redis() == ["redis-1"]
    pods[0] = ready(pod("head-x", "k-cp", node_type="head", group="headgroup"), "10.0.0.1", restarts=1)
    assert b.start_redis() is True
    b.kill_redis()
    assert b.start_redis() is False


def test_zones_are_those_the_worker_groups_are_pinned_to():
    class Pinned(FakeCustom):
        def get_namespaced_custom_object(self, *a):
            return {"spec": {"workerGroupSpecs": [
                {"replicas": 1, "template": {"spec": {"nodeSelector": {kb.ZONE_LABEL: z}}}} for z in ("zone-b", "zone-a")]}}

    b = kb.KubeRayBackend("availproof", "ctx", "availproof", core=FakeCore(), networking=object(), custom=Pinned(),
                          exec_fn=Exec())
    assert b.zones() == ["zone-a", "zone-b"]  # not "control", where the head and Redis run
    assert backend().zones() == ["control", "zone-a", "zone-b", "zone-c"]  # no nodeSelector: the nodes' labels


def test_kuberay_target_must_be_named_and_flags_override_the_file():
    from chaos.ctk import session

    with pytest.raises(UsageError, match="needs context, namespace"):
        session.kube_settings({}, {})
    k = session.kube_settings({"availproof_kubernetes": {"namespace": "b", "max_pods": None}},
                              {"context": "kind-x", "namespace": "a", "serve_url": "http://127.0.0.1:1",
                               "dashboard_url": "http://127.0.0.1:2", "max_pods": 2})
    assert k["namespace"] == "b" and k["context"] == "kind-x" and k["max_pods"] == 2
