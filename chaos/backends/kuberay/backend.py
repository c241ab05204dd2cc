"""The KubeRay backend's class: it makes the kube client and the :class:`~chaos.backends.kuberay.target.Target`,
composes its six parts, one per family of faults (each handed what it needs, the others it uses among them: pods,
kills, engines, domains, lifecycle, accelerators), and offers the fault interface
(:class:`chaos.backends.base.Backend`), each method one line handing the call to the part that owns it (or to the
preparation's and the leftovers' functions over the backend, :mod:`.prepare`, :mod:`.leftovers`)."""

from __future__ import annotations

import secrets

from chaos.backends import base
from chaos.backends.kuberay import leftovers as leftover, prepare as preparation
from chaos.backends.kuberay.kube import pod_exec as kube_exec, load as kl, partition as kp
from chaos.backends.kuberay.kube.client import Clock, KubeClient, kube_attribute, part_attribute
from chaos.backends.kuberay.accelerators import Accelerators
from chaos.backends.kuberay.common import GCS_EXIT_WINDOW_S, ZONE_WATCH_POLL_S
from chaos.backends.kuberay.domains import Domains
from chaos.backends.kuberay.engines import Engines
from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.lifecycle import Lifecycle
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.scopes import IMPLEMENTATIONS
from chaos.backends.kuberay.target import Target
from chaos.base.errors import UsageError, parse_bool


def target_attribute(name: str) -> property:
    return part_attribute("target", name)


