"""Lost service-seconds: how much of its users' service a fault took, in seconds of full outage, for any
load shape. Each figure has two entry points: on numpy columns of the requests' send instants, end instants and
bad flags (``*_columns``: :mod:`chaos.claim.cost` and the soak feed them a run's columns,
:mod:`chaos.recording.request_columns`), and on plain tuples (:class:`Req`, a thin wrapper over the columns' one).

Open loops (constant, Poisson, gamma, stages, traces, sessions): **a time-bucket integral by send instant**.
The fault's window is cut into buckets of ``width`` = 1 s, or the mean inter-arrival time when that is
longer (arrivals counted as distinct send instants to the millisecond: a trace's burst of 28 requests at
one instant is one arrival), aligned on the injection (a last sliver narrower than half a bucket joins the one before it); each bucket's failed fraction (of the population's requests *sent* in it)
times its width, summed. A request in flight at the injection is the fault's: the integral starts at the
bucket holding the earliest of them, and every request sent in those buckets (the ones that had already
ended too) makes the fraction. A bucket with no request takes the mean of its nearest non-empty neighbours'
fractions and is counted (``empty_buckets``); a window more than half of whose buckets are empty, more
than Poisson arrivals at its own rate leave empty by chance, is flagged ``mostly_empty``: its figure is a
lower bound. For a constant open loop with no request in flight at
the injection the integral is ``failed x window / requests``, the rig's earlier figure (a unit test holds it);
with requests in flight it is ``failed / rate``.

Closed loops (a fixed number of users, each sending when its last request ended): **a failure covers its own
span**. Each failed request's span (sent to ended: a 10 s timeout is 10 s of a user's service lost, a fast
refusal a few ms, after which the user sends again) summed, over the population's users
(``concurrency`` x the population's share of the baseline's requests).

The baseline is taken off as a rate: the open loop's baseline failed fraction off every bucket's; the closed
loop's share of user-seconds lost before the injection times the integral's span. The result is never below 0:
a negative figure is clipped and said (``clipped_from``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

NS = 1_000_000_000
OPEN, CLOSED = "open", "closed"


@dataclass(frozen=True)
class Req:
    sent_ns: int
    end_ns: int
    bad: bool  # failed (or, for the SLO figure, outside the SLO)


def width_s(arrivals_in_window: int, window_s: float) -> float:
    """A bucket's width: 1 s, or the mean inter-arrival time when that is longer."""
    if arrivals_in_window <= 0:
        return max(1.0, window_s)
    return max(1.0, window_s / arrivals_in_window)


def _fill(fracs: list[float | None]) -> list[float]:
    """Empty buckets (None) take the mean of their nearest non-empty neighbours' fractions."""
    out: list[float] = []
    left: float | None = None
    right_at = [None] * len(fracs)  # the nearest non-empty bucket's fraction at or after each
    nxt = None
    for i in range(len(fracs) - 1, -1, -1):
        if fracs[i] is not None:
            nxt = fracs[i]
        right_at[i] = nxt
    for f, right in zip(fracs, right_at):
        if f is not None:
            out.append(f)
            left = f
            continue
        near = [v for v in (left, right) if v is not None]
        out.append(sum(near) / len(near) if near else 0.0)
    return out


