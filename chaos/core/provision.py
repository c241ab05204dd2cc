"""The system under test, ready: a backend attached (or a local cluster brought up) and the app deployed.

- :func:`ensure_system`: what a run starts with (local: cluster up if needed, app deployed
  unless already RUNNING; KubeRay: attach, wait until healthy and the app RUNNING);
- :func:`redeploy_if_gone`: what every rollback ends with (and ``availproof recover``);
- :func:`attach`: the backend of a cluster that is already there;
- :func:`app_spec`: the Serve app an experiment asks for (``availproof deploy`` too).

No Chaos Toolkit here; the run (:mod:`chaos.core.run`) and the CLI call these.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from chaos.system import deploy
from chaos.backends.local import LocalCluster
from chaos.backends.local.backend import LocalBackend
from chaos.base.errors import SetupError, UsageError, parse_bool
from chaos.system.frontdoor import FrontSettings
from chaos.core.options import KUBE_FLAGS, backend_kind, kube_settings  # noqa: F401 - KUBE_FLAGS: provision's name too
from chaos.base.readonly import thaw
from serve_apps.admission import Admission
from serve_apps.config import AppSpec, LLMOptions

if TYPE_CHECKING:
    from chaos.core.experiment import Settings
    from chaos.core.run_spec import RunSpec
    from chaos.core.options import Options


def _quiet(msg: str) -> None:
    pass


def app_spec(app: str, cluster: LocalCluster, overrides: dict[str, Any] | None = None, model_path: str = "",
             log: Callable[[str], None] = _quiet) -> AppSpec:
    """The Serve app ``app`` (stream | llm) over the cluster's zones, with the experiment's ``app`` overrides.
    For ``llm`` without ``model_path`` the tiny offline checkpoint is built (once)."""
    overrides = thaw(overrides or {})  # the Settings' are read-only (chaos.base.readonly): the app's values its own
    spec = AppSpec(app=app, zones=cluster.topology.zones,
                   replicas_per_zone=int(overrides.get("replicas_per_zone", 1)))
    for key in ("health_check_period_s", "health_check_timeout_s", "max_ongoing_requests", "max_replicas_per_node",
                "graceful_shutdown_timeout_s", "graceful_shutdown_wait_loop_s", "stall_s", "watchdog", "on_stall"):
        if key in overrides:
            setattr(spec, key, overrides[key])
    if overrides.get("migration"):  # request migration (serve_apps/migrating_ingress.py, llm_migrating.py), validated
        spec.migration_limit = int(overrides["migration"]["limit"])
    if "ranks" in overrides:  # the engine's rank group (serve_apps/stream_ranks.py), validated by the schema
        spec.ranks = int(overrides["ranks"])
    if overrides.get("kv_cache"):  # a small vLLM KV cache (serve_apps/kv_cache.py), validated by the schema
        spec.kv_cache_blocks = int(overrides["kv_cache"]["blocks"])
    if overrides.get("admission"):  # admission limits and fast refusal (serve_apps/admission.py)
        try:
            spec.admission = Admission.from_dict(overrides["admission"])
        except ValueError as e:
            raise UsageError(f"app.{e}") from None
    if app == "llm":
        from serve_apps import checkpoint

        if model_path:
            checkpoint.check(model_path)
        else:
            log(f"building the tiny offline checkpoint in {checkpoint.DEFAULT_DIR} (if not built yet)")
            model_path = str(checkpoint.build(checkpoint.DEFAULT_DIR))
        spec.llm = LLMOptions(model_path=str(model_path))
        spec.max_ongoing_requests = min(spec.max_ongoing_requests, 16)
        check_llm_fits(cluster.topology, spec.llm)
    return spec


def check_llm_fits(topology, llm: LLMOptions) -> None:
    """One vLLM replica (its actor's CPU and its engine's bundle, ``serve_apps.llm_app``) must fit a worker
    of every zone, or Serve leaves it STARTING for ever: refused in one line, naming the nodes."""
    need = 1 + llm.num_cpus
    for zone in topology.zones:
        nodes = topology.nodes_in(zone=zone)
        if not any(n.cpus >= need for n in nodes):
            sizes = ", ".join(f"{n.name} {n.cpus}" for n in nodes)
            raise UsageError(f"{topology.source}: no worker of zone {zone} can hold a vLLM replica (it reserves "
                             f"{need:g} logical CPUs: 1 for the replica, {llm.num_cpus:g} for its engine; cpus: "
                             f"{sizes})")


def ensure_system(spec: RunSpec, options: Options, log: Callable[[str], None] = _quiet, run_id: str = "",
                  faults: list[dict] | None = None):
    """The backend the experiment runs on (``spec``: the run's, :mod:`chaos.core.run_spec`), ready: local (cluster up,
    app deployed) or KubeRay. Before
    anything is changed on a cluster that is already there, the backend is prepared for the run
    (``Backend.prepare``: leftovers of a crashed run refused, the run's id owned; on KubeRay the
    permissions the planned ``faults`` and their heals need, :func:`chaos.core.plan.faults_of`)."""
    if backend_kind(options.backend) == "kuberay":
        return ensure_kuberay(spec, options, log, run_id, faults)
    return ensure_local(spec.settings, options, log, run_id, front=spec.front)


def ensure_kuberay(spec: RunSpec, options: Options, log: Callable[[str], None] = _quiet, run_id: str = "",
                   faults: list[dict] | None = None):
    """Attach to the KubeRay cluster the spec names (the experiment's ``kubernetes``, the flags over it); the
    RayService deploys the app."""
    settings = spec.settings
    backend = kuberay_backend(spec.kube_target() or kube_settings(options.kubernetes, settings.kubernetes))
    if backend.load_job is not None:  # the load workers as a Job: what its pods cannot do, refused first
        from chaos.backends.kuberay.kube import load as kube_load

        token_env = settings.auth_token_env or spec.front.token_env
        kube_load.check_load(settings.load, sends_token=bool(token_env))
    backend.prepare(run_id, settings.scope, faults)
    log(f"KubeRay: RayCluster {backend.cluster} in {backend.namespace} (context {backend.context}), "
        f"blast radius {backend.max_pods} pod(s)")
    backend.wait_healthy(timeout=options.deploy_timeout_s)
    wait_app_running(backend, options.deploy_timeout_s)
    return backend


def wait_app_running(backend, timeout: float) -> None:
    """Poll until the Serve app on a KubeRay cluster is RUNNING (the RayService deploys it)."""
    deadline = time.monotonic() + timeout
    while backend.app_status() != "RUNNING":
        if time.monotonic() > deadline:
            raise SetupError(f"the Serve app on {backend.cluster} is not RUNNING after {timeout:.0f} s "
                             f"(status {backend.app_status()})")
        time.sleep(3)


def ensure_local(settings: Settings, options: Options, log: Callable[[str], None] = _quiet,
                 run_id: str = "", front: FrontSettings | None = None) -> LocalBackend:
    """Bring the cluster up if needed and deploy the app unless it is already RUNNING (``front``: the front
    door's settings as the run's spec parsed them; None: read from ``settings``)."""
    from chaos.system import topology

    cdir = options.cluster_dir
    wanted = topology.load(settings.topology)
    if options.app == "llm":  # before a cluster is looked at or started for it
        check_llm_fits(wanted, LLMOptions())
    cluster = LocalCluster.find(cdir, log=log)
    netns_mode = settings.network == "netns"
    if cluster is not None and cluster.running():
        have, need = _cluster_kind(cluster.topology.name, cluster.state.gcs_fault_tolerance, cluster.state.netns_mode), \
            _cluster_kind(wanted.name, settings.gcs_fault_tolerance, netns_mode)
        if have == need and cluster.topology.to_doc() != wanted.to_doc():  # the same name, its file since changed
            have, need = f"{have}, as it was", f"{need}, as {wanted.source} now says (nodes, sizes or domains)"
        if have != need and options.replace_cluster:
            log("the running cluster differs from what this experiment needs: replacing it")
            cluster.down()
            cluster = None
        elif have != need:
            raise SetupError(f"the running cluster ({have}) is not what the experiment needs ({need}): "
                             f"run `availproof cluster down` first")
        else:
            LocalBackend(cluster).prepare(run_id, settings.scope)  # before anything on it is changed
    if cluster is None or not cluster.running():
        cluster = LocalCluster.up(wanted, cdir, log=log, gcs_fault_tolerance=settings.gcs_fault_tolerance,
                                  netns_mode=netns_mode)
    cluster.wait_healthy(timeout=180)
    spec = app_spec(options.app, cluster, settings.app, options.model_path, log=log)
    status, same_app = deploy.app_status(cluster.state.dashboard_url), deploy.deployed_app(cluster) == options.app
    differ = status is not None and same_app and deploy.deployments_differ(cluster, spec)
    if status == "RUNNING" and same_app and not differ:
        deploy.wait_running(cluster, spec, timeout=30)  # placement check only
    else:
        if differ:
            # a rolling update to other deployment options places new replicas wherever there is room
            # (two in one zone when max_replicas_per_node allows it): a fresh start spreads them
            log("the deployed app's deployments are not what this experiment asks for: deploying it afresh")
            deploy.undeploy(cluster)
        deploy.deploy(cluster, spec, timeout=options.deploy_timeout_s, log=log)
    ensure_front(cluster, settings, log, front=front)
    return LocalBackend(cluster, run_id=run_id)  # a cluster brought up here has nothing left of an earlier run


def front_token(front: FrontSettings) -> str | None:
    """The bearer token the front door (``front``: its settings) requires, from the environment variable the
    experiment names (a missing one is a usage error, before anything runs)."""
    import os

    name = front.token_env
    if not name:
        return None
    token = os.environ.get(name)
    if not token:
        raise UsageError(f"the front door requires a bearer token: set ${name}")
    return token


def ensure_front(cluster: LocalCluster, settings: Settings, log: Callable[[str], None] = _quiet,
                 front: FrontSettings | None = None) -> None:
    """The experiment's front door running (``lb`` / ``zonal-lb``: the rig's HAProxy, started or
    replaced when its shape or settings differ); none for ``direct``. ``front``: its settings as parsed
    (None: read from ``settings``)."""
    from chaos.backends.local import haproxy

    have = cluster.front
    if settings.front == "direct":
        if have is not None:
            cluster.stop_front()
        return
    want = front or FrontSettings.from_dict(settings.front_door)
    token = front_token(want)
    if (have is not None and haproxy.alive(have) and have.shape == settings.front
            and have.settings == want.to_dict() and not want.token_env
            and have.cert_valid_for_s() > haproxy.CERT_RENEW_WITHIN_S):  # renewed a day before it expires
        return
    cluster.start_front(settings.front, want, token=token)


def _cluster_kind(topology_name: str, gcs_ft: bool, netns_mode: bool) -> str:
    return (f"{topology_name}, GCS fault tolerance {'on' if gcs_ft else 'off'}, "
            f"{'per-zone network namespaces' if netns_mode else 'loopback addresses'}")


def redeploy_if_gone(backend, app: str = "stream", overrides: dict[str, Any] | None = None, model_path: str = "",
                     timeout_s: float = 600.0, log: Callable[[str], None] = _quiet) -> bool:
    """Deploy the app again when it is not there; wait until every zone serves again (True: it was redeployed).
    On KubeRay the RayService controller redeploys: wait for the app to be RUNNING."""
    if backend.name == "kuberay":
        wait_app_running(backend, timeout_s)
        return False
    cluster = backend.cluster
    spec = app_spec(app, cluster, overrides, model_path, log=log)
    if deploy.app_status(cluster.state.dashboard_url) is None:
        log("the Serve app is gone: deploying it again")
        deploy.deploy(cluster, spec, timeout=timeout_s, log=log)
        return True
    try:
        deploy.wait_running(cluster, spec, timeout=timeout_s, log=log)
    except deploy.PlacementError as e:
        log(f"{e}: deploying the app afresh (Serve does not move replicas back to a returning zone)")
        deploy.undeploy(cluster)
        deploy.deploy(cluster, spec, timeout=timeout_s, log=log)
        return True
    return False


def backend_class(kind: str | None):
    """The backend class of ``kind`` (local | kuberay), without connecting to anything."""
    if backend_kind(kind) == "kuberay":
        from chaos.backends.kuberay import KubeRayBackend

        return KubeRayBackend
    return LocalBackend


def check_capabilities(kind: str | None, settings: Settings) -> None:
    """Refuse, with one line and before anything starts, an experiment that asks the backend for
    what it cannot do (:func:`chaos.backends.base.required`, the backend's ``capabilities``)."""
    from chaos.backends import base

    cls = backend_class(kind)
    missing = sorted(base.required(settings) - base.capabilities_of(cls))
    if missing:
        raise UsageError(f"the {cls.name} backend cannot run this experiment: "
                         + "; ".join(base.CAPABILITY_TEXT.get(m, m) for m in missing))


def kuberay_backend(k: dict):
    """A KubeRay backend for the target ``k`` (see :func:`kube_settings`), its RayCluster resolved."""
    from chaos.backends.kuberay.kube import load as kube_load
    from chaos.backends.kuberay import KubeRayBackend
    from chaos.backends.kuberay.settings import backend_settings

    b = KubeRayBackend(k["namespace"], k["context"], k.get("ray_cluster", "availproof"),
                       max_pods=int(k.get("max_pods", 1)), serve_url=k["serve_url"], dashboard_url=k["dashboard_url"],
                       partition_method=k.get("partition_method") or "node-filter",
                       allow_autoscaled_zone_loss=parse_bool(k.get("allow_autoscaled_zone_loss"),
                                                             "kubernetes.allow_autoscaled_zone_loss"),
                       load=kube_load.settings_of(k),  # kubernetes.load: the load workers as a Job (or None)
                       **backend_settings(k))  # kubernetes.max_nodes, helper_image
    b.resolve_cluster()
    return b


def attach(options: Options, log: Callable[[str], None] = _quiet):
    """The backend of a cluster that is already there (no run in progress): local or KubeRay."""
    if backend_kind(options.backend) == "kuberay":
        return kuberay_backend(kube_settings(options.kubernetes))
    return LocalBackend(LocalCluster.attach(options.cluster_dir, log=log))
