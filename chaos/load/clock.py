"""A load worker's clocks against the rig's, NTP's way: one reading of the worker's clock between two of ours.

Whatever carries the question (a socket to a local worker process, an exec into a pod), the worker's
reading was taken at some instant between our reading before the question and our reading after the
answer. Against the midpoint of those two, the worker's offset is known to within half that round trip,
whatever the asymmetry of the two legs. Of several samples the one with the shortest round trip is kept:
its bound is the tightest.
"""

from __future__ import annotations

import time
from typing import Any, Callable


def best_offset(ask: Callable[[int], tuple[int, int | None]], samples: int, via: str) -> dict[str, Any]:
    """``ask(k)`` returns the worker's (wall clock ns, monotonic ns or None) for sample ``k``; the worker's
    clocks minus ours from the sample with the shortest round trip: ``wall_offset_ns``, ``mono_offset_ns``
    (None when the worker's monotonic clock is another machine's), ``uncertainty_ns`` (half the round trip),
    ``rtt_ns``, ``samples`` and ``via`` (what carried the question)."""
    best = None
    for k in range(samples):
        w1, m1 = time.time_ns(), time.monotonic_ns()
        wall, mono = ask(k)
        w2, m2 = time.time_ns(), time.monotonic_ns()
        rtt = m2 - m1
        if best is None or rtt < best[0]:
            best = (rtt, wall - (w1 + w2) // 2, None if mono is None else mono - (m1 + m2) // 2)
    rtt, wall, mono = best
    return {"wall_offset_ns": wall, "mono_offset_ns": mono, "uncertainty_ns": rtt // 2 + 1, "rtt_ns": rtt,
            "samples": samples, "via": via}
