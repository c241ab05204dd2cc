"""The timeline of one run as a PNG (matplotlib, no display): what happened to every request.

Top panel: TTFT of each successful request against its send time (seconds from the first
fault's injection), failed requests as red crosses on a strip above them (mid-stream failures
in orange). Bottom panel: requests per second sent, by outcome. Both carry the fault marks
(injection, heal) and the recovery points of the summary (detect, first success, steady
state), so a reader sees the figures where they come from.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from chaos import records as rec

NS = 1_000_000_000
MARK_STYLE = {rec.INJECT_START: ("#c0392b", "-", "inject"), rec.HEAL_END: ("#2471a3", "-", "healed"),
              rec.HEAL_START: ("#2471a3", ":", "heal start")}
POINT_STYLE = {"time_to_detect_s": ("#e67e22", "detect"), "time_to_first_success_s": ("#27ae60", "first success"),
               "time_to_steady_state_s": ("#8e44ad", "steady state")}


def png(run: rec.RunRecords, summary: dict[str, Any], title: str = "") -> bytes:
    """Render the timeline; returns PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    reqs = [r for r in run.requests if r.phase == rec.MEASURE]
    marks = run.marks
    injections = [m.t_ns for m in marks if m.event == rec.INJECT_START]
    t0 = min(injections) if injections else (min((r.sent_ns for r in reqs), default=0))

    def x(ns: int) -> float:
        return (ns - t0) / NS

    fig = Figure(figsize=(10, 5.6), dpi=100)
    ax, bx = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    ok = [r for r in reqs if r.ok and r.ttft_s is not None]
    ok_plain = [r for r in reqs if r.ok and r.ttft_s is None]
    bad = [r for r in reqs if not r.ok]
    ttfts = [r.ttft_s for r in ok] or [0.1]
    top = max(ttfts) * 1.25 + 0.01
    ax.scatter([x(r.sent_ns) for r in ok], [r.ttft_s for r in ok], s=6, c="#1e8449", label="ok (TTFT)")
    if ok_plain:
        ax.scatter([x(r.sent_ns) for r in ok_plain], [r.e2e_s for r in ok_plain], s=6, c="#1e8449", marker=".")
    pre = [r for r in bad if r.failure != rec.STREAM_BROKEN]
    mid = [r for r in bad if r.failure == rec.STREAM_BROKEN]
    if pre:
        ax.scatter([x(r.sent_ns) for r in pre], [top] * len(pre), s=18, c="#c0392b", marker="x",
                   label=f"failed before first token ({len(pre)})")
    if mid:
        ax.scatter([x(r.sent_ns) for r in mid], [top * 0.95] * len(mid), s=18, c="#e67e22", marker="x",
                   label=f"failed mid-stream ({len(mid)})")
    ax.set_ylim(0, top * 1.08)
    ax.set_ylabel("TTFT s (failures on top)")

    # requests per second by outcome
    if reqs:
        lo = math.floor(min(x(r.sent_ns) for r in reqs))
        hi = math.floor(max(x(r.sent_ns) for r in reqs))
        bins = list(range(lo, hi + 1))
        okc = [0] * len(bins)
        badc = [0] * len(bins)
        for r in reqs:
            i = math.floor(x(r.sent_ns)) - lo
            (okc if r.ok else badc)[i] += 1
        bx.bar(bins, okc, width=1.0, align="edge", color="#1e8449", label="ok")
        bx.bar(bins, badc, width=1.0, align="edge", bottom=okc, color="#c0392b", label="failed")
    bx.set_ylabel("requests / s")
    bx.set_xlabel("seconds from injection (send time)")

    for m in marks:
        if m.event in MARK_STYLE:
            color, ls, _ = MARK_STYLE[m.event]
            for a in (ax, bx):
                a.axvline(x(m.t_ns), color=color, ls=ls, lw=1.4)
    for f in summary.get("faults", []):
        base = x(f["inject_ns"])
        for key, (color, label) in POINT_STYLE.items():
            if f.get(key) is not None:
                ax.axvline(base + f[key], color=color, ls="--", lw=1.0, label=f"{label} {f[key]:.2f} s")
    seen = {}
    handles, labels = ax.get_legend_handles_labels()
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    for ev, (color, ls, label) in MARK_STYLE.items():
        if any(m.event == ev for m in marks):
            seen[label] = Line2D([], [], color=color, ls=ls)
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="lower left", ncol=4, mode="expand",
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
