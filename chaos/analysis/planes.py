"""Recovery of the control plane and of capacity per fault, from the sampler's samples alone.

Plain Python: no Ray, no Kubernetes. The data plane (requests) is :mod:`chaos.analysis`;
these are the two other recovery planes, measured from the same ``inject_start`` mark over
the same analysis window (to the next fault's injection or the end of the run). A sample's
instant is when it was started; the sampling period (``resolution_s``) bounds the precision.

Control plane (``control_plane``): *up* in a sample when the GCS answered its health check
and the Serve controller answered. *Lost* when it was not up in at least ``MIN_LOSS_SAMPLES``
(2) consecutive samples: the dashboard's GCS health check gives the GCS 0.1 s to answer
(Ray 2.60, ``dashboard/modules/reporter/utils.py``), so on a busy machine one sample can fail with
nothing down; a lone failed sample is a ``blip`` (counted, not an outage), as KubeRay's probes
need several failures in a row before they act.

- ``time_to_loss_s``: the first sample of the first loss in the window.
- ``time_to_restored_s``: the first up sample after the last loss (a relapse moves it later);
  ``0`` when it was never lost; ``null`` when the window ends with the control plane still not up.
- ``outage_s``: restored - loss, the span of the incident; ``0`` when it was never lost.
- ``losses``: how many separate losses; ``blips``: lone samples not up, outside any loss.

Capacity (``capacity``): the **target** is the placement the application had in the last
sample before the injection in which the controller answered (serving replicas: RUNNING or PENDING_MIGRATION, per deployment
and zone: the rig deploys and waits for the placement the app asks for before any fault).
Samples in which the controller did not answer say nothing about capacity and are skipped,
never read as zero.

- ``target_replicas``, ``min_replicas`` (the fewest serving replicas, all deployments, in a
  known sample of the window), ``min_ratio`` = min / target.
- ``time_to_lost_s``: the first known sample below the target in some deployment and zone.
- ``time_to_restored_s``: the first known sample at the target everywhere after the last one
  below it; ``0`` when capacity was never lost; ``null`` when the window ends below it, and
  unmeasurable when the window ends with samples in which the controller did not answer.
- ``nodes_min_alive``: the fewest worker nodes alive (per zone and in all), in the window.

Honest nulls, with the reason in the fault's ``unmeasurable`` map: every figure of a plane
when no sample lies in the window (not sampled, e.g. a run recorded before the sampler), or
when the samples leave a gap in it (longer than 4 periods and 5 s, from the injection to the
window's end: the sampler fell behind, so a loss could have gone unseen); capacity when no
baseline sample exists (no target to compare with).

The capacity **target** is the same for every fault of a run: the placement before its first
fault (a second fault is not measured against what the first one left).

Replacement (``replacement``, from the RUNNING replicas' ids in the samples): what an upgrade (or
any fault) replaced. ``replicas_before``: the ids RUNNING in the last known sample before the
injection; ``replaced``: how many of them were gone by the window's end; ``new``: ids RUNNING in
the window that were not there before, each with the instant first seen (``running_s``), the
instant first seen STARTING on a node (``scheduled_s``: allocated, its constructor running; a
replica still waiting for a node is not counted; null when no sample saw it starting) and its
start (``start_s`` = running - scheduled: for a vLLM replica, its engine's start; within a
sampling period);
``gone``: each old id with the instant it was first missing (``gone_s``);
``time_to_complete_s``: the first known sample in which no old id runs and at least as many
replicas run as before (the replicas replaced); null with the reason when it never happened in
the window, or when the samples carry no ids (a run recorded before they did). For an upgrade,
:mod:`chaos.analysis.new_version` then requires the new version serving too, from the responses.
"""

from __future__ import annotations

from typing import Any

from chaos.analysis import figures
from chaos.recording import records as rec
from chaos import scopes
from chaos.base.stats import percentile

