"""A straggler's figures: what Serve's router did with a replica that was slow but alive (a scope whose flag
``straggler`` is set, :attr:`chaos.scopes.Scope.straggler`).

Who served (``served_replica``, from the responses' ``x-availproof-replica`` header: ``serve_apps.served_by``)
----------------------------------------------------------------------------------------------------------
``straggler`` (:func:`straggler`), for a fault of a scope that slows one replica down (:func:`applies`), over
the requests measured and **sent during the fault**: from its injection to its heal (the heal's start; no heal
in the analysis window: to the window's end), within its analysis window. The **slow replica** is the fault's
target (the replica whose engine was throttled); the **others** are every other replica that served a request
of that interval.

- ``requests``: the requests of the interval that named the replica that served them; ``slow_requests``: of
  them, served by the slow replica;
- ``replicas``: the replicas serving (those that served a request of the interval, and the slow one);
  ``fair_share``: 1 / ``replicas``; ``share``: ``slow_requests`` / ``requests``; ``share_of_fair``: ``share`` /
  ``fair_share`` (1: the router did not notice the straggler; 0: it routed nothing to it);
- ``slow_p50_ttft_s``, ``slow_p95_ttft_s``, ``others_p50_ttft_s``, ``others_p95_ttft_s``: the TTFT (end-to-end
  for a request not streamed) of the successful requests served by the slow replica, and by the others, p50 and
  p95 (nearest rank);
- ``slow_p50_itl_s`` ... ``others_p95_itl_s``: likewise of their inter-token latency (each request's mean
  inter-token latency, ``itl_mean_s``; requests of one token have none).

A figure that cannot be measured is null, with its reason in the fault's ``unmeasurable`` map
(``straggler.<name>``): no request sent during the fault, no response that named its replica (an app without
the header), no successful request served by the slow replica (its latencies: its share is then 0, a
figure) or by the others.
"""

from __future__ import annotations

from typing import Any

from chaos.recording import records as rec
from chaos import scopes
from chaos.analysis.windows import NS, latency, window_requests
from chaos.base.stats import percentile

SIDES = ("slow", "others")
LATENCIES = ("ttft", "itl")
COUNTS = ("requests", "replicas", "slow_requests")
SHARES = ("share", "fair_share", "share_of_fair")
FIGURES = COUNTS + SHARES + tuple(f"{side}_p{q}_{what}_s" for side in SIDES for what in LATENCIES for q in (50, 95))


def applies(scope: str) -> bool:
    """Whether a fault of ``scope`` makes one replica (its target) a straggler: its flag ``straggler``."""
    return scopes.get(scope).straggler


def _itl(r: rec.RequestRecord) -> float | None:
    return r.itl_mean_s


def straggler(fault: dict[str, Any], measured: list[rec.RequestRecord], window_end_ns: int) -> dict[str, Any]:
    """The straggler's figures of ``fault`` (see the module doc), its reasons put in ``fault["unmeasurable"]``."""
    t0 = fault["inject_ns"]
    heal_s = fault.get("heal_start_s")
    end_ns = window_end_ns if heal_s is None else min(window_end_ns, t0 + int(heal_s * NS))
    slow = fault["target"]
    rs = [r for r in window_requests(fault, measured, window_end_ns) if r.sent_ns < end_ns]
    named = [r for r in rs if r.served_replica is not None]
    out: dict[str, Any] = {"replica": slow, "from_s": 0.0, "to_s": round((end_ns - t0) / NS, 4),
                           **dict.fromkeys(FIGURES)}
    unmeasurable = fault["unmeasurable"]

    def null(names, why: str) -> None:
        for name in names:
            unmeasurable[f"straggler.{name}"] = why

    if not rs:
        null(FIGURES, "no request was sent during the fault")
        return out
    if not named:
        null(FIGURES, "the responses named no replica (no x-availproof-replica header): who served cannot be told")
        return out
    mine = [r for r in named if r.served_replica == slow]
    replicas = {r.served_replica for r in named} | {slow}
    out.update(requests=len(named), replicas=len(replicas), slow_requests=len(mine),
               share=round(len(mine) / len(named), 6), fair_share=round(1 / len(replicas), 6))
    out["share_of_fair"] = round(len(mine) * len(replicas) / len(named), 6)  # share / fair share, unrounded
    by_side = {"slow": [r for r in mine if r.ok], "others": [r for r in named if r.ok and r.served_replica != slow]}
    who = {"slow": "the slow replica", "others": "another replica"}
    for side, xs in by_side.items():
        for what, value in (("ttft", latency), ("itl", _itl)):
            vals = [v for v in map(value, xs) if v is not None]
            names = [f"{side}_p{q}_{what}_s" for q in (50, 95)]
            if vals:
                out[names[0]], out[names[1]] = percentile(vals, 0.5), percentile(vals, 0.95)
            elif not xs:
                null(names, f"no successful request was served by {who[side]} during the fault")
            else:
                null(names, f"no successful request served by {who[side]} during the fault reported " + (
                    "a time to first token" if what == "ttft" else "an inter-token latency (one token each)"))
    return out
