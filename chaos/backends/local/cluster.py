"""A real multi-node Ray cluster on one machine: one raylet per topology node, GCS state in Redis.

Each node is one `ray start` launched as a session leader, on its own loopback address and
its own block of ports; the head holds the GCS, which keeps its tables in an external
Redis when the topology asks for GCS fault tolerance (``RAY_REDIS_ADDRESS`` and
``RAY_external_storage_namespace``, the mechanism of Ray 2.60). Workers get
``RAY_gcs_rpc_server_reconnect_timeout_s=600`` as KubeRay sets it, so they outlive a
head restart.

This class is the only place that starts or signals cluster processes. Faults use its
methods (kill/restart a node, the head, Redis; partition/heal a zone), which act only on
the sessions and PIDs recorded in the state file, and on a recorded PID only while it is still
the process recorded (Redis: ``redis-server`` with the cluster's address, leading its session;
HAProxy: :func:`chaos.backends.local.haproxy.is_ours`): once a process exited, its PID can be
any other.

Every process it starts gets the rig's environment without the variables that hold secrets
(the bearer tokens: :mod:`chaos.secret_env`); the names are kept in the state file, so a later
handle (``availproof recover``) drops them too.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from chaos import ray_dashboard, secret_env, topology as topo
from chaos.backends.local import netns, ports, procs, redis
from chaos.backends.local import state as st
from chaos.backends.local.state import ClusterState, NodeState, RedisState
from chaos.errors import ClusterError, SetupError, UsageError

HEAD = "head"
WORKER_RECONNECT_TIMEOUT_S = 600  # what KubeRay injects into workers with GCS FT
HEAD_START_ATTEMPTS = 3
# Measured with Ray 2.60: the GCS exits about 4 s after its Redis connection breaks, even when
# Redis is back within 0.1 s. After a Redis restart, watch the head this long (from the kill).
GCS_EXIT_AFTER_REDIS_S = 10.0
AGENT_REGISTER_TIMEOUT_MS = 120_000
LATE_REGISTRATION_WAIT_S = 90.0


def default_cluster_dir() -> Path:
    """Where the state of the default local cluster lives (override with AVAILPROOF_HOME)."""
    home = Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof"))
    return home / "cluster"


def ray_binary() -> str:
    candidate = Path(sys.executable).parent / "ray"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ray")
    if not found:
        raise SetupError("the `ray` command is not installed in this environment (pip install 'ray[serve]')")
    return found


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


class LocalCluster:
    """Handle on a local cluster described by a state file in ``cluster_dir``."""

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
            _plan_netns(state, prefix)
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

    # ------------------------------------------------------------------ node processes
    def start_node(self, name: str) -> None:
        """Start (or restart) one node; the head is retried with clean-up, as a rig must."""
        with self._lock:
            node = self.node(name)
            if node.sid and self.core_alive(name):
                self.log(f"{name} is already running")
                return
            if node.sid:  # leftovers of a node whose raylet/GCS died: clear them first
                self._kill_session(node)
            attempts = HEAD_START_ATTEMPTS if node.role == "head" else 2
            for attempt in range(1, attempts + 1):
                try:
                    self._ray_start(node)
                    break
                except ClusterError as e:
                    if attempt == attempts:
                        raise
                    self.log(f"{name}: start attempt {attempt} failed ({e}); cleaning up and retrying")

    def start_nodes(self, names: list[str]) -> None:
        """Start several nodes at once (one thread each); the first error is raised after all tried."""
        errors: list[BaseException] = []

        def one(n: str):
            try:
                self.start_node(n)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=one, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def kill_node(self, name: str, sig: int = signal.SIGKILL) -> list[int]:
        """Kill every process of one node (its whole session). Returns the PIDs signalled."""
        with self._lock:
            node = self.node(name)
            pids = self._kill_session(node, sig)
            self.log(f"killed {name}: {len(pids)} processes")
            return pids

    def kill_head(self) -> list[int]:
        return self.kill_node(HEAD)

    def kill_gcs(self) -> list[int]:
        """SIGKILL the head's gcs_server alone (the rest of the head keeps running)."""
        with self._lock:
            pids = [p for p in self.node_processes(HEAD) if "gcs/gcs_server" in procs.cmdline(p)]
            if not pids:
                raise ClusterError("the head has no gcs_server process to kill")
            self.log(f"killed the head's gcs_server (pid {', '.join(map(str, pids))})")
            return procs.signal_pids(pids, signal.SIGKILL)

    def restart_head(self) -> None:
        self.start_node(HEAD)

    def _kill_session(self, node: NodeState, sig: int = signal.SIGKILL) -> list[int]:
        if not node.sid:
            return []
        pids = procs.kill_session(node.sid, sig)
        if sig == signal.SIGKILL:
            node.sid = None
            self._save()
        return pids

    def _ray_start(self, node: NodeState) -> None:
        s = self.state
        p = node.ports
        Path(node.temp_dir).mkdir(parents=True, exist_ok=True)
        # `ray start --head` refuses while this file points at a GCS it believes is up.
        Path(node.temp_dir, "ray_current_cluster").unlink(missing_ok=True)
        args = [
            ray_binary(), "start",
            f"--node-ip-address={node.ip}",
            f"--node-manager-port={p['node_manager']}",
            f"--object-manager-port={p['object_manager']}",
            f"--metrics-export-port={p['metrics_export']}",
            f"--dashboard-agent-listen-port={p['dashboard_agent_listen']}",
            f"--dashboard-agent-grpc-port={p['dashboard_agent_grpc']}",
            f"--runtime-env-agent-port={p['runtime_env_agent']}",
            f"--min-worker-port={p['min_worker']}",
            f"--max-worker-port={p['max_worker']}",
            f"--num-cpus={node.cpus}",
            f"--memory={node.memory_mb * 1024 * 1024}",
            f"--object-store-memory={node.object_store_mb * 1024 * 1024}",
            f"--temp-dir={node.temp_dir}",
            f"--labels={','.join(f'{k}={v}' for k, v in node.labels.items())}",
            "--disable-usage-stats",
            "--log-style=record",
        ]
        env = self._child_env()
        env.update({
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_gcs_rpc_server_reconnect_timeout_s": str(WORKER_RECONNECT_TIMEOUT_S),
            # Under CPU contention the dashboard agent can take longer than the raylet's default
            # wait for its ports, and the raylet aborts (WaitForDashboardAgentPorts).
            "RAY_agent_register_timeout_ms": str(AGENT_REGISTER_TIMEOUT_MS),
            # One authentication mode for every node, said explicitly. Left unset, Ray 2.60's
            # `ray start --head` turns token authentication on when a ~/.ray/auth_token exists (any
            # earlier `ray.init()` on the machine writes one), while `ray start --address` stays
            # without: the workers are then refused by their own head (InvalidAuthToken). The
            # user's own RAY_AUTH_MODE, when set, is kept (every node inherits it).
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
        })
        env.pop("RAY_num_workers_soft_limit", None)
        if self.topology.idle_workers_kept is not None:
            env["RAY_num_workers_soft_limit"] = str(self.topology.idle_workers_kept)
        if node.role == "head":
            args += [
                "--head",
                f"--port={p['gcs']}",
                "--include-dashboard=true",
                f"--dashboard-host={node.ip}",
                f"--dashboard-port={p['dashboard']}",
                f"--ray-client-server-port={p['ray_client_server']}",
            ]
            topo_ = self.topology
            env.update({
                "DASHBOARD_METRIC_PORT": str(p["dashboard_metrics"]),
                "AUTOSCALER_METRIC_PORT": str(p["autoscaler_metrics"]),
                "RAY_health_check_period_ms": str(topo_.health_check.period_ms),
                "RAY_health_check_failure_threshold": str(topo_.health_check.failure_threshold),
            })
            env.pop("RAY_REDIS_ADDRESS", None)
            if s.gcs_fault_tolerance and s.redis:
                env["RAY_REDIS_ADDRESS"] = f"{s.redis.host}:{s.redis.port}"
                env["RAY_external_storage_namespace"] = s.cluster_id
        else:
            args.append(f"--address={s.gcs_address}")
            env["RAY_SERVE_WORKER_PROXY_HTTP_PORT"] = str(p["serve_http"])
            env["RAY_SERVE_WORKER_PROXY_GRPC_PORT"] = str(p["serve_grpc"])
        logs = self.cluster_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        node.starts += 1
        logfile = logs / f"{node.name}.start-{node.starts}.log"
        args = netns.exec_prefix(node.netns) + args
        with open(logfile, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        node.sid = proc.pid  # the session id of everything the node starts
        self._save()
        t0 = time.monotonic()
        try:
            rc = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            rc = None
        if rc not in (0, None) and self._raylet_alive(node):
            # `ray start` gives up after a fixed 30 s for the raylet to register; under load the
            # raylet may still be on its way: give it a while longer before calling it failed.
            self.log(f"{node.name}: `ray start` gave up early; waiting for its raylet to register")
            if self._wait_registered(node, LATE_REGISTRATION_WAIT_S):
                rc = 0
        if rc != 0 or not procs.session_members(node.sid):
            tail = logfile.read_text(errors="replace").strip().splitlines()[-3:]
            self._kill_session(node)
            reason = "timed out" if rc is None else f"exit code {rc}"
            raise ClusterError(f"`ray start` for {node.name} failed ({reason}): {' | '.join(tail)[-400:]}")
        self.log(f"{node.name} started on {node.ip} in {time.monotonic() - t0:.1f} s")

    def _raylet_alive(self, node: NodeState) -> bool:
        return any("raylet/raylet" in procs.cmdline(p) for p in procs.session_members(node.sid or 0))

    def _wait_registered(self, node: NodeState, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._raylet_alive(node):
                return False
            if any(s.name == node.name and s.gcs_state == "ALIVE" for s in self.status()):
                return True
            time.sleep(1.0)
        return False

    # ------------------------------------------------------------------ Redis
    def start_redis(self) -> bool:
        """Bring Redis back (same port, same append-only file), and the GCS with it.

        A GCS whose Redis went away exits a few seconds later, even when Redis is back at once:
        watch the head until ``GCS_EXIT_AFTER_REDIS_S`` after the kill and restart it if its GCS
        exited (as a kubelet restarts the head container). Returns whether the GCS had exited.
        """
        with self._lock:
            r = self.state.redis
            if r is None:
                raise UsageError("this cluster runs without GCS fault tolerance: it has no Redis")
            if self.redis_alive():
                return False
            r.pid = redis.start(r.host, r.port, Path(r.dir), prefix=netns.exec_prefix(self.state.head.netns),
                                env=self._child_env())
            self._save()
            self.log(f"redis up on {r.host}:{r.port} (pid {r.pid})")
            head = self.state.head
            if head.sid is None:  # the cluster is coming up: there is no GCS yet
                return False
            since = self._redis_killed_at if self._redis_killed_at is not None else time.monotonic()
            self._redis_killed_at = None
            deadline = since + GCS_EXIT_AFTER_REDIS_S
            while self.core_alive(HEAD) and time.monotonic() < deadline:
                time.sleep(0.25)
            if self.core_alive(HEAD):
                return False
            self.log("the GCS exited after losing Redis: restarting the head")
            self.restart_head()
            return True

    def redis_alive(self) -> bool:
        """Redis runs: the recorded PID is alive and still this cluster's redis-server."""
        r = self.state.redis
        return bool(r and r.pid and procs.alive(r.pid) and self._is_redis(r.pid))

    def _is_redis(self, pid: int) -> bool:
        """``pid`` is this cluster's Redis: ``redis-server`` whose title names the cluster's address
        (Redis rewrites its title to ``redis-server HOST:PORT``), leading the session it was started in."""
        r = self.state.redis
        return (r is not None and procs.comm(pid) == "redis-server" and f"{r.host}:{r.port}" in procs.cmdline(pid)
                and procs.session_of(pid) == pid)

    def kill_redis(self) -> list[int]:
        with self._lock:
            r = self.state.redis
            if r is None or not r.pid:
                return []
            if not self.redis_alive():
                self.log(f"redis (pid {r.pid}) is not running: nothing to kill")
                r.pid = None
                self._save()
                return []
            sent = procs.signal_pids([r.pid], signal.SIGKILL)
            self._redis_killed_at = time.monotonic()
            procs.wait_gone([r.pid], 5)
            r.pid = None
            self._save()
            self.log(f"killed redis: {sent}")
            return sent

    # ------------------------------------------------------------------ network
    def partitioned_zones(self) -> list[str]:
        return list(self.state.partitioned)

    def partition_zone(self, zone: str) -> None:
        """Cut ``zone`` off: its namespace's link to the bridge goes down (packets are dropped)."""
        if not self.state.netns_mode:
            raise UsageError("a zone partition needs per-zone network namespaces; this cluster runs in "
                             "loopback-only mode (bring it up with `availproof cluster up --netns`, as root)")
        with self._lock:
            link = self._zone_link(zone)
            netns.set_link(link, up=False)
            if zone not in self.state.partitioned:
                self.state.partitioned.append(zone)
            self._save()
            self.log(f"partitioned {zone} (link {link} down)")

    def heal_zone(self, zone: str) -> None:
        if not self.state.netns_mode:
            return
        with self._lock:
            link = self._zone_link(zone)
            netns.set_link(link, up=True)
            netns.flush_neighbours(list(_domain_namespaces(self.state).values()))
            self.state.partitioned = [z for z in self.state.partitioned if z != zone]
            self._save()
            self.log(f"healed {zone} (link {link} up)")

    def _zone_link(self, zone: str) -> str:
        try:
            return self.state.links[zone]
        except KeyError:
            raise UsageError(f"no zone {zone!r} in cluster {self.state.cluster_id} "
                             f"(zones: {', '.join(z for z in self.state.links if z != netns.HEAD_DOMAIN)})") from None

    def _create_netns(self, prefix: str) -> None:
        by_ns: dict[str, list[str]] = {}
        for n in self.state.nodes.values():
            by_ns.setdefault(n.netns, []).append(n.ip)
        domains = [netns.Domain(namespace=ns, link=self.state.links[domain], addresses=by_ns.get(ns, []))
                   for domain, ns in _domain_namespaces(self.state).items()]
        netns.create(self.state.bridge, prefix, domains)
        self.log(f"network namespaces: {', '.join(d.namespace for d in domains)} on bridge "
                 f"{self.state.bridge} ({prefix}.0/24)")

    def _remove_netns(self) -> None:
        if self.state.netns_mode:
            netns.remove(self.state.bridge, list(_domain_namespaces(self.state).values()))

    # ------------------------------------------------------------------ the front door
    @property
    def front(self):
        """The rig's HAProxy as recorded in the state file (:class:`~chaos.backends.local.haproxy.FrontState`), or None."""
        from chaos.backends.local.haproxy import FrontState

        return FrontState(**self.state.front) if self.state.front else None

    def start_front(self, shape: str, settings, token: str | None = None):
        """Start the front door (replacing one of another shape or settings) in front of every
        worker's Serve proxy; its PID goes in the state file."""
        from chaos import frontdoor
        from chaos.backends.local import haproxy

        with self._lock:
            self.stop_front()
            servers = [frontdoor.Server(n.name, n.zone, n.ip, n.serve_port) for n in self.state.workers()]
            front = haproxy.start(shape, servers, settings, self.cluster_dir, token=token,
                                  env=self._child_env([settings.token_env]))
            self.state.front = front.to_json()
            self._save()
            self.log(f"front door: HAProxy {shape} (pid {front.pid}) at "
                     f"{', '.join(u for _, u, _ in front.urls())}; stats {front.metrics_url}")
            return front

    def stop_front(self) -> None:
        """Stop the rig's HAProxy, if any (by its PID, while it is still this front door's
        HAProxy), and forget it."""
        from chaos.backends.local import haproxy

        with self._lock:
            front = self.front
            if front is None:
                return
            haproxy.stop(front, log=self.log)
            self.state.front = None
            self._save()
            self.log(f"front door stopped (pid {front.pid})")

    # ------------------------------------------------------------------ environment
    def _child_env(self, extra: Iterable[str | None] = ()) -> dict[str, str]:
        """The environment for a process of this cluster: the rig's, without any secret variable
        (:mod:`chaos.secret_env`: declared, listed, ``extra``, or named in the state file before).
        The names go in the state (saved with the start that follows)."""
        drop = secret_env.names(self.state.secret_env + [n for n in extra if n])
        self.state.secret_env = sorted(drop)
        return secret_env.child_env(drop)

    # ------------------------------------------------------------------ persistence
    def _save(self) -> None:
        with self._lock:
            st.save(self._state, self.cluster_dir)
            self._mtime_ns = self._file_mtime()


def _domain_namespaces(state: ClusterState) -> dict[str, str]:
    """Failure domain ("head" or a zone) -> its namespace, in a stable order."""
    out = {netns.HEAD_DOMAIN: state.head.netns}
    for n in state.workers():
        out.setdefault(n.zone, n.netns)
    return out


def _plan_netns(state: ClusterState, prefix: str) -> None:
    """Name the bridge, one namespace and link per domain, and put each node in its domain's."""
    domains = [netns.HEAD_DOMAIN] + sorted({n.zone for n in state.workers()})
    state.netns_mode = True
    state.bridge, names = netns.names(state.cluster_id, domains)
    state.links = {d: link for d, (_, link) in names.items()}
    for n in state.nodes.values():
        n.netns = names[netns.HEAD_DOMAIN if n.role == "head" else n.zone][0]
