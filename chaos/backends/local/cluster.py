"""A real multi-node Ray cluster on one machine: one raylet per topology node, GCS state in Redis.

Each node is one `ray start` launched as a session leader, on its own loopback address and
its own block of ports; the head holds the GCS, which keeps its tables in an external
Redis when the topology asks for GCS fault tolerance (``RAY_REDIS_ADDRESS`` and
``RAY_external_storage_namespace``, the mechanism of Ray 2.60). Workers get
``RAY_gcs_rpc_server_reconnect_timeout_s=600`` as KubeRay sets it, so they outlive a
head restart.

This class (with its parts: :mod:`.nodes`, :mod:`.redis_store`, :mod:`.partition`, :mod:`.front`) is
the only place that starts or signals cluster processes. Faults use its methods (kill/restart a node, the
head, Redis; partition/heal a zone), which act only on the sessions and PIDs recorded in the state file,
and on a recorded PID only while it is still the process recorded (Redis: ``redis-server`` with the
cluster's address, leading its session; HAProxy: :func:`chaos.backends.local.haproxy.is_ours`): once a
process exited, its PID can be any other.

Every process it starts gets the rig's environment without the variables that hold secrets
(the bearer tokens: :mod:`chaos.system.secret_env`); the names are kept in the state file, so a later
handle (``availproof recover``) drops them too.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from chaos.system import ray_dashboard, secret_env, topology as topo
from chaos.backends.local import netns, ports, procs, redis
from chaos.backends.local import state as st
from chaos.backends.local.front import FrontDoor
from chaos.backends.local.nodes import HEAD, NodeProcesses, ray_binary
from chaos.backends.local.partition import ZonePartitions, plan_netns
from chaos.backends.local.redis_store import RedisStore
from chaos.backends.local.state import ClusterState, NodeState, RedisState
from chaos.base.errors import ClusterError, SetupError, UsageError


def default_cluster_dir() -> Path:
    """Where the state of the default local cluster lives (override with AVAILPROOF_HOME)."""
    home = Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof"))
    return home / "cluster"


@dataclass
class NodeStatus:
    name: str
    role: str
    zone: str | None
    region: str | None
    ip: str
    processes: int  # live processes in the node's session
    gcs_state: str  # ALIVE / DEAD / UNKNOWN (head down) / ABSENT (never registered)
    serve_port: int
    core_alive: bool = True  # the raylet (and on the head the GCS) is running

    @property
    def healthy(self) -> bool:
        return self.core_alive and self.gcs_state == "ALIVE"


class LocalCluster(NodeProcesses, RedisStore, ZonePartitions, FrontDoor):
    """Handle on a local cluster described by a state file in ``cluster_dir``: its lifecycle and queries
    here; its node processes (:class:`~chaos.backends.local.nodes.NodeProcesses`), Redis
    (:class:`~chaos.backends.local.redis_store.RedisStore`), zone partitions
    (:class:`~chaos.backends.local.partition.ZonePartitions`) and front door
    (:class:`~chaos.backends.local.front.FrontDoor`) in their modules."""

    def __init__(self, cluster_dir: Path, state: ClusterState, log: Callable[[str], None] | None = None):
        self.cluster_dir = Path(cluster_dir)
        self._state = state
        self._mtime_ns = self._file_mtime()
        self.log = log or (lambda msg: None)
        self._lock = threading.RLock()
        self._redis_killed_at: float | None = None

    def _file_mtime(self) -> int | None:
        try:
            return (self.cluster_dir / st.FILENAME).stat().st_mtime_ns
        except FileNotFoundError:
            return None

    @property
    def state(self) -> ClusterState:
        """The state file is the truth: another handle (another process, a Chaos Toolkit run) may
        have restarted a node or Redis since this one last looked; reload when the file changed."""
        mtime = self._file_mtime()
        if mtime is not None and mtime != self._mtime_ns:
            fresh = st.load(self.cluster_dir)
            if fresh is not None and fresh.cluster_id == self._state.cluster_id:
                self._state = fresh
            self._mtime_ns = mtime
        return self._state

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def attach(cls, cluster_dir: Path | None = None, log: Callable[[str], None] | None = None) -> "LocalCluster":
        """The cluster recorded in ``cluster_dir``; SetupError when there is none."""
        cluster_dir = Path(cluster_dir or default_cluster_dir())
        state = st.load(cluster_dir)
        if state is None:
            raise SetupError(f"no local cluster in {cluster_dir} (run `availproof cluster up`)")
        return cls(cluster_dir, state, log)

    @classmethod
    def find(cls, cluster_dir: Path | None = None, log=None) -> "LocalCluster | None":
        cluster_dir = Path(cluster_dir or default_cluster_dir())
        state = st.load(cluster_dir)
        return cls(cluster_dir, state, log) if state else None

    @classmethod
    def up(
        cls,
        topology: topo.Topology,
        cluster_dir: Path | None = None,
        log: Callable[[str], None] | None = None,
        gcs_fault_tolerance: bool | None = None,
        netns_mode: bool = False,
    ) -> "LocalCluster":
        """Start Redis, the head and one raylet per node. A running cluster is returned as is.

        ``netns_mode`` puts each zone (and the head with Redis) in a network namespace of its own,
        on a bridge, so that a zone can be partitioned; it needs root. Otherwise every node has
        its own loopback address.
        """
        cluster_dir = Path(cluster_dir or default_cluster_dir())
        log = log or (lambda msg: None)
        existing = cls.find(cluster_dir, log)
        if existing is not None:
            if existing.running():
                log(f"cluster {existing.state.cluster_id} is already running in {cluster_dir}: nothing to do")
                return existing
            log(f"cleaning up the remains of cluster {existing.state.cluster_id}")
            existing.down()

        ray_binary()  # fail early, before anything starts
        if topology.gcs_fault_tolerance if gcs_fault_tolerance is None else gcs_fault_tolerance:
            redis.redis_binary()
        gcs_ft = topology.gcs_fault_tolerance if gcs_fault_tolerance is None else gcs_fault_tolerance
        if netns_mode and (reason := netns.unavailable()):
            raise SetupError(reason)
        rng = random.Random()
        cluster_id = f"ap{rng.randrange(16**6):06x}"
        prefix = netns.pick_subnet(rng) if netns_mode else ports.address_prefix(rng)
        base = ports.find_blocks(len(topology.nodes) + 2, rng)
        temp_root = f"/tmp/{cluster_id}"
        state = ClusterState(
            cluster_id=cluster_id,
            topology=topology.to_doc(),
            topology_source=topology.source,
            gcs_fault_tolerance=gcs_ft,
            temp_root=temp_root,
            base_port=base,
        )
        state.nodes[HEAD] = NodeState(
            name=HEAD, role="head", ip=f"{prefix}.2", ports=ports.node_ports(base, 1),
            temp_dir=f"{temp_root}/head", labels={"node": HEAD, "availproof-role": "head"},
            cpus=topology.head.cpus, memory_mb=topology.head.memory_mb,
            object_store_mb=topology.head.object_store_mb,
        )
        for i, node in enumerate(topology.nodes):
            state.nodes[node.name] = NodeState(
                name=node.name, role="worker", ip=f"{prefix}.{3 + i}", ports=ports.node_ports(base, 2 + i),
                temp_dir=f"{temp_root}/{node.name}", labels=node.ray_labels(), zone=node.zone,
                region=node.region, cpus=node.cpus, memory_mb=node.memory_mb,
                object_store_mb=node.object_store_mb,
            )
        if gcs_ft:  # in netns mode .1 is the bridge: Redis shares the head's namespace and address
            state.redis = RedisState(host=f"{prefix}.2" if netns_mode else f"{prefix}.1",
                                     port=ports.node_ports(base, 0)["gcs"], dir=str(cluster_dir / "redis"))
        if netns_mode:
            plan_netns(state, prefix)
        cluster = cls(cluster_dir, state, log)
        cluster._save()
        try:
            t0 = time.monotonic()
            if netns_mode:
                cluster._create_netns(prefix)
            if gcs_ft:
                cluster.start_redis()
            cluster.start_node(HEAD)
            cluster.start_nodes([n.name for n in topology.nodes])
            log(f"cluster {cluster_id} up in {time.monotonic() - t0:.1f} s")
        except BaseException:
            log("start failed: taking down what was started")
            cluster.down()
            raise
        return cluster

    def down(self) -> None:
        """Stop every process this cluster started and remove its files. Safe to repeat."""
        with self._lock:
            self.stop_front()
            for node in sorted(self.state.nodes.values(), key=lambda n: n.role == "head"):
                self._kill_session(node)
            if self.state.redis and self.state.redis.pid:
                procs.stop_pid(self.state.redis.pid, timeout=5, same=lambda pid: self._is_redis(pid))
                self.state.redis.pid = None
            self._remove_netns()
            shutil.rmtree(self.state.temp_root, ignore_errors=True)
            if self.state.redis:
                shutil.rmtree(self.state.redis.dir, ignore_errors=True)
            st.remove(self.cluster_dir)
            self.log(f"cluster {self.state.cluster_id} is down")

    def running(self) -> bool:
        """True when the head's GCS and raylet run (the cluster exists, whatever else is down)."""
        return self.core_alive(HEAD)

    def core_alive(self, name: str) -> bool:
        """The processes a node cannot work without: its raylet, and on the head the GCS."""
        cmds = [procs.cmdline(p) for p in self.node_processes(name)]
        need = ["raylet/raylet"] + (["gcs/gcs_server"] if self.node(name).role == "head" else [])
        return all(any(n in c for c in cmds) for n in need)

    # ------------------------------------------------------------------ queries
    @property
    def topology(self) -> topo.Topology:
        return topo.parse(self.state.topology, source=self.state.topology_source)

    def node(self, name: str) -> NodeState:
        try:
            return self.state.nodes[name]
        except KeyError:
            raise UsageError(f"no node {name!r} in cluster {self.state.cluster_id} "
                             f"(nodes: {', '.join(self.state.nodes)})") from None

    def nodes(self, *, zone: str | None = None, region: str | None = None, include_head: bool = False) -> list[NodeState]:
        """Nodes of one failure domain (all workers when no domain is named)."""
        out = [
            n for n in self.state.nodes.values()
            if (include_head or n.role == "worker")
            and (zone is None or n.zone == zone)
            and (region is None or n.region == region)
        ]
        if (zone or region) and not out:
            raise UsageError(f"no nodes in {'zone ' + zone if zone else 'region ' + region!s}")
        return out

    def serve_url(self, node: str = HEAD) -> str:
        n = self.node(node)
        return f"http://{n.ip}:{n.serve_port}"

    def proxy_urls(self) -> dict[str, str]:
        """Serve proxy URL of every worker node, by node name."""
        return {n.name: self.serve_url(n.name) for n in self.state.workers()}

    def node_processes(self, name: str) -> list[int]:
        n = self.node(name)
        return procs.session_members(n.sid) if n.sid else []

    def gcs_nodes(self, timeout: float = 3.0) -> list[dict] | None:
        """Nodes as the GCS sees them (dashboard REST API), or None when the head does not answer."""
        return ray_dashboard.nodes(self.state.dashboard_url, timeout)

    def status(self) -> list[NodeStatus]:
        seen: dict[str, str] = {}
        summary = self.gcs_nodes()
        if summary is not None:
            # Newest registration wins: a restarted node registers again with a new node id.
            for entry in sorted(summary, key=lambda e: e.get("raylet", {}).get("startTimeMs", 0) or 0):
                raylet = entry.get("raylet", {})
                ip = raylet.get("nodeManagerAddress") or entry.get("ip")
                port = raylet.get("nodeManagerPort")
                for n in self.state.nodes.values():
                    if n.ip == ip and (port is None or port == n.ports["node_manager"]):
                        seen[n.name] = raylet.get("state", "UNKNOWN")
        out = []
        for n in self.state.nodes.values():
            gcs_state = "UNKNOWN" if summary is None else seen.get(n.name, "ABSENT")
            out.append(NodeStatus(n.name, n.role, n.zone, n.region, n.ip,
                                  len(self.node_processes(n.name)), gcs_state, n.serve_port,
                                  core_alive=self.core_alive(n.name)))
        return out

    def redis_status(self) -> dict[str, str]:
        r = self.state.redis
        if r is None:
            return {"state": "none (GCS fault tolerance off)"}
        if not self.redis_alive():
            return {"state": "DOWN", "address": f"{r.host}:{r.port}"}
        info = redis.info(r.host, r.port)
        return {
            "state": "UP" if info else "NOT ANSWERING",
            "address": f"{r.host}:{r.port}",
            "pid": str(r.pid),
            "keys": info.get("dbsize", "?"),
            "memory": info.get("used_memory_human", "?"),
            "aof": "on" if info.get("aof_enabled") == "1" else "off",
        }

    def wait_healthy(self, timeout: float = 120.0, nodes: list[str] | None = None) -> None:
        """Block until the named nodes (default: all) are ALIVE in the GCS with live processes."""
        names = set(nodes or self.state.nodes)
        deadline = time.monotonic() + timeout
        last: list[NodeStatus] = []
        while time.monotonic() < deadline:
            last = [s for s in self.status() if s.name in names]
            if last and all(s.healthy for s in last):
                return
            time.sleep(0.5)
        bad = ", ".join(f"{s.name}={s.gcs_state}/{s.processes}p" for s in last if not s.healthy)
        raise ClusterError(f"nodes not healthy after {timeout:.0f} s: {bad}")


    # ------------------------------------------------------------------ environment
    def _child_env(self, extra: Iterable[str | None] = ()) -> dict[str, str]:
        """The environment for a process of this cluster: the rig's, without any secret variable
        (:mod:`chaos.system.secret_env`: declared, listed, ``extra``, or named in the state file before).
        The names go in the state (saved with the start that follows)."""
        drop = secret_env.names(self.state.secret_env + [n for n in extra if n])
        self.state.secret_env = sorted(drop)
        return secret_env.child_env(drop)

    # ------------------------------------------------------------------ persistence
    def _save(self) -> None:
        with self._lock:
            st.save(self._state, self.cluster_dir)
            self._mtime_ns = self._file_mtime()
