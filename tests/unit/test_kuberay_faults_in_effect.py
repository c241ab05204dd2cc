"""Issue 23, the KubeRay part: a kill is a crash, zone loss cordons only what it must, the partition
is proven, a crashed run's leftovers are found, and each fault's effect is looked at
(:meth:`KubeRayBackend.effect_checks`). Over the real kubernetes client, the in-memory API server and
its kubelet (tests/unit/kube_fake.py: pod termination as the kubelet does it, the processes in the
containers, Pod Security admission, the network between pod IPs)."""

import contextlib
import threading

import pytest

from chaos import analysis
from chaos.scopes import faults
from chaos.core import verdict
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import pod_exec as kube_exec, partition as kp
from chaos.backends.kuberay.kube import client as kube_client
from chaos.base.errors import ClusterError, UsageError
from chaos.scopes.engine_crash import crash_engine
from chaos.backends.kuberay.kills import Kills
from chaos.scopes.head import kill_head
from chaos.scopes.node import kill_node
from chaos.scopes.partition import partition_zone
from chaos.scopes.redis import kill_redis
from chaos.scopes.region import kill_region
from chaos.scopes.replica import kill_replica
from chaos.scopes.zone import kill_zone
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import GRACE_END, node, ray_pod, redis_pod
from tests.unit.test_kuberay_backend import CLUSTER, cluster, replica, writes

SCOPES = ("replica", "engine", "node", "zone", "region", "head", "redis", "partition", "drain", "upgrade")
# the processes a crash must reach with SIGKILL (what the fake kubelet runs in Ray and Redis containers)
VICTIMS = {"ray", "raylet", "gcs_server", "ray::ServeRepli", "ray::ServeContr", "VLLM::EngineCor", "redis-server"}


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(kube_client, "DEFAULT_CLOCK", kube_client.Clock(sleep=lambda s: None))  # the backends' waits
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    # one look at a fault's effect is enough here (what each look sees is tested below)
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", dict.fromkeys(SCOPES, 0.0), raising=False)
    fake_dashboard(monkeypatch)  # the GCS answers


def crashed(s, name):
    """Every victim process of pod ``name`` ended by a SIGKILL at the fault's instant (from inside the pod),
    none reached only by the kubelet: its SIGTERM (a clean shutdown), or its SIGKILL at the end of the
    grace period (the processes ran on after the pod was deleted)."""
    fates = s.kubelet.fates.get(name, [])
    late = [c for c, how in fates if how in ("SIGTERM", GRACE_END) and c in VICTIMS]
    killed = [c for c, how in fates if how == "SIGKILL" and c in VICTIMS]
    return bool(killed) and not late


# ------------------------------------------------------------------ the fake kubelet itself
def test_the_fake_kubelet_terminates_as_the_kubelet_does():
    s, b, _ = cluster()
    # grace 0: the object leaves the API at once, but the containers still get SIGTERM first; bash as PID 1
    # has no handler, so nothing stops before the grace is over: then SIGKILL
    b.core.delete_namespaced_pod("wb-1", "availproof", grace_period_seconds=0)
    assert "wb-1" not in s.pods
    assert s.kubelet.graceful("wb-1") == []
    assert s.kubelet.late("wb-1") == ["bash", "ray", "raylet", "ray::ServeRepli", "VLLM::EngineCor"]
    # where `ray start` is PID 1 (bash exec'd it) it takes the SIGTERM as a clean shutdown
    s.kubelet.ray_pid1 = "ray"
    b.core.delete_namespaced_pod("wa-1", "availproof", grace_period_seconds=0)
    assert s.kubelet.graceful("wa-1") == ["ray", "raylet", "ray::ServeRepli", "VLLM::EngineCor"]
    # redis-server shuts down cleanly; with a shared process namespace the SIGTERM goes to it, not to pause
    b.core.delete_namespaced_pod("redis-1", "availproof", grace_period_seconds=0)
    assert s.kubelet.graceful("redis-1") == ["redis-server"] and s.kubelet.late("redis-1") == ["pause"]
    # a graceful delete: still listed, terminating, until the kubelet is done (the grace over: SIGKILL)
    s.kubelet.ray_pid1 = "bash"
    b.core.delete_namespaced_pod("wc-1", "availproof")
    listed = [p for p in b.pods.pods() if p["metadata"]["name"] == "wc-1"]
    assert listed and listed[0]["metadata"]["deletion_timestamp"] and s.pods["wc-1"]["metadata"]["deletionGracePeriodSeconds"] == 30
    assert s.kubelet.fates.get("wc-1") is None  # bash ignored the SIGTERM: everything still runs
    s.kubelet.finish("wc-1")
    assert "wc-1" not in s.pods and "raylet" in s.kubelet.late("wc-1")


