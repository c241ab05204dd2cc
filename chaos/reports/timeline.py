"""The timeline of one run as a PNG (matplotlib, no display): which zone's requests failed when.

Top panel, one **lane per zone** of the requests' targets (and one ``no zone`` lane for
targets that carry none): every measured request is a point at its send time (seconds from
the first fault's injection) on its zone's lane: green dots succeeded, grey dots succeeded
but missed the SLO's TTFT, red crosses failed before the first token, orange crosses failed
mid-stream. The lanes of the fault's zones are labelled so, in red; each fault is a shaded span
from its injection to the end of its heal, with the injection and the heal as vertical lines
across every lane. The affected population's detect, first success and steady state are
dashed lines, the service's dotted, so a reader sees the figures where they come from.

Under the request lanes, when the run has sampler samples (:mod:`chaos.system.sampler`), three plane
lanes over the same time axis:

- **control plane**: a band, one segment per sample (from its instant to the next sample's):
  green up (GCS and the Serve controller answered), red GCS down, orange GCS up but the
  controller down; the control plane's restore point (:mod:`chaos.analysis.planes`) a dashed line;
- **replicas per zone**: RUNNING replicas of the model deployments (those whose name starts
  with one of :data:`chaos.system.placement.MODEL_DEPLOYMENTS`; all deployments when none does, and
  the lane's label says which) per zone, as steps, the target placement dotted in the zone's
  colour; a sample in which the controller did not answer is a gap (unknown, never zero);
  the capacity restore point a dashed line;
- **nodes alive per zone**: worker nodes the GCS holds ALIVE per zone, as steps (gaps when
  the GCS did not answer).

Bottom panel: the latency of each successful request (TTFT, or end-to-end when not
streamed), coloured by zone, on a log scale, with the same fault marks.

**A picture that scales** (:func:`bins`): a lane of more than :data:`POINTS_PER_LANE` requests is drawn per
time bin instead of point by point (:data:`BINS` bins across the run): the lane's requests per second as a
grey band, the failed share of each bin as red bars from the lane's floor (failures before the first token
and mid-stream apart), and each failure still a cross of its own while the lane has at most
:data:`FAILURE_POINTS` of them; the latency panel draws each zone's p50 and p95 per bin. So an hour costs
the picture what a minute does. Zones have the same
colour in the replicas, nodes and latency panels. Without samples (a run before the sampler)
the plane lanes are left out and the title says "not sampled".

:func:`lane_layout` is the lane arrangement on its own (tested without drawing).
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import numpy as np

from chaos.analysis import figures
from chaos.recording import records as rec, request_columns as rc
from chaos.base import stats
from chaos.system.placement import MODEL_DEPLOYMENTS

NS = 1_000_000_000
NO_ZONE = "no zone"
MARK_STYLE = {rec.INJECT_START: ("#c0392b", "-", "inject"), rec.HEAL_START: ("#2471a3", ":", "heal start"),
              rec.HEAL_END: ("#2471a3", "-", "healed")}
# the recovery points drawn per population: name -> (colour, its name on the timeline: chaos.analysis.figures)
POINT_STYLE = {f.name: (colour, f.short) for f, colour in ((figures.DETECT, "#e67e22"),
                                                           (figures.FIRST_SUCCESS, "#27ae60"),
                                                           (figures.STEADY_STATE, "#8e44ad"))}
POP_STYLE = {"affected": "--", "service": ":"}
ZONE_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#2ca02c")
OK, SLOW, FAILED, MID = "#1e8449", "#9e9e9e", "#c0392b", "#e67e22"
# control-plane states of a sample, and their colours in the band
CP_UP, CP_GCS_DOWN, CP_CONTROLLER_DOWN = "up", "GCS down", "controller down"
CP_COLOURS = {CP_UP: "#27ae60", CP_GCS_DOWN: "#c0392b", CP_CONTROLLER_DOWN: "#e67e22"}
PLANE_KINDS = ("control_plane", "replicas", "nodes")
POINTS_PER_LANE = 5000  # a lane of more requests is drawn per time bin
FAILURE_POINTS = 2000  # failures drawn one by one in a binned lane while it has at most this many
BINS = 400


def lane_layout(requests: list[rec.RequestRecord] | rc.RequestColumns, fault_zones: list[str] | None = None,
                samples: list[rec.Sample] | None = None) -> list[dict[str, Any]]:
    """The lanes, top to bottom. First the request lanes (``kind`` ``"requests"``): one per zone of
    the requests (sorted), then ``no zone`` when a target carries none. Each: ``zone`` (None for the
    zone-less lane), ``label``, ``y`` (its row, top lane highest), ``requests``, ``failed``, ``in_fault``
    (one of the fault's zones).

    Then, when there are ``samples``, the plane lanes (:func:`plane_lanes`): ``control_plane``,
    ``replicas``, ``nodes``, in that order."""
    cols = requests if isinstance(requests, rc.RequestColumns) else rc.from_records(requests)
    zone = cols.zone
    zones = sorted({zone.values[c] for c in np.unique(zone.codes[zone.known()])})
    keys: list[str | None] = list(zones) + ([None] if (~zone.known()).any() else [])
    fault_zones = set(fault_zones or [])
    out = []
    for i, z in enumerate(keys):
        mine = _in_lane(cols, z)
        n, failed = int(np.count_nonzero(mine)), int(np.count_nonzero(mine & ~cols.ok))
        in_fault = z is not None and z in fault_zones
        label = f"{z if z is not None else NO_ZONE}{' (fault)' if in_fault else ''}\n{failed} failed / {n}"
        out.append({"kind": "requests", "zone": z, "label": label, "y": len(keys) - 1 - i, "requests": n,
                    "failed": failed, "in_fault": in_fault})
    if samples:
        out += plane_lanes(samples)
    return out


def _in_lane(cols: rc.RequestColumns, zone: str | None) -> np.ndarray:
    return ~cols.zone.known() if zone is None else cols.zone.isin({zone})


def bins(sent_ns: np.ndarray, lo_ns: int, hi_ns: int, count: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """The time bins of a binned lane: their edges (``count`` + 1, ns, from ``lo_ns`` to past ``hi_ns``) and the
    bin of each send instant."""
    width = max(1, -(-(hi_ns - lo_ns + 1) // count))
    edges = lo_ns + width * np.arange(count + 1, dtype=np.int64)
    return edges, np.clip((sent_ns - lo_ns) // width, 0, count - 1)


def bin_percentiles(which: np.ndarray, values: np.ndarray, count: int, q: float) -> np.ndarray:
    """The nearest-rank ``q`` percentile of ``values`` in each bin (``which``: each value's bin; NaN: an empty bin)."""
    order = np.lexsort((values, which))
    which, values = which[order], values[order]
    first = np.searchsorted(which, np.arange(count), "left")
    n = np.searchsorted(which, np.arange(count), "right") - first
    rank = np.clip(np.ceil(q * n - 1e-9), 1, np.maximum(n, 1)).astype(np.int64)  # chaos.base.stats.rank
    out = np.full(count, np.nan)
    has = n > 0
    out[has] = values[first[has] + rank[has] - 1]
    return out


def cp_state(s: rec.Sample) -> str:
    """A sample's control-plane state: up, GCS down (whatever the controller), or controller down."""
    if not s.gcs_ok:
        return CP_GCS_DOWN
    return CP_UP if s.controller_ok else CP_CONTROLLER_DOWN


def model_deployments(samples: list[rec.Sample]) -> list[str] | None:
    """The deployments that hold the model (:data:`chaos.system.placement.MODEL_DEPLOYMENTS`) seen in the
    samples, sorted; None when none is (then the lanes show all deployments)."""
    seen = {d for s in samples for d in (s.replicas or {})}
    model = sorted(d for d in seen if d.startswith(MODEL_DEPLOYMENTS))
    return model or None


def plane_lanes(samples: list[rec.Sample]) -> list[dict[str, Any]]:
    """The three plane lanes of the samples (sorted by time), each a dict with ``kind`` and ``label``:

    - ``control_plane``: ``segments`` [(start_ns, end_ns, state)], consecutive samples of one state
      merged, each sample lasting to the next one (the last one a median period); ``down`` samples
      not up, ``samples``;
    - ``replicas``: ``deployments`` (the ones counted; None: all), ``zones``, ``series``
      {zone: [(t_ns, RUNNING replicas or None when the controller did not answer)]};
    - ``nodes``: ``zones``, ``series`` {zone: [(t_ns, nodes alive or None)]}.
    """
    samples = sorted(samples, key=lambda s: s.t_ns)
    gaps = sorted(b.t_ns - a.t_ns for a, b in zip(samples, samples[1:]))
    period = stats.percentile(gaps, 0.5) if gaps else NS // 2
    segments: list[list[Any]] = []
    for i, s in enumerate(samples):
        state = cp_state(s)
        end = samples[i + 1].t_ns if i + 1 < len(samples) else s.t_ns + period
        if segments and segments[-1][2] == state and segments[-1][1] == s.t_ns:
            segments[-1][1] = end
        else:
            segments.append([s.t_ns, end, state])
    down = sum(1 for s in samples if not s.control_up)
    cp = {"kind": "control_plane", "label": f"control plane\n{down} of {len(samples)} samples down",
          "segments": [tuple(x) for x in segments], "down": down, "samples": len(samples)}

    deps = model_deployments(samples)
    known = [s for s in samples if s.controller_ok and s.replicas is not None]
    rep_zones = sorted({z for s in known for d, zs in s.replicas.items() if deps is None or d in deps for z in zs})

    def running(s: rec.Sample, z: str) -> int | None:
        if not (s.controller_ok and s.replicas is not None):
            return None
        return sum(zs.get(z, 0) for d, zs in s.replicas.items() if deps is None or d in deps)

    which = ", ".join(deps) if deps else "all deployments"
    replicas = {"kind": "replicas", "label": f"RUNNING replicas\n({which})", "deployments": deps,
                "zones": rep_zones, "series": {z: [(s.t_ns, running(s, z)) for s in samples] for z in rep_zones}}
    node_zones = sorted({z for s in samples for z in (s.nodes_alive or {})})
    nodes = {"kind": "nodes", "label": "worker nodes\nalive", "zones": node_zones,
             "series": {z: [(s.t_ns, None if s.nodes_alive is None else s.nodes_alive.get(z, 0)) for s in samples]
                        for z in node_zones}}
    return [cp, replicas, nodes]


def _jitter(request_id: int) -> float:
    """A fixed pseudo-random offset within the lane (seeded by the request id): dense lanes show their density."""
    return random.Random(request_id).uniform(-0.3, 0.3)


def png(run: rec.RunRecords, summary: dict[str, Any], title: str = "") -> bytes:
    """Render the timeline; returns PNG bytes (1000 x 560 px)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    every = rc.of(run)
    reqs = every.take(every.measure)  # in send order
    marks = sorted(run.marks, key=lambda m: m.t_ns)
    injections = [m.t_ns for m in marks if m.event == rec.INJECT_START]
    t0 = min(injections) if injections else (int(reqs.sent_ns[0]) if len(reqs) else 0)
    slo_ttft = ((summary.get("definitions") or {}).get("slo") or {}).get("ttft_s")
    fault_zones = sorted({z for m in marks for z in (m.zones or [])})

    def x(ns: int) -> float:
        return (ns - t0) / NS

    all_lanes = lane_layout(reqs, fault_zones, run.samples)
    lanes = [lane for lane in all_lanes if lane["kind"] == "requests"]
    planes = {lane["kind"]: lane for lane in all_lanes if lane["kind"] in PLANE_KINDS}
    n = max(1, len(lanes))
    fig = Figure(figsize=(10, 5.6), dpi=100)
    if planes:
        ax, cx, rx, nx, bx = fig.subplots(5, 1, sharex=True,
                                          gridspec_kw={"height_ratios": [max(2, n), 0.45, 1.1, 1.1, 1.8]})
        plane_axes = [cx, rx, nx]
    else:
        ax, bx = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [max(2, n), 2]})
        plane_axes = []
    # one colour per zone, the same in every panel
    zone_keys = sorted({lane["zone"] for lane in lanes if lane["zone"] is not None}
                       | {z for k in ("replicas", "nodes") if k in planes for z in planes[k]["zones"]})
    colour_of = {z: ZONE_COLOURS[i % len(ZONE_COLOURS)] for i, z in enumerate(zone_keys)}
    colour_of[None] = ZONE_COLOURS[len(zone_keys) % len(ZONE_COLOURS)]
    handles: dict[str, Any] = {}
    lat = reqs.latency()
    span_ns = (int(min([reqs.sent_ns[0]] + [m.t_ns for m in marks])), int(max([reqs.sent_ns[-1]] + [m.t_ns for m in marks]))
               ) if len(reqs) else (t0, t0)
    binned = any(lane["requests"] > POINTS_PER_LANE for lane in lanes)
    edges, which = bins(reqs.sent_ns, *span_ns) if binned else (None, None)
    for lane in lanes:
        mine = _in_lane(reqs, lane["zone"])
        if binned and lane["requests"] > POINTS_PER_LANE:
            _lane_bins(ax, reqs, mine, which, edges, lane["y"], x, handles)
        else:
            _lane_points(ax, reqs, mine, lat, slo_ttft, lane["y"], x, handles)
    ax.set_yticks([lane["y"] for lane in lanes])
    ax.set_yticklabels([lane["label"] for lane in lanes], fontsize=8)
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        if lane["in_fault"]:
            tick.set_color(FAILED)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_ylabel("zone of the target")

    for lane in sorted(lanes, key=lambda lane: -lane["y"]):
        ok = np.flatnonzero(_in_lane(reqs, lane["zone"]) & reqs.ok & ~np.isnan(lat))
        if not len(ok):
            continue
        colour, label = colour_of[lane["zone"]], lane["zone"] or NO_ZONE
        if binned:  # p50 and p95 per bin: the picture of a day costs what a minute's does
            mids = [x(int(a + b) // 2) for a, b in zip(edges[:-1], edges[1:])]
            for q, ls in ((0.5, "-"), (0.95, ":")):
                bx.plot(mids, bin_percentiles(which[ok], lat[ok], len(edges) - 1, q), color=colour, ls=ls, lw=1.0,
                        label=f"{label} p{round(q * 100)}")
        else:
            bx.scatter([x(t) for t in reqs.sent_ns[ok].tolist()], lat[ok], s=5, c=colour, label=label)
    positive = lat[reqs.ok & (lat > 0)]
    extremes = [float(positive.min()), float(positive.max())] if len(positive) else []
    if extremes and extremes[1] / extremes[0] > 20:  # a wide range (a hang, a cold start): a log scale keeps both ends
        from matplotlib.ticker import FormatStrFormatter

        bx.set_yscale("log")
        bx.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        bx.set_ylabel("latency s (ok, log)")
    else:
        bx.set_ylim(bottom=0)
        bx.set_ylabel("latency s (ok)")
    bx.set_xlabel("seconds from injection (send time)")
    if reqs.ok.any():
        bx.legend(fontsize=7, loc="best", frameon=False, ncol=min(4, n))

    # each fault: a span from injection to the end of its heal, and its marks across the lanes
    by_fault: dict[str, dict[str, int]] = {}
    for m in marks:
        by_fault.setdefault(m.fault_id, {})[m.event] = m.t_ns
    end = int(reqs.sent_ns[-1]) if len(reqs) else t0
    for ev in by_fault.values():
        if rec.INJECT_START in ev:
            stop = ev.get(rec.HEAL_END) or ev.get(rec.HEAL_START) or end
            for a in (ax, *plane_axes, bx):
                a.axvspan(x(ev[rec.INJECT_START]), x(stop), color="#c0392b", alpha=0.06, zorder=0)
    for m in marks:
        if m.event in MARK_STYLE:
            colour, ls, label = MARK_STYLE[m.event]
            for a in (ax, *plane_axes, bx):
                a.axvline(x(m.t_ns), color=colour, ls=ls, lw=1.4, zorder=2)
            handles.setdefault(label, Line2D([], [], color=colour, ls=ls))
    faults = summary.get("faults") or []
    if planes:
        draw_planes(planes, plane_axes, x, colour_of, faults, handles)
    for f in faults:
        base = x(f["inject_ns"])
        who = f"{f['fault_id']}: " if len(faults) > 1 else ""
        for pop, ls in POP_STYLE.items():
            p = f.get(pop) or {}
            for key, (colour, label) in POINT_STYLE.items():
                if p.get(key) is not None:
                    ax.axvline(base + p[key], color=colour, ls=ls, lw=1.1, zorder=2)
                    handles[f"{who}{pop} {label} {p[key]:.2f} s"] = Line2D([], [], color=colour, ls=ls)
    ax.legend(handles.values(), handles.keys(), fontsize=7, loc="lower left", ncol=4, mode="expand",
              bbox_to_anchor=(0, 1.01, 1, 0.2), frameon=False)
    # the requests' time span (the samples start before the load: the baseline is left out of view)
    span = [x(t) for t in span_ns] if len(reqs) else [x(m.t_ns) for m in marks]
    if span and planes:
        pad = max(0.5, 0.01 * (max(span) - min(span)))
        ax.set_xlim(min(span) - pad, max(span) + pad)
    heading = title or summary.get("experiment") or "availproof run"
    if not planes and len(reqs):
        heading += " (control plane and capacity: not sampled)"
    fig.suptitle(heading, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _lane_points(ax, reqs: rc.RequestColumns, mine: np.ndarray, lat: np.ndarray, slo_ttft: float | None, y0: float,
                 x, handles: dict[str, Any]) -> None:
    """A lane point by point: each request at its send time, jittered within the lane by its id."""
    slow = reqs.ok & (slo_ttft is not None) & (np.nan_to_num(lat, nan=0.0) > (slo_ttft or 0))
    failed = ~reqs.ok
    groups = (("ok", OK, ".", 16, reqs.ok & ~slow), ("ok, over the SLO's TTFT", SLOW, ".", 16, slow),
              ("failed before the first token", FAILED, "x", 22, failed & ~reqs.first_token),
              ("failed mid-stream", MID, "x", 22, failed & reqs.first_token))
    for label, colour, marker, size, which in groups:
        rows = np.flatnonzero(mine & which)
        if len(rows):
            h = ax.scatter([x(t) for t in reqs.sent_ns[rows].tolist()], [y0 + _jitter(i) for i in reqs.id[rows].tolist()],
                           s=size, c=colour, marker=marker, linewidths=1.0, zorder=3)
            handles.setdefault(label, h)


def _lane_bins(ax, reqs: rc.RequestColumns, mine: np.ndarray, which: np.ndarray, edges: np.ndarray, y0: float, x,
               handles: dict[str, Any]) -> None:
    """A lane per time bin: its rate as a grey band, each bin's failed share as red (orange: mid-stream) bars from
    the lane's floor, and the failures one by one while there are few (:data:`FAILURE_POINTS`)."""
    count = len(edges) - 1
    sent = np.bincount(which[mine], minlength=count)
    width_s = (int(edges[1]) - int(edges[0])) / NS
    rate = sent / width_s
    top = float(rate.max()) or 1.0
    xs = [x(int(e)) for e in edges]
    h = ax.stairs(y0 - 0.35 + 0.7 * rate / top, xs, baseline=y0 - 0.35, fill=True, color="#cfd8dc", zorder=1)
    handles.setdefault(f"requests per second (band: 0 to {top:.0f} req/s)", h)
    floor = np.zeros(count)
    for label, colour, kind in (("failed before the first token", FAILED, ~reqs.first_token),
                                ("failed mid-stream", MID, reqs.first_token)):
        bad = np.bincount(which[mine & ~reqs.ok & kind], minlength=count)
        share = np.divide(bad, sent, out=np.zeros(count), where=sent > 0)
        if share.any():
            h = ax.stairs(y0 - 0.35 + 0.7 * (floor + share), xs, baseline=y0 - 0.35 + 0.7 * floor, fill=True,
                          color=colour, alpha=0.8, zorder=2)
            handles.setdefault(f"{label} (share of the bin)", h)
        floor = floor + share
    rows = np.flatnonzero(mine & ~reqs.ok)
    if 0 < len(rows) <= FAILURE_POINTS:
        ax.scatter([x(t) for t in reqs.sent_ns[rows].tolist()], [y0 + _jitter(i) for i in reqs.id[rows].tolist()],
                   s=14, c=np.where(reqs.first_token[rows], MID, FAILED).tolist(), marker="x", linewidths=0.8,
                   zorder=3)


def draw_planes(planes: dict[str, dict[str, Any]], axes: list, x, colour_of: dict, faults: list[dict[str, Any]],
                handles: dict[str, Any]) -> None:
    """The control-plane band, the replicas and the nodes per zone, on their three axes."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cx, rx, nx = axes
    cp = planes["control_plane"]
    for state, colour in CP_COLOURS.items():
        bars = [(x(a), x(b) - x(a)) for a, b, st in cp["segments"] if st == state]
        if bars:
            cx.broken_barh(bars, (0, 1), facecolors=colour, edgecolors="none")
            handles.setdefault(f"control plane {state}", Patch(color=colour))
    cx.set_ylim(0, 1)
    cx.set_yticks([0.5])
    cx.set_yticklabels([cp["label"].replace("\n", ", ")], fontsize=7)

    incident = faults[-1] if faults else {}

    def restored(a, fig: figures.Figure) -> None:
        v = fig.value(incident)
        if v and incident.get("inject_ns") is not None:
            at = x(incident["inject_ns"]) + v
            a.axvline(at, color="#111111", ls="--", lw=1.0, zorder=4)
            handles[f"{fig.short} restored {v:.2f} s"] = Line2D([], [], color="#111111", ls="--")

    restored(cx, figures.CP_RESTORED)

    target = ((faults[0].get("capacity") or {}).get("target") if faults and isinstance(faults[0], dict) else None)
    for a, kind in ((rx, "replicas"), (nx, "nodes")):
        lane = planes[kind]
        k = len(lane["zones"])
        top = 0
        for i, z in enumerate(lane["zones"]):
            pts = lane["series"][z]
            nudge = (i - (k - 1) / 2) * 0.07  # equal counts of several zones stay visible side by side
            ys = [float("nan") if v is None else v + nudge for _, v in pts]
            xs = [x(t) for t, _ in pts]
            if xs:  # the last sample holds until the end of the view
                xs.append(xs[-1] + (xs[-1] - xs[0]) / max(1, len(xs) - 1))
                ys.append(ys[-1])
            a.step(xs, ys, where="post", color=colour_of.get(z, "#555555"), lw=1.3, label=z)
            top = max([top] + [v for _, v in pts if v is not None])
            if kind == "replicas" and isinstance(target, dict):
                want = sum(zs.get(z, 0) for d, zs in target.items()
                           if isinstance(zs, dict) and (lane["deployments"] is None or d in lane["deployments"]))
                a.axhline(want + nudge, color=colour_of.get(z, "#555555"), ls=":", lw=0.9, zorder=1)
                top = max(top, want)
        a.set_ylim(-0.4, top + 0.6)
        a.set_yticks(range(0, int(top) + 1, max(1, int(top + 1) // 3)))
        a.tick_params(axis="y", labelsize=7)
        a.set_ylabel(lane["label"], fontsize=7, rotation=0, ha="right", va="center")
        if kind == "replicas":
            restored(a, figures.CAP_RESTORED)
    if planes["replicas"]["zones"] or planes["nodes"]["zones"]:
        h, lab = (rx if planes["replicas"]["zones"] else nx).get_legend_handles_labels()
        (rx if planes["replicas"]["zones"] else nx).legend(h, lab, fontsize=6, loc="center left",
                                                            bbox_to_anchor=(1.0, 0.5), frameon=False)
    cx.set_ylabel("")


def write(run_dir: Path, run: rec.RunRecords, summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / "timeline.png"
    path.write_bytes(png(run, summary))
    return path
