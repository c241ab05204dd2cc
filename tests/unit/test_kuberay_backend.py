"""The KubeRay backend, driven through the fault functions, over the real kubernetes client and an
in-memory API server (tests/unit/kube_fake.py): what it reads, writes and execs, per scope."""

import shlex
import time

import pytest

from chaos.scopes import faults
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import pod_exec as kube_exec, marks as km, partition as kp
from chaos.backends.kuberay.kube import client as kube_client
from chaos.base.errors import ClusterError, UsageError
from chaos.system.placement import Replica
from chaos.scopes.engine import hang_engine
from chaos.scopes.head import kill_head
from chaos.scopes.node import kill_node
from chaos.scopes.partition import partition_zone
from chaos.scopes.redis import kill_redis
from chaos.scopes.region import kill_region
from chaos.scopes.replica import kill_replica
from chaos.scopes.zone import kill_zone
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import FakeServer, FakeStream, node, ray_pod, redis_pod

CLUSTER = "availproof-x7k2p"  # KubeRay v1.7: <RayService name>-<5 random chars>


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(kube_client, "DEFAULT_CLOCK", kube_client.Clock(sleep=lambda s: None))  # the backends' waits
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    # one look at each fault's effect (tests/unit/test_kuberay_faults_in_effect.py tests what it sees)
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", dict.fromkeys(
        ("replica", "engine", "node", "zone", "region", "head", "redis", "partition", "drain", "upgrade"), 0.0),
        raising=False)


def cluster(max_pods=3, partition_method="node-filter", handler=None, max_nodes=None):
    """kind-like: a control-plane-zone node (head, Redis), zone-a on two nodes, zone-b, zone-c in another region.
    Commands in pods go to the fake kubelet (its processes, nft tables and network) unless ``handler``."""
    s = FakeServer()
    for n in (node("k-cp", "control", "region-1"), node("k-a1", "zone-a", "region-1"),
              node("k-a2", "zone-a", "region-1"), node("k-b", "zone-b", "region-1"), node("k-c", "zone-c", "region-2")):
        s.nodes[n["metadata"]["name"]] = n
    for p in (ray_pod("head", "k-cp", "10.0.0.1", node_type="head", group="headgroup"),
              ray_pod("wa-1", "k-a1", "10.0.1.1"), ray_pod("wa-2", "k-a2", "10.0.1.2"),
              ray_pod("wb-1", "k-b", "10.0.2.1", group="workers-zone-b"),
              ray_pod("wc-1", "k-c", "10.0.3.1", group="workers-zone-c"),
              ray_pod("stranger", "k-a1", "10.0.9.9", cluster="someone-else")):
        s.pods[p["metadata"]["name"]] = p
    s.pods["redis-1"] = redis_pod("redis-1")
    s.custom[("rayservices", "availproof")] = {"apiVersion": "ray.io/v1", "kind": "RayService",
                                               "metadata": {"name": "availproof"},
                                               "status": {"activeServiceStatus": {"rayClusterName": CLUSTER}}}
    s.custom[("rayclusters", CLUSTER)] = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": CLUSTER},
                                          "spec": {"workerGroupSpecs": [
                                              {"groupName": f"workers-{z}", "replicas": n,
                                               "template": {"spec": {"nodeSelector": {kb.ZONE_LABEL: z}}}}
                                              for z, n in (("zone-a", 2), ("zone-b", 1), ("zone-c", 1))]}}
    stream = FakeStream(handler or s.kubelet.exec)
    core, net, custom = s.apis()
    b = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", max_pods=max_pods, serve_url="http://s",
                          dashboard_url="http://d", partition_method=partition_method, core=core, networking=net,
                          custom=custom, stream_fn=stream, **({"max_nodes": max_nodes} if max_nodes else {}))
    b.run_id = "run1"  # settable: the run's id (default a random token)
    b.resolve_cluster()
    return s, b, stream


def writes(s):
    return [(m, p) for m, p, _ in s.calls if m != "GET"]


