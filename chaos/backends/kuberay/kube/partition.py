"""The two ways the Kubernetes backend cuts a zone off the network, and the probe that proves a cut.

``node-filter`` (the default): what Chaos Mesh's chaos-daemon and Litmus' helper pods do, per
node: a helper pod on each node of the zone (``hostNetwork``, capability ``NET_ADMIN``,
tolerating every taint) loads an nftables table into the node's network namespace that drops
every forwarded packet between the zone's Ray pod addresses and anything outside the zone. The
table's base chain sits on the ``forward`` hook ahead of the usual filter priority, and a drop
in any nftables base chain (or legacy iptables) is final, so established connections stall
from the next packet on, whatever the CNI's own rules accept. Traffic between the zone's own
pods still flows. Healing deletes the table (checked) and the helper pods; the helper also
deletes it when it is terminated (its TERM trap), so deleting a helper pod alone heals its
node, and every helper carries ``activeDeadlineSeconds``: a run that crashed leaves no helper
(and no table) past that deadline (the kubelet terminates the pod, the trap runs). Pod traffic
must pass the node's netfilter: true for routed CNIs (kindnet, Calico, Flannel), not for Cilium
with eBPF host routing. The helper needs a namespace whose admission accepts ``hostNetwork`` and
``NET_ADMIN`` (Pod Security ``privileged``): checked beforehand with a server-side dry-run create
(:meth:`chaos.backends.kuberay.KubeRayBackend.preflight_partition`).

``networkpolicy``: the zone's Ray worker pods are labelled ``availproof.io/partition-zone=<zone>``
and a NetworkPolicy selecting exactly those pods (of this RayCluster) denies all their ingress
and egress. The Kubernetes API leaves it to the network plugin when a policy takes effect ("there
is no way to tell from the Kubernetes API when exactly that happens": kubernetes/website
``network-policies.md``, "Pod lifecycle") and says nothing of connections already open: plugins
that accept packets of established (conntrack) flows ahead of their policy rules (Calico's and
Antrea's per-pod chains, kube-network-policies without strict mode as kind uses it) let Ray's
long-lived gRPC channels carry on. So this variant is kept only with its effect checked.

The proof (both methods): before the cut, a TCP connection is opened between two pod IPs across
it, from a Ray pod inside the zone to a Ray pod outside (an echo server there); each look
(:func:`probe_check_script`) says whether that connection still carries bytes (an echo within
the last second) and whether a new connection is accepted. Never from a hostNetwork helper,
whose own traffic does not cross the forward hook. The probe's processes end by themselves at
the same deadline as the helpers. Only silence is a cut (:func:`probe_verdict`): an RST or a FIN
that arrives, on the open connection or as a new one's refusal, came across the path.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from typing import Any

from chaos.backends.kuberay.kube import marks as km

METHODS = ("networkpolicy", "node-filter")  # the order of the experiment schema's enum
DEFAULT_METHOD = "node-filter"
FAULT_LABEL = "availproof.io/fault"
ZONE_KEY = "availproof.io/zone"
RUN_KEY = km.RUN  # the run id (chaos.backends.kuberay.KubeRayBackend.run_id) of what a run created
MEMBER_LABEL = "availproof.io/partition-zone"  # on the Ray pods a networkpolicy partition isolates
POLICY_LABEL = {FAULT_LABEL: "partition"}  # on every NetworkPolicy a partition creates
HELPER_LABEL = {FAULT_LABEL: "partition-helper"}  # on every node-filter helper pod
HELPER_IMAGE = "nicolaka/netshoot:v0.13"  # busybox sh + nft; any image with both will do
TABLE = "availproof_partition"
DEFAULT_DEADLINE_S = 3600  # a helper pod's (and a probe's) lifetime when the partition's duration is not given
PROBE_STALE_S = 1.0  # an established connection that echoed nothing for this long carries no more bytes


def policy_name(zone: str) -> str:
    return f"availproof-partition-{zone}"


def partition_policy(zone: str, cluster: str, run_id: str, deadline_s: float = DEFAULT_DEADLINE_S) -> dict[str, Any]:
    """A NetworkPolicy isolating exactly the zone's Ray worker pods of ``cluster`` (those labelled
    ``MEMBER_LABEL=zone``; no ingress, no egress), annotated with its deadline (:mod:`chaos.backends.kuberay.kube.marks`)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": policy_name(zone), "labels": {**POLICY_LABEL, ZONE_KEY: zone, RUN_KEY: run_id},
                     "annotations": {km.EXPIRES: km.deadline(deadline_s)}},
        "spec": {
            "podSelector": {"matchLabels": {"ray.io/cluster": cluster, MEMBER_LABEL: zone}},
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
# what a helper's node holds now: the table as nft lists it, or the word "absent"
CHECK_SCRIPT = f"nft list table inet {TABLE} 2>/dev/null || echo absent"


def table_holds(listing: str, zone_ips: list[str]) -> tuple[bool, str]:
    """Whether ``nft list table`` output (:data:`CHECK_SCRIPT`) is our table with every zone address in its sets."""
    if f"table inet {TABLE}" not in listing:
        return False, "no table " + TABLE
    missing = [ip for ip in zone_ips if not re.search(rf"(?<![0-9a-fA-F:.]){re.escape(ip)}(?![0-9a-fA-F:.])", listing)]
    if missing:
        return False, f"table {TABLE} lacks {', '.join(missing)}"
    return True, f"table {TABLE} with the zone's {len(zone_ips)} address(es)"


def helper_name(node: str) -> str:
    return ("availproof-partition-" + re.sub(r"[^a-z0-9-]", "-", node.lower()))[:63].rstrip("-")


def helper_pod(node: str, zone: str, image: str = HELPER_IMAGE, run_id: str = "",
               deadline_s: float = DEFAULT_DEADLINE_S) -> dict[str, Any]:
    """The privileged-as-needed helper pod pinned to ``node`` (it bypasses the scheduler, so a cordon
    does not keep it out), gone after ``deadline_s`` whatever happens to the run."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": helper_name(node), "labels": {**HELPER_LABEL, ZONE_KEY: zone, RUN_KEY: run_id},
                     "annotations": {km.EXPIRES: km.deadline(deadline_s)}},
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
            "restartPolicy": "Never",
            # the kubelet terminates the pod then (SIGTERM: the trap removes the table), phase Failed
            "activeDeadlineSeconds": max(1, int(-(-float(deadline_s) // 1))),
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


# ------------------------------------------------------------------ the connection across the cut
# Python in the Ray containers (every Ray image has it), started in the background by an exec and
# ending by itself after its lifetime. Each script starts with ": availproof-probe <what> <id>;"
# (a no-op for sh) so that a reader of the pod's processes, or a test, knows what it is.
PROBE_SERVER = """
import os, socket, sys, threading
path, life, fam = sys.argv[1], float(sys.argv[2]), sys.argv[3]
threading.Timer(life, lambda: os._exit(0)).start()
s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::" if fam == "6" else "0.0.0.0", 0))
s.listen(16)
with open(path + ".tmp", "w") as f:
    f.write("%d %d" % (s.getsockname()[1], os.getpid()))
os.rename(path + ".tmp", path)
def echo(c):
    try:
        while True:
            d = c.recv(256)
            if not d:
                break
            c.sendall(d)
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"""

PROBE_CLIENT = """
import errno, os, socket, sys, time
host, port, path, life = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
end = time.time() + life
def put(state, last):
    with open(path + ".tmp", "w") as f:
        f.write("%s %d %.3f" % (state, os.getpid(), last))
    os.rename(path + ".tmp", path)
try:
    c = socket.create_connection((host, port), timeout=3)
except OSError:
    put("refused", 0.0)
    sys.exit(1)
c.settimeout(0.5)
last = time.time()
put("open", last)
while time.time() < end:
    try:
        c.sendall(b"x")
        if not c.recv(256):
            put("closed", last)
            break
        last = time.time()
    except socket.timeout:
        pass
    except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
        put("reset", last)
        break
    except OSError as e:
        put("timedout" if e.errno == errno.ETIMEDOUT else "error-" + (errno.errorcode.get(e.errno) or "OSError"), last)
        break
    put("open", last)
    time.sleep(0.2)
"""

PROBE_CHECK = """
import errno, os, socket, sys, time
host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
now = time.time()
try:
    state, pid, last = open(path).read().split()
except (OSError, ValueError):
    state, pid, last = "missing", "0", "0"
try:
    os.kill(int(pid), 0) if int(pid) > 0 else int("x")
    alive = "alive"
except (OSError, ValueError):
    alive = "dead"  # its last state stays: a client that ended on a reset says so
try:
    socket.create_connection((host, port), timeout=1).close()
    new = "accepted"
except socket.timeout:
    new = "timeout"
except ConnectionRefusedError:
    new = "refused"
except ConnectionResetError:
    new = "reset"
except OSError as e:
    new = "timeout" if e.errno == errno.ETIMEDOUT else "error-" + (errno.errorcode.get(e.errno) or "OSError")
print(state, alive, "%.3f" % (now - float(last)), new)
"""


def probe_id(run_id: str, zone: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"availproof-cut-{run_id}-{zone}".lower())[:80]


def _wait_for(path: str, tenths: int) -> str:
    return f'i=0; while [ ! -s "{path}" ] && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; cat "{path}"'


def probe_server_script(pid: str, life_s: float, family: int) -> str:
    """Start the echo server (outside the zone); prints "PORT PID"."""
    f = f"/tmp/{pid}.server"
    return (f": availproof-probe server {pid}; rm -f {f}; nohup python -c {shlex.quote(PROBE_SERVER)} {f} "
            f"{int(life_s)} {family} >/dev/null 2>&1 & {_wait_for(f, 100)}")


def probe_client_script(pid: str, host: str, port: int, life_s: float) -> str:
    """Open the connection (inside the zone) and keep it echoing; prints "open PID LAST" once connected."""
    f = f"/tmp/{pid}.client"
    return (f": availproof-probe client {pid}; rm -f {f}; nohup python -c {shlex.quote(PROBE_CLIENT)} "
            f"{shlex.quote(host)} {int(port)} {f} {int(life_s)} >/dev/null 2>&1 & {_wait_for(f, 50)}")


def probe_check_script(pid: str, host: str, port: int) -> str:
    """One look from inside the zone: prints "STATE ALIVE AGE NEW" (the open connection's state, its client
    alive or dead, seconds since its last echo, and what a new connection got: accepted|timeout|refused)."""
    return (f": availproof-probe check {pid}; python -c {shlex.quote(PROBE_CHECK)} {shlex.quote(host)} "
            f"{int(port)} /tmp/{pid}.client")


def probe_stop_script(pid: str) -> str:
    """End the probe's processes in this pod (either end) and remove their files; never fails."""
    return (f": availproof-probe stop {pid}; for f in /tmp/{pid}.client /tmp/{pid}.server; do "
            f'[ -s "$f" ] && kill "$(cut -d" " -f2 "$f")" 2>/dev/null; rm -f "$f" "$f.tmp"; done; true')


def probe_verdict(line: str) -> tuple[tuple[bool, str], tuple[bool, str]]:
    """((established cut, seen), (new cut, seen)) from :func:`probe_check_script`'s output.

    Only silence is a cut: a drop delivers nothing back, neither data nor a FIN nor an RST. An RST (the
    open connection reset, a new one refused) or a FIN that arrives came across the path, so the path
    still carries packets: not a cut, whatever it does to the connection (a policy that rejects is not a
    partition). The open connection is cut when it echoed nothing for :data:`PROBE_STALE_S` or the kernel
    gave up on it after its retransmissions (``ETIMEDOUT``); a new connection when it timed out."""
    words = line.split()
    if len(words) != 4:
        return (False, f"unreadable probe output {line.strip()[:80]!r}"), (False, "unknown")
    state, alive, age, new = words
    try:
        age_s = float(age)
    except ValueError:
        age_s = 0.0
    if state == "timedout":
        est = (True, "the connection timed out (its retransmissions got no answer)")
    elif state == "reset":
        est = (False, "the connection was reset: the far end's RST got through, the path carries")
    elif state == "closed":
        est = (False, "the connection was closed: the far end's FIN got through, the path carries")
    elif state == "open" and alive == "alive":
        est = (age_s >= PROBE_STALE_S, f"last echo {age_s:.1f} s ago")
    else:
        est = (False, f"the probe connection is {state} ({'client ' + alive})")
    if new == "timeout":
        fresh = (True, "a new connection timed out (no answer)")
    elif new in ("refused", "reset"):
        fresh = (False, f"a new connection was {new}: an RST came back across the path, which carries")
    else:
        fresh = (False, f"a new connection was {new}")
    return est, fresh
