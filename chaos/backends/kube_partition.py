"""The two ways the Kubernetes backend cuts a zone off the network.

``networkpolicy``: a NetworkPolicy denying all ingress and egress of the zone's Ray worker
pods. Whether it cuts connections that are already open depends on the CNI: Calico and
Cilium enforce policies on established flows too; kind's kindnet (kube-network-policies
without strict mode) and other conntrack-based implementations apply a policy only when a
connection starts, so Ray's long-lived gRPC channels and the harness' keep-alive connections
go on.

``node-filter``: what Chaos Mesh's chaos-daemon and Litmus' helper pods do, per node: a
helper pod on each node of the zone (``hostNetwork``, capability ``NET_ADMIN``, tolerating
every taint) loads an nftables table into the node's network namespace that drops every
forwarded packet between the zone's Ray pod addresses and anything outside the zone. The
table's base chain sits on the ``forward`` hook ahead of the usual filter priority, and a drop
in any nftables base chain (or legacy iptables) is final, so established connections stall
from the next packet on, whatever the CNI's own rules accept. Traffic between the zone's own
pods still flows. Healing deletes the table (checked) and the helper pods; the helper also
deletes it when it is terminated, so deleting a helper pod alone heals its node. Pod traffic
must pass the node's netfilter: true for routed CNIs (kindnet, Calico, Flannel), not for
Cilium with eBPF host routing (use ``networkpolicy`` there).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from typing import Any

METHODS = ("networkpolicy", "node-filter")
FAULT_LABEL = "availproof.io/fault"
ZONE_KEY = "availproof.io/zone"
POLICY_LABEL = {FAULT_LABEL: "partition"}  # on every NetworkPolicy a partition creates
HELPER_LABEL = {FAULT_LABEL: "partition-helper"}  # on every node-filter helper pod
HELPER_IMAGE = "nicolaka/netshoot:v0.13"  # busybox sh + nft; any image with both will do
TABLE = "availproof_partition"


def policy_name(zone: str) -> str:
    return f"availproof-partition-{zone}"


def partition_policy(zone: str, cluster: str, groups: list[str]) -> dict[str, Any]:
    """A NetworkPolicy isolating the zone's Ray worker pods (no ingress, no egress)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": policy_name(zone), "labels": {**POLICY_LABEL, ZONE_KEY: zone}},
        "spec": {
            "podSelector": {"matchLabels": {"ray.io/cluster": cluster},
                            "matchExpressions": [{"key": "ray.io/group", "operator": "In", "values": groups}]},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


def ruleset(zone_ips: list[str]) -> str:
    """The nftables table that cuts ``zone_ips`` off everything but each other (atomic with ``nft -f``)."""
    v4 = sorted(a for a in zone_ips if ipaddress.ip_address(a).version == 4)
    v6 = sorted(a for a in zone_ips if ipaddress.ip_address(a).version == 6)
    if not v4 and not v6:
        raise ValueError("no pod address to cut off")
    sets, rules = [], []
    for family, name, addrs in (("ip", "zone4", v4), ("ip6", "zone6", v6)):
        if not addrs:
            continue
        kind = "ipv4_addr" if family == "ip" else "ipv6_addr"
        sets.append(f"  set {name} {{ type {kind}; elements = {{ {', '.join(addrs)} }}; }}")
        rules += [f"    {family} saddr @{name} {family} daddr @{name} accept",
                  f"    {family} saddr @{name} drop",
                  f"    {family} daddr @{name} drop"]
    # declare-delete-define: one transaction that replaces any leftover table of ours
    return "\n".join([
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        *sets,
        "  chain forward {",
        "    type filter hook forward priority -200; policy accept;",
        *rules,
        "  }",
        "}",
    ]) + "\n"


def apply_script(zone_ips: list[str]) -> str:
    return f"printf '%s' {shlex.quote(ruleset(zone_ips))} | nft -f -"


REMOVE_SCRIPT = f"if nft list table inet {TABLE} >/dev/null 2>&1; then nft delete table inet {TABLE}; fi"


def helper_name(node: str) -> str:
    return ("availproof-partition-" + re.sub(r"[^a-z0-9-]", "-", node.lower()))[:63].rstrip("-")


def helper_pod(node: str, zone: str, image: str = HELPER_IMAGE) -> dict[str, Any]:
    """The privileged-as-needed helper pod pinned to ``node`` (it bypasses the scheduler, so a cordon
    does not keep it out)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": helper_name(node), "labels": {**HELPER_LABEL, ZONE_KEY: zone}},
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 10,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "nft",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                # idle until told; on termination remove the table, so deleting the pod heals the node
                "command": ["sh", "-c", f"trap '{REMOVE_SCRIPT}; exit 0' TERM INT; sleep 2147483647 & wait"],
                "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
            }],
        },
    }
