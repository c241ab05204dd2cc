"""Issue 34: every object the KubeRay backend creates is valid against the Kubernetes schema, checked the
way the manifests are (chaos.system.manifests.check_object: kubernetes-validate, strict; the vendored KubeRay CRDs for
a RayService). Each body the backend POSTs to the fake API server is captured and validated: the partition's
helper pods (and a clean-up helper made by recover), its NetworkPolicy, the load Job (its dry run) and its
ConfigMaps, a cluster upgrade's record; and the RayService as the upgrade's patch leaves it."""

import pytest

from chaos.scopes import faults
from chaos.system import manifests
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import load as kl, partition as kp
from chaos.backends.kuberay.kube import client as kube_client
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.test_kuberay_backend import cluster
from tests.unit.test_kuberay_leftovers import crash_mid_zone_loss_and_partition, fresh
from tests.unit.test_kuberay_load_job import LOAD_NODE
from tests.unit.test_kuberay_upgrade_drain import rayservice, service


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(kube_client, "DEFAULT_CLOCK", kube_client.Clock(sleep=lambda s: None))  # the backends' waits
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    fake_dashboard(monkeypatch)  # the GCS answers


def created(s) -> list[dict]:
    """Every object body the backend POSTed (reviews and evictions are requests, not objects)."""
    return [body for m, p, body in s.calls if m == "POST" and body
            and not p.endswith("/selfsubjectaccessreviews") and not p.endswith("/eviction")]


def kinds(objs) -> list[str]:
    return sorted({o.get("kind") for o in objs})


def test_every_object_the_backend_creates_is_valid_kubernetes():
    seen: list[dict] = []
    # partitions, both methods, with their dry runs
    for method in ("node-filter", "networkpolicy"):
        s, b, _ = cluster(partition_method=method)
        b.preflight_partition("zone-a")
        b.partition_zone("zone-a")
        b.heal_zone("zone-a")
        seen += created(s)
    # recover's clean-up helper for an nft table whose helper died
    s, b, _ = crash_mid_zone_loss_and_partition("node-filter")
    fresh(b).remove_leftovers()
    seen += created(s)
    # a cluster upgrade: its record, and the RayService as its patch leaves it (against the KubeRay CRD)
    s, b = service()
    b.upgrade_app("cluster", "v3")
    seen += created(s)
    assert manifests.check_object(rayservice(s)) == []
    # the load workers' Job (its dry run, kept out of the zones under test) and its ConfigMaps
    s, b, _ = cluster()
    b.load_job = kl.LoadJobSettings.from_dict({"in_cluster": True, "node_selector": LOAD_NODE})
    b.load_avoid_zones = ["zone-a"]
    b.preflight_load()
    seen += created(s)
    job = kl.job_manifest(b.load_job, "r1", kl.job_name("r1", "abc"), 2, b.cluster, 900, avoid_zones=["zone-a"])
    seen += [job, kl.configmap_manifest("r1", job["metadata"]["name"], 0, {"share": []}, owner_uid="u1")]
    assert kinds(seen) == ["ConfigMap", "Job", "NetworkPolicy", "Pod"]
    assert {o["metadata"]["name"] for o in seen if o["kind"] == "Pod"} >= {kp.helper_name("k-a1"), kp.helper_name("k-a2")}
    problems = [p for o in seen for p in manifests.check_object(o)]
    assert problems == []


def test_the_check_catches_a_broken_object_of_the_backends():
    pod = kp.helper_pod("k-a1", "zone-a", run_id="r1")
    pod["spec"]["hostNetwrok"] = True
    assert any("hostNetwrok" in p for p in manifests.check_object(pod))
    pol = kp.partition_policy("zone-a", "c", "r1")
    pol["spec"]["policyTypes"] = "Ingress"
    assert manifests.check_object(pol) != []
