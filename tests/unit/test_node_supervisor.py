"""The local backend's node supervisor after a partition heals (chaos/backends/local/supervisor.py): a node whose
raylet exited while the GCS holds it dead is restarted, as KubeRay's kubelet restarts the Ray container; a node
that runs, or that the GCS still holds ALIVE, is never touched; it stops at its deadline, at stop(), and once the
head is down."""

import time
from types import SimpleNamespace

from chaos.backends.local.supervisor import NodeSupervisor


class Cluster:
    def __init__(self, alive=("worker-c",), gcs=None, head=True):
        self.alive, self.head = set(alive), head
        self.gcs = gcs or {}
        self.calls, self.logged = [], []

    def running(self):
        return self.head

    def core_alive(self, name):
        return name in self.alive

    def status(self):
        return [SimpleNamespace(name=n, gcs_state=s) for n, s in self.gcs.items()]

    def kill_node(self, name):
        self.calls.append(("kill", name))

    def start_nodes(self, names):
        self.calls.append(("start", tuple(names)))
        self.alive |= set(names)
        self.gcs.update(dict.fromkeys(names, "ALIVE"))

    def log(self, msg):
        self.logged.append(msg)


def test_a_running_node_is_never_touched():
    c = Cluster(alive={"worker-c"}, gcs={"worker-c": "DEAD"})  # the GCS's word alone: its raylet still runs
    s = NodeSupervisor(c, ["worker-c"])
    assert s.step() and c.calls == [] and s.restarted == []


def test_a_node_whose_raylet_exited_and_the_gcs_holds_dead_is_restarted_once():
    c = Cluster(alive=set(), gcs={"worker-c": "DEAD"})
    s = NodeSupervisor(c, ["worker-c"])
    assert s.step() and c.calls == [("kill", "worker-c"), ("start", ("worker-c",))]
    assert s.step() and len(c.calls) == 2 and s.restarted == ["worker-c"]
    assert "restarted, as KubeRay's kubelet restarts the Ray container" in c.logged[0]


def test_a_node_down_but_alive_in_the_gcs_is_waited_for_not_restarted():
    c = Cluster(alive=set(), gcs={"worker-c": "ALIVE"})
    assert NodeSupervisor(c, ["worker-c"]).step() and c.calls == []


def test_absent_from_the_gcs_counts_as_dead_and_a_gcs_that_does_not_answer_as_nothing():
    c = Cluster(alive=set(), gcs={"worker-c": "ABSENT"})  # LocalCluster.status: not listed by the GCS
    NodeSupervisor(c, ["worker-c"]).step()
    assert ("start", ("worker-c",)) in c.calls
    c = Cluster(alive=set(), gcs={"worker-c": "UNKNOWN"})  # the GCS did not answer: no evidence, no restart
    NodeSupervisor(c, ["worker-c"]).step()
    assert c.calls == []


def test_the_head_down_ends_the_supervision_without_a_restart():
    c = Cluster(alive=set(), gcs={"worker-c": "DEAD"}, head=False)
    s = NodeSupervisor(c, ["worker-c"], for_s=5, poll_s=0.01)
    s.start()
    s.join(2)
    assert not s.is_alive() and c.calls == []


def test_it_stops_at_its_deadline_and_at_stop():
    c = Cluster()
    s = NodeSupervisor(c, ["worker-c"], for_s=0.1, poll_s=0.01)
    s.start()
    s.join(2)
    assert not s.is_alive()
    s = NodeSupervisor(c, ["worker-c"], for_s=60, poll_s=0.01)
    s.start()
    t0 = time.monotonic()
    s.stop()
    assert not s.is_alive() and time.monotonic() - t0 < 2


def test_a_failing_look_is_logged_and_tried_again():
    c = Cluster(alive=set(), gcs={"worker-c": "DEAD"})
    looks = []

    def status():
        looks.append(1)
        if len(looks) == 1:
            raise RuntimeError("the dashboard does not answer")
        return [SimpleNamespace(name="worker-c", gcs_state="DEAD")]

    c.status = status
    s = NodeSupervisor(c, ["worker-c"], for_s=5, poll_s=0.01)
    s.start()
    deadline = time.monotonic() + 3
    while not s.restarted and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.restarted == ["worker-c"] and "does not answer" in c.logged[0]
