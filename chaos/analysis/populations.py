"""Recovery per fault, per population: the data-plane figures of a fault, and :func:`analyse`, a run's summary.

Populations
-----------
Every figure is computed twice per fault, for two populations of requests:

- **service**: requests sent to every target: what the service as a whole did.
- **affected**: requests sent to the targets of the fault's failure domain (the target's
  zone is one of the fault's ``zones``): what the users of the lost domain saw. It is the
  service itself, and the summary says why (``affected.basis`` / ``affected.why``), when
  (a) the fault is one whose effect Serve's routing spreads over every proxy (``replica``,
  ``engine``, ``upgrade``: a request sent to zone-a's proxy may be served in zone-c; the scope's
  ``every_target_affected`` in :mod:`chaos.scopes`), (b) the fault has no failure domain
  (``head``, ``redis``: no zones), or (c) no measured request carries a zone (one
  load-balancer URL, KubeRay's serve Service).

A population's requests are those of the fault's analysis window (:mod:`chaos.analysis.windows`).

Figures of one population
-------------------------
- ``time_to_impact_s``: the send instant of the first failed request, clamped to the
  injection for a request already in flight at it (it was hit at the injection at the latest).
- ``time_to_detect_s``: the first instant a client *observed* a failure: send + its
  end-to-end time (a request that times out is observed failing at its timeout).
- ``time_to_first_success_s``: the send instant of the first request sent after the impact
  that succeeded.
- ``time_to_last_failure_s``: the instant the last failure was observed.
- Steady-state windows: one window of ``W`` seconds (``steady_state.window_s``) starts at the
  injection and at the send instant of each of the population's requests (a request in flight
  at the injection is placed at the injection, as its impact is); a window is judged
  when it lies wholly inside the analysis window and holds at least ``min_requests`` requests
  (fewer: too thin to judge, skipped). It is **in bound** when the success ratio is at least
  ``min_success_ratio`` and the p95 latency of its successful requests is at most
  ``max_p95_ttft_s`` (latency: TTFT for streamed requests, end-to-end for non-streamed
  ones, whose first token arrives with the whole response).
- **onset** of the disruption: the impact; with no failure, the first judged window out of
  bound (slow, not failing); with neither, the population was undisturbed.
- ``time_to_first_recovery_s``: the start of the first in-bound window at or after the onset.
- ``time_to_steady_state_s``: the start of the last stretch of in-bound windows that holds to
  the end of the analysis window (the first in-bound window after the last out-of-bound one).
  ``null`` when the last judged window is out of bound: not recovered within the window.
  Undisturbed: ``0.0``.
- ``relapses``: how often the population fell out of bound again after first recovering
  (``null`` when no window could be judged).
- ``disrupted``: a failure, or a judged window out of bound. ``recovered``: steady state reached.
- ``failed_total``, ``failed_mid_stream`` (after the first token), ``failed_by_class``,
  ``requests`` (the window's requests as above), ``failed_ratio`` = failed_total / requests.

Honest nulls
------------
A figure that cannot be measured is ``null`` and its reason is in the fault's
``unmeasurable`` map (key: ``affected.time_to_steady_state_s``, ``failed.unaffected_zones``,
...), never 0 and never "met":

- steady state (and ``recovered``) when no window of the population could be judged after
  the injection (the run ended too soon, or too few requests): *insufficient evidence*, not
  *undisturbed*;
- ``failed.unaffected_zones`` when the fault has no zone, or no request carries a zone.

- every figure of a population with no request in the window (``<population>.requests``).

A ``null`` not listed there means the figure was not reached: *never* (no first success, no
steady state in the window) or, for the failure figures (impact, detection, first success,
last failure) and first recovery, *not applicable* because nothing failed or nothing was
disturbed (``failed_total`` 0, ``disrupted`` false). A fault whose window a later fault cut
(``window_cut_by``) is judged only inside that window; the incident's recovery is the last
fault's, whose window runs through every heal to the end of the run.

Control plane and capacity
--------------------------
Each fault also has ``control_plane`` and ``capacity`` objects, from the sampler's samples
over the same window: :mod:`chaos.analysis.planes` defines them.

Service-wide figures of a fault
-------------------------------
- ``failed``: the service's failures by class, mid-stream apart, in flight at the injection
  apart, per zone, and ``unaffected_zones`` (failures of requests sent to targets outside the
  fault's zones; ``null`` with its reason for a fault with no zone or one that affects every
  target, and for targets without a zone).
- ``goodput_rps``: requests per second that succeeded and met the SLO (TTFT, per-request p95
  inter-token latency, end-to-end), before the injection, during (injection to the service's
  steady state) and after (steady state to the end of the analysis window).
- ``resolution_s``: the median gap between consecutive planned sends in the window. No
  figure can be finer than that.

A client's retries (each population's ``retries``: logical requests and the amplification):
:mod:`chaos.analysis.retries`.
A device that stays bad (``device``: placements, failed starts, time to a healthy replica): :mod:`chaos.analysis.device`.
KV pressure (``kv_pressure``: preemptions, TTFT and ITL under a small vLLM KV cache): :mod:`chaos.analysis.kv_pressure`.
Who served (``locality``, ``warmup``; a straggler's ``straggler``), token continuity (``continuity``) and the
load as sent (``arrivals``): :mod:`chaos.analysis.who_served`, :mod:`chaos.analysis.cold_cache`,
:mod:`chaos.analysis.slow_replica`, :mod:`chaos.analysis.continuity`, :mod:`chaos.analysis.sending`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chaos.analysis import planes
from chaos.recording import records as rec, request_columns as rc
from chaos import scopes
from chaos.analysis.cold_cache import warmup
from chaos.analysis.continuity import token_continuity
from chaos.analysis.orphans import orphans_of
from chaos.analysis.sending import arrivals
from chaos.analysis import kv_pressure as kv_pressure_mod
from chaos.analysis import device as device_mod, new_version, restart as restart_mod, retries as retries_mod, slow_replica
from chaos.analysis import overload as overload_mod
from chaos.analysis.who_served import locality
from chaos.analysis.windows import (FORMAT_VERSION, INSUFFICIENT, NS, SLO, Definitions, Fault, SteadyState,
                                    faults_from_marks, run_end_ns, window_states)

Columns = rc.RequestColumns


def _rate(cols: Columns, rows: np.ndarray, met: np.ndarray, start_ns: int, end_ns: int) -> float | None:
    """Requests per second of ``rows`` sent in [start, end) that met the SLO."""
    if end_ns <= start_ns:
        return None
    sent = cols.sent_ns[rows]
    good = int(np.count_nonzero(met[rows] & (sent >= start_ns) & (sent < end_ns)))
    return round(good / ((end_ns - start_ns) / NS), 4)


def recovery(windows: list[tuple[int, bool]] | tuple[np.ndarray, np.ndarray], onset: int | None) -> dict[str, Any]:
    """First recovery, steady state (the last in-bound stretch) and relapses after ``onset``; ``windows``: the
    judged windows as (start, in bound) pairs, or as two arrays (starts, in bound).

    ``onset`` None: find it as the first window out of bound (a slow-only disruption)."""
    if isinstance(windows, tuple):
        starts, good = windows
    else:
        starts = np.array([s for s, _ in windows], dtype=np.int64)
        good = np.array([g for _, g in windows], dtype=bool)
    if onset is None:
        bad = np.flatnonzero(~good)
        if not len(bad):
            return {"disrupted": False, "first": None, "steady": None, "relapses": 0, "judged": bool(len(starts))}
        onset = int(starts[bad[0]])
    after = starts >= onset
    s, g = starts[after], good[after]
    first = int(s[np.argmax(g)]) if g.any() else None
    relapses = int(np.count_nonzero(g[:-1] & ~g[1:])) if first is not None else 0  # out again after in bound
    steady = None
    if len(g) and g[-1]:
        out = np.flatnonzero(~g)
        steady = int(s[out[-1] + 1]) if len(out) else int(s[0])
    return {"disrupted": True, "first": first, "steady": steady, "relapses": relapses, "judged": bool(len(s))}


def _population(t0: int, window_end_ns: int, cols: Columns, in_flight: np.ndarray, rs: np.ndarray,
                steady: SteadyState, lat: np.ndarray) -> tuple[dict[str, Any], str | None]:
    """One population's figures (``in_flight``, ``rs``: its rows, in send order); the second value is why
    steady state could not be judged."""
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    failed = np.concatenate((in_flight[~cols.ok[in_flight]], rs[~cols.ok[rs]]))
    impact = int(np.maximum(cols.sent_ns[failed], t0).min()) if len(failed) else None
    seen = cols.end_ns[failed]
    first_success = None
    if impact is not None:
        after = rs[cols.ok[rs] & (cols.sent_ns[rs] >= impact)]
        first_success = int(cols.sent_ns[after[0]]) if len(after) else None
    # requests in flight at the injection are judged at the injection (as their impact is)
    judged = np.concatenate((in_flight, rs))
    sent = np.concatenate((np.full(len(in_flight), t0, dtype=np.int64), cols.sent_ns[rs]))
    rcv = recovery(window_states(sent, cols.ok[judged], lat[judged], t0, window_end_ns, steady), impact)
    insufficient = None
    if not len(rs) and not len(in_flight):
        insufficient = "no request of this population in the analysis window"
    elif not rcv["judged"]:
        insufficient = (f"{INSUFFICIENT}: no {steady.window_s:g} s window with at least {steady.min_requests} "
                        f"requests lies inside the {round((window_end_ns - t0) / NS, 2)} s analysis window")
    if not rcv["disrupted"]:
        steady_at, first_at = (t0, None) if insufficient is None else (None, None)
    else:
        steady_at, first_at = rcv["steady"], rcv["first"]
    recovered = None if insufficient else steady_at is not None
    by_class: dict[str, int] = {}
    codes, counts = np.unique(cols.failure.codes[failed], return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        name = (cols.failure.values[code] if code >= 0 else None) or rec.OTHER
        by_class[name] = by_class.get(name, 0) + count
    n = len(rs) + len(in_flight)
    return {
        "requests": n,
        "in_flight_at_injection": len(in_flight),
        "failed_total": len(failed),
        "failed_mid_stream": int(np.count_nonzero(cols.first_token[failed])),
        "failed_by_class": dict(sorted(by_class.items())),
        "failed_ratio": round(len(failed) / n, 6) if n else None,
        "disrupted": rcv["disrupted"],
        "recovered": recovered,
        "time_to_impact_s": sec(impact),
        "time_to_detect_s": sec(int(seen.min())) if len(seen) else None,
        "time_to_first_success_s": sec(first_success),
        "time_to_first_recovery_s": sec(first_at),
        "time_to_steady_state_s": sec(steady_at),
        "time_to_last_failure_s": sec(int(seen.max())) if len(seen) else None,
        "relapses": None if insufficient else rcv["relapses"],
    }, insufficient


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article, as a reason reads it ("an engine-crash fault")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def affected_basis(fault: Fault, measured: list[rec.RequestRecord] | Columns) -> tuple[set[str] | None, str]:
    """The zones whose targets make up the affected population (None: every target), and why."""
    if scopes.get(fault.scope).every_target_affected:
        return None, (f"{a_or_an(fault.scope)} fault affects every target: Serve routes a request from any proxy "
                      f"to any replica")
    if not fault.zones:
        return None, f"the {fault.scope} fault has no failure domain (no zones): every target is affected"
    zoned = (measured.zone.known().any() if isinstance(measured, Columns)
             else any(r.zone is not None for r in measured))
    if not zoned:
        return None, "the targets carry no zone (one front-door URL): requests cannot be attributed to a domain"
    return set(fault.zones), f"requests sent to targets in {', '.join(fault.zones)}"


def fault_rows(cols: Columns, t0: int, window_end_ns: int, cut_by: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(in flight at the injection, sent in the analysis window): rows of ``cols`` (measured, in send order) as
    the module docstring counts them: a request in flight at an injection belongs to that fault, so the window
    of the fault before it ends there and no request is counted for two faults."""
    a, b = np.searchsorted(cols.sent_ns, [t0, window_end_ns], "left")
    rs = np.arange(a, b)
    if cut_by:
        rs = rs[cols.end_ns[a:b] <= window_end_ns]
    return np.flatnonzero(cols.end_ns[:a] > t0), rs


