"""The load workers as pods of a Job (:mod:`chaos.backends.kuberay.kube.load`, :mod:`chaos.backends.kuberay.kube.load_pool`):
admission's dry run of the Job, and the refusal of a fault whose scope reaches a node hosting one."""

from __future__ import annotations

from typing import Callable

from chaos.backends.kuberay.kube import load as kl
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.common import api_message, name_of, node_of, node_zones
from chaos.base.errors import SetupError, UsageError


class LoadJob:
    """The load Job's preflight, its pods, and the blast-radius guard for them: held by the pods part
    (``backend.pods.load``), handed to the parts whose faults reach nodes. ``settings``: ``kubernetes.load`` when ``in_cluster`` (else None); ``avoid_zones``: the zones
    the run's faults hit (set by the preparation); ``cluster``, ``run_id``, ``pods`` and ``nodes``: the backend's, read when used."""

    def __init__(self, kube: KubeClient, namespace: str, cluster: Callable[[], str], settings: kl.LoadJobSettings | None,
                 run_id: Callable[[], str], pods: Callable[..., list[dict]], nodes: Callable[[], list[dict]]):
        self.kube, self.namespace, self.cluster, self.settings = kube, namespace, cluster, settings
        self.run_id, self.read_pods, self.read_nodes = run_id, pods, nodes
        self.avoid_zones: list[str] = []  # the zones the run's faults hit: no load pod there (prepare)

    def preflight(self) -> dict:
        """Before a run whose load workers are a Job (``kubernetes.load.in_cluster``): a server-side dry-run
        create of that Job (one worker: the pod template is the same for every index), through admission
        (Pod Security, policy engines), nothing stored. A refusal raises one line."""
        run_id = self.run_id()
        job = kl.job_manifest(self.settings, run_id, kl.job_name(run_id, "dryrun"), 1, self.cluster(), 600,
                              avoid_zones=self.avoid_zones)
        try:
            self.kube.batch.create_namespaced_job(self.namespace, job, dry_run="All")
        except Exception as e:  # noqa: BLE001 - ApiException: one line
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise SetupError(f"the load workers' Job {name_of(job)}: admission refuses it in namespace {self.namespace} "
                             f"(HTTP {status}: {api_message(e)})") from None
        return {"would_create": f"Job/{name_of(job)}", "image": self.settings.image}

    def pods(self) -> list[dict]:
        """The rig's load worker pods (any run's) that are or may be running: Pending or Running."""
        return [p for p in self.read_pods(label_selector=kl.RUN_LABEL)
                if (p.get("status") or {}).get("phase") in ("Pending", "Running", None)]

    def refuse_reaching(self, what: str, nodes=(), zones=(), nodes_read: list[dict] | None = None) -> None:
        """The blast-radius check for the load: refuse (one line) a fault whose scope reaches a node hosting
        a load worker pod of the rig (:mod:`chaos.backends.kuberay.kube.load`), that is one of ``nodes`` or in one of
        ``zones`` (a zone or region loss, a zone's partition), whichever run's pod it is: the load that
        measures a fault must stay outside its reach."""
        load = [p for p in self.pods() if node_of(p)]
        if not load:
            return
        zone_of = node_zones(nodes_read if nodes_read is not None else self.read_nodes())
        hit = [p for p in load if node_of(p) in set(nodes) or zone_of.get(node_of(p)) in set(zones)]
        if hit:
            where = sorted({f"{node_of(p)} ({zone_of.get(node_of(p)) or 'no zone'})" for p in hit})
            raise UsageError(f"{what}: its scope reaches node(s) {', '.join(where)} hosting load worker pod(s) "
                             f"{', '.join(sorted(name_of(p) for p in hit)[:5])}: refusing to act (the load that measures "
                             f"a fault must stay outside its reach: place the load pods elsewhere with "
                             f"kubernetes.load.node_selector)")
