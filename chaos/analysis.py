"""Recovery per fault, per population, from the request records alone. Plain Python: no Ray, no Kubernetes.

This docstring is the reference for every data-plane figure (the README repeats it in short).
All instants are ``time.time_ns()`` values; every figure is in seconds relative to the
fault's ``inject_start`` mark. Warm-up requests are left out everywhere.

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

A population's requests in a fault's **analysis window** are those sent from the injection
to the window's end (the next fault's injection, or the end of the run), plus those sent
before the injection and still in flight at it (``in_flight_at_injection``: they ended after
it). A request belongs to one fault only: one still in flight at the next fault's injection is
that fault's, not this one's.

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
over the same window: :mod:`chaos.planes` defines them.

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
- ``warmup`` (:func:`warmup`): the cost of a replacement's cold prefix cache. **Prefix-sharing
  requests** are the turns of sessions (``load.sessions``: each shares its group's system prompt,
  and from its second turn its conversation, with earlier requests). ``baseline_p95_ttft_s``: the
  p95 latency of the successful prefix-sharing requests measured before the injection. The
  **replacement**: a replica that served a prefix-sharing request in the window and had served
  nothing before the injection (warm-up requests included); **warm** replicas: those that had.
  Windows as for steady state (``window_s``, starting at the injection and at each prefix-sharing
  request's send, wholly inside the window); one is judged when it holds at least ``min_requests``
  successful prefix-sharing requests served by the replacement and as many served by warm replicas
  (so a cold cache is told apart from the capacity lost meanwhile: both sides see the same load),
  and is in bound when the replacement's p95 latency is at most ``steady_state.warm_factor``
  (default 1.2) times the warm replicas'. ``time_to_warm_s``: the start of the first in-bound
  window from which the replacement **stays** warm: all the prefix-sharing requests from that
  start to the analysis window's end, pooled, are in bound too (its p95 against the warm replicas'
  over the same span: ``pooled_p95_ttft_s``); never before the replacement's first request;
  ``null`` with ``warmed`` false when no window qualifies (not warm within the window). Why pooled,
  not "every later window in bound" as for steady state: a p95 of the 3-15 requests a replica
  serves in a 5 s window is nearly their maximum, and over the hundred overlapping windows of a
  recovery window some replica that is as warm as the others looks 1.2 times slower by chance. On
  synthetic runs (8 req/s, 3 replicas, a replacement cold for 12 s, lognormal TTFT of shape 0.35)
  the every-window rule called it warm in 39 of 60 runs, median 49 s; the pooled rule in 100 of
  100, median 11.4 s, p90 15.3 s (``tests/unit/test_warmup_locality.py``, the power test). ``null`` with its ``reason`` (also in ``unmeasurable``: ``warmup.time_to_warm_s``) when no
  prefix-sharing request was sent, the responses named no replica, nothing was replaced, or no
  window could be judged (insufficient evidence).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from chaos import planes, records as rec, scopes
from chaos.stats import percentile  # the rig's one convention: nearest rank

NS = 1_000_000_000
FORMAT_VERSION = 2  # of summary.json; 1 was the single-population summary before 2026-12
POPULATIONS = ("affected", "service")
INSUFFICIENT = "insufficient evidence"


@dataclass
class SteadyState:
    window_s: float = 5.0
    min_success_ratio: float = 0.99
    max_p95_ttft_s: float | None = None
    min_requests: int = 3
    warm_factor: float = 1.2  # the warm-up figure: a replacement is warm within this factor of warm replicas

    @classmethod
    def from_dict(cls, d: dict | None) -> "SteadyState":
        return cls(**{k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__})


@dataclass
class SLO:
    ttft_s: float | None = 2.0
    itl_s: float | None = 0.5
    e2e_s: float | None = None

    @classmethod
    def from_dict(cls, d: dict | None) -> "SLO":
        return cls(**{k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__})

    def met(self, r: rec.RequestRecord) -> bool:
        if not r.ok:
            return False
        if self.ttft_s is not None and r.ttft_s is not None and r.ttft_s > self.ttft_s:
            return False
        if self.itl_s is not None and r.itl_p95_s is not None and r.itl_p95_s > self.itl_s:
            return False
        if self.e2e_s is not None and r.e2e_s is not None and r.e2e_s > self.e2e_s:
            return False
        return True


@dataclass
class Definitions:
    """What a summary is computed with: written into the run header, so that
    ``availproof analyse`` can derive the same figures from the records alone."""

    steady_state: SteadyState = field(default_factory=SteadyState)
    slo: SLO = field(default_factory=SLO)
    population: str = "affected"  # which population the bounds are checked on

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "steady_state": asdict(self.steady_state),
                "slo": asdict(self.slo), "population": self.population}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Definitions":
        d = d or {}
        return cls(SteadyState.from_dict(d.get("steady_state")), SLO.from_dict(d.get("slo")),
                   d.get("population", "affected"))


@dataclass
class Fault:
    """The four marks of one fault, folded."""

    fault_id: str
    scope: str
    target: str
    zones: list[str]
    inject_ns: int
    inject_end_ns: int | None = None
    heal_start_ns: int | None = None
    heal_end_ns: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def faults_from_marks(marks: list[rec.FaultMark]) -> list[Fault]:
    out: dict[str, Fault] = {}
    for m in sorted(marks, key=lambda m: m.t_ns):
        f = out.get(m.fault_id)
        if m.event == rec.INJECT_START:
            if f is None:
                out[m.fault_id] = Fault(m.fault_id, m.scope, m.target, list(m.zones), m.t_ns, detail=dict(m.detail))
        elif f is not None:
            if m.event == rec.INJECT_END:
                f.inject_end_ns = m.t_ns
            elif m.event == rec.HEAL_START:
                f.heal_start_ns = m.t_ns
            elif m.event == rec.HEAL_END:
                f.heal_end_ns = m.t_ns
            f.detail.update(m.detail)
    return sorted(out.values(), key=lambda f: f.inject_ns)


def _end_ns(r: rec.RequestRecord) -> int:
    """The instant the client saw the request end (its outcome observed)."""
    return r.sent_ns + int((r.e2e_s or 0) * NS)


def latency(r: rec.RequestRecord) -> float | None:
    """TTFT for a streamed request; end-to-end for one that was not streamed."""
    return r.ttft_s if r.stream else r.e2e_s


def _rate(rs: list[rec.RequestRecord], slo: SLO, start_ns: int, end_ns: int) -> float | None:
    if end_ns <= start_ns:
        return None
    good = sum(1 for r in rs if start_ns <= r.sent_ns < end_ns and slo.met(r))
    return round(good / ((end_ns - start_ns) / NS), 4)


def _window_state(ws: list[rec.RequestRecord], steady: SteadyState) -> bool | None:
    """True in bound, False out of bound, None too thin to judge."""
    if len(ws) < max(1, steady.min_requests):
        return None
    ok = [r for r in ws if r.ok]
    if len(ok) / len(ws) < steady.min_success_ratio:
        return False
    if steady.max_p95_ttft_s is not None:
        p95 = percentile([x for x in map(latency, ok) if x is not None], 0.95)
        if p95 is None or p95 > steady.max_p95_ttft_s:
            return False
    return True


def judge_windows(rs: list[rec.RequestRecord], t0: int, end_ns: int, steady: SteadyState,
                  judge: Callable[[list[rec.RequestRecord]], bool | None] | None = None) -> list[tuple[int, bool]]:
    """(start, in bound) of every judged window; ``rs`` sorted by send, all sent in [t0, end). A window
    is judged by ``judge`` (True in bound, False out, None too thin), by default the steady state's."""
    w = int(steady.window_s * NS)
    out: list[tuple[int, bool]] = []
    j = k = 0
    for s in [t0] + [r.sent_ns for r in rs]:
        if s + w > end_ns:
            break
        while j < len(rs) and rs[j].sent_ns < s:
            j += 1
        k = max(k, j)
        while k < len(rs) and rs[k].sent_ns < s + w:
            k += 1
        state = _window_state(rs[j:k], steady) if judge is None else judge(rs[j:k])
        if state is not None and (not out or out[-1][0] != s):
            out.append((s, state))
    return out


