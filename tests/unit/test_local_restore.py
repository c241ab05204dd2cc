"""The local backend's restore after a head restart: with GCS fault tolerance the workers get a moment to
reconnect; without it nothing running before can, so the workers the new GCS does not know are restarted
at once (no 20 s wait for what cannot happen), and a worker just started is given its moment."""

from types import SimpleNamespace

from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.cluster import NodeStatus
from chaos.base.errors import ClusterError


class FakeCluster:
    """The calls ``_restore`` makes, recorded; ``known`` are the workers the GCS holds ALIVE."""

    def __init__(self, ft: bool, known: set[str]):
        self.state = SimpleNamespace(gcs_fault_tolerance=ft, redis=None)
        self.known = set(known)
        self.calls: list[tuple] = []

    def status(self):
        return [NodeStatus(n, "worker", "z", None, "127.0.0.1", 1, "ALIVE" if n in self.known else "ABSENT", 0)
                for n in ("worker-a", "worker-b", "worker-c")]

    def wait_healthy(self, timeout):
        self.calls.append(("wait_healthy", timeout))
        if len(self.known) < 3:
            raise ClusterError("not healthy")

    def core_alive(self, name):
        return True

    def kill_node(self, name):
        self.calls.append(("kill", name))

    def start_nodes(self, names):
        self.calls.append(("start", tuple(names)))
        self.known |= set(names)

    def partitioned_zones(self):
        return []


def restore(cluster: FakeCluster) -> dict:
    return LocalBackend(cluster)._restore({}, partitions=[], redis=False, head=True,
                                          nodes=["worker-a", "worker-b", "worker-c"], check=None, timeout=60)


def test_without_fault_tolerance_unknown_workers_are_restarted_without_waiting():
    c = FakeCluster(ft=False, known=set())
    done = restore(c)
    assert c.calls[0] == ("kill", "worker-a")  # no wait first
    assert ("start", ("worker-a", "worker-b", "worker-c")) in c.calls and done["started"] == [
        "worker-a", "worker-b", "worker-c"]
    assert [x for x in c.calls if x[0] == "wait_healthy"] == [("wait_healthy", 60)]


def test_with_fault_tolerance_the_workers_get_their_moment_first():
    c = FakeCluster(ft=True, known={"worker-a"})
    restore(c)
    assert c.calls[0] == ("wait_healthy", 20)  # the moment to reconnect
    assert ("kill", "worker-a") not in c.calls and ("kill", "worker-b") in c.calls


def test_without_fault_tolerance_all_known_waits_as_before():
    c = FakeCluster(ft=False, known={"worker-a", "worker-b", "worker-c"})
    assert restore(c)["started"] == [] and c.calls == [("wait_healthy", 20), ("wait_healthy", 60)]