class KubeRayBackend(base.ByScope):
    """Faults on a KubeRay cluster, within one context and namespace only.

    Every write goes to ``namespace`` (pods, NetworkPolicies, partition helper pods) or to the
    nodes of the domain it is told to break that this RayCluster's pods could run on (cordon, annotated
    with ``run_id`` so the heal uncordons only this run's). ``max_pods`` is the experiment's
    blast-radius limit in pods, ``max_nodes`` (default ``max_pods``) in nodes a zone or region loss
    may cordon; ``partition_method`` one of :data:`chaos.backends.kuberay.kube.partition.METHODS`
    (``node-filter`` by default). Processes inside pods are signalled through the exec API with
    their exit status checked (``stream_fn`` is the ``kubernetes.stream.stream`` seam), over an
    ApiClient of exec's own (``exec_core``); all of them, and the ``clock`` its waits read and sleep on, in one
    :class:`~chaos.backends.kuberay.kube.client.KubeClient` (``kube``). ``run_id`` (settable; default a random token made here)
    marks everything this backend creates or cordons. ``load`` (``kubernetes.load``,
    :class:`chaos.backends.kuberay.kube.load.LoadJobSettings`): with ``in_cluster`` the run's load workers are pods
    of a Job of this backend's (:meth:`load_pool`), and no fault may reach a node that hosts one
    (:meth:`refuse_reaching_load`).
    """

    name = "kuberay"
    # only the scopes whose methods it has (chaos.backends.base.capabilities_of): no front door of the
    # rig's (the serve Service is the client's), no cluster without GCS fault tolerance (the manifests
    # always set it), no load to the head
    capabilities: frozenset[str] = frozenset()
    implementations = IMPLEMENTATIONS
    # the API clients, as the parts read them: the backend's kube client's (settable, as the tests do)
    core, net, custom = kube_attribute("core"), kube_attribute("net"), kube_attribute("custom")
    exec_core, authz, batch = kube_attribute("exec_core"), kube_attribute("authz"), kube_attribute("batch")
    stream_fn = kube_attribute("stream_fn")
    # what it acts on and within (the target), and the parts' settings and state, as the rest reads them (settable)
    namespace, context, cluster = target_attribute("namespace"), target_attribute("context"), target_attribute("cluster")
    service, run_id, serve_url = target_attribute("service"), target_attribute("run_id"), target_attribute("serve_url")
    max_pods, max_nodes = target_attribute("max_pods"), target_attribute("max_nodes")
    partition_method, helper_image = target_attribute("partition_method"), target_attribute("helper_image")
    helper_deadline_s, gcs_exit_window_s = target_attribute("helper_deadline_s"), target_attribute("gcs_exit_window_s")
    allow_autoscaled_zone_loss = target_attribute("allow_autoscaled_zone_loss")
    load_job, load_avoid_zones = part_attribute("pods.load", "settings"), part_attribute("pods.load", "avoid_zones")
    killed, head_at_kill = part_attribute("kills", "killed"), part_attribute("kills", "head_at_kill")
    drained = part_attribute("kills", "drained")
    head_before_redis_kill = part_attribute("kills", "head_before_redis_kill")
    redis_killed_at = part_attribute("kills", "redis_killed_at")
    paused, throttles = part_attribute("engines", "paused"), part_attribute("engines", "throttles")
    cuts = part_attribute("domains.partitions", "cuts")
    lost_nodes = part_attribute("domains.zone_loss", "lost_nodes")
    nodes_at_loss = part_attribute("domains.zone_loss", "nodes_at_loss")
    zone_watches = part_attribute("domains.zone_loss", "zone_watches")
    zone_watch_poll_s = part_attribute("domains.zone_loss", "zone_watch_poll_s")
    cordon_spare_nodes = part_attribute("domains.zone_loss", "cordon_spare_nodes")
    accelerator_restore_s = part_attribute("accelerators", "accelerator_restore_s")
    accelerator_poll_s = part_attribute("accelerators", "accelerator_poll_s")

    def __init__(self, namespace: str, context: str, cluster: str, max_pods: int = 3, serve_url: str | None = None,
                 dashboard_url: str | None = None, partition_method: str = kp.DEFAULT_METHOD,
                 helper_image: str = kp.HELPER_IMAGE, core=None, networking=None, custom=None, stream_fn=None,
                 max_nodes: int | None = None, exec_core=None, run_id: str | None = None,
                 helper_deadline_s: float = kp.DEFAULT_DEADLINE_S, gcs_exit_window_s: float = GCS_EXIT_WINDOW_S,
                 authz=None, allow_autoscaled_zone_loss: bool = False, batch=None,
                 load: kl.LoadJobSettings | None = None, zone_watch_poll_s: float = ZONE_WATCH_POLL_S,
                 clock: Clock | None = None):
        if not namespace or not context:
            raise UsageError("the Kubernetes backend needs an explicit namespace and kube context")
        if partition_method not in kp.METHODS:
            raise UsageError(f"kubernetes.partition_method must be one of {', '.join(kp.METHODS)}, "
                             f"got {partition_method!r}")
        if core is None or networking is None or custom is None:
            from kubernetes import client, config

            api = config.new_client_from_config(context=context)
            core = core or client.CoreV1Api(api)
            networking = networking or client.NetworkingV1Api(api)
            custom = custom or client.CustomObjectsApi(api)
            if exec_core is None:  # exec's own ApiClient: stream() patches the one it is given (kube_exec)
                exec_core = client.CoreV1Api(config.new_client_from_config(context=context))
        if authz is None:  # SelfSubjectAccessReviews over the reads' own ApiClient
            from kubernetes import client

            authz = client.AuthorizationV1Api(core.api_client)
        if batch is None:  # the load workers' Job, over the reads' ApiClient
            from kubernetes import client

            batch = client.BatchV1Api(core.api_client)
        # every call to the cluster, and every look at the clock and sleep, goes through this one object
        self.kube = KubeClient(core, networking, custom, exec_core if exec_core is not None else kube_exec.own_core(core),
                               authz, batch, stream_fn, clock)
        self.target = Target(namespace, context, cluster, max_pods, max_pods if max_nodes is None else max_nodes,
                             run_id or secrets.token_hex(4), serve_url=serve_url, dashboard_url=dashboard_url,
                             partition_method=partition_method, helper_image=helper_image,
                             helper_deadline_s=helper_deadline_s, gcs_exit_window_s=gcs_exit_window_s,
                             allow_autoscaled_zone_loss=parse_bool(allow_autoscaled_zone_loss,
                                                                   "allow_autoscaled_zone_loss"))
        # the parts, one per family, each handed what it needs (the parts it holds: kuberay/__init__.py)
        t = self.target
        self.pods = Pods(self.kube, t, load if load is not None and load.in_cluster else None)  # and the load Job
        self.kills = Kills(self.kube, t, self.pods, self.pods.load)
        self.accelerators = Accelerators(self.kube, t, self.pods)
        self.engines = Engines(self.kube, t, self.pods, self.accelerators)  # and the wedges, the weights, the devices
        self.domains = Domains(self.kube, t, self.pods, self.kills, zone_watch_poll_s)  # zone loss, partitions, autoscalers
        self.lifecycle = Lifecycle(self.kube, t, self.pods, self.kills)  # upgrades and drains, rollbacks

    # the fault interface and what the rest of the rig calls, each handed to the part that owns it
    # reads, domains, health (the pods part)
    def resolve_cluster(self):
        return self.pods.resolve_cluster()

    def zones(self):
        return self.pods.zones()

    def regions(self):
        return self.pods.regions()

    def zones_in_region(self, region):
        return self.pods.zones_in_region(region)

    def ray_pod_names(self):
        return self.pods.ray_pod_names()

    def nodes_in(self, zone=None, region=None):
        return self.pods.nodes_in(zone, region)

    def zone_of(self, node):
        return self.pods.zone_of(node)

    def targets(self):
        return self.pods.targets()

    def front_targets(self):
        return self.pods.front_targets()

    def head_target(self):
        return self.pods.head_target()

    def own_hosts(self):
        return self.pods.own_hosts()

    def topology_doc(self):
        return self.pods.topology_doc()

    def front_door(self):
        return self.pods.front_door()

    def healthy(self):
        return self.pods.healthy()

    def wait_healthy(self, timeout=300.0):
        return self.pods.wait_healthy(timeout)

    def observe(self, timeout):
        return self.pods.observe(timeout)

    def app_status(self):
        return self.pods.app_status()

    def exec(self, pod, script, container=None, ok_codes=(0,), core=None, status=None):
        return self.pods.exec(pod, script, container, ok_codes, core, status)

    @property
    def dashboard_url(self) -> str:
        return self.pods.dashboard_url

    def describe(self) -> dict:
        return {"backend": "kuberay", "context": self.context, "namespace": self.namespace, "cluster": self.cluster,
                "gcs_fault_tolerance": True, "network": "kubernetes", "partition_method": self.partition_method,
                "run_id": self.run_id, "max_pods": self.max_pods, "max_nodes": self.max_nodes,
                "load_workers": ({"where": "pods of a Kubernetes Job", "image": self.load_job.image,
                                  "node_selector": self.load_job.node_selector}
                                 if self.load_job is not None else {"where": "processes of the rig"})}

    # kills of pods, the head, Redis, replicas
    def kill_node(self, node):
        return self.kills.kill_node(node)

    def start_node(self, node):
        return self.kills.start_node(node)

    def kill_head(self, method='node'):
        return self.kills.kill_head(method)

    def restart_head(self):
        return self.kills.restart_head()

    def head_alive(self):
        return self.kills.head_alive()

    def kill_redis(self):
        return self.kills.kill_redis()

    def start_redis(self, poll_s=1.0):
        return self.kills.start_redis(poll_s)

    def replicas(self, state='RUNNING'):
        return self.kills.replicas(state)

    def pick_replica(self, zone=None, replica_id=None, deployment=None):
        return self.kills.pick_replica(zone, replica_id, deployment)

    def replica_killer(self, r, method):
        return self.kills.replica_killer(r, method)

    def replica_ongoing(self, r, at_least, wait_s):
        return self.kills.replica_ongoing(r, at_least, wait_s)

    # engines, wedges, weights (the engines part)
    def pause_engine(self, r):
        return self.engines.pause_engine(r)

    def crash_engine(self, r):
        return self.engines.crash_engine(r)

    def hooked_engines(self, r, what, to):
        return self.engines.hooked_engines(r, what, to)

    def error_engine(self, r):
        return self.engines.error_engine(r)

    def stutter_engine(self, r, factor, period_s, duration_s):
        return self.engines.stutter_engine(r, factor, period_s, duration_s)

    def duty_samples(self, pod, pids, t):
        return self.engines.duty_samples(pod, pids, t)

    def resume_engine(self, pids):
        return self.engines.resume_engine(pids)

    def engine_children(self, r):
        return self.engines.engine_children(r)

    def processes_left(self, node, pids):
        return self.engines.processes_left(node, pids)

    def wedge_engine(self, r, spin=False):
        return self.engines.wedges.wedge_engine(r, spin)

    def hang_rank(self, r, rank=1, spin=False):
        return self.engines.ranks.hang_rank(r, rank, spin)

    def kill_rank(self, r, rank=1):
        return self.engines.ranks.kill_rank(r, rank)

    def rank_children(self, r):
        return self.engines.ranks.rank_children(r)

    def garble_engine(self, r):
        return self.engines.wedges.garble_engine(r)

    def stall_engine(self, r):
        return self.engines.wedges.stall_engine(r)

    def slow_engine(self, r, factor, hold_s=None):
        return self.engines.wedges.slow_engine(r, factor, hold_s)

    def arm_engine(self, r, fault, request, what):
        return self.engines.wedges.arm_engine(r, fault, request, what)

    def release_engine(self, pids, fault='wedge'):
        return self.engines.wedges.release_engine(pids, fault)

    def weights_breaker(self, r):
        return self.engines.weights.weights_breaker(r)

    def restore_weights(self, fault):
        return self.engines.weights.restore_weights(fault)

    def replica_states(self, deployment):  # restart-fails' hold: through the dashboard, no pod read
        from chaos.system import start_watch

        return start_watch.replica_states(self.pods.dashboard_url, deployment)

    # device-loss: the marker in the pod, the remedy's cordon (the engines part's devices, .device)
    def device_breaker(self, r, mode, xid, outage_s=None, taint=False, acknowledge_other_gpu_pods=False):
        return self.engines.devices.device_breaker(r, mode, xid, outage_s, taint, acknowledge_other_gpu_pods)

    def device_look(self, fault):
        return self.engines.devices.device_look(fault)

    def restore_device(self, fault):
        return self.engines.devices.restore_device(fault)

    def cordon_device_node(self, fault):
        return self.engines.devices.cordon_device_node(fault)

    def uncordon_device_node(self, fault):
        return self.engines.devices.uncordon_device_node(fault)

    # zone and region loss, partitions (the domains part)
    def kill_zones(self, zones):
        return self.domains.zone_loss.kill_zones(zones)

    def restore_zones(self, zones=None):
        return self.domains.zone_loss.restore_zones(zones)

    def effect_held(self, fault):
        return self.domains.zone_loss.effect_held(fault)

    def preflight_partition(self, zone):
        return self.domains.partitions.preflight_partition(zone)

    def partition_zone(self, zone, deadline_s=None):
        return self.domains.partitions.partition_zone(zone, deadline_s)

    def partition_armer(self, zone, deadline_s=None):
        return self.domains.partitions.partition_armer(zone, deadline_s)

    def heal_zone(self, zone):
        return self.domains.partitions.heal_zone(zone)

    def partitioned_zones(self):
        return self.domains.partitions.partitioned_zones()

    # upgrades, drains, rollbacks (the lifecycle part)
    def preflight_upgrade(self, variant):
        return self.lifecycle.upgrades.preflight_upgrade(variant)

    def upgrade_variants(self):
        return self.lifecycle.upgrades.upgrade_variants()

    def upgrade_app(self, variant, version):
        return self.lifecycle.upgrades.upgrade_app(variant, version)

    def drain_node(self, node, deadline_s):
        return self.lifecycle.upgrades.drain_node(node, deadline_s)

    def graceful_shutdown(self):
        return self.lifecycle.upgrades.graceful_shutdown()

    def second_cluster_room(self, cluster_spec):
        return self.lifecycle.rollbacks.second_cluster_room(cluster_spec)

    def roll_back_upgrade(self, fault):
        return self.lifecycle.rollbacks.roll_back_upgrade(fault)

    # accelerators
    def lose_accelerator(self, r, acknowledge_other_gpu_pods=False):
        return self.accelerators.lose_accelerator(r, acknowledge_other_gpu_pods)

    def hold_accelerator(self, fault):
        return self.accelerators.hold_accelerator(fault)

    def restore_accelerator(self, node, wait_s=None, fault=None, look=True):
        return self.accelerators.restore_accelerator(node, wait_s, fault, look)

    # preparation, leftovers, heals: functions over the backend (.prepare, .leftovers)
    def prepare(self, run_id, scope, faults=None):
        return preparation.prepare(self, run_id, scope, faults)

    def preflight_access(self, scopes):
        return preparation.preflight_access(self, scopes)

    def heal(self, faults, timeout=300.0):
        return preparation.heal(self, faults, timeout)

    def recover_access(self):
        return preparation.recover_access(self)

    def heal_all(self, timeout=300.0):
        return preparation.heal_all(self, timeout)

    def leftovers(self, in_pods=True):
        return leftover.find(self, in_pods)

    def remove_leftovers(self, found=None, keep_going=False):
        return leftover.remove(self, found, keep_going)

    # the load workers' Job (the pods part's) and the autoscalers (the domains part's)
    def preflight_load(self) -> dict:
        return self.pods.load.preflight()

    def load_pods(self) -> list[dict]:
        return self.pods.load.pods()

    def refuse_reaching_load(self, what: str, nodes=(), zones=(), nodes_read: list[dict] | None = None) -> None:
        self.pods.load.refuse_reaching(what, nodes=nodes, zones=zones, nodes_read=nodes_read)

    def load_pool(self, shape, events, **kw):
        """The run's load workers as pods of a Job (:class:`chaos.backends.kuberay.kube.load_pool.JobPool`), or None
        when ``kubernetes.load.in_cluster`` is off (the workers are then processes of the rig)."""
        if self.load_job is None:
            return None
        from chaos.backends.kuberay.kube.load_pool import JobPool

        return JobPool(self, self.load_job, shape, events, **kw)

    def autoscaling(self, zones: list[str] | None = None) -> list[str]:
        return self.domains.autoscalers.signs(zones)

    def refuse_autoscaled_zone_loss(self, zones: list[str] | None = None) -> None:
        self.domains.autoscalers.refuse_zone_loss(zones)

    # by scope (chaos.backends.base.ByScope, :data:`.scopes.IMPLEMENTATIONS`)
    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]:
        """Every object a fault of ``scope`` with these action ``arguments`` would touch now, and what the
        heal (or the cluster) then does: ``{"kind", "name", "where", "does", "after"}`` per object. Only
        reads (GETs of pods, nodes, the RayService and RayCluster, a ConfigMap; the dashboard for a
        replica's pod): nothing is created, patched, deleted or reviewed. The fault's guards run as they
        would (the blast radius, max_nodes, an autoscaled zone, an upgrade KubeRay would not roll out);
        what they refuse raises, one line."""
        self.pods.follow_active()
        return super().plan(scope, arguments)

    def effect_checks(self, fault: dict) -> list[dict]:
        """One look at whether ``fault`` (as :mod:`chaos.scopes.faults` builds it: ``scope``, ``target``, ``zones``, and
        what the backend's call returned) is in effect: a list of ``{"check", "ok", "seen"}``. One or two API reads
        (and an exec where only the inside of a pod tells), so that :func:`chaos.scopes.faults.prove` can call it until
        every check is ok; what each scope's proof looks at: :mod:`chaos.backends.kuberay.proofs`."""
        return super().effect_checks(fault)