def events(marker):
    return [m.event for m in marker.marks]


# ------------------------------------------------------------------ which cluster
def test_the_active_cluster_comes_from_the_rayservice_status():
    s, b, _ = cluster()
    assert b.cluster == CLUSTER
    assert b.zones() == ["zone-a", "zone-b", "zone-c"]  # the worker groups' nodeSelectors, not "control"


def test_without_a_rayservice_the_cluster_is_found_by_kuberays_naming():
    s, b, _ = cluster()
    del s.custom[("rayservices", "availproof")]  # the client raises its ApiException(404): not an error here
    b.cluster = "availproof"
    assert b.resolve_cluster() == CLUSTER
    assert kb.cluster_name("availproof", ["availproof-x7k2p", "availproof-raycluster-x7k2p", "availproof-extra",
                                          "availproof-X7K2P", "availproof"]) == ["availproof-x7k2p", "availproof"]
    s.pods["other"] = ray_pod("other", "k-b", "10.0.2.9", cluster="availproof-b6d4f")  # a pending upgrade's cluster
    b.cluster = "availproof"
    with pytest.raises(UsageError, match="2 matching cluster"):
        b.resolve_cluster()


# ------------------------------------------------------------------ zone and region loss
def test_zone_loss_cordons_then_deletes_with_one_blast_radius_check_and_heals_only_its_cordon():
    s, b, _ = cluster()
    s.nodes["k-a3"] = node("k-a3", "zone-a", "region-1", unschedulable=True)  # cordoned by someone else
    marker = faults.Marker()
    f = kill_zone(b, marker, "zone-a", outage_s=20)
    assert marker.marks[0].detail["nodes"] == ["wa-1", "wa-2"] and f["pids"] == 2
    w = writes(s)
    # cordon (with the mark) of the zone's schedulable nodes first, then force-deletes of its Ray pods only
    assert w[:4] == [("PATCH", "/api/v1/nodes/k-a1"), ("PATCH", "/api/v1/nodes/k-a2"),
                     ("DELETE", "/api/v1/namespaces/availproof/pods/wa-1?gracePeriodSeconds=0"),
                     ("DELETE", "/api/v1/namespaces/availproof/pods/wa-2?gracePeriodSeconds=0")]
    cordon = next(body for m, p, body in s.calls if p == "/api/v1/nodes/k-a1" and m == "PATCH")
    # the run id as the mark, the node's resourceVersion as the precondition
    expires = cordon["metadata"]["annotations"].pop(km.CORDON_EXPIRES)  # the mark's deadline (leftovers expire)
    assert not km.expired(expires) and km.expired(expires, now=time.time() + b.helper_deadline_s + 2)
    assert cordon == {"metadata": {"annotations": {kb.CORDON_MARK: "run1"}, "resourceVersion": "1"},
                      "spec": {"unschedulable": True}}
    assert "stranger" in s.pods and "wb-1" in s.pods
    # healed after the outage: our two nodes uncordoned and unmarked; the foreign cordon stays
    assert w[4:] == [("PATCH", "/api/v1/nodes/k-a1"), ("PATCH", "/api/v1/nodes/k-a2")]
    for n in ("k-a1", "k-a2"):
        assert s.nodes[n]["spec"]["unschedulable"] is False
        assert kb.CORDON_MARK not in s.nodes[n]["metadata"].get("annotations", {})
    assert s.nodes["k-a3"]["spec"]["unschedulable"] is True
    assert events(marker) == ["inject_start", "inject_end", "heal_start", "heal_end"]


def test_zone_loss_over_the_blast_radius_touches_nothing_and_records_nothing():
    s, b, _ = cluster(max_pods=1)
    marker = faults.Marker()
    with pytest.raises(UsageError, match="loss of zone-a: the selector matches 2 pods, more than the limit of 1"):
        kill_zone(b, marker, "zone-a")
    assert writes(s) == [] and marker.marks == []