def recovery(windows: list[tuple[int, bool]], onset: int | None) -> dict[str, Any]:
    """First recovery, steady state (the last in-bound stretch) and relapses after ``onset``.

    ``onset`` None: find it as the first window out of bound (a slow-only disruption)."""
    if onset is None:
        onset = next((s for s, good in windows if not good), None)
        if onset is None:
            return {"disrupted": False, "first": None, "steady": None, "relapses": 0,
                    "judged": bool(windows)}
    after = [(s, good) for s, good in windows if s >= onset]
    first = next((s for s, good in after if good), None)
    relapses, prev = 0, None
    steady = None
    for s, good in after:
        if good and steady is None:
            steady = s
        elif not good:
            if prev is True and first is not None:
                relapses += 1
            steady = None
        prev = good
    return {"disrupted": True, "first": first, "steady": steady, "relapses": relapses, "judged": bool(after)}


def _population(t0: int, window_end_ns: int, in_flight: list[rec.RequestRecord], rs: list[rec.RequestRecord],
                steady: SteadyState) -> tuple[dict[str, Any], str | None]:
    """One population's figures; the second value is why steady state could not be judged."""
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    failed = [r for r in in_flight if not r.ok] + [r for r in rs if not r.ok]
    impact = min((max(r.sent_ns, t0) for r in failed), default=None)
    seen = [_end_ns(r) for r in failed]
    first_success = None
    if impact is not None:
        first_success = next((r.sent_ns for r in rs if r.ok and r.sent_ns >= impact), None)
    # requests in flight at the injection are judged at the injection (as their impact is)
    at_injection = [dataclasses.replace(r, sent_ns=t0) for r in in_flight]
    rcv = recovery(judge_windows(at_injection + rs, t0, window_end_ns, steady), impact)
    insufficient = None
    if not rs and not in_flight:
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
    for r in failed:
        by_class[r.failure or rec.OTHER] = by_class.get(r.failure or rec.OTHER, 0) + 1
    n = len(rs) + len(in_flight)
    return {
        "requests": n,
        "in_flight_at_injection": len(in_flight),
        "failed_total": len(failed),
        "failed_mid_stream": sum(1 for r in failed if r.got_first_token),
        "failed_by_class": dict(sorted(by_class.items())),
        "failed_ratio": round(len(failed) / n, 6) if n else None,
        "disrupted": rcv["disrupted"],
        "recovered": recovered,
        "time_to_impact_s": sec(impact),
        "time_to_detect_s": sec(min(seen)) if seen else None,
        "time_to_first_success_s": sec(first_success),
        "time_to_first_recovery_s": sec(first_at),
        "time_to_steady_state_s": sec(steady_at),
        "time_to_last_failure_s": sec(max(seen)) if seen else None,
        "relapses": None if insufficient else rcv["relapses"],
    }, insufficient


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article, as a reason reads it ("an engine-crash fault")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def affected_basis(fault: Fault, measured: list[rec.RequestRecord]) -> tuple[set[str] | None, str]:
    """The zones whose targets make up the affected population (None: every target), and why."""
    if scopes.get(fault.scope).every_target_affected:
        return None, (f"{a_or_an(fault.scope)} fault affects every target: Serve routes a request from any proxy "
                      f"to any replica")
    if not fault.zones:
        return None, f"the {fault.scope} fault has no failure domain (no zones): every target is affected"
    if not any(r.zone is not None for r in measured):
        return None, "the targets carry no zone (one front-door URL): requests cannot be attributed to a domain"
    return set(fault.zones), f"requests sent to targets in {', '.join(fault.zones)}"


