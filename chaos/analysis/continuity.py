"""A fault's token-level continuity: what the streams of its window lost, repeated, reordered or corrupted, and
how many were migrated (the records' fields: :mod:`chaos.load.continuity`).

``continuity`` (:func:`token_continuity`), per fault, over the streamed requests of the fault's population (those
of its analysis window and those in flight at its injection, as the recovery figures count them,
:func:`chaos.analysis.populations.fault_rows`), the service's at the top and the affected population's under
``affected`` when it differs from the service (the fault's failure domain; null when it is the service):

- ``streams``: the streamed requests; ``streams_checked``: those whose token order was checked (the stream
  target's; a vLLM stream's events carry no index); ``tokens_lost``, ``tokens_duplicated``,
  ``tokens_out_of_order``: their sums over the checked streams;
- ``streams_checked_corrupted``: the streams checked for corruption (the stream target's; vLLM's against the
  run's golden answer); ``tokens_corrupted``: the sum over them;
- ``streams_migrated``: streams with at least one migration marker; ``migrations``: the markers;
  ``refused``: streams whose record says migration was refused (``migration_refused``);
- ``migration_gap_p50_ms``, ``migration_gap_p99_ms``: nearest rank over every migration's gap (last token before
  it to first token after it) of the population's streams; null when no stream migrated (not applicable).

A figure that cannot be measured is null with its reason in the fault's ``unmeasurable`` map
(``continuity.<name>``, ``continuity.affected.<name>``): the records carry no continuity (the run header has no
``continuity``: recorded before the harness measured it), no streamed request, no stream that could be checked
(the records' ``continuity_why`` says why), or migrations without a token on both sides of one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from chaos.recording import request_columns as rc
from chaos.base.stats import percentile

ORDER = ("tokens_lost", "tokens_duplicated", "tokens_out_of_order")
FIGURES = ("streams", "streams_checked", *ORDER, "streams_checked_corrupted", "tokens_corrupted", "streams_migrated",
           "migrations", "refused", "migration_gap_p50_ms", "migration_gap_p99_ms")
NOT_RECORDED = "the records carry no token continuity (recorded before the harness measured it)"


def token_continuity(fault: dict[str, Any], cols: rc.RequestColumns, rows: np.ndarray,
                     recorded: bool) -> dict[str, Any]:
    """The fault's ``continuity`` (see the module doc) over ``rows`` of ``cols`` (its requests, service-wide);
    ``recorded``: the run header says its records carry continuity. Reasons go to ``fault["unmeasurable"]``."""
    out = population(cols, rows, recorded, fault["unmeasurable"], "continuity")
    zones = (fault.get("affected") or {}).get("zones")
    out["affected"] = None if zones is None else population(
        cols, rows[cols.zone.isin(set(zones))[rows]], recorded, fault["unmeasurable"], "continuity.affected")
    return out


def population(cols: rc.RequestColumns, rows: np.ndarray, recorded: bool, unmeasurable: dict[str, str],
               prefix: str) -> dict[str, Any]:
    """The continuity figures of one population's ``rows``; a null's reason put under ``<prefix>.<name>``."""
    streams = rows[cols.stream[rows]]
    out: dict[str, Any] = dict.fromkeys(FIGURES)
    out["streams"] = len(streams)

    def null(names, why: str) -> None:
        for name in names:
            unmeasurable[f"{prefix}.{name}"] = why

    if not recorded:
        null(FIGURES[1:], NOT_RECORDED)
        return out
    if not len(streams):
        null(FIGURES[1:], "no streamed request in the window")
        return out
    checked = ~np.isnan(cols.tokens_lost[streams])
    out["streams_checked"] = int(np.count_nonzero(checked))
    if checked.any():
        for name in ORDER:
            out[name] = int(np.nansum(getattr(cols, name)[streams]))
    else:
        null(ORDER, _why(cols, streams))
    corrupt = ~np.isnan(cols.tokens_corrupted[streams])
    out["streams_checked_corrupted"] = int(np.count_nonzero(corrupt))
    if corrupt.any():
        out["tokens_corrupted"] = int(np.nansum(cols.tokens_corrupted[streams]))
    else:
        null(("tokens_corrupted",), _why(cols, streams))
    m = np.nan_to_num(cols.migrations[streams], nan=0.0)
    out["streams_migrated"] = int(np.count_nonzero(m > 0))
    out["migrations"] = int(m.sum())
    out["refused"] = int(np.count_nonzero(cols.migration_refused.known()[streams]))
    migrated = streams[m > 0]
    if len(migrated):
        gaps = [g for r in cols.records(migrated) for g in (r.migration_gaps_ms or [])]
        if gaps:
            out["migration_gap_p50_ms"], out["migration_gap_p99_ms"] = percentile(gaps, 0.5), percentile(gaps, 0.99)
        else:
            null(("migration_gap_p50_ms", "migration_gap_p99_ms"),
                 "no migration had a token received on both sides of it")
    return out


def _why(cols: rc.RequestColumns, streams: np.ndarray, look: int = 50) -> str:
    """Why none of ``streams`` could be checked: the most common reason their first records give."""
    reasons = Counter(r.continuity_why for r in cols.records(streams[:look]) if r.continuity_why)
    if not reasons:
        return "no stream of this population said why it could not be checked"
    return f"no stream could be checked: {reasons.most_common(1)[0][0]}"
