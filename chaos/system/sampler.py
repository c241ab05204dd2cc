"""The control-plane and capacity sampler: one observation every ``period_s``, for the whole run.

Beside the load harness (the data plane), a thread asks the cluster, at a fixed period:

- is the **GCS** answering (``GET /api/gcs_healthz`` on the dashboard: the check KubeRay's
  head readiness probe makes), and how long did it take;
- is the **Serve controller** answering (``GET /api/serve/applications/``), and the
  application's status;
- **capacity**: serving replicas (RUNNING, or PENDING_MIGRATION off a draining node) per deployment and zone (the controller's view) and nodes
  ALIVE per zone (the GCS' view; on KubeRay, Ray pods Ready per zone).

Each observation is a :class:`chaos.recording.records.Sample` published on the run's events (the
NDJSON writer, the Prometheus exporter subscribe), stamped with ``time.time_ns()`` when it
started. The probes of one sample run concurrently, each with a timeout of ``PROBE_TIMEOUT_S``
(2 s: what "answering" means here); a probe that fails or times out is recorded as not
answering (and why), never skipped. A sample that takes longer than the period delays the
next one (the sample records how long it took); ticks are never made up in a burst.

The backend decides *how* to observe (:meth:`observe` functions below for a dashboard URL, their
calls made by :mod:`chaos.system.ray_dashboard`); this module only keeps the clock.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from chaos.system import ray_dashboard
from chaos.recording import records as rec

DEFAULT_PERIOD_S = 0.5
PROBE_TIMEOUT_S = 2.0  # a probe that has not answered by then did not answer (KubeRay's probes allow 1-5 s)


def gcs_health(dashboard_url: str, timeout: float) -> tuple[bool, float | None, str | None]:
    """(answered, latency, why not) of the dashboard's GCS health check."""
    t = time.monotonic()
    try:
        status, body = ray_dashboard.gcs_healthz(dashboard_url, timeout)
    except (OSError, ValueError) as e:
        return False, None, _why(e)
    took = round(time.monotonic() - t, 6)
    return (status == 200 and body.strip() == b"success"), took, None if status == 200 else f"HTTP {status}"


# replica states that serve requests: what Serve's routers get (deployment_state.get_running_replica_infos):
# RUNNING, and PENDING_MIGRATION (on a draining node, serving until its replacement runs)
SERVING = ("RUNNING", "PENDING_MIGRATION")


def serve_state(dashboard_url: str, timeout: float, zone_of_ip: dict[str, str | None],
                app: str | None, ids_out: dict[str, list[str]] | None = None,
                starting_out: dict[str, list[str]] | None = None,
                ) -> tuple[bool, str | None, dict[str, dict[str, int]] | None, str | None]:
    """(controller answered, app status, RUNNING replicas per deployment per zone, why not);
    ``ids_out`` receives the RUNNING replicas' ids per deployment, ``starting_out`` those STARTING
    on a node (allocated, their constructor running: for a vLLM replica, its engine starting; Serve
    says STARTING too while a replica waits for a node, which is not counted).

    While a restarted controller re-attaches the live replicas (state RECOVERING) it cannot say
    how many run, and while it builds an application (a new code version: the app is listed with no
    deployment for a few seconds, the old replicas still serving) it does not say: replicas are then
    ``None`` (unknown), never 0. An application that is not listed at all has 0 replicas."""
    try:
        details = ray_dashboard.read_serve_details(dashboard_url, timeout)
    except (OSError, ValueError) as e:
        return False, None, None, _why(e)
    if not isinstance(details, dict) or "applications" not in details:
        return False, None, None, "no Serve details in the answer"
    apps = details.get("applications") or {}
    replicas: dict[str, dict[str, int]] = {}
    recovering = 0
    for name, a in apps.items():
        if app is not None and name != app:
            continue
        for dep_name, dep in (a.get("deployments") or {}).items():
            per_zone = replicas.setdefault(dep_name, {})
            for r in dep.get("replicas") or []:
                if r.get("state") in SERVING:
                    z = zone_of_ip.get(r.get("node_ip")) or "?"
                    per_zone[z] = per_zone.get(z, 0) + 1
                    if ids_out is not None:
                        ids_out.setdefault(dep_name, []).append(str(r.get("replica_id")))
                elif r.get("state") == "STARTING" and starting_out is not None and (r.get("pid") or r.get("node_id")):
                    # allocated (an actor with a process on a node): its constructor runs; a replica still
                    # waiting for a node to be allocated on (after a node loss) is not starting yet
                    starting_out.setdefault(dep_name, []).append(str(r.get("replica_id")))
                recovering += r.get("state") == "RECOVERING"
    status = (apps.get(app) or {}).get("status") if app else None
    listed = [a for name, a in apps.items() if app is None or name == app]
    if any(not (a.get("deployments") or {}) for a in listed):
        # the app is there but lists no deployment: the controller is (re)building it (an upgrade's
        # new code version: ~3-4 s during which the old replicas keep serving), not 0 replicas
        return True, status, None, f"the application lists no deployment (status {status}): replicas unknown " \
                                   f"while the controller builds it"
    if recovering:  # a restarted controller re-attaching live replicas: neither lost nor confirmed
        return True, status, None, f"{recovering} replica(s) RECOVERING: capacity unknown until the controller " \
                                   f"has re-attached them"
    return True, status, replicas, None