def analyse_fault(fault: Fault, measured: list[rec.RequestRecord], window_end_ns: int, measure_start_ns: int,
                  steady: SteadyState, slo: SLO, cut_by: str | None = None) -> dict[str, Any]:
    t0 = fault.inject_ns
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    # a request in flight at an injection belongs to that fault: the window of the fault before
    # it ends there, so no request is counted for two faults
    rs = [r for r in measured if t0 <= r.sent_ns < window_end_ns and not (cut_by and _end_ns(r) > window_end_ns)]
    in_flight = [r for r in measured if r.sent_ns < t0 < _end_ns(r)]
    unmeasurable: dict[str, str] = {}

    zones, why = affected_basis(fault, measured)
    pops: dict[str, dict[str, Any]] = {}
    for name, keep in (("service", None), ("affected", zones)):
        pick = (lambda xs: xs) if keep is None else (lambda xs: [r for r in xs if r.zone in keep])  # noqa: E731
        figures, insufficient = _population(t0, window_end_ns, pick(in_flight), pick(rs), steady)
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
    failed = [r for r in in_flight if not r.ok] + [r for r in rs if not r.ok]
    mid_stream = svc["failed_mid_stream"]
    if not fault.zones:
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = f"the {fault.scope} fault has no zone: no zone is unaffected by it"
    elif scopes.get(fault.scope).every_target_affected:
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = (f"{a_or_an(fault.scope)} fault affects every target (Serve routes from "
                                                   f"any proxy to any replica): no zone is unaffected by it")
    elif not any(r.zone is not None for r in measured):
        unaffected = None
        unmeasurable["failed.unaffected_zones"] = "the targets carry no zone: failures cannot be placed in a zone"
    else:
        unaffected = sum(1 for r in failed if r.zone is not None and r.zone not in fault.zones)
    planned = sorted(r.planned_ns for r in rs)  # the schedule's resolution, not the (bunched) sends
    gaps = [b - a for a, b in zip(planned, planned[1:])]
    before = [r for r in measured if measure_start_ns <= r.sent_ns < t0]
    steady_ns = None if svc["time_to_steady_state_s"] is None else t0 + int(svc["time_to_steady_state_s"] * NS)
    recovered_at = steady_ns if steady_ns is not None else window_end_ns
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
            "in_flight_at_injection": sum(1 for r in in_flight if not r.ok),
            "by_class": svc["failed_by_class"],
            "before_first_token": len(failed) - mid_stream,
            "mid_stream": mid_stream,
            "unaffected_zones": unaffected,
            "by_zone": _count_by(failed, "zone"),
        },
        "goodput_rps": {
            "before": _rate(before, slo, measure_start_ns, t0),
            "during": _rate(rs, slo, t0, recovered_at) if svc["disrupted"] else None,
            "after": _rate(rs, slo, recovered_at, window_end_ns) if steady_ns is not None else None,
        },
        "p95_ttft_s": {
            "before": percentile([x for x in map(latency, before) if x is not None], 0.95),
            "after": percentile([x for r in rs if recovered_at <= r.sent_ns and r.ok
                                 for x in [latency(r)] if x is not None], 0.95),
        },
        "resolution_s": round(percentile(gaps, 0.5) / NS, 4) if gaps else None,
        "unmeasurable": unmeasurable,
        # the fault's proof, as it looked at the system after acting (chaos.faults.prove); null for
        # runs recorded before faults proved themselves
        "effect": fault.detail.get("effect"),
        "detail": fault.detail,
    }