def test_the_fake_kuberay_replaces_a_pod_only_once_it_is_gone():
    """KubeRay v1.7 reconcilePods counts a group's pods terminating ones included: no replacement while the
    old pod terminates; one, Pending, once it is gone; the scheduler binds it to a schedulable node of the
    group's zone only (a cordoned one is skipped)."""
    s, b, _ = cluster()
    b.core.delete_namespaced_pod("wb-1", "availproof")  # graceful: terminating, still listed
    assert s.kuberay.reconcile_pods() == []
    s.kubelet.finish("wb-1")
    new = s.kuberay.reconcile_pods()
    assert len(new) == 1 and new[0].startswith(f"{CLUSTER}-workers-zone-b-worker-")
    assert s.pods[new[0]]["status"]["phase"] == "Pending" and s.kuberay.reconcile_pods() == []
    s.nodes["k-b"]["spec"]["unschedulable"] = True
    assert s.schedule() == []  # pinned to zone-b, whose only node is cordoned
    s.nodes["k-b"]["spec"]["unschedulable"] = False
    assert s.schedule() == new and s.pods[new[0]]["spec"]["nodeName"] == "k-b"
    assert b.zone_of(new[0]) == "zone-b" and kb.pod_ready(b.pods.pods(f"ray.io/group=workers-zone-b")[0])


# ------------------------------------------------------------------ 1. a kill is a crash
KILLS = {
    "node": (lambda b, m: kill_node(b, m, node="wb-1"), ["wb-1"]),
    "zone": (lambda b, m: kill_zone(b, m, "zone-a"), ["wa-1", "wa-2"]),
    "region": (lambda b, m: kill_region(b, m, "region-2"), ["wc-1"]),
    "head": (lambda b, m: kill_head(b, m, outage_s=None), ["head"]),
    "redis": (lambda b, m: kill_redis(b, m, outage_s=None), ["redis-1"]),
    "replica-pod": (lambda b, m: kill_replica(b, m, replica=replica(), method="pod"), ["wa-1"]),
}


@pytest.mark.parametrize("pid1", ["bash", "ray"])
@pytest.mark.parametrize("scope", sorted(KILLS))
def test_every_kill_sigkills_the_processes_before_the_pod_is_deleted(scope, pid1):
    s, b, stream = cluster()
    s.kubelet.ray_pid1 = pid1
    kill, victims = KILLS[scope]
    kill(b, faults.Marker())
    for name in victims:
        assert name not in s.pods, name  # then deleted (grace 0), for KubeRay or the Deployment to replace
        assert crashed(s, name), (name, s.kubelet.fates.get(name))
        # the first command in the pod that acts (the orphan check only looks for its engines before the kill)
        crash = next(sc for pod, c, sc in stream.calls if pod == name and not sc.startswith(": availproof-orphans"))
        assert crash in (kb.CRASH_SCRIPT, kb.REDIS_CRASH_SCRIPT)
    deletes = [p for m, p in writes(s) if m == "DELETE"]
    assert deletes == [f"/api/v1/namespaces/availproof/pods/{n}?gracePeriodSeconds=0" for n in victims]


@pytest.mark.parametrize("pid1", ["bash", "ray"])
@pytest.mark.parametrize("scope", sorted(KILLS))
def test_a_kill_that_only_deletes_the_pod_is_caught(scope, pid1, monkeypatch):
    """The old kill (a delete with grace 0, no SIGKILL from inside): the kubelet's SIGTERM reaches
    `ray start` (a clean shutdown), or bash ignores it and everything runs on until the grace is over.
    Either way :func:`crashed` says it was no crash: the test above fails on that code."""
    s, b, _ = cluster()
    s.kubelet.ray_pid1 = pid1
    monkeypatch.setattr(Kills, "crash", lambda self, pods, what, script=kb.CRASH_SCRIPT: None)
    kill, victims = KILLS[scope]
    kill(b, faults.Marker())
    for name in victims:
        assert name not in s.pods and not crashed(s, name), (name, s.kubelet.fates.get(name))


def test_a_kill_that_could_not_sigkill_deletes_nothing_and_records_nothing():
    s, b, stream = cluster()
    stream.handler = lambda pod, c, script: ("", "sh: 1: kill: No such process\n", 1)
    marker = faults.Marker()
    with pytest.raises(kube_exec.ExecError, match="the SIGKILL of 2 of 2 pod.s. failed, none of them deleted"):
        kill_zone(b, marker, "zone-a")
    assert marker.marks == [] and "wa-1" in s.pods and "wa-2" in s.pods
    assert not [p for m, p in writes(s) if m == "DELETE"]
    assert b.restore_zones() == ["k-a1", "k-a2"]  # the cordon it had set is this run's to undo


def test_redis_running_as_pid_1_is_refused_not_deleted():
    s, b, _ = cluster()
    s.pods["redis-1"] = redis_pod("redis-1", share_process_namespace=False)  # redis-server is PID 1
    with pytest.raises(kube_exec.ExecError, match="shareProcessNamespace: true"):
        b.kill_redis()
    assert "redis-1" in s.pods and s.kubelet.fates.get("redis-1") is None


