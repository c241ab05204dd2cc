"""Per-zone network namespaces for real (root): what a partition does to traffic, and clean-up.

Traffic goes only to addresses inside the namespaces this test makes."""

import subprocess
import sys
import time
import uuid

import pytest

from chaos.backends.local import netns
from chaos.scopes.partition import partition_zone

LISTENER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""

CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.0) as c:
        print(c.recv(2).decode())
except OSError as e:
    print(type(e).__name__)
"""


def reach(host: str, port: int, namespace: str | None = None) -> str:
    out = subprocess.run(netns.exec_prefix(namespace) + [sys.executable, "-c", CONNECT, host, str(port)],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


@pytest.fixture
def two_zones():
    reason = netns.unavailable()
    assert reason is None, reason  # CI runs as root: this must work there
    cid = f"ap{uuid.uuid4().hex[:6]}"
    prefix = netns.pick_subnet()
    bridge, names = netns.names(cid, ["za", "zb"])
    domains = [netns.Domain(names["za"][0], names["za"][1], [f"{prefix}.2", f"{prefix}.3"]),
               netns.Domain(names["zb"][0], names["zb"][1], [f"{prefix}.4"])]
    netns.create(bridge, prefix, domains)
    listeners = []
    try:
        for d in domains:
            for a in d.addresses:
                p = subprocess.Popen(netns.exec_prefix(d.namespace) + [sys.executable, "-c", LISTENER, a, "7070"],
                                     stdout=subprocess.PIPE, text=True)
                assert p.stdout.readline().strip() == "ready"
                listeners.append(p)
        yield prefix, bridge, domains
    finally:
        for p in listeners:
            p.kill()
            p.wait()
        netns.remove(bridge, [d.namespace for d in domains])
        assert not any(netns.exists(d.namespace) for d in domains)
        assert netns.link_up(bridge) is None


def test_partition_drops_traffic_across_zones_but_not_inside_one(two_zones):
    prefix, _, (za, zb) = two_zones
    a1, a2, b = f"{prefix}.2", f"{prefix}.3", f"{prefix}.4"
    assert reach(a1, 7070) == "hi" and reach(b, 7070) == "hi"  # from the root namespace (the client)
    assert reach(b, 7070, za.namespace) == "hi"
    netns.set_link(za.link, up=False)
    assert netns.link_up(za.link) is False
    t0 = time.monotonic()
    assert reach(a1, 7070) == "TimeoutError"  # dropped, not refused: as across a real partition
    assert time.monotonic() - t0 >= 0.9
    assert reach(b, 7070, za.namespace) == "TimeoutError"
    assert reach(a1, 7070, zb.namespace) == "TimeoutError"
    assert reach(a2, 7070, za.namespace) == "hi"  # inside the cut zone, traffic still flows
    assert reach(b, 7070) == "hi"  # the other zone is untouched
    netns.set_link(za.link, up=True)
    netns.flush_neighbours([za.namespace, zb.namespace])
    # healed: every path answers again at once (no failed ARP entries left from the cut)
    assert reach(a1, 7070) == "hi"
    assert reach(b, 7070, za.namespace) == "hi"
    assert reach(a1, 7070, zb.namespace) == "hi"


def test_a_failed_create_leaves_nothing_behind():
    cid = f"ap{uuid.uuid4().hex[:6]}"
    prefix = netns.pick_subnet()
    bridge, names = netns.names(cid, ["za"])
    bad = [netns.Domain(names["za"][0], names["za"][1], ["not-an-address"])]
    with pytest.raises(Exception, match="failed"):
        netns.create(bridge, prefix, bad)
    assert not netns.exists(names["za"][0])
    assert netns.link_up(bridge) is None



KEEPALIVE = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16); print("ready", flush=True)
def serve(c):
    while c.recv(4096):
        c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\n\\r\\n")
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


class NetnsCut:
    """The partition fault's backend side on two namespaces: the cut (the zone's link down, as the
    local cluster does it; or nothing, the mutation) and its proof (chaos.backends.local.effect.CutProbe)."""

    def __init__(self, link: str, host: str, port: int, applied: bool = True):
        self.link, self.host, self.port, self.applied = link, host, port, applied
        self.probe = None

    def partition_zone(self, zone, deadline_s=None):
        from chaos.backends.local import effect

        self.probe = effect.CutProbe(self.host, self.port).open()  # before the cut
        if self.applied:
            netns.set_link(self.link, up=False)

    def heal_zone(self, zone):
        netns.set_link(self.link, up=True)
        self.probe.close()

    def effect_checks(self, fault):
        return self.probe.checks()


@pytest.mark.parametrize("applied", [True, False], ids=["cut", "mutation-cut-not-applied"])
def test_a_partition_proves_itself_on_an_established_connection_and_a_cut_not_applied_is_not_in_effect(
        two_zones, applied):
    from chaos.scopes import faults
    from chaos.core import verdict

    prefix, _, (za, zb) = two_zones
    host = f"{prefix}.3"
    server = subprocess.Popen(netns.exec_prefix(za.namespace) + [sys.executable, "-c", KEEPALIVE, host, "7171"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        backend, marker = NetnsCut(za.link, host, 7171, applied=applied), faults.Marker()
        f = partition_zone(backend, marker, "za", duration_s=0.5)
        e = f["effect"]
        if applied:
            assert e["verified"] is True and e["time_to_effect_s"] < 5.0, e
            assert [c["ok"] for c in e["checks"]] == [True, True]
            assert "no answer within" in e["checks"][0]["seen"] and "not answered" in e["checks"][1]["seen"]
        else:  # the mutation: nothing was cut, the connection still answers: not in effect, the run is an ERROR
            assert e["verified"] is False and e["time_to_effect_s"] is None, e
            assert e["checks"][0]["seen"].startswith("answered") and e["checks"][1]["seen"] == "accepted"
            summary = {"faults": [{"scope": "partition", "target": "za", "effect": e}], "bounds": {"results": []}}
            v = verdict.decide(summary, {"status": "completed", "run": []})
            assert v["word"] == verdict.ERROR and v["reasons"] == ["fault not in effect: partition za"]
        assert [m.event for m in marker.marks] == ["inject_start", "inject_end", "heal_start", "heal_end"]
        assert marker.marks[1].detail["effect"] == e  # in the records: the summary re-derives it
    finally:
        server.kill()
        server.wait()