def _count_by(rs: list[rec.RequestRecord], attr: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rs:
        key = str(getattr(r, attr))
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def run_end_ns(run: rec.RunRecords) -> int:
    """The end of the run: the footer's stop instant, else the last request's end (a partial run)."""
    if run.footer and run.footer.get("stopped_ns"):
        return run.footer["stopped_ns"]
    if run.requests:
        return max(_end_ns(r) for r in run.requests) + 1
    return 0


def arrivals(reqs: list[rec.RequestRecord]) -> dict[str, Any]:
    """The load as it was sent (every request, warm-up included): how many, the rate achieved over
    the sending span, the coefficient of variation of the inter-arrival times of the send instants
    (1 for Poisson, 1 / sqrt(k) for gamma arrivals of burstiness k, 0 for constant), requests per
    load worker, and how many ``max_model_len`` clipped. ``reqs`` sorted by send."""
    sent = [r.sent_ns for r in reqs]
    gaps = [(b - a) / NS for a, b in zip(sent, sent[1:])]
    cv = None
    if len(gaps) >= 2 and sum(gaps) > 0:
        m = sum(gaps) / len(gaps)
        cv = round((sum((g - m) ** 2 for g in gaps) / (len(gaps) - 1)) ** 0.5 / m, 4)
    per_worker: dict[str, int] = {}
    for r in reqs:
        if r.worker is not None:
            per_worker[str(r.worker)] = per_worker.get(str(r.worker), 0) + 1
    span = (sent[-1] - sent[0]) / NS if len(sent) > 1 else 0.0
    return {"sent": len(reqs), "rate_rps": round((len(sent) - 1) / span, 3) if span > 0 else None,
            "interarrival_cv": cv, "per_worker": dict(sorted(per_worker.items(), key=lambda kv: int(kv[0]))),
            "clipped": sum(1 for r in reqs if r.clipped), "send_lag_ms": send_lag_ms(reqs)}


def send_lag_ms(reqs: list[rec.RequestRecord]) -> dict[str, Any] | None:
    """How late the client sent against its schedule (sent minus planned, ms): p50, p99, max, over the
    open loop's requests; null for a closed loop (no schedule: every request is sent when a user is free).
    A p99 of many ms means the client, not the system, set the timing (a burst sent one after another)."""
    lags = [(r.sent_ns - r.planned_ns) / 1e6 for r in reqs if r.planned_ns != r.sent_ns]
    if not lags:
        return None
    lags.sort()
    return {"p50": round(percentile(lags, 0.5), 3), "p99": round(percentile(lags, 0.99), 3),
            "max": round(lags[-1], 3), "requests": len(lags)}


def analyse(run: rec.RunRecords, steady: SteadyState | None = None, slo: SLO | None = None,
            population: str = "affected") -> dict[str, Any]:
    """The summary of one run: totals, then one entry per fault, grouped by scope."""
    steady = steady or SteadyState()
    slo = slo or SLO()
    reqs = sorted(run.requests, key=lambda r: r.sent_ns)
    measured = [r for r in reqs if r.phase == rec.MEASURE]
    faults = faults_from_marks(run.marks)
    end_ns = run_end_ns(run)
    measure_start = measured[0].sent_ns if measured else end_ns
    results = []
    for i, f in enumerate(faults):
        nxt = faults[i + 1] if i + 1 < len(faults) else None
        window_end = nxt.inject_ns if nxt else end_ns
        fault = analyse_fault(f, measured, window_end, measure_start, steady, slo,
                              cut_by=nxt.fault_id if nxt else None)
        fault.update(planes.analyse_fault(f.inject_ns, window_end, run.samples, fault["unmeasurable"],
                                          first_inject_ns=faults[0].inject_ns, scope=f.scope))
        # who served: outside the client's zone and region; the replacement's cold prefix cache
        fault["locality"] = locality(fault, measured, window_end, measure_start)
        fault["warmup"] = warmup(fault, reqs, measured, window_end, measure_start, steady)
        results.append(fault)
    by_scope: dict[str, list[dict]] = {}
    for r in results:
        by_scope.setdefault(r["scope"], []).append(r)
    baseline_end = faults[0].inject_ns if faults else end_ns
    baseline = [r for r in measured if r.sent_ns < baseline_end]
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run.header.get("run_id"),
        "partial": run.partial,
        "torn_lines": run.torn_lines,
        "definitions": Definitions(steady, slo, population).to_dict(),
        "requests": {
            "total": len(reqs),
            "warmup": len(reqs) - len(measured),
            "measured": len(measured),
            "ok": sum(1 for r in measured if r.ok),
            "failed": sum(1 for r in measured if not r.ok),
            "failed_before_first_fault": sum(1 for r in baseline if not r.ok),
        },
        "arrivals": arrivals(reqs),
        "faults": results,
        "by_scope": by_scope,
    }