# ------------------------------------------------------------------ 2. zone and region loss cordon what they must
def test_zone_loss_cordons_every_node_the_clusters_pods_could_schedule_on_and_no_other():
    """Every node of the zone that a pod template of the cluster admits (where KubeRay's replacements could go:
    the worker group's nodeSelector, its tolerations), those hosting its pods, those labelled for it; not a
    node another workload owns (tainted for it, not tolerated by any template)."""
    s, b, _ = cluster()
    s.nodes["k-a3"] = node("k-a3", "zone-a", "region-1",  # another workload's node in the zone: tainted for it
                           taints=[{"key": "dedicated", "value": "other", "effect": "NoSchedule"}])
    s.pods["app-1"] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app-1", "uid": "uid-app-1", "labels": {}},
                       "spec": {"nodeName": "k-a3", "containers": [{"name": "app"}]}, "status": {"phase": "Running"}}
    s.nodes["k-a4"] = node("k-a4", "zone-a", "region-1", labels={"availproof.io/zone-loss-node": "true"})  # opted in
    s.nodes["k-a5"] = node("k-a5", "zone-a", "region-1")  # a spare node of the zone: no pod of ours on it yet
    s.nodes["k-a6"] = node("k-a6", "zone-a", "region-1",  # tainted, but the zone's group tolerates it
                           taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    rc = s.custom[("rayclusters", CLUSTER)]["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    rc["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    b.max_nodes = 5
    b.kill_zones(["zone-a"])
    cordoned = sorted(n for n, o in s.nodes.items() if o["spec"].get("unschedulable"))
    assert cordoned == ["k-a1", "k-a2", "k-a4", "k-a5", "k-a6"]  # k-a1 also hosts a stranger's pod: it hosts ours too
    assert {s.nodes[n]["metadata"]["annotations"][kb.CORDON_MARK] for n in cordoned} == {"run1"}
    assert "app-1" in s.pods and "stranger" in s.pods
    # the fake scheduler agrees: the replacements find no node (k-a3's taint is not tolerated)
    new = s.kuberay.reconcile_pods()
    assert len(new) == 2 and s.schedule() == []
    b.restore_zones(["zone-a"])


def test_the_nodes_the_templates_admit_count_in_the_blast_radius():
    s, b, _ = cluster()  # max_nodes 3
    for n in ("k-a5", "k-a6"):
        s.nodes[n] = node(n, "zone-a", "region-1")
    with pytest.raises(UsageError) as e:
        b.kill_zones(["zone-a"])
    assert "\n" not in str(e.value) and str(e.value).startswith(
        "loss of zone-a: it would cordon 4 nodes, more than the limit of 3 (max_nodes): refusing to act")
    assert writes(s) == [] and s.kubelet.fates == {}


def test_the_nodes_a_loss_would_cordon_count_in_the_blast_radius():
    s, b, _ = cluster(max_pods=5, max_nodes=3)  # region-1: 4 Ray pods on 4 nodes (k-cp, k-a1, k-a2, k-b)
    with pytest.raises(UsageError, match="loss of control, zone-a, zone-b: it would cordon 4 nodes, more than the "
                                         "limit of 3 .max_nodes."):
        kill_region(b, faults.Marker(), "region-1")
    assert writes(s) == [] and s.kubelet.fates == {}
    s2, b2, _ = cluster(max_pods=1)  # max_nodes defaults to max_pods
    assert b2.max_nodes == 1 and b2.describe()["max_nodes"] == 1


def _spare_zone_cluster(monkeypatch):
    """zone-a with a spare node (k-a3: no Ray pod on it, nothing labelled), the heal's wait skipped."""
    s, b, stream = cluster()
    s.nodes["k-a3"] = node("k-a3", "zone-a", "region-1")
    monkeypatch.setattr(b, "wait_healthy", lambda timeout=300.0: None)
    return s, b


def _kuberay_replaces(s):
    """KubeRay recreates the crashed pods (pinned to their zone) and the scheduler binds what fits."""
    with s.lock:  # the zone's watch reads from its own thread meanwhile
        new = s.kuberay.reconcile_pods()
        return new, s.schedule()


def test_a_zone_with_a_spare_node_stays_lost_its_replacements_pending_and_the_effect_holds(monkeypatch):
    s, b = _spare_zone_cluster(monkeypatch)
    marker = faults.Marker()
    f = kill_zone(b, marker, "zone-a")  # no outage: the rollback heals
    assert s.nodes["k-a3"]["spec"]["unschedulable"] is True  # the spare node is cordoned too
    new, bound = _kuberay_replaces(s)
    assert len(new) == 2 and bound == []  # the replacements stay Pending: every node of the zone is cordoned
    assert [c["ok"] for c in b.effect_held(f)] == [True]
    faults.heal(b, marker, timeout=1.0)
    healed = analysis.faults_from_marks(marker.marks)[0].detail
    assert healed["effect"]["verified"] is True and healed["zone_watch"]["held"] is True
    assert healed["zone_watch"]["looks"] >= 2 and healed["zone_watch"]["breach"] is None
    assert verdict.decide({"faults": [{"scope": "zone", "target": "zone-a", "effect": healed["effect"]}]})["word"] != "ERROR"
    assert s.schedule() == new  # healed: they schedule


def test_a_zone_that_comes_back_before_the_heal_makes_the_run_an_error_saying_when_and_how(monkeypatch):
    s, b = _spare_zone_cluster(monkeypatch)
    b.cordon_spare_nodes = False  # the spare node's cordon left out on purpose: the replacements find it
    b.zone_watch_poll_s = 0.01
    marker = faults.Marker()
    f = kill_zone(b, marker, "zone-a")
    assert f["effect"]["verified"] is True  # right after the crash the zone looks lost: the replacements are not there yet
    new, bound = _kuberay_replaces(s)
    assert sorted(bound) == sorted(new) and len(new) == 2  # Ready in the lost zone, on its spare node
    assert {s.pods[n]["spec"]["nodeName"] for n in new} == {"k-a3"}
    watch = b.zone_watches[("zone-a",)]
    for _ in range(500):  # the watch's own thread sees it
        if watch.breach:
            break
        threading.Event().wait(0.01)
    assert watch.breach and watch.breach["pods"] == sorted(new)
    faults.heal(b, marker, timeout=1.0)
    healed = analysis.faults_from_marks(marker.marks)[0].detail
    effect = healed["effect"]
    assert effect["verified"] is False and effect["lost_until_s"] == watch.breach["t_s"] > 0
    last = effect["checks"][-1]
    assert not last["ok"] and "the zone came back" in last["seen"] and "after the loss began (at 20" in last["seen"]
    assert f"pod {sorted(new)[0]} Ready on node k-a3: one the loss left schedulable" in last["seen"]
    got = verdict.decide({"faults": [{"scope": "zone", "target": "zone-a", "effect": effect}]})
    assert got["word"] == "ERROR" and got["reasons"] == ["fault not in effect: zone zone-a"]


def test_a_zone_that_comes_back_during_a_timed_outage_is_caught_at_the_heal(monkeypatch):
    """kill_zone with outage_s: the heal is restore_zones inside the heal marks; the watch's last look, before
    the uncordon, sees the replacements that came up meanwhile (here on a node added after the loss began)."""
    s, b = _spare_zone_cluster(monkeypatch)
    monkeypatch.setattr(faults, "sleep", lambda seconds: (s.nodes.__setitem__("k-a9", node("k-a9", "zone-a")),
                                                           _kuberay_replaces(s)))
    marker = faults.Marker()
    kill_zone(b, marker, "zone-a", outage_s=30)
    effect = analysis.faults_from_marks(marker.marks)[0].detail["effect"]
    assert effect["verified"] is False and "a node added after the loss began" in effect["checks"][-1]["seen"]
    assert marker.marks[1].detail["effect"]["verified"] is True  # the inject end mark keeps what was proven then


def test_heal_uncordons_only_its_own_runs_nodes():
    s, b, _ = cluster()
    other = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", max_pods=3, core=b.core,
                              networking=b.net, custom=b.custom, stream_fn=b.stream_fn)
    other.run_id = "run2"
    other.resolve_cluster()
    assert kb.KubeRayBackend("availproof", "c", "x", core=b.core, networking=b.net, custom=b.custom).run_id not in (
        "", None, "true")  # a random token by default
    b.kill_zones(["zone-a"])
    other.kill_zones(["zone-b"])
    b.core.patch_node("k-c", {"spec": {"unschedulable": True}})  # someone cordons a node meanwhile
    assert b.restore_zones() == ["k-a1", "k-a2"]
    assert s.nodes["k-b"]["spec"]["unschedulable"] is True  # the other run's
    assert s.nodes["k-b"]["metadata"]["annotations"][kb.CORDON_MARK] == "run2"
    assert s.nodes["k-c"]["spec"]["unschedulable"] is True  # theirs
    assert other.restore_zones() == ["k-b"] and s.nodes["k-c"]["spec"]["unschedulable"] is True


def test_a_node_changed_between_read_and_cordon_is_not_overwritten():
    s, b, _ = cluster()
    stale = b.pods.nodes()
    b.core.patch_node("k-a1", {"spec": {"unschedulable": True}})  # someone else, after our read
    b.pods.nodes = lambda: stale
    with pytest.raises(ClusterError, match="node k-a1: the patch failed .HTTP 409"):
        b.kill_zones(["zone-a"])
    assert kb.CORDON_MARK not in (s.nodes["k-a1"]["metadata"].get("annotations") or {})


# ------------------------------------------------------------------ 3. partitions
def test_node_filter_is_the_default_everywhere(monkeypatch):
    import argparse

    from chaos.commands import cli
    from chaos.core import provision

    assert kp.DEFAULT_METHOD == "node-filter" and kp.DEFAULT_METHOD in kp.METHODS
    s, b, _ = cluster()
    assert kb.KubeRayBackend("n", "c", "x", core=b.core, networking=b.net, custom=b.custom).partition_method == "node-filter"
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("run", "suite"):
        flag = next(a for a in sub.choices[command]._actions if "--partition-method" in a.option_strings)
        assert "default node-filter" in flag.help and tuple(flag.choices) == kp.METHODS
    made = {}

    class Backend:
        def __init__(self, *a, **kw):
            made.update(kw)

        def resolve_cluster(self):
            return "c"

    monkeypatch.setattr(kb, "KubeRayBackend", Backend)
    provision.kuberay_backend({"namespace": "n", "context": "c", "serve_url": "u", "dashboard_url": "d"})
    assert made["partition_method"] == "node-filter"


def test_preflight_dry_runs_the_helper_and_says_in_one_line_what_admission_refuses():
    s, b, _ = cluster()
    got = b.preflight_partition("zone-a")
    assert got["would_create"] == ["Pod/availproof-partition-k-a1", "Pod/availproof-partition-k-a2"]
    posts = [p for m, p in writes(s) if m == "POST"]
    assert posts == ["/api/v1/namespaces/availproof/pods?dryRun=All"] * 2
    assert not any(p.startswith("availproof-partition") for p in s.pods)  # nothing stored
    s.pod_security = "baseline"
    with pytest.raises(ClusterError) as e:
        b.preflight_partition("zone-a")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("partition of zone-a (node-filter): admission refuses the Pod "
                                              "availproof-partition-k-a1 in namespace availproof (HTTP 403: ")
    assert ('violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), non-default capabilities '
            '(container "nft" must not include "NET_ADMIN" in securityContext.capabilities.add)') in msg
    assert "--partition-method networkpolicy" in msg
    b.partition_method = "networkpolicy"  # its policy is admitted
    assert b.preflight_partition("zone-a")["would_create"] == ["NetworkPolicy/availproof-partition-zone-a"]
    assert s.netpols == {}


def test_helpers_end_by_their_deadline_and_take_their_table_with_them():
    s, b, _ = cluster()
    b.partition_zone("zone-a", deadline_s=89.5)
    helpers = [p for p in s.pods.values() if p["metadata"]["labels"].get(kp.FAULT_LABEL) == "partition-helper"]
    assert {p["spec"]["activeDeadlineSeconds"] for p in helpers} == {90}
    assert sorted(s.kubelet.tables) == ["k-a1", "k-a2"]
    for p in helpers:  # the deadline passes: the kubelet terminates the pod, the TERM trap removes the table
        s.kubelet.terminate(p)
    assert s.kubelet.tables == {}
    assert b.partition_method == "node-filter" and kb.KubeRayBackend(
        "n", "c", "x", core=b.core, networking=b.net, custom=b.custom).helper_deadline_s == kp.DEFAULT_DEADLINE_S


def _partition_with_the_hook(backend, marker, zone, duration_s=None):
    """partition_zone with the hook this backend needs (chaos/scopes/faults.py, not this backend's to edit):
    the set-up armed before the inject mark, the mark taken just before the cut."""
    cut = backend.partition_armer(zone, deadline_s=duration_s + 300 if duration_s else None)
    with marker.inject("partition", zone, [zone]) as f:
        f.update(cut())
        f["cut"] = True
        faults.prove(backend, marker, f)
    return f


@pytest.mark.parametrize("method", ["node-filter", "networkpolicy"])
def test_the_partitions_mark_is_the_cut_its_helpers_and_probe_set_up_before_it(method, monkeypatch):
    """A helper image that takes 30 s to pull: the helpers Running and the probe open before the mark; the cut
    (the nft table, or the policy) is the only thing done after it, so the time to impact counts from the cut."""
    s, b, stream = cluster(partition_method=method)
    s.kubelet.cni_cuts_established = True
    clock = [1000.0]
    monkeypatch.setattr(b.kube, "clock", kube_client.Clock(monotonic=lambda: clock[0],
                                                         sleep=lambda seconds: clock.__setitem__(0, clock[0] + seconds)))
    monkeypatch.setattr(faults.time, "monotonic", lambda: clock[0])  # the rig's marks (chaos.scopes.faults): its own seam
    s.clock = lambda: clock[0]
    s.pull_s = {kp.HELPER_IMAGE: 30.0}
    applied = []  # (what, instant) of each step of the cut, on the fake clock
    nft, create_policy = s.kubelet._nft, s.crud
    monkeypatch.setattr(s.kubelet, "_nft", lambda pod, script: (applied.append(("nft", clock[0])), nft(pod, script))[1])
    monkeypatch.setattr(s, "crud", lambda m, name, store, kind, q, body: (
        applied.append(("policy", clock[0])) if (m, kind) == ("POST", "NetworkPolicy") and q.get("dryRun") is None
        else None, create_policy(m, name, store, kind, q, body))[1])
    marker = faults.Marker()
    f = _partition_with_the_hook(b, marker, "zone-a")
    mark_at = clock[0] - marker.since_inject(f)  # the inject mark's instant, on the fake clock
    steps = [t for what, t in applied if what in ("nft", "policy")]
    assert steps and min(steps) == mark_at  # the cut is the mark: nothing between them
    if method == "node-filter":
        assert mark_at - 1000.0 >= 30.0  # the pull was waited for before the mark, not after
        helpers = [p for p in s.pods.values() if p["metadata"]["labels"].get(kp.FAULT_LABEL) == "partition-helper"]
        assert helpers and all(p["status"]["phase"] == "Running" for p in helpers)
    assert f["effect"]["verified"] and f["effect"]["time_to_effect_s"] == 0.0  # counted from the cut
    assert f["cut_at_ns"] and f["armed_s"] >= (30.0 if method == "node-filter" else 0.0)
    # before the cut, nothing was cut: the probe was opened and echoing while the helpers pulled
    assert [c for c in stream.calls if ": availproof-probe client" in c[2]]
    b.heal_zone("zone-a")


def test_an_armed_partition_whose_cut_fails_leaves_nothing_behind():
    def handler(pod, c, script):
        if c == "nft" and "nft -f" in script:
            return "", "Error: Could not process rule: Operation not permitted", 1
        return s.kubelet.exec(pod, c, script)

    s, b, stream = cluster(handler=lambda pod, c, script: handler(pod, c, script))
    cut = b.partition_armer("zone-a")
    assert len([p for p in s.pods if p.startswith("availproof-partition-")]) == 2  # armed: helpers Running
    with pytest.raises(kube_exec.ExecError):
        cut()
    assert not [p for p in s.pods if p.startswith("availproof-partition-")] and s.kubelet.tables == {}
    assert b.cuts["zone-a"]["probe"] is None  # the probe closed


@pytest.mark.parametrize("line,est,new", [
    ("open alive 2.500 timeout", True, True),  # silence both ways: cut
    ("timedout alive 9.000 timeout", True, True),  # the kernel gave up on its retransmissions: silence
    ("reset alive 0.300 refused", False, False),  # an RST each way got through: the path carries
    ("closed alive 0.300 timeout", False, True),  # a FIN got through
    ("open alive 2.500 refused", True, False),  # a refusal is an answer
    ("open alive 0.200 accepted", False, False),
])
def test_only_silence_is_a_cut(line, est, new):
    (e, _), (n, seen) = kp.probe_verdict(line)
    assert (e, n) == (est, new), line


def test_the_probe_scripts_tell_a_reset_and_a_refusal_from_silence(tmp_path):
    """PROBE_CLIENT and PROBE_CHECK in a real Python over loopback: a far end that resets the connection,
    and a port nobody listens on, are answers (reset, refused), not a cut."""
    import os
    import socket
    import struct
    import subprocess
    import sys

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    path = str(tmp_path / "probe")
    client = subprocess.Popen([sys.executable, "-c", kp.PROBE_CLIENT, "127.0.0.1", str(port), path, "20"])
    try:
        conn, _ = srv.accept()
        conn.recv(16)
        conn.sendall(b"x")  # one echo: open
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # an RST
        assert client.wait(timeout=10) == 0
        state = open(path).read().split()[0]
        assert state == "reset", state
        srv.close()  # nobody listens any more: a new connection is refused
        out = subprocess.run([sys.executable, "-c", kp.PROBE_CHECK, "127.0.0.1", str(port), path],
                             capture_output=True, text=True, timeout=20).stdout.split()
        assert out[0] == "reset" and out[3] == "refused", out
        (est, _), (new, _) = kp.probe_verdict(" ".join(out))
        assert not est and not new
    finally:
        client.kill()
        with contextlib.suppress(OSError):
            os.unlink(path)


def test_a_networkpolicy_the_plugin_applies_only_to_new_connections_is_not_in_effect():
    s, b, _ = cluster(partition_method="networkpolicy")  # the fake's plugin: conntrack first, as kindnet
    b.partition_zone("zone-a")
    checks = b.effect_checks({"scope": "partition", "target": "zone-a", "zones": ["zone-a"]})
    by = {c["check"].split(" ")[1]: c for c in checks}
    assert by["connection"]["ok"] is False and "last echo 0.2 s ago" in by["connection"]["seen"]
    assert by["new"]["ok"] is True  # a new connection is refused all right
    assert "wa-1 -> head (10.0.0.1:" in by["connection"]["check"]  # two pod IPs, never a hostNetwork helper
    s.kubelet.cni_cuts_established = True  # a plugin that enforces policy per packet
    assert all(c["ok"] for c in b.effect_checks({"scope": "partition", "target": "zone-a", "zones": ["zone-a"]}))


def test_a_node_filter_cut_that_is_not_applied_is_not_in_effect():
    s, b, _ = cluster()
    b.partition_zone("zone-a")
    fault = {"scope": "partition", "target": "zone-a", "zones": ["zone-a"]}
    assert [c["ok"] for c in b.effect_checks(fault)] == [True, True, True, True]
    s.kubelet.tables.pop("k-a1")  # the mutation: one node's table never loaded
    checks = b.effect_checks(fault)
    assert [c["ok"] for c in checks] == [False, False, False, True]
    assert checks[2]["seen"] == "no table availproof_partition" and "k-a1" in checks[2]["check"]


# ------------------------------------------------------------------ 4. leftovers of a crashed run
def test_leftovers_of_any_run_are_found_by_label_and_annotation_and_removed():
    s, b, _ = cluster()
    b.partition_zone("zone-a")  # node-filter helpers on k-a1, k-a2
    b.kill_zones(["zone-b"])  # k-b cordoned
    b.partition_method = "networkpolicy"
    b.partition_zone("zone-c")  # a policy, wc-1 labelled
    # ... and the run crashed: a new run (another run id) looks
    fresh = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", core=b.core, networking=b.net,
                              custom=b.custom, stream_fn=b.stream_fn, run_id="run2", dashboard_url="http://d")
    fresh.resolve_cluster()
    found = fresh.leftovers()
    assert sorted((x["kind"], x["name"], x["run_id"]) for x in found) == [
        ("NetworkPolicy", "availproof-partition-zone-c", "run1"), ("NftTable", "k-a1", "run1"),
        ("NftTable", "k-a2", "run1"), ("Node", "k-b", "run1"),
        ("Pod", "availproof-partition-k-a1", "run1"), ("Pod", "availproof-partition-k-a2", "run1"),
        ("Pod", "wc-1", "run1")]
    assert all(x["expires"] for x in found)  # every mark carries its deadline
    assert {x["zone"] for x in found} == {"zone-a", "zone-b", "zone-c"}
    assert fresh.restore_zones() == []  # its own heal leaves another run's cordon alone ...
    out = fresh.remove_leftovers()  # ... recover removes every leftover
    assert len(out["removed"]) == 7 and fresh.leftovers() == []
    assert s.kubelet.tables == {} and s.netpols == {} and not s.nodes["k-b"]["spec"]["unschedulable"]
    assert kb.CORDON_MARK not in s.nodes["k-b"]["metadata"]["annotations"]
    assert kp.MEMBER_LABEL not in s.pods["wc-1"]["metadata"]["labels"]


