"""upgrade: a rolling upgrade of the Serve application under load (:func:`upgrade_app`), the planned
disruption users cause: every replica replaced. It proves itself at its end (the new replicas RUNNING), not by
the effect checks."""

from __future__ import annotations

import time
import uuid

from chaos.scopes import faults
from chaos.backends.kuberay.kube.access import UPGRADE
from chaos.base.errors import UsageError
from chaos.system.placement import PlacementUnknown
from chaos.base.scope_registry import Scope


def _replica_ids(backend) -> set[str]:
    return {r.replica_id for r in backend.replicas()}


def upgrade_app(backend, marker: faults.Marker, variant: str = "code", timeout_s: float = 600.0, poll_s: float = 1.0,
                version: str | None = None) -> dict:
    """A rolling upgrade of the Serve application under load: the planned disruption users cause.

    The inject mark is the instant the new config is applied (``backend.upgrade_app``); the heal
    marks bracket the wait for its completion: every replica RUNNING before the upgrade is gone and
    as many RUNNING replicas as before are new ones (polled every ``poll_s``; the figures themselves
    come from the sampler's records, :mod:`chaos.analysis.planes`). A replica RUNNING before it that is still
    there after ``timeout_s`` ends the wait with ``complete: false``. ``variant``: which change
    (``backend.upgrade_variants()``: local ``code``; KubeRay ``serve_config``, ``cluster``).
    """
    if variant not in backend.upgrade_variants():
        raise UsageError(f"upgrade variant must be one of {', '.join(backend.upgrade_variants())}, got {variant!r}")
    before = _replica_ids(backend)
    if not before:
        raise UsageError("no RUNNING replica to upgrade: the app is not serving")
    version = version or uuid.uuid4().hex[:8]
    with marker.inject(SCOPE.name, variant, [], {"replicas_before": sorted(before), "version": version}) as f:
        f.update(backend.upgrade_app(variant, version))
    deadline = time.monotonic() + timeout_s
    with marker.heal(f):
        now: set[str] = before
        while time.monotonic() < deadline:
            try:
                now = _replica_ids(backend)
            except PlacementUnknown:  # a read that got no answer says nothing about the upgrade
                time.sleep(poll_s)
                continue
            if not (now & before) and len(now) >= len(before) and backend.app_status() == "RUNNING":
                break
            time.sleep(poll_s)
        f["replicas_after"] = sorted(now)
        f["complete"] = not (now & before) and len(now) >= len(before)
        # the upgrade's proof is its completion: every replica of before gone, as many new ones RUNNING
        t = round(marker.since_inject(f), 3)
        f["effect"] = faults.effect(f["complete"], t, timeout_s, [{
            "check": "every replica RUNNING before the upgrade replaced by a new RUNNING one", "ok": f["complete"],
            "t_s": t, "seen": f"{len(now & before)} of {len(before)} old replicas left, {len(now)} RUNNING"}])
    return f


SCOPE = Scope(
    "upgrade", "rolling upgrade", fault=upgrade_app, backend_methods=("upgrade_app",),
    action_omits=("poll_s", "version"),  # a test's polling, a caller's version (else a new one)
    every_target_affected=True, replacing=True, replaces_every_replica=True,
    kube_access=UPGRADE,
    conflict_class="every-replica",  # it completes, no heal of its own (held for its recovery window)
)