# ---------------------------------------------------------------- who served: locality and warm-up
def _window_requests(fault: dict[str, Any], measured: list[rec.RequestRecord], window_end_ns: int) -> list[rec.RequestRecord]:
    """The requests sent in the fault's analysis window, as :func:`analyse_fault` counts them."""
    t0, cut = fault["inject_ns"], fault.get("window_cut_by")
    return [r for r in measured if t0 <= r.sent_ns < window_end_ns and not (cut and _end_ns(r) > window_end_ns)]


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


NO_PREFIX_SHARING = ("no prefix-sharing request was sent (the load has no sessions, and no trace rows that "
                     "share a first prefix block)")


def _prefix_sharing(r: rec.RequestRecord) -> bool:
    """A request that shares a prefix with others: a session's turn (its group's system prompt, its
    conversation so far: chaos.load.sessions), or a trace row whose first prefix block other rows begin
    with (its ``prefix_group``: chaos.load.workload.plan)."""
    return r.session is not None or r.prefix_group is not None


def prefix_sharing_basis(rs: list[rec.RequestRecord]) -> dict[str, Any]:
    """Which requests the warm-up counted as prefix-sharing: sessions' turns, trace rows by shared first
    block, how many of each, and how many groups."""
    turns = [r for r in rs if r.session is not None]
    traced = [r for r in rs if r.session is None and r.prefix_group is not None]
    return {"session_turns": len(turns), "trace_rows": len(traced),
            "groups": len({r.prefix_group for r in turns + traced if r.prefix_group is not None})}