# ------------------------------------------------------------------ 5. smaller
def test_resume_does_not_raise_when_serve_replaced_the_stopped_process():
    s, b, _ = cluster()
    pids = b.pause_engine(replica(node="wb-1"))
    assert pids == ["wb-1/57"]
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")  # Serve's health check failed: the replica was replaced
    assert b.resume_engine(pids) == ["wb-1/57"] and b.paused == []


def test_a_draining_zones_replicas_keep_their_zone_while_the_pod_terminates(monkeypatch):
    s, b, _ = cluster()
    b.drain_node("wb-1", 30)  # terminating, still listed
    details = {"applications": {"llm": {"status": "RUNNING", "deployments": {"StreamTarget": {"replicas": [
        {"state": "RUNNING", "node_ip": "10.0.1.1"}, {"state": "RUNNING", "node_ip": "10.0.2.1"}]}}}}}
    fake_dashboard(monkeypatch, serve=details)
    smp = b.observe(timeout=1.0)
    assert smp.replicas == {"StreamTarget": {"zone-a": 1, "zone-b": 1}}  # not "?"
    assert smp.nodes_alive["zone-b"] == 0  # a pod going away is no capacity
    # KubeRay v1.7 does not replace it while it terminates (it is still listed) ...
    assert s.kuberay.reconcile_pods() == [] and s.schedule() == []
    assert b.observe(timeout=1.0).replicas == {"StreamTarget": {"zone-a": 1, "zone-b": 1}}
    # ... only once it is gone: then a new pod in zone-b, counted once it runs
    s.kubelet.finish("wb-1")
    new = s.kuberay.reconcile_pods()
    assert len(new) == 1 and s.schedule() == new
    assert b.observe(timeout=1.0).nodes_alive["zone-b"] == 1