def test_region_loss_is_checked_once_for_all_its_pods():
    s, b, _ = cluster(max_pods=3)  # region-1 holds 4 Ray pods (head, wa-1, wa-2, wb-1)
    with pytest.raises(UsageError, match="loss of control, zone-a, zone-b: the selector matches 4 pods"):
        kill_region(b, faults.Marker(), "region-1")
    assert writes(s) == []


def test_region_loss_is_one_fault_over_every_zone_of_the_region_and_the_rollback_uncordons():
    s, b, _ = cluster(max_pods=4)
    marker = faults.Marker()
    f = kill_region(b, marker, "region-1")  # no outage_s: the rollback heals
    assert f["zones"] == ["control", "zone-a", "zone-b"]  # the head's zone is in region-1 too: it goes as well
    assert {p for m, p in writes(s) if m == "DELETE"} == {
        f"/api/v1/namespaces/availproof/pods/{n}?gracePeriodSeconds=0" for n in ("head", "wa-1", "wa-2", "wb-1")}
    assert sorted(n for n, o in s.nodes.items() if o["spec"].get("unschedulable")) == ["k-a1", "k-a2", "k-b", "k-cp"]
    # KubeRay recreates the pods on uncordoned nodes once healed; here: put them back ready
    for p in (ray_pod("head2", "k-cp", "10.0.0.2", node_type="head", group="headgroup"),
              ray_pod("wa-3", "k-a1", "10.0.1.3"), ray_pod("wa-4", "k-a2", "10.0.1.4"),
              ray_pod("wb-2", "k-b", "10.0.2.2", group="workers-zone-b")):
        s.pods[p["metadata"]["name"]] = p
    done = faults.heal(b, marker, timeout=5)  # the rollback: what this run injected
    assert done["healed"] == [f["fault_id"]] and marker.unhealed() == []
    assert sorted(done["uncordoned"]) == ["k-a1", "k-a2", "k-b", "k-cp"]
    assert not any(o["spec"].get("unschedulable") for o in s.nodes.values())


# ------------------------------------------------------------------ exec, checked
def test_gcs_kill_execs_pgrep_x_in_the_head_container_and_returns_the_pids():
    s, b, stream = cluster(handler=lambda pod, c, script: ("57\n", "", 0))
    marker = faults.Marker()
    f = kill_head(b, marker, outage_s=None, method="gcs")
    assert stream.calls == [("head", "ray-head", "pids=$(pgrep -x gcs_server) && kill -9 $pids && echo $pids")]
    assert "pgrep -f" not in stream.calls[0][2]  # -f would match the shell running the command
    assert f["pids"] == 1 and writes(s) == []
    kill_head(b, marker, outage_s=None)
    assert writes(s) == [("DELETE", "/api/v1/namespaces/availproof/pods/head?gracePeriodSeconds=0")]


@pytest.mark.parametrize("scope", ["gcs", "sigkill", "engine"])
def test_a_failed_command_raises_says_what_failed_and_records_no_injection(scope):
    s, b, stream = cluster(handler=lambda pod, c, script: ("", "sh: kill: (41) - No such process\n", 1))
    marker = faults.Marker()
    r = Replica(app="a", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name="n", actor_id="x",
                pid=41, node_ip="10.0.1.1", node="wa-1", zone="zone-a", region=None)
    with pytest.raises(kube_exec.ExecError) as e:
        if scope == "gcs":
            kill_head(b, marker, outage_s=None, method="gcs")
        elif scope == "sigkill":
            kill_replica(b, marker, replica=r)
        else:
            b.pick_replica = lambda **kw: r
            hang_engine(b, marker)
    assert "exited 1" in str(e.value) and "No such process" in str(e.value) and "availproof/" in str(e.value)
    assert marker.marks == [] and b.paused == []


