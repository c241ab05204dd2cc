"""When the recovery window may end before its planned length: every plane back and steady for the
settle time (a definition; it decides only how long the load stays on, never a figure).

The run (:func:`chaos.core.run.keep_load_for_recovery`) analyses the records taken so far every couple of
seconds and ends the recovery window once, for the last fault (the incident's, whose window runs
to the end of the run):

- the affected population and the service are at steady state (``time_to_steady_state_s`` reached:
  the last stretch of judged windows is in bound),
- the control plane is restored (``time_to_restored_s``; 0 when it was never lost),
- capacity is restored, per zone (``time_to_restored_s``; 0 when it was never lost),

and the latest of these instants lies at least ``settle_s`` + one steady-state window (``window_s``,
the last stretch a window can be judged in) before the end of the records. The run uses a settle
time of at least the load's timeout: a request is recorded when it ends, so one still in flight (a
hang, up to the client's timeout) is not in the records yet. A figure that is unmeasurable, or not
reached, keeps the window open to its planned length.

What an early end costs: a relapse after the window ended is not seen (the figures describe the
window that was measured: its length is in the summary, ``recovery_window``). A relapse inside it
is, the analysis being the same as for a full window: the window ends only while the last judged
window is in bound, so a relapse one second after the settle time keeps it open and is reported.
"""

from __future__ import annotations

from typing import Any

from chaos.analysis import figures

NS = 1_000_000_000


def recovered_at_s(fault: dict[str, Any]) -> float | None:
    """The instant (s after the fault's injection) every plane was back, from one fault of a summary
    (:func:`chaos.analysis.analyse`); None while any is not back or cannot be measured."""
    instants = figures.recovery_instants(fault)  # chaos.analysis.figures.RECOVERY_INSTANTS
    if any(x is None for x in instants):
        return None
    return max(instants)


def settled(summary: dict[str, Any], records_end_s: float, settle_s: float, window_s: float) -> float | None:
    """The recovery instant (s after the last injection) when every plane has been back for
    ``settle_s`` (+ ``window_s``) by ``records_end_s`` (the end of the records, s after the last
    injection); else None."""
    faults = summary.get("faults") or []
    if not faults or settle_s <= 0:
        return None
    at = recovered_at_s(faults[-1])
    if at is None or records_end_s - at < settle_s + window_s:
        return None
    return at