def test_exec_has_its_own_api_client_so_the_samplers_reads_go_on_meanwhile():
    s, b, stream = cluster()
    seen = []
    stream.during.append(lambda: seen.append(len(b.core.list_namespaced_pod("availproof").items)))
    b.exec("wb-1", "kill -9 41")
    assert seen == [len(s.pods)] and b.exec_core.api_client is not b.core.api_client
    assert b.core.api_client.call_api.__name__ == "call_api" and "stream" not in repr(b.core.api_client.call_api)


def test_start_redis_polls_for_the_gcs_exit_instead_of_sleeping_blindly(monkeypatch):
    s, b, _ = cluster()
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == 2:  # the GCS exits a little later; the kubelet restarts the head container
            s.pods["head"]["status"]["containerStatuses"][0]["restartCount"] = 1

    monkeypatch.setattr(b.kube, "clock", kube_client.Clock(sleep=sleep))
    b.kill_redis()
    s.pods["redis-2"] = redis_pod("redis-2")
    assert b.start_redis() is True
    assert slept == [1.0, 1.0]  # seen at the second look, no blind wait
    b.kill_redis()
    s.pods["redis-3"] = redis_pod("redis-3")
    slept.clear()
    b.gcs_exit_window_s = 5
    assert b.start_redis() is False and max(slept) <= 1.0 and len(slept) == 5  # bounded