def warmup(fault: dict[str, Any], every: list[rec.RequestRecord], measured: list[rec.RequestRecord],
           window_end_ns: int, measure_start_ns: int, steady: SteadyState) -> dict[str, Any]:
    """The replacement replica's cold prefix cache, from the injection (see the module doc: warm-up).

    ``baseline_p95_ttft_s``: p95 latency of the successful prefix-sharing requests measured before
    the injection. The **replacement**: a replica (``served_replica``) that served a prefix-sharing
    request in the window and served nothing before the injection (warm-up included); **warm**
    replicas: those that did. Windows as for steady state (W = ``window_s``, starting at the
    injection and at each prefix-sharing request's send); one is judged when it holds at least
    ``min_requests`` successful prefix-sharing requests served by the replacement and as many
    served by warm replicas, and is in bound when the p95 latency of the replacement's is at most
    ``warm_factor`` times the warm replicas'. ``time_to_warm_s``: the start of the first in-bound
    window from which every prefix-sharing request to the window's end, pooled, is in bound too,
    and not before the replacement's first request (null: not warm within it, ``warmed`` false)."""
    t0 = fault["inject_ns"]
    unmeasurable = fault["unmeasurable"]
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 4)  # noqa: E731
    before = [r for r in measured if measure_start_ns <= r.sent_ns < t0 and r.ok and _prefix_sharing(r)]
    baseline = percentile([x for x in map(latency, before) if x is not None], 0.95)
    seen_before = {r.served_replica for r in every if r.sent_ns < t0 and r.served_replica is not None}
    rs = [r for r in _window_requests(fault, measured, window_end_ns) if _prefix_sharing(r)]
    new = sorted({r.served_replica for r in rs if r.served_replica is not None} - seen_before)
    first_new = min((r.sent_ns for r in rs if r.served_replica in set(new)), default=None)
    out = {"factor": steady.warm_factor, "baseline_p95_ttft_s": baseline, "time_to_warm_s": None, "warmed": None,
           "requests": len(rs), "replacements": new, "first_served_by_replacement_s": sec(first_new),
           "windows_judged": 0, "pooled_p95_ttft_s": None, "reason": None}
    if baseline is None:
        unmeasurable["warmup.baseline_p95_ttft_s"] = (
            "no successful prefix-sharing request was measured before the injection" if any(map(_prefix_sharing, every))
            else NO_PREFIX_SHARING)
    out["prefix_sharing"] = prefix_sharing_basis([r for r in every if _prefix_sharing(r)])
    if not any(map(_prefix_sharing, every)):
        why = NO_PREFIX_SHARING
    elif not any(r.served_replica is not None for r in every if _prefix_sharing(r)):
        why = "the responses named no replica (no x-availproof-replica header): the replacement cannot be told"
    elif not new:
        why = ("nothing was replaced: no prefix-sharing request of the window was served by a replica not seen "
               "before the injection")
    else:
        cold, warm = set(new), seen_before

        def p95s(ws: list[rec.RequestRecord]) -> tuple[float, float] | None:
            c = [x for r in ws if r.ok and r.served_replica in cold for x in [latency(r)] if x is not None]
            w = [x for r in ws if r.ok and r.served_replica in warm for x in [latency(r)] if x is not None]
            if len(c) < max(1, steady.min_requests) or len(w) < max(1, steady.min_requests):
                return None
            return percentile(c, 0.95), percentile(w, 0.95)

        def judge(ws: list[rec.RequestRecord]) -> bool | None:
            p = p95s(ws)
            return None if p is None else p[0] <= steady.warm_factor * p[1]

        windows = judge_windows(rs, t0, window_end_ns, steady, judge)
        out["windows_judged"] = len(windows)
        if not windows:
            why = (f"{INSUFFICIENT}: no {steady.window_s:g} s window held {steady.min_requests} successful "
                   f"prefix-sharing requests served by the replacement and as many served by warm replicas")
        else:
            warm_at = None
            for start, good in windows:
                if good and judge([r for r in rs if r.sent_ns >= start]):  # and stays warm, pooled to the end
                    pooled = p95s([r for r in rs if r.sent_ns >= start])
                    out["pooled_p95_ttft_s"] = {"replacement": round(pooled[0], 6), "warm": round(pooled[1], 6)}
                    warm_at = max(start, first_new)  # never before it served
                    break
            out["time_to_warm_s"], out["warmed"] = sec(warm_at), warm_at is not None
            return out
    out["reason"] = why
    unmeasurable["warmup.time_to_warm_s"] = why
    return out
