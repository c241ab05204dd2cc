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

from chaos import records as rec
from chaos.analysis.windows import NS, _window_requests


def _phases(fault: dict[str, Any], window_end_ns: int) -> tuple[int, int | None]:
    """The end of *during* (the service's steady state, else the window's end) and the start of *after*."""
    steady_s = fault["service"]["time_to_steady_state_s"]
    steady_ns = None if steady_s is None else fault["inject_ns"] + int(steady_s * NS)
    return (steady_ns if steady_ns is not None else window_end_ns), steady_ns


def _outside(rs: list[rec.RequestRecord], mine: str, theirs: str) -> tuple[int, int]:
    """(served outside the client's domain, requests where both are known)."""
    known = [r for r in rs if getattr(r, mine) is not None and getattr(r, theirs) is not None]
    return sum(1 for r in known if getattr(r, mine) != getattr(r, theirs)), len(known)


def locality(fault: dict[str, Any], measured: list[rec.RequestRecord], window_end_ns: int,
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
    t0 = fault["inject_ns"]
    during_end, after_start = _phases(fault, window_end_ns)
    rs = _window_requests(fault, measured, window_end_ns)
    phases = {"before": [r for r in measured if measure_start_ns <= r.sent_ns < t0],
              "during": [r for r in rs if r.sent_ns < during_end],
              "after": None if after_start is None else [r for r in rs if r.sent_ns >= after_start]}
    out: dict[str, Any] = {}
    for name, xs in phases.items():
        if xs is None:
            out[name] = None
            continue
        zone_out, zone_n = _outside(xs, "served_zone", "zone")
        region_out, region_n = _outside(xs, "served_region", "region")
        out[name] = {"requests": sum(1 for r in xs if r.served_replica is not None),
                     "cross_zone": zone_out if zone_n else None,
                     "cross_zone_share": round(zone_out / zone_n, 6) if zone_n else None,
                     "cross_region": region_out if region_n else None,
                     "cross_region_share": round(region_out / region_n, 6) if region_n else None}
    unmeasurable = fault["unmeasurable"]
    for domain, mine, theirs in (("zone", "served_zone", "zone"), ("region", "served_region", "region")):
        shares = [p[f"cross_{domain}_share"] for p in (out["during"], out["after"]) if p]
        if any(v is not None for v in shares):
            continue
        if not rs:
            why = "no request in the analysis window"
        elif not any(getattr(r, theirs) is not None for r in rs):
            why = (f"the client's requests carry no {domain} (one front door for every zone): a request served "
                   f"outside the client's {domain} cannot be told")
        elif not any(getattr(r, mine) is not None for r in rs):
            why = f"the responses named no {domain} (no x-availproof-{domain} header: an app without them)"
        else:
            why = f"no request of the window knew both the client's {domain} and the one that served it"
        unmeasurable[f"locality.cross_{domain}_share"] = why
    return out