def arrays(requests: Iterable[Req]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Requests as the columns the ``*_columns`` functions take: send instants, end instants, bad flags."""
    rs = list(requests)
    n = len(rs)
    return (np.fromiter((r.sent_ns for r in rs), dtype=np.int64, count=n),
            np.fromiter((r.end_ns for r in rs), dtype=np.int64, count=n),
            np.fromiter((bool(r.bad) for r in rs), dtype=bool, count=n))


def _distinct(values: np.ndarray) -> int:
    """How many distinct values (sorted input counted in one pass)."""
    if len(values) < 2:
        return len(values)
    step = values[1:] != values[:-1]
    if bool(np.all(values[1:] >= values[:-1])):
        return int(np.count_nonzero(step)) + 1
    return len(np.unique(values))


def open_loop(requests: Iterable[Req], t0_ns: int, window_end_ns: int, base_fraction: float = 0.0,
              width: float | None = None) -> dict[str, Any]:
    """:func:`open_loop_columns` of a list of requests."""
    return open_loop_columns(*arrays(requests), t0_ns, window_end_ns, base_fraction, width)


def open_loop_columns(sent_ns: np.ndarray, end_ns: np.ndarray, bad: np.ndarray, t0_ns: int, window_end_ns: int,
                      base_fraction: float = 0.0, width: float | None = None) -> dict[str, Any]:
    """The time-bucket integral of the failed fraction over the fault's window (see the module docstring).
    The requests (columns of the same length, any order): the population's measured requests sent from before
    the injection (at least every one in flight at it, and the others sent in those seconds) to the window's
    end; ``bad`` the failed (or outside the SLO) ones."""
    keep = sent_ns < window_end_ns
    sent, end, bad = sent_ns[keep], end_ns[keep], bad[keep]
    in_flight = (sent < t0_ns) & (end > t0_ns)
    window_s = (window_end_ns - t0_ns) / NS
    instants = _distinct(sent[sent >= t0_ns] // 1_000_000)
    w = width if width is not None else width_s(instants, window_s)
    wn = int(round(w * NS))
    first = int(sent[in_flight].min()) if in_flight.any() else t0_ns
    pre = math.ceil((t0_ns - first) / wn) if first < t0_ns else 0
    start = t0_ns - pre * wn
    after = max(1, math.ceil((window_end_ns - t0_ns) / wn))
    if after > 1 and (window_end_ns - t0_ns) - (after - 1) * wn < wn / 2:
        after -= 1  # a last sliver narrower than half a bucket joins the bucket before it
    n_buckets = pre + after
    take = sent >= start
    idx = np.minimum((sent[take] - start) // wn, n_buckets - 1)
    sent_n = np.bincount(idx, minlength=n_buckets).tolist()
    bad_n = np.bincount(idx[bad[take]], minlength=n_buckets).tolist()
    widths = [(wn if i < n_buckets - 1 else window_end_ns - (start + i * wn)) / NS for i in range(n_buckets)]
    fracs = _fill([b / s if s else None for b, s in zip(bad_n, sent_n)])
    raw = sum((f - base_fraction) * dw for f, dw in zip(fracs, widths))
    empty = sum(1 for s in sent_n if not s)
    return {"model": OPEN, "value_s": max(0.0, raw), "raw_s": raw, "clipped_from": raw if raw < 0 else None,
            "width_s": round(w, 6), "buckets": n_buckets, "empty_buckets": empty,
            "mostly_empty": _mostly_empty(empty, n_buckets, sum(sent_n)),
            "span_s": round((window_end_ns - start) / NS, 6), "base_fraction": base_fraction}


def _mostly_empty(empty: int, buckets: int, requests: int) -> bool:
    """More than half the buckets empty, and more than Poisson arrivals at the window's own rate leave
    empty by chance (mean + 3 standard deviations): a load that slept, not a slow one."""
    if empty * 2 <= buckets:
        return False
    chance = math.exp(-requests / buckets) if buckets else 1.0
    return empty / buckets > chance + 3 * math.sqrt(chance * (1 - chance) / buckets)


def _lost_s(sent_ns: np.ndarray, end_ns: np.ndarray, bad: np.ndarray) -> float:
    """The bad requests' spans in seconds, summed one by one in the columns' order."""
    return sum(((end_ns[bad] - sent_ns[bad]) / NS).tolist())


def closed_loop(requests: Iterable[Req], t0_ns: int, window_end_ns: int, users: float,
                base_share: float = 0.0) -> dict[str, Any]:
    """:func:`closed_loop_columns` of a list of requests."""
    return closed_loop_columns(*arrays(requests), t0_ns, window_end_ns, users, base_share)


def closed_loop_columns(sent_ns: np.ndarray, end_ns: np.ndarray, bad: np.ndarray, t0_ns: int, window_end_ns: int,
                        users: float, base_share: float = 0.0) -> dict[str, Any]:
    """The failed requests' spans over the users (see the module docstring). The requests (columns): the
    population's measured requests sent in the window or in flight at the injection; ``base_share``: the share of
    user-seconds lost to failures before the injection."""
    keep = (sent_ns < window_end_ns) & ((sent_ns >= t0_ns) | (end_ns > t0_ns))
    start = min(int(sent_ns[keep].min()) if keep.any() else t0_ns, t0_ns)
    span_s = (window_end_ns - start) / NS
    lost_user_s = _lost_s(sent_ns, end_ns, keep & bad)
    raw = lost_user_s / users - base_share * span_s
    return {"model": CLOSED, "value_s": max(0.0, raw), "raw_s": raw, "clipped_from": raw if raw < 0 else None,
            "users": users, "lost_user_s": round(lost_user_s, 6), "span_s": round(span_s, 6),
            "base_share": base_share, "mostly_empty": False}


def base_fraction(requests: Iterable[Req]) -> float | None:
    """The open loop's baseline: the failed fraction of the requests before the injection."""
    return base_fraction_columns(arrays(requests)[2])


def base_fraction_columns(bad: np.ndarray) -> float | None:
    """:func:`base_fraction` of the baseline's bad flags."""
    return int(np.count_nonzero(bad)) / len(bad) if len(bad) else None


def base_share(requests: Iterable[Req], users: float, span_s: float) -> float | None:
    """The closed loop's baseline: user-seconds lost to failures over the user-seconds of the baseline."""
    return base_share_columns(*arrays(requests), users, span_s)


def base_share_columns(sent_ns: np.ndarray, end_ns: np.ndarray, bad: np.ndarray, users: float,
                       span_s: float) -> float | None:
    """:func:`base_share` of the baseline's columns."""
    if users <= 0 or span_s <= 0:
        return None
    return _lost_s(sent_ns, end_ns, bad) / (users * span_s)
