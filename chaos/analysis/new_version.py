"""An upgrade's completion seen from the responses: the new version serving, not only new replica ids.

The sampled replacement (:func:`chaos.analysis.planes.replacement`) calls an upgrade complete at the first sample in
which no replica RUNNING before it runs and as many run as before: new *ids*. New ids do not prove the new
version answers (a replica restarted on the old config has a new id too). Every response names the app
version that served it (``x-availproof-version``, ``serve_apps.served_by``; the record's ``served_version``),
so for a scope that replaces every replica (:attr:`chaos.base.scope_registry.Scope.replaces_every_replica`),
:func:`complete` adds to the fault's ``replacement``:

- ``replicas_replaced_s``: the sampled completion (new ids), as it was;
- ``new_version``: the version the upgrade set (its mark's ``version``);
- ``new_version_first_served``: the first successful measured request sent in the window that the new
  version served, by the instant its outcome was seen: ``{"request", "sent_s", "served_s"}`` (seconds from
  the injection);
- ``time_to_complete_s``: the later of the two, so an upgrade is complete when its replicas are replaced
  **and** the new version serves; null with the reason when it never served in the window.

When the responses cannot tell (no request of the run carries ``served_version``: an app or endpoint
without the headers; or the upgrade changes what runs without changing the version the app reports, as a
KubeRay ``cluster`` upgrade does: its mark says ``version_served: false``), ``new_version_first_served`` is
null with the reason and ``time_to_complete_s`` stays the replicas' replacement.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.recording import request_columns as rc
from chaos import scopes
from chaos.analysis.windows import NS

FIRST_SERVED = "replacement.new_version_first_served"
COMPLETE = "replacement.time_to_complete_s"


def complete(fault: dict[str, Any], measured: rc.RequestColumns, window_end_ns: int) -> None:
    """The fault's ``replacement`` completed from the responses (see the module doc); its reasons in the
    fault's ``unmeasurable``. Nothing for a scope that does not replace every replica."""
    rp = fault.get("replacement")
    if not isinstance(rp, dict) or not scopes.get(fault.get("scope")).replaces_every_replica:
        return
    unmeasurable = fault["unmeasurable"]
    detail = fault.get("detail") or {}
    version = detail.get("version")
    replaced_s = rp.get("time_to_complete_s")
    rp.update(replicas_replaced_s=replaced_s, new_version=None if version is None else str(version),
              new_version_first_served=None)
    if version is None:
        unmeasurable[FIRST_SERVED] = "the upgrade's marks name no version (a run recorded before they did)"
        return
    if detail.get("version_served") is False:
        unmeasurable[FIRST_SERVED] = (
            f"this upgrade ({fault.get('target')}) does not change the version the app reports "
            f"(x-availproof-version): completion is the replicas' replacement alone")
        return
    column = measured.served_version
    if not np.any(column.codes >= 0):
        unmeasurable[FIRST_SERVED] = (
            "no response named its version (served_version: the app or endpoint sends no x-availproof-version): "
            "completion is the replicas' replacement alone")
        return
    t0 = fault["inject_ns"]
    mine = ((measured.sent_ns >= t0) & (measured.sent_ns < window_end_ns) & (measured.end_ns <= window_end_ns)
            & measured.ok & column.isin({str(version)}))
    rows = np.flatnonzero(mine)
    if not len(rows):
        unmeasurable[FIRST_SERVED] = f"no request sent in the window was served by the new version {version}"
        rp["time_to_complete_s"] = None
        unmeasurable[COMPLETE] = (f"the new version {version} served no request in the window"
                                  + (f" (the replicas were replaced at {replaced_s} s)" if replaced_s is not None
                                     else ""))
        return
    first = int(rows[np.argmin(measured.end_ns[rows])])
    served_s = round((int(measured.end_ns[first]) - t0) / NS, 4)
    rp["new_version_first_served"] = {"request": int(measured.id[first]),
                                      "sent_s": round((int(measured.sent_ns[first]) - t0) / NS, 4),
                                      "served_s": served_s}
    if replaced_s is not None:
        rp["time_to_complete_s"] = max(replaced_s, served_s)