def test_exit_status_is_read_from_the_error_channel():
    assert kube_exec.exit_status('{"metadata":{},"status":"Success"}') == (0, "")
    code, msg = kube_exec.exit_status('{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","message":"m",'
                                      '"details":{"causes":[{"reason":"ExitCode","message":"137"}]}}')
    assert (code, msg) == (137, "m")
    assert kube_exec.exit_status('{"status":"Failure","message":"container not found"}') == (None, "container not found")
    assert kube_exec.exit_status("")[0] is None


def test_an_exec_that_did_not_finish_raises():
    class Hung:
        def run_forever(self, timeout=None):
            pass

        def is_open(self):
            return True

        def close(self):
            self.closed = True

    class Core:
        def connect_get_namespaced_pod_exec(self, *a, **kw):
            raise AssertionError("called through stream only")

    hung = Hung()
    with pytest.raises(kube_exec.ExecError, match="did not finish within 5 s"):
        kube_exec.run(Core(), "ns", "p", "sleep 99", timeout=5, stream_fn=lambda method, *a, **kw: hung)
    assert hung.closed


# ------------------------------------------------------------------ replicas and engines
def replica(pid=41, node="wa-1"):
    return Replica(app="a", deployment="StreamTarget", replica_id="r1", state="RUNNING",
                   actor_name="SERVE_REPLICA::a#S#r1", actor_id="x", pid=pid, node_ip="10.0.1.1", node=node,
                   zone="zone-a", region=None)


def test_replica_kill_methods_and_engine_hang_aim_at_the_replica_pod():
    s, b, stream = cluster()
    kubelet = s.kubelet
    marker = faults.Marker()
    f = kill_replica(b, marker, replica=replica())
    assert f["pids"] == ["wa-1/41"] and f["victim"] == {"node": "wa-1", "pid": 41, "engines": [57]}
    assert "pgrep -P 41" in stream.calls[0][2]  # its engines found before the kill (the orphan check)
    assert stream.calls[1] == ("wa-1", "ray-worker", "kill -9 41")
    assert kubelet.fates["wa-1"] == [("ray::ServeRepli", "SIGKILL")]
    kubelet.actors["SERVE_REPLICA::a#S#r1"] = ("wb-1", 41)
    kill_replica(b, marker, replica=replica(node="wb-1"), method="actor")
    arm, fire = [c for c in stream.calls if "availproof-actor-kill" in c[2]]
    assert arm[:2] == fire[:2] == ("head", "ray-head") and "SERVE_REPLICA::a#S#r1" in shlex.split(arm[2])
    assert kubelet.fates["wb-1"] == [("ray::ServeRepli", "SIGKILL")]  # Ray's kill of the actor's process
    kill_replica(b, marker, replica=replica(), method="pod")
    assert ("wa-1", "ray-worker", kb.CRASH_SCRIPT) in stream.calls  # the crash, then the delete
    assert writes(s)[-1] == ("DELETE", "/api/v1/namespaces/availproof/pods/wa-1?gracePeriodSeconds=0")
    assert kubelet.graceful("wa-1") == []
    b.pick_replica = lambda **kw: replica(node="wb-1")
    n = len(stream.calls)
    f = hang_engine(b, marker, duration_s=5)
    assert f["pids"] == ["wb-1/57"] and "pgrep -P 41 -f EngineCore" in stream.calls[n][2]
    # the engine stopped; the replica's process is not running: the actor kill above took wb-1's replica
    assert f["pid"] == 41 and [c["ok"] for c in f["effect"]["checks"]] == [True, False]
    assert stream.calls[-1] == ("wb-1", "ray-worker", "if kill -0 57 2>/dev/null; then kill -CONT 57; else echo gone; fi")
    assert b.paused == [] and kubelet.processes(s.pods["wb-1"])[57]["state"] == "S"


