"""Exec and kills: commands in pods (exit status checked), the crash of a pod's processes then its
delete, and the kills of a worker pod, the head, Redis and a replica (an engine's faults: :mod:`.engines`)."""

from __future__ import annotations

import math
import secrets
from concurrent.futures import ThreadPoolExecutor

from chaos.backends.kuberay.kube import pod_exec as kube_exec
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import (CRASH_OK, CRASH_SCRIPT, REDIS_CRASH_SCRIPT, labels_of, limit,
                                           name_of, node_of, node_regions, node_zones, pod_ready, restarts, select)
from chaos.base.errors import ClusterError, UsageError


class Kills:
    """A kill is a crash: the processes SIGKILLed inside the pod through exec, then the pod deleted. A part the
    backend holds (``backend.kills``): what it crashed (``killed``, ``head_at_kill``, the Redis kill's), the worker
    pods a drain evicted (``drained``); ``load``: the load workers' Job part, whose nodes no kill may reach."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, load: LoadJob):
        self.kube, self.target, self.pods, self.load = kube, target, pods, load
        self.head_before_redis_kill: tuple[str, int, str | None] | None = None  # (pod name, restarts, uid)
        self.redis_killed_at: float | None = None  # monotonic instant of the last Redis kill
        self.drained: set[str] = set()  # worker pods evicted by drain_node, gone (or going) at their deadline
        # what the effect checks compare with: pods this backend crashed (name -> uid, restarts at the kill), the
        # head as it was at the last head kill
        self.killed: dict[str, dict] = {}
        self.head_at_kill: dict | None = None

    def crash(self, pods: list[dict], what: str, script: str = CRASH_SCRIPT) -> None:
        """SIGKILL every process of each pod's main container from inside it (``script``, exit status
        checked: :data:`CRASH_OK`), all the pods at once (one exec each, in parallel); raise
        :class:`~chaos.backends.kuberay.kube.pod_exec.ExecError` naming every pod whose kill failed, after trying
        them all. What each pod was (uid, container restarts) and the crash exec's exit status (the evidence
        of the crash: 137, the exec'd shell killed with its container; 0, sent) are kept for :meth:`effect_checks`."""
        for p in pods:
            self.killed[name_of(p)] = {"uid": (p.get("metadata") or {}).get("uid"), "restarts": restarts(p)}

        def one(p: dict) -> str | None:
            status: dict = {}
            try:  # an ApiClient per exec: they run at once
                self.pods.exec_in(p, script, ok_codes=CRASH_OK,
                              core=kube_exec.own_core(self.kube.exec_core) if len(pods) > 1 else None, status=status)
            except kube_exec.ExecError as e:
                return str(e)
            finally:
                self.killed[name_of(p)]["exec_exit"] = status.get("exit")
            return None

        if len(pods) == 1:
            failed = [one(pods[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(16, len(pods))) as pool:
                failed = list(pool.map(one, pods))
        errors = [e for e in failed if e]
        if errors:
            raise kube_exec.ExecError(f"{what}: the SIGKILL of {len(errors)} of {len(pods)} pod(s) failed, "
                                      f"none of them deleted: {'; '.join(errors)}"[:900])

    def kill_pods(self, pods: list[dict], what: str, script: str = CRASH_SCRIPT) -> list[str]:
        """A crash, then the pod's removal: :meth:`_crash`, then a delete with grace 0 (KubeRay or the
        Deployment replaces the pod; the kubelet's SIGTERM finds only what is left of the dead container)."""
        self.crash(pods, what, script)
        return self.pods.delete(pods)

    def kill_node(self, node: str) -> list[str]:
        if node in self.drained:
            return self._end_drain(node)
        pods = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == node], 1, f"worker pod {node}")
        self.load.refuse_reaching(f"kill of worker pod {node}", nodes=[node_of(p) for p in pods])
        return self.kill_pods(pods, f"kill of worker pod {node}")

    def _end_drain(self, node: str) -> list[str]:
        """The deadline of a drain (:func:`chaos.scopes.drain.drain_node` kills the node then): the evicted
        pod, still terminating, is force-deleted (grace 0: its grace period, the deadline, is over;
        the kubelet's SIGKILL comes now too); one already gone left before its deadline: nothing to
        kill, not an error. Only pods this backend evicted get here (checked at the eviction)."""
        self.drained.discard(node)
        left = [p for p in self.pods.pods() if name_of(p) == node and labels_of(p).get("ray.io/is-ray-node") == "yes"]
        return self.pods.delete(left)

    def start_node(self, node: str) -> None:
        """Nothing to do: KubeRay recreates a deleted worker pod; :meth:`wait_healthy` waits for it."""

    def kill_head(self, method: str = "node") -> list[str]:
        head = self.pods.head()
        self.head_at_kill = {"name": name_of(head), "uid": (head.get("metadata") or {}).get("uid"),
                             "restarts": restarts(head)}
        if method == "gcs":
            # -x: the process name exactly, so pgrep never matches the shell running it
            status: dict = {}
            try:
                out = self.pods.exec_in(head, "pids=$(pgrep -x gcs_server) && kill -9 $pids && echo $pids", status=status)
            finally:
                self.head_at_kill["exec_exit"] = status.get("exit")
            return [f"{name_of(head)}/{pid}" for pid in out.split()]
        return self.kill_pods([head], f"kill of head pod {name_of(head)}")

    def restart_head(self) -> None:
        """KubeRay (a deleted pod) or the kubelet (an exited container) restarts the head: wait for it."""
        self.pods.wait(self.head_alive, 300, "the head pod to be ready")

    def head_alive(self) -> bool:
        return any(pod_ready(p) for p in self.pods.ray(node_type="head"))

    def kill_redis(self) -> list[str]:
        """SIGKILL redis-server inside its pod (:data:`REDIS_CRASH_SCRIPT`: refused when it runs as its
        container's PID 1), then delete the pod (grace 0) for the Deployment to replace."""
        head = self.pods.head()
        self.head_before_redis_kill = (name_of(head), restarts(head), (head.get("metadata") or {}).get("uid"))
        pods = limit(self.pods.redis_pods(), 1, "redis pod")
        self.redis_killed_at = self.kube.monotonic()
        return self.kill_pods(pods, "kill of Redis", REDIS_CRASH_SCRIPT)

    def _head_restarted(self) -> bool:
        """Whether the head's GCS went down since the Redis kill: the head container restarted, or the
        head pod was replaced (or is going)."""
        if self.head_before_redis_kill is None:
            return False
        name, count, uid = self.head_before_redis_kill
        heads = select(self.pods.pods(), [], cluster=self.target.cluster, node_type="head", terminating=True)
        same = [p for p in heads if name_of(p) == name and (p.get("metadata") or {}).get("uid") == uid
                and not (p.get("metadata") or {}).get("deletion_timestamp")]
        return not same or restarts(same[0]) > count

    def start_redis(self, poll_s: float = 1.0) -> bool:
        """Redis is a Deployment: wait for its new pod; then watch the head for its GCS's exit (Ray
        2.60's GCS exits a few seconds after losing Redis; the kubelet restarts the head container),
        polling every ``poll_s`` until it is seen or ``gcs_exit_window_s`` after the kill has passed;
        then wait for the head to be ready. True when the GCS exited (the head container restarted, or
        the head pod was replaced)."""
        self.pods.wait(lambda: any(pod_ready(p) for p in self.pods.redis_pods()), 300, "the Redis pod to be ready")
        since = self.redis_killed_at if self.redis_killed_at is not None else self.kube.monotonic()
        exited = self._head_restarted()
        polls = max(1, math.ceil(self.target.gcs_exit_window_s / poll_s))
        while not exited and polls > 0 and self.kube.monotonic() - since < self.target.gcs_exit_window_s:
            self.kube.sleep(poll_s)
            polls -= 1
            exited = self._head_restarted()
        self.restart_head()
        return exited or self._head_restarted()

    def replicas(self, state: str | None = "RUNNING") -> list:
        from chaos.system import placement, ray_dashboard

        self.pods.follow_active()
        nodes = self.pods.nodes()
        zones, regions = node_zones(nodes), node_regions(nodes)
        by_ip = {}
        # a terminating pod (evicted by a drain) still hosts its replicas until it is gone
        for p in select(self.pods.pods(), nodes, cluster=self.target.cluster, terminating=True):
            n = node_of(p)
            ip = (p.get("status") or {}).get("pod_ip")
            if ip:
                by_ip[ip] = (name_of(p), zones.get(n), regions.get(n))
        details = ray_dashboard.serve_details(self.pods.dashboard_url)
        if details is None:
            raise placement.PlacementUnknown(f"the dashboard of {self.target.cluster} did not answer: placement unknown")
        rows = placement.replicas_from_details(details, by_ip)
        return [r for r in rows if state is None or r.state == state]

    def pick_replica(self, zone: str | None = None, replica_id: str | None = None, deployment: str | None = None):
        from chaos.system import placement

        return placement.pick(self.replicas(), zone=zone, replica_id=replica_id, deployment=deployment)

    def replica_killer(self, r, method: str):
        """Everything but the kill itself done; the returned callable kills the replica (``disarm()`` on it, when it
        has one, undoes what was prepared: :func:`chaos.scopes.replica.disarm`)."""
        if not r.node:
            raise UsageError(f"replica {r.replica_id}: its pod is not known (node IP {r.node_ip})")
        if method == "sigkill":
            pid = int(r.pid)
            return lambda: (self.pods.exec(r.node, f"kill -9 {pid}"), [f"{r.node}/{pid}"])[1]
        if method == "actor":
            return self._armed_actor_kill(r)
        if method == "pod":
            pods = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == r.node], 1,
                         f"pod of replica {r.replica_id}")
            return lambda: self.kill_pods(pods, f"kill of the pod of replica {r.replica_id}")
        raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")

    def replica_ongoing(self, r, at_least: int, wait_s: float) -> int:
        """Wait until replica ``r`` has ``at_least`` ongoing requests (Serve's count, read by a Ray driver in the
        head container: :mod:`chaos.system.replica_ongoing`); the count seen, or ClusterError saying why not."""
        from chaos.system import replica_ongoing

        if not r.actor_name:
            raise ClusterError(f"replica {r.replica_id} has no actor name: its ongoing requests cannot be read")
        out = self.pods.exec_in(self.pods.head(), replica_ongoing.script(r.actor_name, at_least, wait_s),
                                timeout=wait_s + replica_ongoing.CONNECT_S + 10)  # the script's own bound, then some
        return replica_ongoing.verdict(r.replica_id, at_least, wait_s, out)

    def _armed_actor_kill(self, r):
        """``ray.kill`` of the replica's actor through a Ray driver in the head container, connected *before*
        the fault's instant (:func:`chaos.system.ray_actor.arm_script`: ``ray.init`` and the actor's lookup take
        seconds); the returned callable fires it (:func:`chaos.system.ray_actor.fire_script`): one exec and the
        kill. A driver that could not connect raises here, before any mark. The callable's ``disarm()`` ends a driver
        never to be fired (:func:`chaos.system.ray_actor.disarm_script`)."""
        from chaos.system import ray_actor

        if not r.actor_name:
            raise ClusterError(f"replica {r.replica_id} has no actor name: cannot kill it through Ray")
        head = self.pods.head()
        kill_id = f"availproof-actor-kill-{self.target.run_id}-{secrets.token_hex(3)}"
        ready, line = ray_actor.parse_word(self.pods.exec_in(head, ray_actor.arm_script(kill_id, r.actor_name)), "ready")
        if not ready:
            raise ClusterError(f"replica {r.replica_id}: the Ray driver in head pod {name_of(head)} is not ready to kill "
                               f"actor {r.actor_name} ({line or 'no answer within 60 s'})")
        driver = int(line.split()[1])

        def fire() -> list[str]:
            killed, word = ray_actor.parse_word(self.pods.exec_in(head, ray_actor.fire_script(kill_id, driver)), "killed")
            if not killed:
                raise ClusterError(f"ray.kill of actor {r.actor_name} from head pod {name_of(head)} failed "
                                   f"({word or 'no answer within 10 s'})")
            return [f"{r.node}/{r.pid}"]

        # never fired (the kill refused after the arming): the driver ended and its files removed (one exec)
        fire.disarm = lambda: self.pods.exec_in(head, ray_actor.disarm_script(kill_id, driver))
        return fire