def analyse_fault(fault: Fault, measured: list[rec.RequestRecord] | Columns, window_end_ns: int,
                  measure_start_ns: int, steady: SteadyState, slo: SLO, cut_by: str | None = None) -> dict[str, Any]:
    cols = measured if isinstance(measured, Columns) else rc.from_records(sorted(measured, key=lambda r: r.sent_ns))
    t0 = fault.inject_ns
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    in_flight, rs = fault_rows(cols, t0, window_end_ns, cut_by)
    unmeasurable: dict[str, str] = {}
    lat = cols.latency()

    zones, why = affected_basis(fault, cols)
    pops: dict[str, dict[str, Any]] = {}
    for name, keep in (("service", None), ("affected", zones)):
        mine = (lambda rows: rows) if keep is None else (lambda rows: rows[cols.zone.isin(keep)[rows]])  # noqa: E731
        figures, insufficient = _population(t0, window_end_ns, cols, mine(in_flight), mine(rs), steady, lat)
        if insufficient:
            keys = ("time_to_steady_state_s", "time_to_first_recovery_s", "recovered", "relapses")
            if not figures["requests"]:
                keys += ("requests", "failed_ratio")
            for key in keys:
                unmeasurable[f"{name}.{key}"] = insufficient
        pops[name] = figures
    pops["affected"] = {"basis": "service" if zones is None else "fault_domain",
                        "zones": None if zones is None else sorted(zones), "why": why, **pops["affected"]}

    svc = pops["service"]
    failed = np.concatenate((in_flight[~cols.ok[in_flight]], rs[~cols.ok[rs]]))
    mid_stream = svc["failed_mid_stream"]
    if not fault.zones:
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = f"the {fault.scope} fault has no zone: no zone is unaffected by it"
    elif scopes.get(fault.scope).every_target_affected:
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = (f"{a_or_an(fault.scope)} fault affects every target (Serve routes from "
                                                   f"any proxy to any replica): no zone is unaffected by it")
    elif not cols.zone.known().any():
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = "the targets carry no zone: failures cannot be placed in a zone"
    else:
        zone = cols.zone.take(failed)
        unaffected = int(np.count_nonzero(zone.known() & ~zone.isin(set(fault.zones))))
    gaps = np.diff(np.sort(cols.planned_ns[rs]))  # the schedule's resolution, not the (bunched) sends
    a, b = np.searchsorted(cols.sent_ns, [measure_start_ns, t0], "left")
    before = np.arange(a, max(a, b))
    met = cols.slo_met(slo)
    steady_ns = None if svc["time_to_steady_state_s"] is None else t0 + int(svc["time_to_steady_state_s"] * NS)
    recovered_at = steady_ns if steady_ns is not None else window_end_ns
    after = rs[(cols.sent_ns[rs] >= recovered_at) & cols.ok[rs]]
    return {
        "fault_id": fault.fault_id,
        "scope": fault.scope,
        "target": fault.target,
        "zones": fault.zones,
        "inject_ns": t0,
        "inject_end_s": sec(fault.inject_end_ns),
        "heal_start_s": sec(fault.heal_start_ns),
        "heal_end_s": sec(fault.heal_end_ns),
        "window_s": round((window_end_ns - t0) / NS, 4),
        "window_cut_by": cut_by,
        "affected": pops["affected"],
        "service": svc,
        "failed": {
            "total": len(failed),
            "in_flight_at_injection": int(np.count_nonzero(~cols.ok[in_flight])),
            "by_class": svc["failed_by_class"],
            "before_first_token": len(failed) - mid_stream,
            "mid_stream": mid_stream,
            "unaffected_zones": unaffected,
            "by_zone": _count_by(cols.zone.take(failed)),
        },
        "goodput_rps": {
            "before": _rate(cols, before, met, measure_start_ns, t0),
            "during": _rate(cols, rs, met, t0, recovered_at) if svc["disrupted"] else None,
            "after": _rate(cols, rs, met, recovered_at, window_end_ns) if steady_ns is not None else None,
        },
        "p95_ttft_s": {
            "before": rc.percentile(_known(lat[before]), 0.95),
            "after": rc.percentile(_known(lat[after]), 0.95),
        },
        "resolution_s": round(rc.percentile(gaps, 0.5) / NS, 4) if len(gaps) else None,
        "unmeasurable": unmeasurable,
        # the fault's proof, as it looked at the system after acting (chaos.scopes.faults.prove); null for
        # runs recorded before faults proved themselves
        "effect": fault.detail.get("effect"),
        "detail": fault.detail,
    }


