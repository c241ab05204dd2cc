"""The one interface every fault, probe, action and the CLI go through; both backends implement it.

Faults (:mod:`chaos.faults`) are written once against this protocol; a backend never decides
*what* to break, only *how* to break it in its world (processes and network namespaces on the
local backend, pods and nodes on KubeRay). ``tests/unit/test_backend_interface.py`` checks that
:class:`~chaos.backends.local.backend.LocalBackend` and
:class:`~chaos.backends.kuberay.KubeRayBackend` have every method with a compatible signature.

What the lists returned by the kill methods hold is the backend's: PIDs on the local backend,
pod names (or ``pod/pid``) on KubeRay. Faults record them, or their number, in the fault's detail.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable


@runtime_checkable
class Backend(Protocol):
    name: str  # "local" or "kuberay"

    @property
    def dashboard_url(self) -> str: ...

    # domains and what the harness loads
    def zones(self) -> list[str]: ...
    def regions(self) -> list[str]: ...
    def zones_in_region(self, region: str) -> list[str]: ...
    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]: ...
    def zone_of(self, node: str) -> str | None: ...
    def targets(self) -> list[tuple[str, str, str | None, str | None]]: ...  # (name, URL, zone, region)
    def head_target(self) -> tuple[str, str, str | None, str | None]: ...
    def own_hosts(self) -> tuple[str, ...]: ...  # addresses the rig created that the harness may load
    def describe(self) -> dict: ...  # the cluster as recorded in a run's summary
    def topology_doc(self) -> dict: ...  # regions > zones > nodes, for the environment record

    # nodes, head, domains
    def kill_node(self, node: str) -> list: ...
    def start_node(self, node: str) -> None: ...
    def kill_head(self, method: str = "node") -> list: ...  # method: node | gcs
    def restart_head(self) -> None: ...
    def head_alive(self) -> bool: ...
    def kill_zones(self, zones: list[str]) -> list: ...  # zone or region loss, all at once
    def restore_zones(self, zones: list[str]) -> Any: ...
    def partition_zone(self, zone: str) -> None: ...
    def heal_zone(self, zone: str) -> None: ...
    def kill_redis(self) -> list: ...
    def start_redis(self) -> bool: ...  # True when the GCS exited meanwhile (and was restarted)

    # the disruptions users cause themselves (chaos.faults.upgrade_app, drain_node)
    def upgrade_app(self, variant: str, version: str) -> dict: ...  # start a rolling upgrade; what changed
    def upgrade_variants(self) -> tuple[str, ...]: ...  # the variants this backend can apply
    def drain_node(self, node: str, deadline_s: float) -> dict: ...  # a graceful drain notice with a deadline
    def graceful_shutdown(self) -> dict: ...  # the deployment's graceful-shutdown settings and upgrade strategy
    def front_door(self) -> dict: ...  # what stands between the client and the Serve proxies (environment)
    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]: ...  # the front door's URLs

    # Serve replicas and engines
    def replicas(self, state: str | None = "RUNNING") -> list: ...
    def pick_replica(self, zone: str | None = None, replica_id: str | None = None,
                     deployment: str | None = None) -> Any: ...
    def replica_killer(self, r: Any, method: str) -> Callable[[], list]: ...  # everything but the kill done
    def pause_engine(self, r: Any) -> list: ...
    def resume_engine(self, pids: list) -> list: ...

    # health
    def healthy(self) -> bool: ...
    def wait_healthy(self, timeout: float) -> None: ...
    def heal_all(self, timeout: float) -> dict: ...  # every experiment's rollback
    def app_status(self) -> str | None: ...  # the Serve app's status, None when there is none
    def observe(self, timeout: float) -> Any: ...  # one chaos.records.Sample of the control plane and capacity
