"""The timeline of one run as a PNG (matplotlib, no display): which zone's requests failed when.

Top panel, one **lane per zone** of the requests' targets (and one ``no zone`` lane for
targets that carry none): every measured request is a point at its send time (seconds from
the first fault's injection) on its zone's lane: green dots succeeded, grey dots succeeded
but missed the SLO's TTFT, red crosses failed before the first token, orange crosses failed
mid-stream. The lanes of the fault's zones are labelled so, in red; each fault is a shaded span
from its injection to the end of its heal, with the injection and the heal as vertical lines
across every lane. The affected population's detect, first success and steady state are
dashed lines, the service's dotted, so a reader sees the figures where they come from.

Bottom panel: the latency of each successful request (TTFT, or end-to-end when not
streamed), coloured by zone, on a log scale, with the same fault marks.

:func:`lane_layout` is the lane arrangement on its own (tested without drawing).
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

from chaos import records as rec

NS = 1_000_000_000
NO_ZONE = "no zone"
MARK_STYLE = {rec.INJECT_START: ("#c0392b", "-", "inject"), rec.HEAL_START: ("#2471a3", ":", "heal start"),
              rec.HEAL_END: ("#2471a3", "-", "healed")}
POINT_STYLE = {"time_to_detect_s": ("#e67e22", "detect"), "time_to_first_success_s": ("#27ae60", "first success"),
               "time_to_steady_state_s": ("#8e44ad", "steady state")}
POP_STYLE = {"affected": "--", "service": ":"}
ZONE_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#2ca02c")
OK, SLOW, FAILED, MID = "#1e8449", "#9e9e9e", "#c0392b", "#e67e22"


def lane_layout(requests: list[rec.RequestRecord], fault_zones: list[str] | None = None) -> list[dict[str, Any]]:
    """The lanes, top to bottom: one per zone of the requests (sorted), then ``no zone`` when a
    target carries none. Each: ``zone`` (None for the zone-less lane), ``label``, ``y`` (its row,
    top lane highest), ``requests``, ``failed``, ``in_fault`` (one of the fault's zones)."""
    zones = sorted({r.zone for r in requests if r.zone is not None})
    keys: list[str | None] = list(zones) + ([None] if any(r.zone is None for r in requests) else [])
    fault_zones = set(fault_zones or [])
    out = []
    for i, z in enumerate(keys):
        mine = [r for r in requests if r.zone == z]
        failed = sum(1 for r in mine if not r.ok)
        in_fault = z is not None and z in fault_zones
        label = f"{z if z is not None else NO_ZONE}{' (fault)' if in_fault else ''}\n{failed} failed / {len(mine)}"
        out.append({"zone": z, "label": label, "y": len(keys) - 1 - i, "requests": len(mine), "failed": failed,
                    "in_fault": in_fault})
    return out


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

    def latency(r: rec.RequestRecord) -> float | None:
        return r.ttft_s if r.stream and r.ttft_s is not None else r.e2e_s

    lanes = lane_layout(reqs, fault_zones)
    n = max(1, len(lanes))
    fig = Figure(figsize=(10, 5.6), dpi=100)
    ax, bx = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [max(2, n), 2]})
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

    for i, lane in enumerate(sorted(lanes, key=lambda lane: -lane["y"])):
        ok = [r for r in reqs if r.zone == lane["zone"] and r.ok and latency(r) is not None]
        if ok:
            bx.scatter([x(r.sent_ns) for r in ok], [latency(r) for r in ok], s=5,
                       c=ZONE_COLOURS[i % len(ZONE_COLOURS)], label=lane["zone"] or NO_ZONE)
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
            for a in (ax, bx):
                a.axvspan(x(ev[rec.INJECT_START]), x(stop), color="#c0392b", alpha=0.06, zorder=0)
    for m in marks:
        if m.event in MARK_STYLE:
            colour, ls, label = MARK_STYLE[m.event]
            for a in (ax, bx):
                a.axvline(x(m.t_ns), color=colour, ls=ls, lw=1.4, zorder=2)
            handles.setdefault(label, Line2D([], [], color=colour, ls=ls))
    faults = summary.get("faults") or []
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
    fig.suptitle(title or summary.get("experiment") or "availproof run", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def write(run_dir: Path, run: rec.RunRecords, summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / "timeline.png"
    path.write_bytes(png(run, summary))
    return path
