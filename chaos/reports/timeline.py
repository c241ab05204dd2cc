"""The timeline of one run as a PNG (matplotlib, no display): which zone's requests failed when.

Top panel, one **lane per zone** of the requests' targets (and one ``no zone`` lane for
targets that carry none): every measured request is a point at its send time (seconds from
the first fault's injection) on its zone's lane: green dots succeeded, grey dots succeeded
but missed the SLO's TTFT, red crosses failed before the first token, orange crosses failed
mid-stream. The lanes of the fault's zones are labelled so, in red; each fault is a shaded span
from its injection to the end of its heal, with the injection and the heal as vertical lines
across every lane. The affected population's detect, first success and steady state are
dashed lines, the service's dotted, so a reader sees the figures where they come from.

Under the request lanes, when the run has sampler samples (:mod:`chaos.sampler`), three plane
lanes over the same time axis:

- **control plane**: a band, one segment per sample (from its instant to the next sample's):
  green up (GCS and the Serve controller answered), red GCS down, orange GCS up but the
  controller down; the control plane's restore point (:mod:`chaos.planes`) a dashed line;
- **replicas per zone**: RUNNING replicas of the model deployments (those whose name starts
  with one of :data:`chaos.placement.MODEL_DEPLOYMENTS`; all deployments when none does, and
  the lane's label says which) per zone, as steps, the target placement dotted in the zone's
  colour; a sample in which the controller did not answer is a gap (unknown, never zero);
  the capacity restore point a dashed line;
- **nodes alive per zone**: worker nodes the GCS holds ALIVE per zone, as steps (gaps when
  the GCS did not answer).

Bottom panel: the latency of each successful request (TTFT, or end-to-end when not
streamed), coloured by zone, on a log scale, with the same fault marks. Zones have the same
colour in the replicas, nodes and latency panels. Without samples (a run before the sampler)
the plane lanes are left out and the title says "not sampled".

:func:`lane_layout` is the lane arrangement on its own (tested without drawing).
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

from chaos import figures, records as rec, stats
from chaos.analysis import latency
from chaos.placement import MODEL_DEPLOYMENTS

NS = 1_000_000_000
NO_ZONE = "no zone"
MARK_STYLE = {rec.INJECT_START: ("#c0392b", "-", "inject"), rec.HEAL_START: ("#2471a3", ":", "heal start"),
              rec.HEAL_END: ("#2471a3", "-", "healed")}
# the recovery points drawn per population: name -> (colour, its name on the timeline: chaos.figures)
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


def lane_layout(requests: list[rec.RequestRecord], fault_zones: list[str] | None = None,
                samples: list[rec.Sample] | None = None) -> list[dict[str, Any]]:
    """The lanes, top to bottom. First the request lanes (``kind`` ``"requests"``): one per zone of
    the requests (sorted), then ``no zone`` when a target carries none. Each: ``zone`` (None for the
    zone-less lane), ``label``, ``y`` (its row, top lane highest), ``requests``, ``failed``, ``in_fault``
    (one of the fault's zones).

    Then, when there are ``samples``, the plane lanes (:func:`plane_lanes`): ``control_plane``,
    ``replicas``, ``nodes``, in that order."""
    zones = sorted({r.zone for r in requests if r.zone is not None})
    keys: list[str | None] = list(zones) + ([None] if any(r.zone is None for r in requests) else [])
    fault_zones = set(fault_zones or [])
    out = []
    for i, z in enumerate(keys):
        mine = [r for r in requests if r.zone == z]
        failed = sum(1 for r in mine if not r.ok)
        in_fault = z is not None and z in fault_zones
        label = f"{z if z is not None else NO_ZONE}{' (fault)' if in_fault else ''}\n{failed} failed / {len(mine)}"
        out.append({"kind": "requests", "zone": z, "label": label, "y": len(keys) - 1 - i, "requests": len(mine),
                    "failed": failed, "in_fault": in_fault})
    if samples:
        out += plane_lanes(samples)
    return out


def cp_state(s: rec.Sample) -> str:
    """A sample's control-plane state: up, GCS down (whatever the controller), or controller down."""
    if not s.gcs_ok:
        return CP_GCS_DOWN
    return CP_UP if s.controller_ok else CP_CONTROLLER_DOWN


def model_deployments(samples: list[rec.Sample]) -> list[str] | None:
    """The deployments that hold the model (:data:`chaos.placement.MODEL_DEPLOYMENTS`) seen in the
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


def _jitter(r: rec.RequestRecord) -> float:
    """A fixed pseudo-random offset within the lane (seeded by the request id): dense lanes show their density."""
    return random.Random(r.id).uniform(-0.3, 0.3)


def png(run: rec.RunRecords, summary: dict[str, Any], title: str = "") -> bytes:
    """Render the timeline; returns PNG bytes (1000 x 560 px)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    reqs = [r for r in run.requests if r.phase == rec.MEASURE]
    marks = sorted(run.marks, key=lambda m: m.t_ns)
    injections = [m.t_ns for m in marks if m.event == rec.INJECT_START]
    t0 = min(injections) if injections else (min((r.sent_ns for r in reqs), default=0))
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
    for lane in lanes:
        y0 = lane["y"]
        mine = [r for r in reqs if r.zone == lane["zone"]]
        is_slow = [r.ok and slo_ttft is not None and (latency(r) or 0) > slo_ttft for r in mine]
        slow = [r for r, s in zip(mine, is_slow) if s]
        groups = (
            ("ok", OK, ".", 16, [r for r, s in zip(mine, is_slow) if r.ok and not s]),
            ("ok, over the SLO's TTFT", SLOW, ".", 16, slow),
            ("failed before the first token", FAILED, "x", 22,
             [r for r in mine if not r.ok and not r.got_first_token]),
            ("failed mid-stream", MID, "x", 22, [r for r in mine if not r.ok and r.got_first_token]),
        )
        for label, colour, marker, size, rs in groups:
            if rs:
                h = ax.scatter([x(r.sent_ns) for r in rs], [y0 + _jitter(r) for r in rs], s=size, c=colour,
                               marker=marker, linewidths=1.0, zorder=3)
                handles.setdefault(label, h)
    ax.set_yticks([lane["y"] for lane in lanes])
    ax.set_yticklabels([lane["label"] for lane in lanes], fontsize=8)
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        if lane["in_fault"]:
            tick.set_color(FAILED)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_ylabel("zone of the target")

    for lane in sorted(lanes, key=lambda lane: -lane["y"]):
        ok = [r for r in reqs if r.zone == lane["zone"] and r.ok and latency(r) is not None]
        if ok:
            bx.scatter([x(r.sent_ns) for r in ok], [latency(r) for r in ok], s=5,
                       c=colour_of[lane["zone"]], label=lane["zone"] or NO_ZONE)
    lat = [v for r in reqs if r.ok for v in [latency(r)] if v is not None and v > 0]
    if lat and max(lat) / min(lat) > 20:  # a wide range (a hang, a cold start): a log scale keeps both ends
        from matplotlib.ticker import FormatStrFormatter

        bx.set_yscale("log")
        bx.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        bx.set_ylabel("latency s (ok, log)")
    else:
        bx.set_ylim(bottom=0)
        bx.set_ylabel("latency s (ok)")
    bx.set_xlabel("seconds from injection (send time)")
    if any(r.ok for r in reqs):
        bx.legend(fontsize=7, loc="best", frameon=False, ncol=min(4, n))

    # each fault: a span from injection to the end of its heal, and its marks across the lanes
    by_fault: dict[str, dict[str, int]] = {}
    for m in marks:
        by_fault.setdefault(m.fault_id, {})[m.event] = m.t_ns
    end = max((r.sent_ns for r in reqs), default=t0)
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
        _draw_planes(planes, plane_axes, x, colour_of, faults, handles)
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
    span = [x(r.sent_ns) for r in reqs] + [x(m.t_ns) for m in marks]
    if span and planes:
        pad = max(0.5, 0.01 * (max(span) - min(span)))
        ax.set_xlim(min(span) - pad, max(span) + pad)
    heading = title or summary.get("experiment") or "availproof run"
    if not planes and reqs:
        heading += " (control plane and capacity: not sampled)"
    fig.suptitle(heading, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _draw_planes(planes: dict[str, dict[str, Any]], axes: list, x, colour_of: dict, faults: list[dict[str, Any]],
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