# ------------------------------------------------------------------ 6. every effect check
def test_effect_checks_see_each_kill_and_not_what_did_not_happen():
    s, b, _ = cluster()
    look = b.effect_checks
    # replica: the process, before and after
    assert not look({"scope": "replica", "target": "r1", "zones": ["zone-a"], "pids": ["wa-1/41"]})[0]["ok"]
    b.replica_killer(replica(), "sigkill")()
    assert look({"scope": "replica", "target": "r1", "zones": ["zone-a"], "pids": ["wa-1/41"]})[0]["ok"]
    # node: a pod the rig did not crash is not in effect; one it crashed is (gone)
    assert not look({"scope": "node", "target": "wc-1", "zones": ["zone-c"], "pids": 0})[0]["ok"]
    b.kill_node("wc-1")
    assert look({"scope": "node", "target": "wc-1", "zones": ["zone-c"], "pids": 1})[0] == {
        "check": "pod wc-1 crashed: gone, replaced or restarted", "ok": True,
        "seen": "gone (the crash's exec exited 137)"}  # the exec's exit status: the evidence of the crash itself
    # zone: no Ready Ray pod left and the nodes unschedulable; a replacement Ready there, or an uncordon, is seen
    zone = {"scope": "zone", "target": "zone-a", "zones": ["zone-a"], "pids": 2}
    b.kill_zones(["zone-a"])
    assert [c["ok"] for c in look(zone)] == [True, True, True]
    s.pods["wa-3"] = ray_pod("wa-3", "k-a1", "10.0.1.3")
    b.core.patch_node("k-a2", {"spec": {"unschedulable": False}})
    assert [c["ok"] for c in look(zone)] == [False, False, False] and "k-a2" in look(zone)[1]["seen"]
    assert "pod wa-3 Ready on node k-a1" in look(zone)[2]["seen"]
    # redis, then the head: the pods gone
    assert look({"scope": "redis", "target": "redis", "zones": [], "pids": b.kill_redis()})[0]["ok"]
    b.kill_head()
    head = look({"scope": "head", "target": "head", "zones": [], "pids": 1})[0]
    assert head["ok"] and head["seen"].endswith("(the kill's exec exited 137)")
    # a kill whose exec exited 0 (its shell outlived the SIGKILLs: PID 1 kept the container up) says so too
    _, b2, _ = cluster()
    b2.kill_head(method="gcs")
    assert b2.effect_checks({"scope": "head", "target": "head", "zones": [], "pids": 1})[0]["seen"].endswith("exited 0)")