def _known(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _count_by(column: rc.Coded) -> dict[str, int]:
    out: dict[str, int] = {}
    codes, counts = np.unique(column.codes, return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        key = str(column.values[code] if code >= 0 else None)
        out[key] = out.get(key, 0) + count
    return dict(sorted(out.items()))


def analyse(run: rec.RunRecords, steady: SteadyState | None = None, slo: SLO | None = None,
            population: str = "affected") -> dict[str, Any]:
    """The summary of one run: totals, then one entry per fault, grouped by scope."""
    steady = steady or SteadyState()
    slo = slo or SLO()
    every = rc.of(run)  # every request, in send order
    measured = every.take(every.measure)
    faults = faults_from_marks(run.marks)
    end_ns = run_end_ns(run, every)
    measure_start = int(measured.sent_ns[0]) if len(measured) else end_ns
    results = []
    logical = retries_mod.logical_requests(every) if retries_mod.policy_of(run.header) else None
    for i, f in enumerate(faults):
        nxt = faults[i + 1] if i + 1 < len(faults) else None
        window_end = nxt.inject_ns if nxt else end_ns
        fault = analyse_fault(f, measured, window_end, measure_start, steady, slo,
                              cut_by=nxt.fault_id if nxt else None)
        fault.update(planes.analyse_fault(f.inject_ns, window_end, run.samples, fault["unmeasurable"],
                                          first_inject_ns=faults[0].inject_ns, scope=f.scope))
        new_version.complete(fault, measured, window_end)  # an upgrade is complete once the new version serves
        # who served: outside the client's zone and region; the replacement's cold prefix cache
        fault["locality"] = locality(fault, measured, window_end, measure_start)
        fault["warmup"] = warmup(fault, every, measured, window_end, measure_start, steady)
        # a client's retries: logical requests and the amplification, per population (chaos.analysis.retries)
        retries_mod.fault_retries(fault, logical, every, window_end, measure_start, steady)
        in_flight, rows = fault_rows(measured, f.inject_ns, window_end, fault["window_cut_by"])
        # token by token: what its streams lost, repeated, reordered or corrupted, and their migrations
        fault["continuity"] = token_continuity(fault, measured, np.concatenate((in_flight, rows)),
                                               recorded="continuity" in run.header)
        # the engines of the replica it killed or replaced: gone, and when (chaos.system.orphan_watch)
        fault["orphans"] = orphans_of(f.scope, f.detail, fault["unmeasurable"])
        if restart_mod.applies(f.scope):  # its replacement could not start for a while: its starts counted
            fault["restart"] = restart_mod.restart(f, run.samples, window_end, fault["unmeasurable"])
        if device_mod.applies(f.scope):  # a node whose device stays bad: where its replacements went, and when
            fault["device"] = device_mod.device(f, measured.records(np.concatenate((in_flight, rows))), window_end,
                                                fault["unmeasurable"])
        if kv_pressure_mod.applies(run.samples):  # a small vLLM KV cache: its preemptions and latencies
            fault["kv_pressure"] = kv_pressure_mod.kv_pressure(f.inject_ns, measured, np.concatenate((in_flight, rows)),
                                                               run.samples, measure_start, window_end,
                                                               fault["unmeasurable"])
        if slow_replica.applies(f.scope):  # a replica slowed down: its share and latency against the others'
            fault["straggler"] = slow_replica.straggler(fault, measured.records(rows), window_end)
        results.append(fault)
    by_scope: dict[str, list[dict]] = {}
    for r in results:
        by_scope.setdefault(r["scope"], []).append(r)
    baseline_end = faults[0].inject_ns if faults else end_ns
    ok = int(np.count_nonzero(measured.ok))
    out = {
        "format_version": FORMAT_VERSION,
        "run_id": run.header.get("run_id"),
        "partial": run.partial,
        "torn_lines": run.torn_lines,
        "definitions": Definitions(steady, slo, population).to_dict(),
        "requests": {
            "total": len(every),
            "warmup": len(every) - len(measured),
            "measured": len(measured),
            "ok": ok,
            "failed": len(measured) - ok,
            "failed_before_first_fault": int(np.count_nonzero(~measured.ok[measured.sent_ns < baseline_end])),
        },
        "arrivals": arrivals(every),
        "faults": results,
        "by_scope": by_scope,
    }
    # a load step above capacity: goodput, refusals and timeouts per phase, the time to goodput recovered
    stepped = overload_mod.overload(run.header, every, steady.min_success_ratio, steady.window_s,
                                    stopped_ns=(run.footer or {}).get("stopped_ns"))
    if stepped is not None:
        out["overload"] = stepped
    return out
