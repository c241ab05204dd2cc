"""Free loopback ports and addresses for the nodes of one local cluster.

Each node gets its own loopback address (127.A.B.n; Ray silently replaces 127.0.0.1 with the
machine's routable address, but accepts the rest of 127/8) and a block of ports that was
free when the cluster came up. Blocks sit below the kernel's ephemeral range so that client
connections never take them later.
"""

from __future__ import annotations

import random
import socket

BLOCK = 100  # ports per node
WORKER_PORTS = range(20, BLOCK)  # offsets inside a block for Ray worker processes
LOW, HIGH = 10000, 32000

# Offsets inside a node's block.
OFFSETS = {
    "node_manager": 0,
    "object_manager": 1,
    "metrics_export": 2,
    "dashboard_agent_listen": 3,
    "dashboard_agent_grpc": 4,
    "runtime_env_agent": 5,
    "serve_http": 6,
    "serve_grpc": 7,
    # head only
    "gcs": 10,
    "dashboard": 11,
    "ray_client_server": 12,
    "dashboard_metrics": 13,
    "autoscaler_metrics": 14,
}


def port_free(port: int, host: str = "") -> bool:
    """True when a server could listen on ``port`` (TIME_WAIT leftovers do not count, as servers
    set SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def find_blocks(count: int, rng: random.Random | None = None, attempts: int = 200) -> int:
    """Return a base port such that ``count`` consecutive blocks are all free."""
    rng = rng or random.Random()
    span = count * BLOCK
    for _ in range(attempts):
        base = rng.randrange(LOW, HIGH - span) // BLOCK * BLOCK
        if all(port_free(p) for p in range(base, base + span)):
            return base
    raise OSError(f"no {span} consecutive free ports between {LOW} and {HIGH}")


def node_ports(base: int, index: int) -> dict[str, int]:
    start = base + index * BLOCK
    ports = {name: start + off for name, off in OFFSETS.items()}
    ports["min_worker"] = start + WORKER_PORTS.start
    ports["max_worker"] = start + WORKER_PORTS.stop - 1
    return ports


def address_prefix(rng: random.Random | None = None) -> str:
    """A random 127.A.B prefix, so two clusters on one machine do not share addresses."""
    rng = rng or random.Random()
    return f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}"
