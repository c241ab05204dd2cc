"""Chaos Toolkit actions: one per failure scope, each a thin call into :mod:`chaos.faults` on the
run in progress, and the rollback (:func:`heal_all`).

An action injects only into a run that is open and measuring (:func:`chaos.ctk.session.measuring_run`);
otherwise it refuses, saying why (the activity fails; nothing is touched). ``configuration`` is accepted because Chaos
Toolkit passes it; the run already knows its cluster.
"""

from __future__ import annotations

from typing import Any, Callable

from chaos import faults, faults_accelerator, faults_engine
from chaos import run as core
from chaos.ctk.session import measuring_run


def _on_run(fault: Callable[..., Any], **kwargs) -> Any:
    run = measuring_run()
    return fault(run.backend, run.marker, **kwargs)


def kill_replica(zone: str | None = None, method: str = "sigkill", deployment: str | None = None,
                 configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_replica, zone=zone, method=method, deployment=deployment)


def hang_engine(zone: str | None = None, duration_s: float | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults_engine.hang_engine, zone=zone, duration_s=duration_s)


def crash_engine(zone: str | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults_engine.crash_engine, zone=zone)


def error_engine(zone: str | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults_engine.error_engine, zone=zone)


def slow_engine(zone: str | None = None, factor: float = 4.0, period_s: float = 0.2, duration_s: float = 20.0,
                configuration: dict | None = None) -> dict:
    return _on_run(faults_engine.slow_engine, zone=zone, factor=factor, period_s=period_s, duration_s=duration_s)


def kill_node(node: str | None = None, zone: str | None = None, outage_s: float | None = None,
              configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_node, node=node, zone=zone, outage_s=outage_s)


def kill_head(outage_s: float | None = 5.0, method: str = "node", configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_head, outage_s=outage_s, method=method)


def kill_zone(zone: str, outage_s: float | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_zone, zone=zone, outage_s=outage_s)


def kill_region(region: str, outage_s: float | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_region, region=region, outage_s=outage_s)


def kill_redis(outage_s: float | None = 5.0, configuration: dict | None = None) -> dict:
    return _on_run(faults.kill_redis, outage_s=outage_s)


def partition_zone(zone: str, duration_s: float | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults.partition_zone, zone=zone, duration_s=duration_s)


def head_outage_second_fault(outage_s: float = 20.0, second: str = "replica", zone: str | None = None,
                             delay_s: float = 3.0, configuration: dict | None = None) -> dict:
    return _on_run(faults.head_outage_second_fault, outage_s=outage_s, second=second, zone=zone, delay_s=delay_s)


def upgrade_app(variant: str = "code", timeout_s: float = 600.0, configuration: dict | None = None) -> dict:
    return _on_run(faults.upgrade_app, variant=variant, timeout_s=timeout_s)


def drain_node(node: str | None = None, zone: str | None = None, deadline_s: float = 30.0,
               outage_s: float | None = 20.0, configuration: dict | None = None) -> dict:
    return _on_run(faults.drain_node, node=node, zone=zone, deadline_s=deadline_s, outage_s=outage_s)


def lose_accelerator(zone: str | None = None, outage_s: float | None = None, configuration: dict | None = None) -> dict:
    return _on_run(faults_accelerator.lose_accelerator, zone=zone, outage_s=outage_s)


def heal_all(timeout_s: float = 240.0, configuration: dict | None = None) -> dict:
    """The rollback of every experiment: heal exactly what this run injected and has not healed
    (none: nothing is touched), wait for health, redeploy the app if the cluster lost it (a head
    restart without GCS fault tolerance). With no run open (its set-up failed) there is nothing to heal."""
    run = core.current()
    if run is None:
        return {"healed": [], "note": "no run is open: nothing was injected, nothing to heal"}
    return core.heal_injected(run, timeout_s)
