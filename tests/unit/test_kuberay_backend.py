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


class FakeCore:
    def __init__(self):
        self.deleted, self.patched = [], []

    def list_namespaced_pod(self, ns):
        return FakeList(PODS)

    def list_node(self):
        return FakeList(NODES)

    def delete_namespaced_pod(self, name, ns, grace_period_seconds=None):
        self.deleted.append((name, ns, grace_period_seconds))

    def patch_node(self, name, body):
        self.patched.append((name, body))


def test_backend_zone_loss_cordons_and_force_deletes_within_its_namespace():
    core = FakeCore()
    b = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", max_pods=3, core=core, networking=object())
    assert b.kill_zone("zone-a") == ["wa-1", "wa-2"]
    assert core.deleted == [("wa-1", "availproof", 0), ("wa-2", "availproof", 0)]
    assert core.patched == [("k-a", {"spec": {"unschedulable": True}})]
    tight = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", max_pods=1, core=FakeCore(),
                              networking=object())
    with pytest.raises(UsageError, match="more than the limit"):
        tight.kill_zone("zone-a")


def test_backend_needs_explicit_context_and_namespace():
    with pytest.raises(UsageError):
        kb.KubeRayBackend("", "ctx", "c", core=FakeCore(), networking=object())