NS = 1_000_000_000
# the samples must cover the window: no gap longer than this many periods (and MIN_GAP_S)
MAX_GAP_PERIODS = 4
MIN_GAP_S = 5.0  # a sample whose probes time out takes up to 2 s (chaos.system.sampler.PROBE_TIMEOUT_S)


def _sec(t0: int, ns: int | None) -> float | None:
    return None if ns is None else round((ns - t0) / NS, 4)


def _loss_and_restore(points: list[tuple[int, bool]]) -> tuple[int | None, int | None]:
    """(first bad instant, first good instant after the last bad one) of (t, good) points."""
    loss = next((t for t, good in points if not good), None)
    if loss is None:
        return None, None
    restored = None
    for t, good in points:
        if not good:
            restored = None
        elif restored is None:
            restored = t
    return loss, restored


def resolution(samples: list[rec.Sample]) -> float | None:
    """The median gap between consecutive samples, in seconds (None for fewer than two)."""
    gaps = [b.t_ns - a.t_ns for a, b in zip(samples, samples[1:])]
    return round(percentile(gaps, 0.5) / NS, 4) if gaps else None


MIN_LOSS_SAMPLES = 2


def debounced(points: list[tuple[int, bool]], min_run: int = MIN_LOSS_SAMPLES) -> tuple[list[tuple[int, bool]], int]:
    """The (t, good) points with every run of fewer than ``min_run`` bad points read as good (a run that
    ends the window counts whatever its length: it is not known to be over), and how many such blips."""
    out, blips, i = list(points), 0, 0
    while i < len(points):
        if points[i][1]:
            i += 1
            continue
        j = i
        while j < len(points) and not points[j][1]:
            j += 1
        if j - i < min_run and j < len(points):
            blips += j - i
            for k in range(i, j):
                out[k] = (points[k][0], True)
        i = j
    return out, blips


def control_plane(t0: int, window: list[rec.Sample], unmeasurable: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": len(window), "time_to_loss_s": None, "time_to_restored_s": None,
                           "outage_s": None, "losses": None, "blips": None, "max_gcs_latency_s": None}
    if not window:
        for k in ("time_to_loss_s", "time_to_restored_s", "outage_s"):
            unmeasurable[f"control_plane.{k}"] = "not sampled: no control-plane sample in the analysis window"
        return out
    points, out["blips"] = debounced([(s.t_ns, s.control_up) for s in window])
    out["losses"] = sum(1 for (_, a), (_, b) in zip([(0, True)] + points, points) if a and not b)
    loss, restored = _loss_and_restore(points)
    out["time_to_loss_s"] = _sec(t0, loss)
    out["time_to_restored_s"] = 0.0 if loss is None else _sec(t0, restored)
    if loss is None:
        out["outage_s"] = 0.0
    elif restored is not None:
        out["outage_s"] = round((restored - loss) / NS, 4)
    out["max_gcs_latency_s"] = max((s.gcs_latency_s for s in window if s.gcs_latency_s is not None), default=None)
    return out


def _short(s: rec.Sample, target: dict[str, dict[str, int]]) -> bool:
    have = s.replicas or {}
    return any(have.get(dep, {}).get(zone, 0) < n for dep, zones in target.items() for zone, n in zones.items())