def nodes_alive(dashboard_url: str, timeout: float, zone_of_ip: dict[str, str | None],
                exclude_ips: set[str] = frozenset()) -> tuple[dict[str, int] | None, str | None]:
    """Worker nodes the GCS holds ALIVE, per zone (the head excluded)."""
    try:
        summary = ray_dashboard.read_nodes(dashboard_url, timeout)
    except (OSError, ValueError, AttributeError) as e:
        return None, _why(e)
    out = {z: 0 for z in set(zone_of_ip.values()) if z}
    for entry in summary:
        raylet = entry.get("raylet", {})
        ip = raylet.get("nodeManagerAddress") or entry.get("ip")
        if ip in exclude_ips or raylet.get("state") != "ALIVE":
            continue
        z = zone_of_ip.get(ip)
        if z:
            out[z] = out.get(z, 0) + 1
    return out, None


def _why(e: BaseException) -> str:
    if isinstance(e, ray_dashboard.HTTPStatusError):
        return f"HTTP {e.status}"
    reason = getattr(e, "reason", None)
    return f"{type(e).__name__}: {reason or e}"[:160]


_pool: ThreadPoolExecutor | None = None


def _probes() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(3, thread_name_prefix="availproof-probe")
    return _pool


def observe_dashboard(dashboard_url: str, zone_of_ip: dict[str, str | None], app: str | None,
                      timeout: float, exclude_ips: set[str] = frozenset(), nodes: bool = True) -> rec.Sample:
    """One sample through a Ray dashboard, its probes at once (each bounded by ``timeout``);
    ``nodes=False`` when the caller counts nodes its own way (KubeRay: pods Ready)."""
    t_ns, t = time.time_ns(), time.monotonic()
    pool = _probes()
    g = pool.submit(gcs_health, dashboard_url, timeout)
    ids: dict[str, list[str]] = {}
    starting: dict[str, list[str]] = {}
    s = pool.submit(serve_state, dashboard_url, timeout, zone_of_ip, app, ids, starting)
    n = pool.submit(nodes_alive, dashboard_url, timeout, zone_of_ip, exclude_ips) if nodes else None
    gcs_ok, latency, gcs_why = g.result()
    ctl_ok, status, replicas, ctl_why = s.result()
    alive, nodes_why = n.result() if n is not None else (None, None)
    errors = {k: v for k, v in (("gcs", gcs_why), ("controller" if not ctl_ok else "capacity", ctl_why),
                                ("nodes", nodes_why)) if v}
    return rec.Sample(t_ns=t_ns, took_s=round(time.monotonic() - t, 6), gcs_ok=gcs_ok, gcs_latency_s=latency,
                      controller_ok=ctl_ok, app_status=status, replicas=replicas, nodes_alive=alive, errors=errors,
                      replica_ids={d: sorted(v) for d, v in ids.items()} if replicas is not None else None,
                      starting_ids={d: sorted(v) for d, v in starting.items()} if replicas is not None else None)


class Sampler(threading.Thread):
    """Calls ``observe(timeout)`` every ``period_s`` until stopped, publishing each sample."""

    def __init__(self, observe: Callable[[float], rec.Sample], events: rec.Events,
                 period_s: float = DEFAULT_PERIOD_S, max_samples: int = 100_000,
                 probe_timeout_s: float = PROBE_TIMEOUT_S):
        super().__init__(name="availproof-sampler", daemon=True)
        if not period_s > 0:
            raise ValueError("the sampling period must be > 0")
        self.observe = observe
        self.events = events
        self.period_s = period_s
        self.max_samples = max_samples  # a bound on the loop, whatever happens
        self.probe_timeout_s = probe_timeout_s
        self.taken = 0
        self._stop_evt = threading.Event()

    def run(self) -> None:
        timeout = self.probe_timeout_s
        next_at = time.monotonic()
        while not self._stop_evt.is_set() and self.taken < self.max_samples:
            try:
                sample = self.observe(timeout)
            except Exception as e:  # noqa: BLE001 - an observation that failed is a sample saying so
                sample = rec.Sample(t_ns=time.time_ns(), took_s=0.0, gcs_ok=False, gcs_latency_s=None,
                                    controller_ok=False, app_status=None, replicas=None, nodes_alive=None,
                                    errors={"sampler": f"{type(e).__name__}: {e}"[:160]})
            self.taken += 1
            self.events.emit(self.events.sample_taken, sample)
            next_at += self.period_s
            self._stop_evt.wait(max(0.0, next_at - time.monotonic()))
            if time.monotonic() - next_at > self.period_s:  # fell behind: restart the clock, do not burst
                next_at = time.monotonic()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop_evt.set()
        if self.is_alive():
            self.join(timeout)

