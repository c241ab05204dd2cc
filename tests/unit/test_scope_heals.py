"""Each backend's heal restores what each fault's scope says it restores there (the ``heal`` of its
implementations: chaos/backends/local/scopes.py, chaos/backends/kuberay/scopes.py), and nothing for the
scopes Serve heals itself; KubeRay's preparation checks what each planned fault's scope says it reaches
(``reach``)."""

from chaos.backends.kuberay import KubeRayBackend
from chaos.backends.kuberay.scopes import Reach, Restore as KubeRestore
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.scopes import Restore

ZONES = {"zone-a": ["worker-a"], "zone-b": ["worker-b1", "worker-b2"], "zone-c": ["worker-c"]}


def backend(partitioned=()):
    """A local backend whose restore is recorded, not done (what heal asks of it is what is tested)."""
    b = LocalBackend.__new__(LocalBackend)
    b.asked = {}
    b.nodes_in = lambda zone=None, region=None: ZONES[zone]
    b.resume_engine = lambda pids: [p for p in pids]
    b.cluster = type("Cluster", (), {"partitioned_zones": lambda self: list(partitioned)})()
    b._restore = lambda done, **kw: b.asked.update(done=done, **kw) or done
    return b


def fault(scope, target, zones=(), **detail):
    return {"fault_id": f"{scope}-1", "scope": scope, "target": target, "zones": list(zones), **detail}


def test_the_heal_restores_what_each_fault_s_scope_says():
    b = backend(partitioned=["zone-c", "zone-a"])
    b.heal([fault("engine", "r1", ["zone-a"], pids=[11, 12]), fault("node", "worker-a", ["zone-a"]),
            fault("zone", "zone-b", ["zone-b"]), fault("partition", "zone-c", ["zone-c"]),
            fault("replica", "r2", ["zone-a"], pids=[13]), fault("drain", "worker-c", ["zone-c"])], timeout=1.0)
    assert b.asked == {"done": {"resumed": [11, 12]}, "partitions": ["zone-c"], "redis": False, "head": False,
                       "nodes": ["worker-a", "worker-b1", "worker-b2", "worker-c"],
                       "check": {"worker-a", "worker-b1", "worker-b2", "worker-c"}, "timeout": 1.0}


def test_after_a_control_plane_fault_the_head_is_restarted_and_every_worker_checked():
    b = backend()
    b.heal([fault("redis", "redis"), fault("node", "worker-a", ["zone-a"])], timeout=1.0)
    assert b.asked["redis"] is True and b.asked["head"] is True and b.asked["check"] is None
    b.heal([fault("head", "head")], timeout=1.0)
    assert b.asked["redis"] is False and b.asked["head"] is True and b.asked["nodes"] == []


def test_scopes_serve_heals_itself_and_unknown_ones_restore_nothing():
    b = backend()
    faults = [fault("replica", "r1", pids=[1]), fault("engine-crash", "r2", pids=[2]), fault("upgrade", "code"),
              fault("disk-full", "worker-a", ["zone-a"])]
    assert b.restores(faults) == []
    b.heal(faults, timeout=1.0)
    assert b.asked["done"] == {"resumed": []} and b.asked["nodes"] == [] and not b.asked["head"]
    assert sum([Restore(nodes={"a"}), Restore(resume=[1], head=True)], Restore()) == Restore({"a"}, [1], set(), False, True)


def test_on_kuberay_the_heal_joins_what_each_fault_s_scope_restores_in_the_faults_order():
    b = KubeRayBackend.__new__(KubeRayBackend)
    zone_a, region = fault("zone", "zone-a", ["zone-a"]), fault("region", "region-2", ["zone-c"])
    upgrade, plain = fault("upgrade", "cluster", record="cm-1", complete=False), fault("upgrade", "serve_config")
    faults = [fault("engine", "r1", pids=["wa-1/11"]), zone_a, fault("partition", "zone-b", ["zone-b"]), upgrade,
              plain, region, fault("engine", "r2", pids=["wb-1/12"]), fault("node", "wc-1", ["zone-c"])]
    assert sum(b.restores(faults), KubeRestore()) == KubeRestore(
        resume=["wa-1/11", "wb-1/12"], cuts={"zone-b"}, lost={"zone-a", "zone-c"}, watched=[zone_a, region],
        upgrades=[upgrade])


def test_on_kuberay_the_preparation_joins_what_each_planned_fault_reaches():
    b = KubeRayBackend.__new__(KubeRayBackend)
    b.zones_in_region = lambda region: {"region-2": ["zone-c"]}[region]

    def planned(scope, **arguments):
        return {"scope": scope, "arguments": arguments}

    # the zones named by the losses and the partitions; a cluster upgrade; the other faults reach nothing
    faults = [planned("zone", zone="zone-a"), planned("region", region="region-2"), planned("partition", zone="zone-b"),
              planned("upgrade", variant="cluster"), planned("replica", zone="zone-a")]
    assert sum(b.reaches({"zone", "region", "partition", "upgrade", "replica"}, faults), Reach()) == Reach(
        loses=True, lost={"zone-a", "zone-c"}, cuts=True, cut={"zone-b"}, cluster_upgrade=True)
    # a loss naming no zone loses every zone; a scope with no planned fault reaches as one with no arguments
    assert sum(b.reaches({"zone", "partition"}, [planned("zone")]), Reach()) == Reach(
        loses=True, every_zone_lost=True, cuts=True)
    assert sum(b.reaches({"upgrade"}, [planned("upgrade", variant="serve_config")]), Reach()) == Reach()
