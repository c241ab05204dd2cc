"""Issue 34: leftovers expire. Every change the rig makes on the cluster carries the run id and a deadline
(chaos/backends/kuberay/kube/marks.py); a run killed mid zone loss and mid partition (its helper pod dead too, its
nft table left on the node), with an engine stopped, is undone by ``recover`` down to the fake cluster as it
was before the run (every node, label, annotation, policy, table and process state), and a later preparation
finds nothing. The next preparation itself undoes marks past their deadline and refuses the live ones."""

import copy
import time

import pytest

from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import marks as km, partition as kp
from chaos.base.errors import SetupError
from tests.unit.test_kuberay_backend import cluster, replica
from tests.unit.test_kuberay_preflight import no_waiting  # noqa: F401 - the autouse fixture: no sleeping


def _clean(d) -> dict:
    """An object's map as the API server serialises it: empty and false fields omitted (``omitempty``)."""
    return {k: v for k, v in (d or {}).items() if v not in ({}, None, False, [])}


def snapshot(s) -> dict:
    """What a run may change on the fake cluster: every node (labels, annotations, spec), every pod's labels
    and annotations (and where it runs), the NetworkPolicies, the nft tables on the nodes, the ConfigMaps,
    the processes stopped (state T) in the pods; resourceVersions left out (a patch and its undo count two)."""
    procs = s.kubelet.procs
    return {
        "nodes": {n: {"labels": _clean(o["metadata"].get("labels")), "annotations": _clean(o["metadata"].get("annotations")),
                      "spec": _clean(o.get("spec"))} for n, o in s.nodes.items()},
        "pods": {n: {"labels": _clean(o["metadata"].get("labels")), "annotations": _clean(o["metadata"].get("annotations")),
                     "node": o["spec"].get("nodeName")} for n, o in s.pods.items()},
        "netpols": copy.deepcopy(s.netpols),
        "tables": copy.deepcopy(s.kubelet.tables),
        "configmaps": sorted(s.configmaps),
        "stopped": sorted((uid, pid) for uid, t in procs.items() for pid, p in t.items() if p["state"] in ("T", "t")),
    }


def crash_mid_zone_loss_and_partition(method: str):
    """A run that lost zone-b, cut zone-a off, stopped the engine of wc-1's replica, and died before any heal
    (its zone watch gone with it); with node-filter, one helper pod died too without its TERM trap."""
    s, b, _ = cluster(partition_method=method)
    before = snapshot(s)
    b.kill_zones(["zone-b"])
    b.partition_zone("zone-a")
    assert b.pause_engine(replica(node="wc-1")) == ["wc-1/57"]
    for w in b.zone_watches.values():  # the rig's process is gone, and its threads with it
        w.stop(final_look=False)
    if method == "node-filter":
        s.pods.pop(kp.helper_name("k-a2"))  # its node's kubelet lost it: no TERM trap, the table stays
        assert s.kubelet.tables.get("k-a2")
    return s, b, before


def fresh(b, run_id="run2"):
    out = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", core=b.core, networking=b.net,
                            custom=b.custom, stream_fn=b.stream_fn, run_id=run_id, dashboard_url="http://d",
                            serve_url="http://s", max_pods=3)
    out.resolve_cluster()
    out.wait_healthy = lambda timeout=300.0: None  # KubeRay's replacement of the lost zone's pod is its own
    return out


@pytest.mark.parametrize("method", ["node-filter", "networkpolicy"])
def test_recover_leaves_the_cluster_as_it_was_before_a_run_killed_mid_zone_loss_and_partition(method):
    s, b, before = crash_mid_zone_loss_and_partition(method)
    found = fresh(b).leftovers()
    kinds = sorted({x["kind"] for x in found})
    assert kinds == (["NftTable", "Node", "Paused", "Pod"] if method == "node-filter"
                     else ["NetworkPolicy", "Node", "Paused", "Pod"])
    assert all(x["run_id"] == "run1" and x["expires"] and not km.expired(x["expires"]) for x in found)
    if method == "node-filter":  # the table whose helper died is found on its node, without the helper
        assert ("NftTable", "k-a2") in {(x["kind"], x["name"]) for x in found}
    done = fresh(b).heal_all(timeout=1)  # availproof recover
    assert done["resumed"] == [] and sorted(done["uncordoned"]) == ["k-b"]
    after = snapshot(s)
    # the zone loss's own victim (wb-1, crashed and deleted) is KubeRay's to bring back; every other pod is as
    # it was, and no pod of the rig's is left
    gone = set(before["pods"]) - set(after["pods"])
    assert gone == {"wb-1"} and set(after["pods"]) <= set(before["pods"])
    before["pods"] = {n: v for n, v in before["pods"].items() if n not in gone}
    assert after == before
    assert s.kubelet.procs and not after["stopped"]  # the engine SIGCONT'd through exec
    # a later preparation finds nothing
    later = fresh(b, "run3")
    assert later.leftovers() == []
    later.prepare("run3", "replica")


def test_the_next_preparation_undoes_marks_past_their_deadline_and_refuses_live_ones(monkeypatch):
    s, b, before = crash_mid_zone_loss_and_partition("node-filter")
    nxt = fresh(b, "run2")
    with pytest.raises(SetupError, match=r"still has \d+ object\(s\) of an earlier run of the rig: .*availproof recover"):
        nxt.prepare("run2", "replica")  # before their deadline: maybe a live run's, so refused, nothing undone
    assert s.kubelet.tables and s.nodes["k-b"]["spec"]["unschedulable"]
    real = km.expired
    monkeypatch.setattr(km, "expired", lambda stamp, now=None: real(stamp, now=time.time() + 2 * 3600))
    nxt.prepare("run2", "replica")  # past every deadline: no live run owns them, undone here
    after = snapshot(s)
    before["pods"].pop("wb-1")
    assert after == before and fresh(b, "run3").leftovers() == []


def test_every_mark_names_the_run_and_a_deadline():
    s, b, _ = crash_mid_zone_loss_and_partition("node-filter")
    k_b = s.nodes["k-b"]["metadata"]["annotations"]
    assert k_b[kb.CORDON_MARK] == "run1" and not km.expired(k_b[km.CORDON_EXPIRES])
    table = km.read(s.nodes["k-a1"]["metadata"]["annotations"][km.NFT_MARK])
    assert table["run"] == "run1" and table["zone"] == "zone-a" and table["expires"]
    helper = s.pods[kp.helper_name("k-a1")]
    assert helper["metadata"]["labels"][kp.RUN_KEY] == "run1" and helper["metadata"]["annotations"][km.EXPIRES]
    assert helper["spec"]["activeDeadlineSeconds"] > 0  # and it ends by itself
    paused = km.read(s.pods["wc-1"]["metadata"]["annotations"][km.PAUSED_MARK])
    assert paused["run"] == "run1" and paused["pids"] == [57]
    assert km.expired(km.deadline(10, now=0.0)) and not km.expired(None) and not km.expired("not a time")