def test_replicas_map_to_pods_and_zones_by_pod_ip(monkeypatch):
    s, b, _ = cluster()
    details = {"applications": {"app": {"deployments": {"StreamTarget": {"replicas": [
        {"replica_id": "r1", "state": "RUNNING", "node_ip": "10.0.1.2", "pid": 3, "actor_name": "n1"},
        {"replica_id": "r2", "state": "RUNNING", "node_ip": "10.0.2.1", "pid": 4, "actor_name": "n2"},
        {"replica_id": "r3", "state": "RUNNING", "node_ip": "10.0.9.9", "pid": 5, "actor_name": "n3"}]}}}}}
    fake_dashboard(monkeypatch, serve=details)
    rows = b.replicas()
    assert [(r.replica_id, r.node, r.zone) for r in rows] == [("r1", "wa-2", "zone-a"), ("r2", "wb-1", "zone-b"),
                                                               ("r3", None, None)]  # another cluster's pod IP
    assert b.pick_replica(zone="zone-b").replica_id == "r2"


# ------------------------------------------------------------------ partitions
def test_networkpolicy_partition_isolates_exactly_the_zones_pods_and_heals():
    s, b, _ = cluster(partition_method="networkpolicy")
    s.kubelet.cni_cuts_established = True  # a plugin that enforces policy per packet
    s.pods["wa-9"] = ray_pod("wa-9", "k-b", "10.0.2.9")  # group workers-zone-a, but on a zone-b node
    marker = faults.Marker()
    partition_zone(b, marker, "zone-a", duration_s=20)
    pol = next(body for m, p, body in s.calls if m == "POST")
    assert not km.expired(pol["metadata"]["annotations"].pop(km.EXPIRES))  # its deadline: leftovers expire
    want = kp.partition_policy("zone-a", CLUSTER, "run1")
    want["metadata"]["annotations"] = {}
    assert pol == want
    assert pol["spec"]["podSelector"]["matchLabels"] == {"ray.io/cluster": CLUSTER, kp.MEMBER_LABEL: "zone-a"}
    assert pol["spec"]["ingress"] == [] and pol["spec"]["egress"] == [] and pol["spec"]["policyTypes"] == ["Ingress", "Egress"]
    # the zone's pods were labelled (not wa-9 of the same group in zone-b); the heal removed the labels again
    labelled = [p for m, p, body in s.calls if m == "PATCH" and body["metadata"].get("labels") == {kp.MEMBER_LABEL: "zone-a"}
                and km.read(body["metadata"]["annotations"][km.MEMBER_MARK])["run"] == "run1"]  # its run and deadline
    assert labelled == ["/api/v1/namespaces/availproof/pods/wa-1", "/api/v1/namespaces/availproof/pods/wa-2"]
    assert writes(s)[-3:] == [
        ("DELETE", "/apis/networking.k8s.io/v1/namespaces/availproof/networkpolicies/availproof-partition-zone-a"),
        ("PATCH", "/api/v1/namespaces/availproof/pods/wa-1"), ("PATCH", "/api/v1/namespaces/availproof/pods/wa-2")]
    assert not any(kp.MEMBER_LABEL in p["metadata"]["labels"] for p in s.pods.values())
    assert s.netpols == {} and events(marker)[-1] == "heal_end" and s.kubelet.probes == {}


