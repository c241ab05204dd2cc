"""The KubeRay backend's class: its settings and state, the parts it holds (its methods delegating to them in one
line each) and the rooms it is still made of."""

from __future__ import annotations

import secrets

from chaos.backends.kuberay.kube import pod_exec as kube_exec, load as kl, partition as kp
from chaos.backends.kuberay.kube import zone as kz
from chaos.backends.kuberay.kube.client import Clock, KubeClient, kube_attribute, part_attribute
from chaos.backends.kuberay.accelerators import Accelerators
from chaos.backends.kuberay.autoscaling import Autoscaling
from chaos.backends.kuberay.common import GCS_EXIT_WINDOW_S, ZONE_WATCH_POLL_S
from chaos.backends.kuberay.engines import Engines
from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.partition import Partition
from chaos.backends.kuberay.plan import PlanRows
from chaos.backends.kuberay.leftovers import Leftovers
from chaos.backends.kuberay.orphans import Orphans
from chaos.backends.kuberay.prepare import Preparation
from chaos.backends.kuberay.proofs import ProofReads
from chaos.backends.kuberay.reads import Reads
from chaos.backends.kuberay.rollback import UpgradeRollback
from chaos.backends.kuberay.scopes import ByScope
from chaos.backends.kuberay.upgrade import UpgradeDrain
from chaos.backends.kuberay.wedge import Wedges
from chaos.backends.kuberay.weights import RestartWeights
from chaos.backends.kuberay.zone import ZoneLoss
from chaos.errors import UsageError, parse_bool


class KubeRayBackend(Reads, Kills, Engines, Orphans, Wedges, RestartWeights, ZoneLoss, Partition, UpgradeDrain,
                     UpgradeRollback, Accelerators, Preparation, Leftovers, PlanRows, ProofReads, ByScope):
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
    # the API clients, as the parts read them: the backend's kube client's (settable, as the tests do)
    core, net, custom = kube_attribute("core"), kube_attribute("net"), kube_attribute("custom")
    exec_core, authz, batch = kube_attribute("exec_core"), kube_attribute("authz"), kube_attribute("batch")
    stream_fn = kube_attribute("stream_fn")
    # the parts' settings and state, as the rest reads them (settable)
    load_job, load_avoid_zones = part_attribute("load", "settings"), part_attribute("load", "avoid_zones")

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
        self.namespace, self.context, self.cluster, self.max_pods = namespace, context, cluster, max_pods
        self.service: str | None = None  # the RayService, when the cluster is one's (resolve_cluster)
        self.serve_url, self._dashboard_url = serve_url, dashboard_url
        self.partition_method, self.helper_image = partition_method, helper_image
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
        # the parts it holds: the load workers' Job (kube.load) and the autoscalers a zone loss looks for
        self.load = LoadJob(self.kube, namespace, lambda: self.cluster, load if load is not None and load.in_cluster else None,
                            run_id=lambda: self.run_id, pods=lambda **kw: self._pods(**kw), nodes=lambda: self._nodes())
        self.autoscalers = Autoscaling(self.kube, lambda: self.cluster, raycluster=lambda: self._raycluster(),
                                       service=lambda: self.service, rayservice=lambda: self._get_rayservice(),
                                       nodes=lambda: self._nodes(), allowed=lambda: self.allow_autoscaled_zone_loss)
        self.allow_autoscaled_zone_loss = parse_bool(allow_autoscaled_zone_loss, "allow_autoscaled_zone_loss")
        self.max_nodes = max_pods if max_nodes is None else max_nodes
        self.run_id = run_id or secrets.token_hex(4)
        self.helper_deadline_s, self.gcs_exit_window_s = helper_deadline_s, gcs_exit_window_s
        self.paused: list[str] = []  # "pod/pid" of engines we stopped (or throttle)
        self.throttles: dict[str, list[str]] = {}  # pod -> the ids of the duty cycles running there (engine-stutter)
        self.head_before_redis_kill: tuple[str, int, str | None] | None = None  # (pod name, restarts, uid)
        self.redis_killed_at: float | None = None  # monotonic instant of the last Redis kill
        self.drained: set[str] = set()  # worker pods evicted by drain_node, gone (or going) at their deadline
        # what the effect checks compare with: pods this backend crashed (name -> uid, restarts at the
        # kill), the head as it was at the last head kill, the nodes of each zone loss, each zone's cut
        self.killed: dict[str, dict] = {}
        self.head_at_kill: dict | None = None
        self.lost_nodes: dict[tuple[str, ...], list[str]] = {}
        self.cuts: dict[str, dict] = {}
        # zone and region loss, proven from the injection to the heal (kube_zone.ZoneWatch): one watch per
        # loss, keyed by its zones; every node name known when the loss began (a later one was added since)
        self.zone_watch_poll_s = float(zone_watch_poll_s)
        self.zone_watches: dict[tuple[str, ...], kz.ZoneWatch] = {}
        self.nodes_at_loss: dict[tuple[str, ...], set[str]] = {}
        # tests only: False leaves the cordon of the zone's spare nodes out (only those hosting the pods, or
        # labelled, are cordoned: the loss as it was before, which KubeRay's replacements undid on a spare node)
        self.cordon_spare_nodes = True

    # the parts' methods, as the backend's
    def preflight_load(self) -> dict:
        return self.load.preflight()

    def load_pods(self) -> list[dict]:
        return self.load.pods()

    def refuse_reaching_load(self, what: str, nodes=(), zones=(), nodes_read: list[dict] | None = None) -> None:
        self.load.refuse_reaching(what, nodes=nodes, zones=zones, nodes_read=nodes_read)

    def load_pool(self, shape, events, **kw):
        """The run's load workers as pods of a Job (:class:`chaos.backends.kuberay.kube.load_pool.JobPool`), or None
        when ``kubernetes.load.in_cluster`` is off (the workers are then processes of the rig)."""
        if self.load_job is None:
            return None
        from chaos.backends.kuberay.kube.load_pool import JobPool

        return JobPool(self, self.load_job, shape, events, **kw)

    def autoscaling(self, zones: list[str] | None = None) -> list[str]:
        return self.autoscalers.signs(zones)

    def refuse_autoscaled_zone_loss(self, zones: list[str] | None = None) -> None:
        self.autoscalers.refuse_zone_loss(zones)
