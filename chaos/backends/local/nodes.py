"""The nodes' processes of a local cluster: ``ray start`` for one node (its session, its ports, its
environment), starting several at once, killing a node, the head or the GCS alone; what
:class:`~chaos.backends.local.cluster.LocalCluster` does with them. Only the sessions
recorded in the state file are signalled.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from chaos.backends.local import netns, procs
from chaos.backends.local.state import NodeState
from chaos.base.errors import ClusterError, SetupError

HEAD = "head"
WORKER_RECONNECT_TIMEOUT_S = 600  # what KubeRay injects into workers with GCS FT
HEAD_START_ATTEMPTS = 3
AGENT_REGISTER_TIMEOUT_MS = 120_000
LATE_REGISTRATION_WAIT_S = 90.0


def ray_binary() -> str:
    candidate = Path(sys.executable).parent / "ray"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ray")
    if not found:
        raise SetupError("the `ray` command is not installed in this environment (pip install 'ray[serve]')")
    return found


class NodeProcesses:
    """Start and stop the nodes' ``ray start`` sessions.

    What it uses of the host class (:class:`~chaos.backends.local.cluster.LocalCluster`): ``state``, ``log``,
    ``_lock``, ``_save``, ``_child_env``, ``node``, ``node_processes``, ``core_alive``,
    ``topology``, ``status``, ``cluster_dir``.
    """

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
            # the node's name, which every process it starts inherits: the key of its device-loss marker (the nodes
            # share this machine's /tmp: serve_apps.device_loss)
            "AVAILPROOF_NODE": node.name,
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


def request_drain(gcs, node_id: str, name: str, message: str, deadline_s: float) -> None:
    """Ray's drain-node request for ``node_id`` through the GCS client ``gcs`` (what autoscaler v2 and a preemption
    notice use), reason PREEMPTION, its deadline ``deadline_s`` from now; Ray does not kill the node at the deadline.
    Raises ClusterError when the GCS refuses it."""
    from ray.core.generated import autoscaler_pb2

    from chaos.base.errors import ClusterError

    accepted, why = gcs.drain_node(node_id, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
                                   message, int((time.time() + deadline_s) * 1000))
    if not accepted:
        raise ClusterError(f"the GCS refused to drain {name}: {why}")