def test_node_filter_partition_applies_the_rules_on_every_zone_node_and_removes_them():
    s, b, stream = cluster()  # node-filter: the default
    assert b.partition_method == "node-filter" == kp.DEFAULT_METHOD
    marker = faults.Marker()
    partition_zone(b, marker, "zone-a")  # healed by the rollback
    helpers = {n: p for n, p in s.pods.items() if p["metadata"]["labels"].get(kp.FAULT_LABEL) == "partition-helper"}
    assert sorted(p["spec"]["nodeName"] for p in helpers.values()) == ["k-a1", "k-a2"]
    for p in helpers.values():
        assert p["spec"]["hostNetwork"] is True and p["spec"]["tolerations"] == [{"operator": "Exists"}]
        assert p["spec"]["containers"][0]["securityContext"] == {"capabilities": {"add": ["NET_ADMIN"]}}
        assert p["spec"]["activeDeadlineSeconds"] == kp.DEFAULT_DEADLINE_S
        assert p["metadata"]["labels"][kp.RUN_KEY] == "run1"
    assert {n: sorted(t) for n, t in s.kubelet.tables.items()} == {"k-a1": ["10.0.1.1", "10.0.1.2"],
                                                                   "k-a2": ["10.0.1.1", "10.0.1.2"]}
    applied = next(sc for pod, c, sc in stream.calls if c == "nft")
    rules = shlex.split(applied)[2]
    assert "elements = { 10.0.1.1, 10.0.1.2 }" in rules and "hook forward" in rules
    assert "ip saddr @zone4 ip daddr @zone4 accept" in rules  # inside the zone still flows
    assert "ip saddr @zone4 drop" in rules and "ip daddr @zone4 drop" in rules
    assert b.partitioned_zones() == ["zone-a"] and events(marker) == ["inject_start", "inject_end"]
    done = faults.heal(b, marker, timeout=5)  # the rollback: what this run injected
    assert done["healed"] == [f["fault_id"] for f in marker.attempted.values()]
    assert events(marker) == ["inject_start", "inject_end", "heal_start", "heal_end"]
    assert s.kubelet.tables == {} and s.kubelet.probes == {}
    assert not any(kp.FAULT_LABEL in p["metadata"]["labels"] for p in s.pods.values())
    assert b.partitioned_zones() == []


def test_node_filter_partition_that_fails_to_apply_leaves_no_helper_and_records_nothing():
    s, b, stream = cluster()

    def handler(pod, c, script):
        if c == "nft" and script.startswith("printf"):
            return "", "Error: Could not process rule: Operation not permitted\n", 1
        return s.kubelet.exec(pod, c, script)

    stream.handler = handler
    marker = faults.Marker()
    with pytest.raises(kube_exec.ExecError, match="Operation not permitted"):
        partition_zone(b, marker, "zone-a")
    assert marker.marks == [] and s.kubelet.tables == {} and s.kubelet.probes == {}
    assert not any(kp.FAULT_LABEL in p["metadata"]["labels"] for p in s.pods.values())


def test_ruleset_handles_both_families_and_refuses_nothing_to_cut():
    text = kp.ruleset(["10.0.0.2", "fd00::5", "10.0.0.1"])
    assert "type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2 }" in text and "type ipv6_addr; elements = { fd00::5 }" in text
    assert text.startswith(f"table inet {kp.TABLE}\ndelete table inet {kp.TABLE}\n")
    with pytest.raises(ValueError):
        kp.ruleset([])


def test_partition_method_is_checked():
    s = FakeServer()
    core, net, custom = s.apis()
    with pytest.raises(UsageError, match="partition_method must be one of networkpolicy, node-filter"):
        kb.KubeRayBackend("availproof", "ctx", "c", partition_method="iptables", core=core, networking=net,
                          custom=custom)


# ------------------------------------------------------------------ node, redis, health
def test_node_kill_deletes_one_worker_pod_and_refuses_the_head_and_strangers():
    s, b, _ = cluster()
    marker = faults.Marker()
    kill_node(b, marker, zone="zone-b")
    assert writes(s) == [("DELETE", "/api/v1/namespaces/availproof/pods/wb-1?gracePeriodSeconds=0")]
    for name in ("head", "stranger"):
        with pytest.raises(UsageError, match="matches no pod"):
            b.kill_node(name)


def test_redis_restart_reports_whether_the_head_restarted():
    s, b, _ = cluster()
    f = kill_redis(b, faults.Marker(), outage_s=None)
    assert f["pids"] == ["redis-1"] and "redis-1" not in s.pods
    s.pods["redis-2"] = redis_pod("redis-2")  # the Deployment's replacement
    s.pods["head"]["status"]["containerStatuses"][0]["restartCount"] = 1  # the GCS exited, the kubelet restarted it
    assert b.start_redis() is True
    b.kill_redis()
    s.pods["redis-3"] = redis_pod("redis-3")
    assert b.start_redis() is False


