"""What one KubeRay backend acts on and within: the kube context, namespace and cluster (the RayService's active
RayCluster once resolved), the run id that marks what it creates, and its limits and settings. One object, made by
the backend and handed to each of its parts (:mod:`.backend`); the backend reads and sets it through attributes of
its own (``backend.cluster``, ``backend.run_id``, ...)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Target:
    namespace: str
    context: str
    cluster: str  # the RayCluster acted on (resolve_cluster: a RayService's active one)
    max_pods: int  # the blast-radius limit in pods
    max_nodes: int  # ... in nodes a zone or region loss may cordon
    run_id: str  # marks everything this backend creates or cordons (settable: prepare)
    serve_url: str | None = None
    dashboard_url: str | None = None  # as given (None: the backend refuses what needs it)
    partition_method: str = "node-filter"
    helper_image: str = ""
    helper_deadline_s: float = 0.0
    gcs_exit_window_s: float = 0.0
    allow_autoscaled_zone_loss: bool = False
    service: str | None = None  # the RayService, when the cluster is one's (resolve_cluster)
