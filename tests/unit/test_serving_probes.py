"""The hypothesis' serving probes over a fake backend: every zone serving (the spread) and every replica serving
(the capacity, wherever it runs: device-loss-remedy's, whose replacement lands in another zone)."""

from chaos.ctk import probes
from chaos.system import placement


def replica(rid, zone, state="RUNNING", deployment="StreamTarget"):
    return placement.Replica(app="llm", deployment=deployment, replica_id=rid, state=state, actor_name=None,
                             actor_id=None, pid=None, node_ip=None, node=f"worker-{zone[-1]}", zone=zone,
                             region="region-1")


class FakeBackend:
    def __init__(self, rows):
        self.rows = rows

    def replicas(self, state="RUNNING"):
        return [r for r in self.rows if state is None or r.state == state]

    def zones(self):
        return ["zone-a", "zone-b", "zone-c"]


def with_backend(monkeypatch, rows):
    monkeypatch.setattr(probes, "backend_for", lambda configuration: FakeBackend(rows))


def test_three_replicas_in_two_zones_serve_the_capacity_but_not_every_zone(monkeypatch):
    with_backend(monkeypatch, [replica("a1", "zone-c"), replica("a2", "zone-c"), replica("b1", "zone-b")])
    assert probes.every_replica_serving(3) is True
    assert probes.every_zone_serving() is False


def test_a_replica_still_starting_is_not_serving(monkeypatch):
    with_backend(monkeypatch, [replica("a1", "zone-c"), replica("a2", "zone-a", state="STARTING"),
                               replica("b1", "zone-b")])
    assert probes.every_replica_serving(3) is False
    assert probes.every_replica_serving(2) is True


def test_every_deployment_must_have_its_count(monkeypatch):
    rows = [replica(f"s{i}", "zone-a") for i in range(3)] + [replica("i1", "zone-a", deployment="Ingress")]
    with_backend(monkeypatch, rows)
    assert probes.every_replica_serving(3) is False
    with_backend(monkeypatch, [])
    assert probes.every_replica_serving(1) is False  # nothing deployed: nothing serves


def test_requests_go_where_they_are_told(monkeypatch):
    class Doors(FakeBackend):
        def targets(self):
            return [("worker-a", "http://127.0.0.3:8000", "zone-a", None), ("worker-b", "http://127.0.0.4:8000", "zone-b", None)]

        def head_target(self):
            return ("head", "http://127.0.0.2:8000", None, None)

        def front_targets(self):
            return [("lb", "http://127.0.0.9:9000", None, None)]

    b = Doors([])
    assert probes._urls(b, "front") == ["http://127.0.0.9:9000"]
    assert probes._urls(b, "head") == ["http://127.0.0.2:8000"]
    assert probes._urls(b, "workers") == ["http://127.0.0.3:8000", "http://127.0.0.4:8000"]


def test_both_probes_ask_again_until_their_wait_is_over(monkeypatch):
    answers = [[replica("a1", "zone-a", state="STARTING"), replica("b1", "zone-b"), replica("c1", "zone-c")],
               [replica("a1", "zone-a"), replica("b1", "zone-b"), replica("c1", "zone-c")]]

    class Later(FakeBackend):
        def replicas(self, state="RUNNING"):
            self.rows = answers[min(self.asked, 1)]
            self.asked += 1
            return super().replicas(state)

    for probe in (lambda: probes.every_zone_serving(wait_s=10), lambda: probes.every_replica_serving(3, wait_s=10)):
        b = Later([])
        b.asked = 0
        monkeypatch.setattr(probes, "backend_for", lambda configuration: b)
        monkeypatch.setattr("time.sleep", lambda s: None)
        assert probe() is True and b.asked == 2  # STARTING at the first look, RUNNING at the second
    b = Later([])
    b.asked = 0
    monkeypatch.setattr(probes, "backend_for", lambda configuration: b)
    assert probes.every_replica_serving(3, wait_s=0) is False and b.asked == 1  # no wait: one look