def capacity(t0: int, baseline: list[rec.Sample], window: list[rec.Sample],
             unmeasurable: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"target_replicas": None, "target": None, "min_replicas": None, "min_ratio": None,
                           "time_to_lost_s": None, "time_to_restored_s": None, "nodes_min_alive": None,
                           "nodes_min_alive_per_zone": None}
    known = [s for s in window if s.controller_ok and s.replicas is not None]
    nodes = [s.nodes_alive for s in window if s.nodes_alive is not None]
    if nodes:
        zones = sorted({z for n in nodes for z in n})
        out["nodes_min_alive_per_zone"] = {z: min(n.get(z, 0) for n in nodes) for z in zones}
        out["nodes_min_alive"] = min(sum(n.values()) for n in nodes)
    else:
        unmeasurable["capacity.nodes_min_alive"] = "no sample in the window knew the nodes alive"
    ref = next((s for s in reversed(baseline) if s.controller_ok and s.replicas), None)
    reason = None
    if not window:
        reason = "not sampled: no sample in the analysis window"
    elif ref is None:
        reason = "no baseline sample before the injection: no target placement to compare with"
    elif not known:
        reason = "the Serve controller answered no sample in the window: capacity unknown"
    if reason:
        for k in ("target_replicas", "min_replicas", "min_ratio", "time_to_lost_s", "time_to_restored_s"):
            unmeasurable[f"capacity.{k}"] = reason
        if ref is not None:
            out["target"] = ref.replicas
            out["target_replicas"] = sum(sum(z.values()) for z in ref.replicas.values())
        return out
    target = ref.replicas
    total = sum(sum(z.values()) for z in target.values())
    out["target"], out["target_replicas"] = target, total
    out["min_replicas"] = min(sum(sum(z.values()) for z in (s.replicas or {}).values()) for s in known)
    out["min_ratio"] = round(out["min_replicas"] / total, 4) if total else None
    lost, restored = _loss_and_restore([(s.t_ns, not _short(s, target)) for s in known])
    out["time_to_lost_s"] = _sec(t0, lost)
    if window[-1] is not known[-1]:  # the controller stopped answering: the end is unknown
        unmeasurable["capacity.time_to_restored_s"] = (
            f"the Serve controller answered no sample from {_sec(t0, known[-1].t_ns)} s to the end of the "
            f"window: capacity at the end is unknown")
    else:
        out["time_to_restored_s"] = 0.0 if lost is None else _sec(t0, restored)
    return out


def coverage_gap(t0: int, window_end_ns: int, window: list[rec.Sample], period_s: float | None) -> str | None:
    """Why the samples do not cover the window (a gap longer than ``MAX_GAP_PERIODS`` periods, and at
    least ``MIN_GAP_S``, between the injection, the samples and the window's end), or None."""
    if not window:
        return None  # said as "not sampled"
    limit = max(MIN_GAP_S, MAX_GAP_PERIODS * (period_s or 0.0))
    edges = [t0] + [s.t_ns for s in window] + [window_end_ns]
    gap, at = max((b - a, a) for a, b in zip(edges, edges[1:]))
    if gap / NS > limit:
        return (f"not observed for {gap / NS:.1f} s from {(at - t0) / NS:.1f} s (samples more than {limit:g} s "
                f"apart): the sampler fell behind or stopped")
    return None


def _ids(s: rec.Sample) -> set[str]:
    return {i for ids in (s.replica_ids or {}).values() for i in ids}