def test_effect_checks_of_a_head_that_did_not_go_and_of_an_engine():
    s, b, _ = cluster()
    head = {"scope": "head", "target": "head", "zones": [], "pids": 1}
    b.head_at_kill = {"name": "head", "uid": "uid-head", "restarts": 0}
    assert look_ok(b, head) == [False]  # pod unchanged, the GCS answers (patched above)
    s.pods["head"]["status"]["containerStatuses"][0]["restartCount"] = 1  # the gcs kill: the container restarted
    assert look_ok(b, head) == [True]
    engine = {"scope": "engine", "target": "r1", "zones": ["zone-b"], "pids": b.pause_engine(replica(node="wb-1"))}
    assert look_ok(b, engine) == [True]
    b.resume_engine(engine["pids"])
    assert look_ok(b, engine) == [False] and b.effect_checks(engine)[0]["seen"] == "57 S"


def look_ok(b, fault):
    return [c["ok"] for c in b.effect_checks(fault)]


def test_effect_checks_of_upgrades_drains_and_unknown_scopes(monkeypatch):
    s, b, _ = cluster()
    rs = s.custom[("rayservices", "availproof")]
    b.service = "availproof"
    up = {"scope": "upgrade", "target": "cluster", "zones": [], "version": "v3", "cluster_before": CLUSTER}
    assert look_ok(b, up) == [False]
    rs["status"]["activeServiceStatus"] = {"rayClusterName": "availproof-b6d4f"}
    assert look_ok(b, up) == [True]
    app = {"status": "RUNNING", "deployed_app_config": {"runtime_env": {"env_vars": {kb.VERSION_ENV: "v2"}}}}
    fake_dashboard(monkeypatch, serve={"applications": {"llm": app}})
    up = {"scope": "upgrade", "target": "serve_config", "zones": [], "version": "v2"}
    assert look_ok(b, up) == [True]
    app["status"] = "DEPLOYING"
    assert look_ok(b, up) == [False]
    drain = {"scope": "drain", "target": "wb-1", "zones": ["zone-b"], "pids": 0}
    assert look_ok(b, drain) == [False]
    b.drain_node("wb-1", 30)
    assert b.effect_checks(drain)[0]["seen"] == "terminating" and look_ok(b, drain) == [True]
    assert look_ok(b, {"scope": "nonsense", "target": "x", "zones": []}) == [False]


