"""Per-zone network namespaces for real (root): what a partition does to traffic, and clean-up.

Traffic goes only to addresses inside the namespaces this test makes."""

import subprocess
import sys
import time
import uuid

import pytest

from chaos.backends.local import netns

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

