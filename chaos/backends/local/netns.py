"""Per-zone network namespaces, so that a zone can really be cut off the network.

Layout (needs root and iproute2): one bridge in the root namespace holding the subnet's first
address (the rig's own client sends from it), and one namespace per zone plus one for the head
and Redis. Each namespace has one veth whose outer end is on the bridge; every node address of
the zone sits on the inner end. Traffic between zones, and from the client, goes over the
bridge; traffic inside a zone stays inside its namespace.

Cutting a zone sets the outer end down: packets to and from the zone are dropped (connections
time out, as across a real partition; nothing is refused), while the zone's own nodes still
reach each other and keep their addresses. Healing sets it up again. Only addresses inside
namespaces this module created are ever used: the subnet is one the root namespace does not
route anywhere else.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass

from chaos.base.errors import SetupError

HEAD_DOMAIN = "head"  # the namespace of the head node and Redis


def unavailable() -> str | None:
    """Why per-zone namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "per-zone network namespaces need root (ip netns)"
    if not shutil.which("ip"):
        return "per-zone network namespaces need iproute2's `ip` (Debian: apt-get install -y iproute2)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SetupError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network or address the root namespace routes or holds (gateways included)."""
    text = _ip("-4", "route", "show", "table", "all").stdout + _ip("-4", "-o", "addr").stdout
    nets = []
    for token in re.findall(r"\b(\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?)\b", text):
        try:
            nets.append(ipaddress.ip_network(token, strict=False))
        except ValueError:
            continue
    return nets


def pick_subnet(rng: random.Random | None = None, attempts: int = 200) -> str:
    """A free 10.A.B.0/24 prefix ("10.A.B") that nothing on this machine routes or uses."""
    rng = rng or random.Random()
    used = used_networks()
    for _ in range(attempts):
        net = ipaddress.ip_network(f"10.{rng.randrange(200, 255)}.{rng.randrange(0, 256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return str(net.network_address).rsplit(".", 1)[0]
    raise SetupError("no free 10.x.y.0/24 subnet for the cluster's network namespaces")


@dataclass
class Domain:
    """One namespace: its name, the outer end of its veth (on the bridge), its addresses."""

    namespace: str
    link: str
    addresses: list[str]


def names(cluster_id: str, domains: list[str]) -> tuple[str, dict[str, tuple[str, str]]]:
    """Bridge name and, per domain, (namespace, outer link). Link names fit Linux's 15 chars."""
    bridge = f"{cluster_id}br"
    out = {d: (f"{cluster_id}-{d}", f"{cluster_id}v{i}") for i, d in enumerate(domains)}
    return bridge, out


def create(bridge: str, prefix: str, domains: list[Domain]) -> None:
    """Make the bridge and the namespaces; on any failure remove what was made."""
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{prefix}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for d in domains:
            _ip("netns", "add", d.namespace)
            _ip("link", "add", d.link, "type", "veth", "peer", "name", "eth0", "netns", d.namespace)
            _ip("link", "set", d.link, "master", bridge, "up")
            _ip("-n", d.namespace, "link", "set", "lo", "up")
            _ip("-n", d.namespace, "link", "set", "eth0", "up")
            for a in d.addresses:
                _ip("-n", d.namespace, "addr", "add", f"{a}/24", "dev", "eth0")
    except BaseException:
        remove(bridge, [d.namespace for d in domains])
        raise


def remove(bridge: str | None, namespaces: list[str]) -> None:
    """Delete the namespaces (their veths go with them) and the bridge. Safe to repeat."""
    for ns in namespaces:
        _ip("netns", "del", ns, check=False)
    if bridge:
        _ip("link", "del", bridge, check=False)


def set_link(link: str, up: bool) -> None:
    _ip("link", "set", link, "up" if up else "down")


def flush_neighbours(namespaces: list[str]) -> None:
    """Forget failed ARP entries left by the cut (an artefact of one L2 bridge: across real zones
    traffic is routed), so that a healed zone answers at once instead of after ARP retries."""
    _ip("neigh", "flush", "all", check=False)
    for ns in namespaces:
        _ip("-n", ns, "neigh", "flush", "all", check=False)


def link_up(link: str) -> bool | None:
    """Whether the outer end is administratively up (None: no such link)."""
    proc = _ip("-o", "link", "show", link, check=False)
    if proc.returncode != 0:
        return None
    flags = proc.stdout.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in proc.stdout else []
    return "UP" in flags


def exec_prefix(namespace: str | None) -> list[str]:
    """The command prefix that runs a program inside ``namespace`` (nothing for the root one)."""
    return ["ip", "netns", "exec", namespace] if namespace else []


def exists(namespace: str) -> bool:
    return namespace in _ip("netns", "list", check=False).stdout.split()
