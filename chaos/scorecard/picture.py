"""The scorecard's picture: the matrix as an SVG heatmap (drawn by hand, as the claim's picture is: no plotting
library). Rows: fault x load; columns: detector x period. A cell's colour is its detected share (red 0 % to
green 100 %), its text the share and the p99 time to detect; grey: not applicable (its reason in the md);
white: planned, no trial yet; a cell sharing another's deployment is drawn with that cell's figures, dashed.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from chaos.scorecard.plan import FAULT_FREE

CW, CH, LW, TH = 104, 36, 150, 56


def colour(share: float) -> str:
    """Red (0) through amber to green (1)."""
    share = max(0.0, min(1.0, share))
    r = int(220 * (1 - share) + 40 * share)
    g = int(60 * (1 - share) + 170 * share)
    return f"rgb({r},{g},70)"


def svg(doc: dict[str, Any]) -> str:
    rows = [r for r in doc["cells"] if r["fault"] != FAULT_FREE]
    row_keys = list(dict.fromkeys((r["fault"], r["load"]) for r in rows))
    col_keys = list(dict.fromkeys((r["detector"], r["period"]) for r in rows))
    at = {(r["fault"], r["load"], r["detector"], r["period"]): r for r in rows}
    w, h = LW + CW * len(col_keys) + 10, TH + CH * len(row_keys) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="6" y="16" font-size="13" font-weight="bold">Detector scorecard ({escape(doc["app"])} app): '
           'detected share, p99 time to detect</text>']
    for j, (det, period) in enumerate(col_keys):
        x = LW + j * CW + CW / 2
        out.append(f'<text x="{x}" y="{TH - 20}" text-anchor="middle" font-weight="bold">{escape(det)}</text>')
        out.append(f'<text x="{x}" y="{TH - 6}" text-anchor="middle">{escape(period)}</text>')
    for i, (fault, load) in enumerate(row_keys):
        y = TH + i * CH
        out.append(f'<text x="6" y="{y + CH / 2 + 4}">{escape(fault)} / {escape(load)}</text>')
        for j, (det, period) in enumerate(col_keys):
            r = at.get((fault, load, det, period))
            x = LW + j * CW
            if r is None:
                continue
            status, share = r.get("status"), r.get("detected")
            fill = "#d0d0d0" if status == "not_applicable" else ("white" if share is None else colour(share))
            dash = ' stroke-dasharray="4 2"' if status == "same_as" else ""
            out.append(f'<rect x="{x + 1}" y="{y + 1}" width="{CW - 2}" height="{CH - 2}" fill="{fill}" '
                       f'stroke="#555"{dash}><title>{escape(r["id"])}: {escape(str(r.get("why") or ""))}</title></rect>')
            if status == "not_applicable":
                label = "n/a"
            elif share is None:
                label = "no trial" if not r.get("trials_found") else "unmeasured"
            else:
                p99 = r.get("time_to_detect_p99_s")
                label = f"{share:.0%}" + (f" · {p99:.0f} s" if p99 is not None else "")
            out.append(f'<text x="{x + CW / 2}" y="{y + CH / 2 + 4}" text-anchor="middle">{escape(label)}</text>')
    ff = next((r for r in doc["cells"] if r["fault"] == FAULT_FREE), None)
    if ff is not None:
        n = ff.get("false_replacements")
        out.append(f'<text x="6" y="{h - 14}">fault-free ({escape(ff["detector"])}, {escape(ff["period"])}): '
                   f'false replacements {"no trial" if n is None else n}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
