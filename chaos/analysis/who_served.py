"""Who served a fault's requests, against where their client is (the target's zone and region).

Who served (from the responses' ``x-availproof-*`` headers: ``serve_apps.served_by``)
-------------------------------------------------------------------------------------
- ``locality`` (:func:`locality`): per phase, *before* (measured requests sent before the
  injection), *during* (from the injection to the service's steady state, or to the window's end
  when it never got there) and *after* (from the steady state to the window's end; ``null`` when
  never steady): ``requests`` that named their replica, ``cross_zone`` / ``cross_zone_share`` (served
  in another zone than the client's, i.e. the target's, over the requests where both are known) and
  ``cross_region`` / ``cross_region_share``. A share is ``null`` when no request of the phase knew
  both; for the window (during and after) the reason is in ``unmeasurable``
  (``locality.cross_zone_share``: behind one balancer for every zone the client's requests carry no
  zone; an app without the headers names none). The bound ``max_cross_region_share`` reads the
  larger of the *during* and *after* shares.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.recording import records as rec, request_columns as rc
from chaos.analysis.windows import NS, window_mask


def _phases(fault: dict[str, Any], window_end_ns: int) -> tuple[int, int | None]:
    """The end of *during* (the service's steady state, else the window's end) and the start of *after*."""
    steady_s = fault["service"]["time_to_steady_state_s"]
    steady_ns = None if steady_s is None else fault["inject_ns"] + int(steady_s * NS)
    return (steady_ns if steady_ns is not None else window_end_ns), steady_ns


def locality(fault: dict[str, Any], measured: list[rec.RequestRecord] | rc.RequestColumns, window_end_ns: int,
             measure_start_ns: int) -> dict[str, Any]:
    """Where the requests were served against where their client is, before, during and after the fault.

    Per phase (*before*: measured requests sent from the start of the measurement to the injection;
    *during*: from the injection to the service's steady state, or to the window's end when it never
    got there; *after*: from the steady state to the window's end, null when it never got there):
    ``requests`` (that named the replica that served them), ``cross_zone`` / ``cross_zone_share``
    (served in another zone than the target's, over the requests where both zones are known) and
    ``cross_region`` / ``cross_region_share`` (likewise for regions). A share is null when no
    request of the phase knew both (the fault's ``unmeasurable`` says why, for the window: the
    client's requests carry no zone behind one balancer for every zone, or the responses named none)."""
    cols = measured if isinstance(measured, rc.RequestColumns) else rc.from_records(measured)
    t0 = fault["inject_ns"]
    during_end, after_start = _phases(fault, window_end_ns)
    sent = cols.sent_ns
    window = window_mask(cols, fault, window_end_ns)
    phases = {"before": (sent >= measure_start_ns) & (sent < t0), "during": window & (sent < during_end),
              "after": None if after_start is None else window & (sent >= after_start)}
    both = {"zone": (cols.served_zone.known() & cols.zone.known(), cols.served_zone.same_as(cols.zone)),
            "region": (cols.served_region.known() & cols.region.known(), cols.served_region.same_as(cols.region))}
    named = cols.served_replica.known()
    out: dict[str, Any] = {}
    for name, mask in phases.items():
        if mask is None:
            out[name] = None
            continue
        out[name] = {"requests": int(np.count_nonzero(named & mask))}
        for domain, (known, same) in both.items():
            n = int(np.count_nonzero(known & mask))
            outside = n - int(np.count_nonzero(same & mask))
            out[name][f"cross_{domain}"] = outside if n else None
            out[name][f"cross_{domain}_share"] = round(outside / n, 6) if n else None
        out[name] = {k: out[name][k] for k in ("requests", "cross_zone", "cross_zone_share", "cross_region",
                                                "cross_region_share")}
    unmeasurable = fault["unmeasurable"]
    for domain, mine, theirs in (("zone", cols.served_zone, cols.zone), ("region", cols.served_region, cols.region)):
        shares = [p[f"cross_{domain}_share"] for p in (out["during"], out["after"]) if p]
        if any(v is not None for v in shares):
            continue
        if not window.any():
            why = "no request in the analysis window"
        elif not (theirs.known() & window).any():
            why = (f"the client's requests carry no {domain} (one front door for every zone): a request served "
                   f"outside the client's {domain} cannot be told")
        elif not (mine.known() & window).any():
            why = f"the responses named no {domain} (no x-availproof-{domain} header: an app without them)"
        else:
            why = f"no request of the window knew both the client's {domain} and the one that served it"
        unmeasurable[f"locality.cross_{domain}_share"] = why
    return out