def test_health_counts_the_pods_the_raycluster_asks_for():
    s, b, _ = cluster()
    assert b.healthy() is True  # 1 head + 2 + 1 + 1 workers, all ready, Redis ready
    s.pods["wc-1"]["status"]["conditions"][0]["status"] = "False"
    assert b.healthy() is False
    with pytest.raises(ClusterError, match="timed out"):
        b.wait_healthy(timeout=0)


def test_observe_counts_ready_worker_pods_per_zone_and_maps_replicas_by_pod_ip(monkeypatch):
    """The control-plane sample on KubeRay: GCS, controller and replicas through the dashboard (faked
    here at the HTTP level), nodes alive as the Ray worker pods Ready per zone from the API server."""
    s, b, _ = cluster()
    s.pods["wb-1"]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]  # zone-b's pod not Ready
    details = {"applications": {"llm": {"status": "RUNNING", "deployments": {"StreamTarget": {"replicas": [
        {"state": "RUNNING", "node_ip": "10.0.1.1"}, {"state": "RUNNING", "node_ip": "10.0.3.1"},
        {"state": "STARTING", "node_ip": "10.0.2.1"}]}}}}}
    fake_dashboard(monkeypatch, serve=details)  # the GCS answers; no node table
    smp = b.observe(timeout=1.0)
    assert smp.gcs_ok and smp.controller_ok and smp.app_status == "RUNNING"
    assert smp.replicas == {"StreamTarget": {"zone-a": 1, "zone-c": 1}}
    assert smp.nodes_alive == {"zone-a": 2, "zone-b": 0, "zone-c": 1}  # the head and a stranger's pod not counted
    assert "nodes" not in smp.errors  # the dashboard's node table is not what KubeRay counts
    assert smp.conditions == {"Ready": "True", "UpgradeInProgress": "False"}  # as KubeRay writes them
    s.kuberay.serve_endpoints = 0  # the serve Service has no ready endpoint left
    assert b.observe(timeout=1.0).conditions == {"Ready": "False", "UpgradeInProgress": "False"}
    # the API server not answering: nodes unknown (None, never 0), and said why
    monkeypatch.setattr(b.pods, "nodes", lambda: (_ for _ in ()).throw(OSError("apiserver down")))
    smp = b.observe(timeout=1.0)
    assert smp.nodes_alive is None and "apiserver down" in smp.errors["kubernetes"]


# ------------------------------------------------------------------ settings of the backend's own (issue 34)
def test_max_nodes_and_the_helper_image_are_settable_from_the_kubernetes_block():
    from chaos.backends.kuberay.settings import backend_settings

    assert backend_settings({}) == {"max_nodes": None, "helper_image": kp.HELPER_IMAGE}
    got = backend_settings({"max_nodes": 4, "helper_image": "registry.example/tools/nft:1.0", "max_pods": 2})
    assert got == {"max_nodes": 4, "helper_image": "registry.example/tools/nft:1.0"}
    for bad, field in (({"max_nodes": 0}, "max_nodes"), ({"max_nodes": "3"}, "max_nodes"),
                       ({"max_nodes": True}, "max_nodes"), ({"helper_image": ""}, "helper_image"),
                       ({"helper_image": "a b"}, "helper_image")):
        with pytest.raises(UsageError, match=f"kubernetes.{field}"):
            backend_settings(bad)
    s, b, _ = cluster()
    own = kb.KubeRayBackend("availproof", "kind-availproof", "availproof", core=b.core, networking=b.net,
                            custom=b.custom, stream_fn=b.stream_fn, run_id="run1", **got)
    own.resolve_cluster()
    assert own.max_nodes == 4 and own.describe()["max_nodes"] == 4
    own.preflight_partition("zone-a")
    helpers = [body for m, p, body in s.calls if m == "POST" and p.endswith("/pods?dryRun=All")]
    assert helpers and all(h["spec"]["containers"][0]["image"] == "registry.example/tools/nft:1.0" for h in helpers)