def replacement(t0: int, before: list[rec.Sample], window: list[rec.Sample],
                unmeasurable: dict[str, str], scope: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"replicas_before": None, "replaced": None, "new": [], "gone": [],
                           "time_to_complete_s": None}
    ref = next((s for s in reversed(before) if s.replica_ids is not None and s.controller_ok), None)
    known = [s for s in window if s.replica_ids is not None and s.controller_ok]
    reason = None
    if ref is None:
        reason = "no sample before the injection knew the replicas' ids (runs recorded before they were sampled)"
    elif not known:
        reason = "no sample in the window knew the replicas' ids"
    if reason:
        unmeasurable["replacement"] = reason
        return out
    old = _ids(ref)
    out["replicas_before"] = len(old)
    new_seen: dict[str, int] = {}
    gone_at: dict[str, int] = {}
    scheduled: dict[str, int] = {}
    for s in before[-1:] + window:  # a replacement may be scheduled before the window's first sample
        for i in {i for ids in (s.starting_ids or {}).values() for i in ids} - old:
            scheduled.setdefault(i, s.t_ns)
    complete = None
    for s in known:
        ids = _ids(s)
        for i in ids - old:
            new_seen.setdefault(i, s.t_ns)
        for i in old - ids:
            gone_at.setdefault(i, s.t_ns)
        if complete is None and not (ids & old) and len(ids) >= len(old):
            complete = s.t_ns
    out["replaced"] = len(old - _ids(known[-1]))
    out["new"] = [{"replica": i, "running_s": _sec(t0, t), "scheduled_s": _sec(t0, scheduled.get(i)),
                   "start_s": _sec(scheduled[i], t) if i in scheduled else None}
                  for i, t in sorted(new_seen.items(), key=lambda x: x[1])]
    out["gone"] = [{"replica": i, "gone_s": _sec(t0, t)} for i, t in sorted(gone_at.items(), key=lambda x: x[1])]
    out["time_to_complete_s"] = _sec(t0, complete)
    if complete is None:
        # None: not told (measured as an upgrade); else only a scope meant to replace every replica
        if scope is None or scopes.get(scope).replaces_every_replica:
            unmeasurable["replacement.time_to_complete_s"] = (
                f"not every replica running before the injection was replaced within the window "
                f"({out['replaced']} of {len(old)})")
        else:
            unmeasurable["replacement.time_to_complete_s"] = (
                f"not applicable: a {scope} fault does not replace every replica ({out['replaced']} of {len(old)} "
                "replaced); only an upgrade's completion is measured")
    return out


def registered(t0: int, window: list[rec.Sample], baseline: list[rec.Sample], planes: dict[str, dict[str, Any]],
               unmeasurable: dict[str, str]) -> list[str]:
    """The figures of the sampled planes registered in the catalogue with a derivation of their own
    (:func:`chaos.analysis.figures.register`), computed into their plane with their reason when null; their keys."""
    keys = []
    for fig in (f for plane in figures.SAMPLED_PLANES for f in figures.of(plane) if f.derive):
        planes[fig.plane][fig.name], why = fig.derive(t0, window, baseline)
        if why:
            unmeasurable[fig.key()] = why
        keys.append(fig.key())
    return keys


def analyse_fault(t0: int, window_end_ns: int, samples: list[rec.Sample], unmeasurable: dict[str, str],
                  first_inject_ns: int | None = None, scope: str | None = None) -> dict[str, Any]:
    """Both planes of one fault; adds its reasons to the fault's ``unmeasurable`` map. The capacity
    target is the placement before the run's *first* fault (``first_inject_ns``), so that a later
    fault is not measured against what an earlier one left."""
    window = [s for s in samples if t0 <= s.t_ns < window_end_ns]
    baseline = [s for s in samples if s.t_ns < (first_inject_ns if first_inject_ns is not None else t0)]
    period = resolution(samples)
    gap = coverage_gap(t0, window_end_ns, window, period)
    cp = control_plane(t0, window, unmeasurable)
    cp["resolution_s"] = resolution(window)
    cap = capacity(t0, baseline, window, unmeasurable)
    planes = {"control_plane": cp, "capacity": cap}
    derived = registered(t0, window, baseline, planes, unmeasurable)
    if gap:
        keys = [f"control_plane.{k}" for k in ("time_to_loss_s", "time_to_restored_s", "outage_s")]
        keys += [f"capacity.{k}" for k in ("min_replicas", "min_ratio", "time_to_lost_s", "time_to_restored_s")]
        for key in keys + derived:
            plane, _, name = key.partition(".")
            planes[plane][name] = None
            unmeasurable[key] = gap
    from chaos.system import frontdoor

    return {"control_plane": cp, "capacity": cap,
            "replacement": replacement(t0, [s for s in samples if s.t_ns < t0], window, unmeasurable, scope),
            "front_door": frontdoor.fault_figures(t0, window_end_ns, samples, unmeasurable)}
