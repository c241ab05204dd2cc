"""How a figure reads in a table cell, one rule for the report and the suite table.

A ``null`` figure reads ``never`` only when it was not reached; when the summary's
``unmeasurable`` map says why it could not be measured it reads ``unmeasurable`` (with the
reason where asked), and a figure that does not apply reads ``n/a``. Never 0, never "met".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.core import bounds
from chaos.analysis import figures
from chaos import scopes
from chaos.core import verdict as verdict_mod


def fmt(v: Any) -> str:
    """A plain value: None is "never" (a figure never reached); see :func:`figure` for a fault's figures."""
    if v is None:
        return "never"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


# figures that exist only because something failed: a null one means "nothing failed", not "never"
FAILURE_FIGURES = frozenset(f.name for f in figures.of(figures.POPULATION) if f.failure)


def figure(fault: dict[str, Any], population: str, key: str, reasons: bool = False) -> str:
    """One figure of one population of a fault, as text. A value is printed as is; a null is
    "unmeasurable" (with its reason when ``reasons``) when the fault's ``unmeasurable`` map lists it,
    "n/a" when it does not apply (nothing failed, undisturbed), and "never" only otherwise."""
    p = fault.get(population) or {}
    v = p.get(key)
    if v is not None:
        return fmt(v)
    why = (fault.get("unmeasurable") or {}).get(f"{population}.{key}")
    if why:
        return f"unmeasurable: {why}" if reasons else "unmeasurable"
    fig = figures.get(f"{population}.{key}")
    if fig and fig.failure and not p.get("failed_total"):
        return "n/a (nothing failed)" if reasons else "n/a"
    if key == figures.FIRST_RECOVERY.name and p.get("disrupted") is False:
        return "n/a (undisturbed)" if reasons else "n/a"
    if fig and fig.window_cut and fault.get("window_cut_by"):
        return f"never in its window (cut by {fault['window_cut_by']})" if reasons else "never (window cut)"
    return "never"


def unaffected_zones(fault: dict[str, Any], reasons: bool = False) -> str:
    """Failures in the zones the fault did not touch. Null: "n/a" when the notion does not apply
    (a zone-less fault, or one that affects every target), "unmeasurable" when the targets carry
    no zone; with ``reasons``, the summary's reason follows."""
    v = (fault.get("failed") or {}).get("unaffected_zones")
    if v is not None:
        return str(v)
    why = (fault.get("unmeasurable") or {}).get("failed.unaffected_zones")
    spread = scopes.get(fault.get("scope")).every_target_affected  # Serve routes to it from every zone
    word = "n/a" if (not fault.get("zones") or spread) else "unmeasurable"
    if not reasons or not why:
        return word
    return f"n/a ({why})" if word == "n/a" else f"unmeasurable: {why}"


def _fault_met(summary: dict[str, Any], fault: dict[str, Any]) -> str:
    b = summary.get("bounds") or {}
    return bounds.fault_met(b.get("results"), fault["fault_id"]) or ("yes" if b.get("all_met") else "no")


def plane_figure(fault: dict[str, Any], plane: str, key: str, reasons: bool = False) -> str:
    """One figure of the control plane or capacity (:mod:`chaos.analysis.planes`) as text, by the rules of
    :func:`figure` (a listed null is "unmeasurable", an unlisted one "never"); a 0 that means the
    plane was never lost says so; a summary written before the sampler has no planes: "n/a"."""
    if not isinstance(fault.get(plane), dict):
        return "n/a (not in this summary: recorded before the sampler)" if reasons else "n/a"
    text = figure(fault, plane, key, reasons)
    p = fault[plane]
    loss = (figures.CP_LOSS if plane == "control_plane" else figures.CAP_LOST).name
    back = (figures.CP_RESTORED.name, figures.CP_OUTAGE.name)  # the same names in capacity
    if reasons and key in back and p.get(key) == 0 and p.get(loss) is None:
        text += " (never down)" if plane == "control_plane" else " (never lost)"
    return text


AFFECTED_COLUMNS = (figures.IMPACT, figures.DETECT, figures.FIRST_SUCCESS, figures.STEADY_STATE, figures.RELAPSES)
PLANE_COLUMNS = (figures.CP_OUTAGE, figures.CAP_RESTORED)
TABLE_COLUMNS = ("experiment", "scope", "affected", f"affected {figures.REQUESTS.label}",
                 f"{figures.FAILED.label} (mid-stream)", *(f.heading for f in AFFECTED_COLUMNS),
                 f"service {figures.FAILED.heading}", f"service {figures.FIRST_SUCCESS.heading}",
                 figures.UNAFFECTED_ZONES.heading, *(f.heading for f in PLANE_COLUMNS), "bounds met", "verdict")


def table(results: list[dict[str, Any]]) -> str:
    """One row per fault: the affected population's figures, the service's failures and first success,
    the control plane's outage and the time to capacity restored (:mod:`chaos.analysis.planes`)."""
    rows = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for r in results:
        name = Path(r["experiment"]).stem
        s = r.get("summary") or {}
        faults = s.get("faults") or []
        verdict = verdict_mod.of_result(r)["word"]
        if not faults:
            blanks = " | ".join(["-"] * (len(TABLE_COLUMNS) - 3))
            rows.append(f"| {name} | {blanks} | no | {verdict}: {(r.get('error') or '')[:80]} |")
            continue
        for f in faults:
            a, svc = f.get("affected") or {}, f.get("service") or {}
            who = ", ".join(a.get("zones") or []) if a.get("basis") == "fault_domain" else "service"
            row = [name, f["scope"], who, a.get("requests"), f"{a.get('failed_total')} ({a.get('failed_mid_stream')})"]
            row += [figure(f, "affected", k.name) for k in AFFECTED_COLUMNS]
            row += [svc.get("failed_total"), figure(f, "service", figures.FIRST_SUCCESS.name), unaffected_zones(f)]
            row += [plane_figure(f, k.plane, k.name) for k in PLANE_COLUMNS]
            rows.append("| " + " | ".join(str(c) for c in row + [_fault_met(s, f), verdict]) + " |")
    return "\n".join(rows) + "\n"