def test_the_partition_ruleset_passes_nft_check_mode():
    """``nft -c`` (Debian package nftables) parses and checks the table against the kernel without
    loading it; skipped where nftables is not installed or cannot reach netlink."""
    import shutil
    import subprocess

    nft = shutil.which("nft")
    if nft is None:
        pytest.skip("nftables is not installed (Debian package nftables)")
    trial = subprocess.run([nft, "-c", "-f", "-"], input="table inet availproof_trial {\n}\n", text=True,
                           capture_output=True, timeout=20)
    if trial.returncode != 0:
        pytest.skip(f"nft -c cannot run here: {trial.stderr.strip()[:120]}")
    for ips in (["10.0.1.1", "10.0.1.2"], ["fd00::5"], ["10.0.0.1", "fd00::1"]):
        r = subprocess.run([nft, "-c", "-f", "-"], input=kp.ruleset(ips), text=True, capture_output=True, timeout=20)
        assert r.returncode == 0, r.stderr
    broken = kp.ruleset(["10.0.1.1"]).replace("@zone4 drop", "@zone9 drop")
    assert subprocess.run([nft, "-c", "-f", "-"], input=broken, text=True, capture_output=True,
                          timeout=20).returncode != 0  # the check is not a no-op


def test_an_engine_crash_kills_the_engine_child_only_and_proves_the_replica_lived():
    s, b, _ = cluster()
    r = replica(node="wb-1")
    pids = b.crash_engine(r)
    assert pids == ["wb-1/57"]
    assert s.kubelet.fates["wb-1"] == [("VLLM::EngineCor", "SIGKILL")]  # the engine, by SIGKILL, nothing else
    crash = {"scope": "engine-crash", "target": "r1", "zones": ["zone-b"], "pid": r.pid, "pids": pids}
    assert look_ok(b, crash) == [True, True]
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 41")  # the replica went too: no longer the engine's crash alone
    assert look_ok(b, crash) == [True, False]
    with pytest.raises(ClusterError, match="no engine child process"):  # nothing left to crash
        b.crash_engine(r)


def test_the_engine_crash_fault_records_the_replica_it_proves_alive():
    s, b, _ = cluster()
    b.pick_replica = lambda zone=None, **_: replica(node="wb-1")
    f = crash_engine(b, faults.Marker(), zone="zone-b")
    assert f["pid"] == 41 and f["pids"] == ["wb-1/57"]
    assert f["effect"]["verified"] and [c["ok"] for c in f["effect"]["checks"]] == [True, True], f["effect"]


def test_an_engine_crash_refused_leaves_nothing_in_the_records():
    s, b, _ = cluster()
    s.kubelet.exec("wb-1", "ray-worker", "kill -9 57")  # no engine left to crash
    b.pick_replica = lambda zone=None, **_: replica(node="wb-1")
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="no engine child process"):
        crash_engine(b, marker, zone="zone-b")
    assert marker.marks == []
