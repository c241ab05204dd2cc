"""The local backend: the fault interface (:class:`chaos.backends.base.Backend`) over a :class:`LocalCluster`.

Every process it signals is first checked to belong to a session recorded in the cluster's
state file (the allowlist): a replica PID read from Serve is refused if it is anything else.
"""

from __future__ import annotations

import signal
from typing import Callable

from chaos.system import placement, start_watch
from chaos.backends import base, engine_faults
from chaos.backends.local import device, effect, engines, procs, ranks, supervisor, throttle, weights
from chaos.backends.local.nodes import request_drain
from chaos.backends.local.scopes import IMPLEMENTATIONS, Restore
from chaos.backends.local.cluster import HEAD, LocalCluster
from chaos.base.errors import ClusterError, SetupError, UsageError
from serve_apps import engine_faults as app_engine_faults


SUPERVISE_AFTER_HEAL_S = 60.0  # how long a healed zone's nodes are watched (a raylet exited 24 s after a heal)


class LocalBackend(device.Methods, ranks.Methods, base.ByScope):  # device-loss's, rank faults' methods
    name = "local"
    # beyond the scopes it implements (chaos.backends.base.capabilities_of): the rig's own
    # front door, clusters without GCS fault tolerance, load to the head
    capabilities = frozenset({base.FRONT_DOOR, base.NO_GCS_FT, base.LOAD_TO_HEAD})
    # its scopes: their plans and proofs (chaos.backends.local.scopes); plan and effect_checks go there
    implementations = IMPLEMENTATIONS

    def __init__(self, cluster: LocalCluster, run_id: str | None = None):
        self.cluster = cluster
        self.cut_probes: dict[str, effect.CutProbe] = {}  # zone -> the connection opened before its cut
        self.duty_cycles: list[throttle.DutyCycle] = []  # engine-stutter's, until the heal stops them
        self.supervisors: list[supervisor.NodeSupervisor] = []  # a healed zone's nodes, restarted if they die
        self.run_id = run_id  # what this run's wedges carry (and prepare's)

    # ---------------------------------------------------------------- domains
    def zones(self) -> list[str]:
        return self.cluster.topology.zones

    def regions(self) -> list[str]:
        return self.cluster.topology.regions

    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]:
        return [n.name for n in self.cluster.nodes(zone=zone, region=region)]

    def zone_of(self, node: str) -> str | None:
        return self.cluster.node(node).zone

    def zones_in_region(self, region: str) -> list[str]:
        return sorted({n.zone for n in self.cluster.nodes(region=region)})

    def targets(self) -> list[tuple[str, str, str | None, str | None]]:
        """(name, proxy URL, zone, region) of every worker's Serve proxy."""
        return [(n.name, self.cluster.serve_url(n.name), n.zone, n.region) for n in self.cluster.state.workers()]

    def head_target(self) -> tuple[str, str, str | None, str | None]:
        return (HEAD, self.cluster.serve_url(HEAD), None, None)

    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]:
        """(name, URL, zone, region) of every listener of the front door (zone: the one a zonal
        balancer prefers; None for one balancer over all zones)."""
        front = self.cluster.front
        if front is None:
            raise ClusterError("no front door is running (availproof starts it for experiments with front lb/zonal-lb)")
        region_of = {n.zone: n.region for n in self.cluster.state.workers()}
        return [(name, url, zone, region_of.get(zone)) for name, url, zone in front.urls()]

    def front_door(self) -> dict:
        """The front door in the run's environment: its shape, settings and listeners; ``direct``
        when the client sends to the proxies itself."""
        front = self.cluster.front
        if front is None:
            return {"shape": "direct", "what": "the client round-robins over the zone proxies itself, with no "
                                                "health checks: a dead proxy keeps its share of the traffic"}
        settings = dict(front.settings)
        return {"shape": front.shape, "what": f"the rig's HAProxy ({front.shape}), active HTTP checks of "
                                               f"/-/healthz on every zone proxy", "settings": settings,
                "listeners": [u for _, u, _ in front.urls()], "metrics_url": front.metrics_url,
                "ca_bundle": front.ca_bundle, "pid": front.pid}

    def own_hosts(self) -> tuple[str, ...]:
        """Addresses the rig itself created (its network namespaces) that the harness may load."""
        s = self.cluster.state
        return tuple(n.ip for n in s.nodes.values()) if s.netns_mode else ()

    def describe(self) -> dict:
        s = self.cluster.state
        return {"backend": "local", "topology": s.topology.get("name"), "gcs_fault_tolerance": s.gcs_fault_tolerance,
                "network": "netns" if s.netns_mode else "loopback"}

    def topology_doc(self) -> dict:
        return self.cluster.state.topology

    @property
    def dashboard_url(self) -> str:
        return self.cluster.state.dashboard_url

    # ---------------------------------------------------------------- nodes
    def kill_node(self, node: str) -> list[int]:
        return self.cluster.kill_node(node)

    def start_node(self, node: str) -> None:
        self.cluster.start_node(node)

    def kill_zones(self, zones: list[str]) -> list[int]:
        """Zone (or region) loss: kill every node of ``zones``, back to back; returns the PIDs signalled."""
        return [pid for z in zones for n in self.nodes_in(zone=z) for pid in self.cluster.kill_node(n)]

    def restore_zones(self, zones: list[str]) -> None:
        """Restart every node of ``zones``."""
        for z in zones:
            for n in self.nodes_in(zone=z):
                self.cluster.start_node(n)

    def kill_head(self, method: str = "node") -> list[int]:
        return self.cluster.kill_gcs() if method == "gcs" else self.cluster.kill_head()

    def restart_head(self) -> None:
        self.cluster.restart_head()

    def kill_redis(self) -> list[int]:
        return self.cluster.kill_redis()

    def start_redis(self) -> bool:
        return self.cluster.start_redis()

    def head_alive(self) -> bool:
        return self.cluster.core_alive(HEAD)

    def partition_zone(self, zone: str, deadline_s: float | None = None) -> None:
        """Cut ``zone`` off, with a connection across the cut opened just before it (the effect's proof).
        (``deadline_s``: the cut outliving a crashed run is undone by `availproof recover`, not by a clock.)"""
        node = self.cluster.nodes(zone=zone)[0]
        probe = effect.CutProbe(node.ip, node.serve_port).open()
        self.cut_probes[zone] = probe
        self.cluster.partition_zone(zone)

    def heal_zone(self, zone: str, supervise: bool = True) -> None:
        """The cut healed; the zone's nodes then supervised for a while (:mod:`chaos.backends.local.supervisor`:
        a node the GCS declares dead after the heal is restarted, as KubeRay's kubelet would); not by the
        backend's own heal (``supervise`` False), which restarts the zone's nodes where down itself."""
        self.cluster.heal_zone(zone)
        probe = self.cut_probes.pop(zone, None)
        if probe is not None:
            probe.close()
        if not supervise:
            return
        watch = supervisor.NodeSupervisor(self.cluster, self.nodes_in(zone=zone), for_s=SUPERVISE_AFTER_HEAL_S)
        watch.start()
        self.supervisors.append(watch)

    def prepare(self, run_id: str, scope: str, faults: list[dict] | None = None) -> None:
        """Before any fault: a run that crashed may have left a partition or stopped processes; refuse
        to start on such a cluster (one line) rather than measure a fault on top of another. (Nothing to
        ask permission for: the rig started every process it signals; ``faults`` is not needed here.)"""
        self.run_id = run_id  # what this run's wedges are marked with (release_engine ends only those)
        left = [f"partition of {z}" for z in self.cluster.partitioned_zones()]
        left += [f"stopped process {p}" for p in self.stopped_processes()]
        left += [f"wedged engine {p}" for p in engines.wedged(self.cluster_processes())]
        left += [f"engine {p}'s fault request never taken" for p in engines.pending(self.cluster_processes())]
        left += device.left_markers()  # a device-loss marker left: every new engine on its node would fail
        if left:
            raise SetupError(f"the cluster still has a fault of an earlier run in place ({', '.join(left)}): "
                             "run `availproof recover` first")

    # ---------------------------------------------------------------- replicas
    def replicas(self, state: str | None = "RUNNING") -> list[placement.Replica]:
        """Serve's replicas in ``state`` (None: all); :class:`~chaos.system.placement.PlacementUnknown` when
        the dashboard does not answer (unknown, not none)."""
        return [r for r in placement.replicas(self.cluster) if state is None or r.state == state]

    def pick_replica(self, zone: str | None = None, replica_id: str | None = None,
                     deployment: str | None = None) -> placement.Replica:
        return placement.pick(self.replicas(), zone=zone, replica_id=replica_id, deployment=deployment)

    def _owned(self, pid: int | None) -> int:
        """Return ``pid`` if it belongs to a node session of this cluster; refuse otherwise."""
        if not pid or not procs.alive(pid):
            raise ClusterError(f"process {pid} is not running")
        if procs.session_of(pid) not in {n.sid for n in self.cluster.state.nodes.values() if n.sid}:
            raise UsageError(f"process {pid} is not part of cluster {self.cluster.state.cluster_id}: refused")
        return pid

    def replica_killer(self, r: placement.Replica, method: str) -> Callable[[], list[int]]:
        """Everything but the kill itself done; the returned callable kills the replica."""
        pid = self._owned(r.pid)
        if method == "sigkill":
            return lambda: procs.signal_pids([pid], signal.SIGKILL)
        if method == "actor":
            from chaos.system.ray_actor import ActorKiller

            killer = ActorKiller(self.cluster.state.gcs_address, r.actor_name)

            def kill() -> list[int]:
                try:
                    killer.kill()
                finally:
                    killer.close()
                return [pid]

            kill.disarm = killer.close  # never fired: the connected driver ended (chaos.scopes.replica.disarm)
            return kill
        raise UsageError(f"replica kill method {method!r} is not available on the local backend (sigkill, actor)")

    def replica_ongoing(self, r: placement.Replica, at_least: int, wait_s: float) -> int:  # chaos.system.replica_ongoing
        from chaos.system.replica_ongoing import wait_local
        return wait_local(self.cluster.state.gcs_address, r.actor_name, r.replica_id, at_least, wait_s)

    def engine_children(self, r: placement.Replica, name: str = "EngineCore") -> list[int]:
        """The engine processes of a replica: its children whose command line says ``name``
        (``EngineCore``: vLLM's ``VLLM::EngineCore`` and the stream target's ``availproof::EngineCore``)."""
        pid = self._owned(r.pid)
        return [p for p in procs.session_members(procs.session_of(pid))
                if procs.parent(p) == pid and name in procs.cmdline(p) + procs.comm(p)]

    def engine_pids(self, r: placement.Replica, to: str = "stop") -> list[int]:
        """The replica's engine processes (:meth:`engine_children`), never the replica itself: what an engine
        hang stops, an engine crash kills, an engine error signals and a straggler's duty cycle throttles.
        Refused for a replica without an engine child (there is no engine apart from it)."""
        engines = self.engine_children(r)
        if not engines:
            raise ClusterError(f"replica {r.replica_id} (pid {r.pid}) has no engine child process to {to}")
        return engines

    def processes_left(self, node: str | None, pids: list[int]) -> dict[int, float | None]:
        """One look (/proc): those of ``pids`` still alive, a zombie counting as gone, each with its resident memory
        in MB (VmRSS; None: unreadable). ``node`` is not needed here: every node's processes are this host's."""
        return procs.left([int(p) for p in pids])

    def crash_engine(self, r: placement.Replica) -> list[int]:
        """SIGKILL the replica's engine process(es) and nothing else: the replica's own process lives on."""
        return procs.signal_pids(self.engine_pids(r, "crash"), signal.SIGKILL)

    def pause_engine(self, r: placement.Replica) -> list[int]:
        return procs.signal_pids(self.engine_pids(r), signal.SIGSTOP)

    def error_engine(self, r: placement.Replica) -> Callable[[], list[int]]:
        return engines.error(self, r)

    def wedge_engine(self, r: placement.Replica, spin: bool = False) -> Callable[[], list[int]]:
        return engines.wedge(self, r, spin)

    def garble_engine(self, r: placement.Replica) -> Callable[[], list[int]]:
        return engines.hold(self, r, "garbage")

    def stall_engine(self, r: placement.Replica) -> Callable[[], list[int]]:
        return engines.hold(self, r, "stall")

    def slow_engine(self, r: placement.Replica, factor: float, hold_s: float | None = None) -> Callable[[], list[int]]:
        return engines.hold(self, r, "slow", factor, hold_s)

    def weights_breaker(self, r: placement.Replica) -> Callable[[str], dict]:  # restart-fails (.weights)
        return weights.breaker(self, r)

    def restore_weights(self, fault: dict) -> dict:
        return weights.restore(self, fault)

    def replica_states(self, deployment: str | None) -> dict[str, str] | None:  # restart-fails' hold
        return start_watch.replica_states(self.dashboard_url, deployment)

    def release_engine(self, pids: list[int], fault: str = "wedge") -> list[dict]:
        return engines.release(self.run_id, pids, fault)

    def stutter_engine(self, r: placement.Replica, factor: float, period_s: float, duration_s: float) -> list[int]:
        """Throttle the replica's engine process(es) by a duty cycle of SIGSTOP and SIGCONT, a thread of the
        rig's (:class:`chaos.backends.local.throttle.DutyCycle`) that :meth:`resume_engine` stops; it ends by
        itself a margin after ``duration_s``."""
        cycle = throttle.DutyCycle(self.engine_pids(r, "slow down"),
                                   engine_faults.Throttle(factor, period_s, duration_s))
        cycle.start()
        self.duty_cycles.append(cycle)
        return list(cycle.pids)

    def resume_engine(self, pids: list[int]) -> list[int]:
        """SIGCONT each stopped process still there; first the duty cycles throttling any of them stopped."""
        cycles = getattr(self, "duty_cycles", [])
        for cycle in [c for c in cycles if c.covers(pids)]:
            cycle.stop()
            cycles.remove(cycle)
        return procs.signal_pids([self._owned(p) for p in pids if procs.alive(p)], signal.SIGCONT)

    def lose_accelerator(self, r: placement.Replica, acknowledge_other_gpu_pods: bool = False) -> Callable[[], dict]:
        """No accelerator here: the scope is not one this backend registers (the run is refused when it opens,
        :data:`chaos.backends.base.CAPABILITY_TEXT`); called anyway, refused the same way."""
        raise UsageError("the local backend cannot run this: "
                         + base.CAPABILITY_TEXT[base.scope_capability("accelerator")])

    def hold_accelerator(self, fault: dict) -> dict:
        return {"check": "the device plugin kept off", "ok": False, "seen": "no accelerator on the local backend"}

    def restore_accelerator(self, node: str, wait_s: float | None = None, fault: dict | None = None) -> dict:
        return {"node": node, "note": "no accelerator on the local backend: nothing to restore"}

    # ---------------------------------------------------------------- health
    def cluster_processes(self) -> list[int]:
        """Every process of the cluster's nodes' sessions."""
        return [p for n in self.cluster.state.nodes.values() if n.sid for p in procs.session_members(n.sid)]

    def stopped_processes(self) -> list[int]:
        return [p for p in self.cluster_processes() if procs.state(p) in ("T", "t")]

    def heal(self, faults: list[dict], timeout: float = 180.0) -> dict:
        """Heal what ``faults`` (this run's, from :meth:`chaos.scopes.faults.Marker.unhealed`) broke, and
        nothing else: what each one's scope restores here (:class:`chaos.backends.local.scopes.Restore`:
        engines resumed, zones' partitions healed, Redis and the head restarted if a head or Redis fault
        left them down, nodes (node, drain; every node of a lost zone or region) restarted where down);
        then wait for health. A head fault's consequence is the whole cluster's (without GCS fault
        tolerance no worker is known to the new GCS), so after one every worker is checked."""
        self.stop_supervisors()
        want = sum(self.restores(faults), Restore())
        done: dict[str, list] = {"resumed": self.resume_engine(want.resume)}
        for f in want.release:  # what each wedge (garbage, stall) was at the run's end, into the fault (its detail)
            kind = engine_faults.marked_fault(f.get("scope"))
            ranks.hold_to_heal(self, f)  # a rank-hang's proof looked at once more first (never raises)
            f[f"{kind}_at_end"] = self.release_engine(list(f.get("pids") or []), kind)
            done.setdefault("released", []).extend(f[f"{kind}_at_end"])
        app_engine_faults.remove_tombstones(want.tombstones)  # an engine-error's record, read by its proof
        for f in want.weights:  # restart-fails not restored by its outage: the original back where still the fault's
            f["weights_restored"] = self.restore_weights(f)
            done.setdefault("weights", []).append(f["weights_restored"])
        device.heal(self, want.devices, done)  # device-loss: the marker removed, the cordon undone, where still ours
        return self._restore(done, partitions=[z for z in self.cluster.partitioned_zones() if z in want.partitions],
                             redis=want.redis, head=want.head, nodes=sorted(want.nodes),
                             check=None if want.head else set(want.nodes), timeout=timeout)

    def heal_all(self, timeout: float = 180.0) -> dict:
        """Undo whatever is broken (``availproof recover`` after a killed run): resume stopped
        processes, release engines' held faults (their marks removed, requests never taken made void),
        heal partitions, restart what is down."""
        for cycle in getattr(self, "duty_cycles", []):  # a straggler's duty cycle first: it would stop them again
            cycle.stop()
        self.stop_supervisors()
        done: dict[str, list] = {"resumed": procs.signal_pids(self.stopped_processes(), signal.SIGCONT),
                                 "released": engines.unwedge(self.cluster_processes()),
                                 "voided": engines.void_requests(self.cluster_processes())}  # armed, never taken
        done["weights"] = [w for w in [weights.recover(self)] if w]  # a restart-fails run killed before its restore
        done["devices"] = [d for d in [device.recover(self)] if d]  # device-loss markers and cordons left
        return self._restore(done, partitions=self.cluster.partitioned_zones(), redis=True, head=True,
                             nodes=[n.name for n in self.cluster.state.workers()], check=None, timeout=timeout)

    def stop_supervisors(self) -> list[str]:
        """Stop supervising healed zones (before any restart of the heal's own); the nodes they restarted."""
        restarted = []
        for watch in getattr(self, "supervisors", []):
            watch.stop()
            restarted += watch.restarted
        self.supervisors = []
        return restarted

    def _restore(self, done: dict[str, list], partitions: list[str], redis: bool, head: bool, nodes: list[str],
                 check: set[str] | None, timeout: float) -> dict:
        """Heal ``partitions``; restart Redis, the head and ``nodes`` where down (as asked); restart
        the workers of ``check`` (None: every worker) that the GCS still holds DEAD or ABSENT; wait
        for health."""
        done.update(healed=[], started=[])
        for zone in partitions:
            self.heal_zone(zone, supervise=False)
            done["healed"].append(zone)
        r = self.cluster.state.redis
        if redis and r is not None and not self.cluster.redis_alive():
            self.cluster.start_redis()
            done["started"].append("redis")
        if head and not self.cluster.core_alive(HEAD):
            self.cluster.restart_head()
            done["started"].append(HEAD)
        down = [n for n in nodes if not self.cluster.core_alive(n)]
        if down:
            self.cluster.start_nodes(down)
            done["started"] += down
        # A node the GCS declared dead cannot rejoin, and after a head restart without GCS fault
        # tolerance no worker is known to the new GCS: give reconnecting nodes a moment, then
        # restart whatever is still DEAD or ABSENT. Without fault tolerance nothing that was running
        # before can reconnect, so no moment is given (only the nodes just started are waited for).
        stuck = [] if self.cluster.state.gcs_fault_tolerance else self._stuck_workers(check, exclude=set(down))
        if not stuck:
            try:
                self.cluster.wait_healthy(timeout=20)
            except ClusterError:
                stuck = self._stuck_workers(check)
        for name in stuck:
            self.cluster.kill_node(name)
        if stuck:
            self.cluster.start_nodes(stuck)
            done["started"] += stuck
        self.cluster.wait_healthy(timeout=timeout)
        return done

    def _stuck_workers(self, check: set[str] | None, exclude: set[str] = frozenset()) -> list[str]:
        """The workers (of ``check``; None: every one) the GCS holds DEAD or ABSENT, but ``exclude``."""
        return [s.name for s in self.cluster.status() if s.role == "worker" and s.gcs_state in ("DEAD", "ABSENT")
                and (check is None or s.name in check) and s.name not in exclude]

    def observe(self, timeout: float):
        """One sample of the control plane and capacity (chaos.system.sampler), through the dashboard."""
        from chaos.system import sampler
        from serve_apps.config import APP_NAME

        from chaos.backends.local import haproxy

        st = self.cluster.state
        zone_of_ip = {n.ip: n.zone for n in st.nodes.values() if n.role != "head"}
        sample = sampler.observe_dashboard(st.dashboard_url, zone_of_ip, APP_NAME, timeout,
                                           exclude_ips={n.ip for n in st.nodes.values() if n.role == "head"})
        front = self.cluster.front
        if front is not None:
            sample.front = haproxy.show_stat(front, timeout=min(timeout, 1.0))
            if sample.front is None:
                sample.errors["front"] = "the balancer's stats socket did not answer"
        return sample

    # ---------------------------------------------------------------- planned disruptions
    def upgrade_variants(self) -> tuple[str, ...]:
        return ("code",)

    def upgrade_app(self, variant: str, version: str) -> dict:
        """Apply the deployed Serve config again with ``AVAILPROOF_APP_VERSION=version`` in the
        application's ``runtime_env``: a new code version, so Serve replaces every replica in a
        rolling update (a ``user_config`` change would reconfigure replicas in place and replace
        none: it is not an upgrade of what runs)."""
        from chaos.system import ray_dashboard
        from serve_apps.config import APP_NAME

        if variant not in self.upgrade_variants():
            raise UsageError(f"the local backend's upgrade variants are {', '.join(self.upgrade_variants())}, "
                             f"got {variant!r}")
        details = ray_dashboard.serve_details(self.dashboard_url) or {}
        app = (details.get("applications") or {}).get(APP_NAME) or {}
        cfg = app.get("deployed_app_config")
        if not cfg:
            raise ClusterError("the Serve app is not deployed: nothing to upgrade")
        cfg = dict(cfg)
        env = dict((cfg.get("runtime_env") or {}).get("env_vars") or {})
        previous = env.get("AVAILPROOF_APP_VERSION")
        env["AVAILPROOF_APP_VERSION"] = version
        cfg["runtime_env"] = {**(cfg.get("runtime_env") or {}), "env_vars": env}
        http = details.get("http_options") or {}
        doc = {"proxy_location": details.get("proxy_location") or "EveryNode",
               "http_options": {"host": http.get("host", "0.0.0.0"), "port": http.get("port")},
               "applications": [cfg]}
        ray_dashboard.put_serve_config(self.dashboard_url, doc)
        return {"variant": variant, "version": version, "previous_version": previous,
                "changed": "applications[0].runtime_env.env_vars.AVAILPROOF_APP_VERSION",
                "version_served": True}  # the responses' x-availproof-version names it once it serves

    def drain_node(self, node: str, deadline_s: float) -> dict:
        """Ray's drain-node API (what autoscaler v2 and a preemption notice use), reason PREEMPTION,
        with the deadline; Ray does not kill the node at the deadline: the caller does."""
        from ray._raylet import GcsClient

        n = self.cluster.node(node)
        if n.role == "head":
            raise UsageError("the head cannot be drained (drain a worker node)")
        node_id = self.node_id(n)
        request_drain(GcsClient(address=self.cluster.state.gcs_address), node_id, node,
                      f"availproof: drain of {node}", deadline_s)
        return {"method": "ray drain-node", "reason": "PREEMPTION", "node_id": node_id}

    def node_id(self, n) -> str:
        """The Ray node id of node ``n`` (its ALIVE raylet's, by address and port)."""
        summary = self.cluster.gcs_nodes() or []
        for entry in sorted(summary, key=lambda e: e.get("raylet", {}).get("startTimeMs", 0) or 0, reverse=True):
            raylet = entry.get("raylet", {})
            if (raylet.get("nodeManagerAddress") == n.ip and raylet.get("state") == "ALIVE"
                    and raylet.get("nodeManagerPort") in (None, n.ports["node_manager"])):
                return raylet["nodeId"]
        raise ClusterError(f"{n.name} is not ALIVE in the GCS: nothing to drain")

    def graceful_shutdown(self) -> dict:
        """The deployments' graceful-shutdown settings as deployed (Serve's defaults where unset)."""
        from chaos.system import ray_dashboard
        from serve_apps.config import APP_NAME

        details = ray_dashboard.serve_details(self.dashboard_url) or {}
        app = (details.get("applications") or {}).get(APP_NAME) or {}
        out = {}
        for name, dep in (app.get("deployments") or {}).items():
            c = dep.get("deployment_config") or {}
            out[name] = {k: c.get(k) for k in ("graceful_shutdown_timeout_s", "graceful_shutdown_wait_loop_s")}
        return {"deployments": out, "upgrade_strategy": "Serve rolling update (replicas replaced in batches of "
                                                        "about 20% of the target, at least one)"}

    def app_status(self) -> str | None:
        from chaos.system import deploy

        return deploy.app_status(self.dashboard_url)

    def wait_healthy(self, timeout: float = 120.0) -> None:
        self.cluster.wait_healthy(timeout=timeout)

    def healthy(self) -> bool:
        """Every node ALIVE in the GCS with live processes, and Redis up when GCS FT is on."""
        nodes_ok = all(s.healthy for s in self.cluster.status())
        redis = self.cluster.redis_status()
        return nodes_ok and redis.get("state") in ("UP", "none (GCS fault tolerance off)")
