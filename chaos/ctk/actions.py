"""Chaos Toolkit actions: one per failure scope, each a thin call into :mod:`chaos.faults`.

Every action takes ``configuration`` (Chaos Toolkit passes it) to find the cluster
(``availproof_cluster_dir``) when no run is active, and returns what it did.
"""

from __future__ import annotations

from chaos import faults
from chaos.ctk.session import backend_for, marker_for, redeploy_if_gone


def kill_replica(zone: str | None = None, method: str = "sigkill", deployment: str | None = None,
                 configuration: dict | None = None) -> dict:
    return faults.kill_replica(backend_for(configuration), marker_for(), zone=zone, method=method,
                               deployment=deployment)


def hang_engine(zone: str | None = None, duration_s: float | None = None, configuration: dict | None = None) -> dict:
    return faults.hang_engine(backend_for(configuration), marker_for(), zone=zone, duration_s=duration_s)


def kill_node(node: str | None = None, zone: str | None = None, outage_s: float | None = None,
              configuration: dict | None = None) -> dict:
    return faults.kill_node(backend_for(configuration), marker_for(), node=node, zone=zone, outage_s=outage_s)


def kill_head(outage_s: float | None = 5.0, method: str = "node", configuration: dict | None = None) -> dict:
    return faults.kill_head(backend_for(configuration), marker_for(), outage_s=outage_s, method=method)


def kill_zone(zone: str, outage_s: float | None = None, configuration: dict | None = None) -> dict:
    return faults.kill_zone(backend_for(configuration), marker_for(), zone=zone, outage_s=outage_s)


def kill_region(region: str, outage_s: float | None = None, configuration: dict | None = None) -> dict:
    return faults.kill_region(backend_for(configuration), marker_for(), region=region, outage_s=outage_s)


def kill_redis(outage_s: float | None = 5.0, configuration: dict | None = None) -> dict:
    return faults.kill_redis(backend_for(configuration), marker_for(), outage_s=outage_s)


def partition_zone(zone: str, duration_s: float | None = None, configuration: dict | None = None) -> dict:
    return faults.partition_zone(backend_for(configuration), marker_for(), zone=zone, duration_s=duration_s)


def head_outage_second_fault(outage_s: float = 20.0, second: str = "replica", zone: str | None = None,
                             delay_s: float = 3.0, configuration: dict | None = None) -> dict:
    return faults.head_outage_second_fault(backend_for(configuration), marker_for(), outage_s=outage_s,
                                           second=second, zone=zone, delay_s=delay_s)


def upgrade_app(variant: str = "code", timeout_s: float = 600.0, configuration: dict | None = None) -> dict:
    return faults.upgrade_app(backend_for(configuration), marker_for(), variant=variant, timeout_s=timeout_s)


def drain_node(node: str | None = None, zone: str | None = None, deadline_s: float = 30.0,
               outage_s: float | None = 20.0, configuration: dict | None = None) -> dict:
    return faults.drain_node(backend_for(configuration), marker_for(), node=node, zone=zone,
                             deadline_s=deadline_s, outage_s=outage_s)


def heal_all(timeout_s: float = 240.0, configuration: dict | None = None) -> dict:
    """The rollback of every experiment: restore whatever is broken, wait for health, and
    redeploy the app if the cluster lost it (a head restart without GCS fault tolerance)."""
    backend = backend_for(configuration)
    done = faults.heal_all(backend, timeout=timeout_s)
    done["redeployed"] = redeploy_if_gone(backend, configuration)
    return done
