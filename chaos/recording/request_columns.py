"""A run's requests as columns: one numpy array per field the figures read, in send order.

The analysis (:mod:`chaos.analysis`), the timeline and the lost service read these instead of one Python
object per request: a window, a population, a percentile is a slice, a mask or a sort, never a rescan of
a list. Built either by the column reader (:mod:`chaos.recording.record_columns`, from ``records.ndjson`` in one pass)
or from a list of :class:`chaos.recording.records.RequestRecord` (:func:`from_records`: the records a live run or a test
holds); the two give the same arrays for the same requests.

- numbers: ``id``, ``sent_ns``, ``planned_ns`` and ``end_ns`` (int64; ``end_ns`` the instant the client saw the
  request end, :func:`chaos.analysis.windows.request_end_ns`'s), ``ttft``, ``e2e``, ``itl_p95``, ``itl_mean`` and a
  stream's continuity counts, ``tokens_lost`` ... ``migrations`` (float64, NaN where the record says None), ``ok``,
  ``measure`` (phase ``measure``), ``stream``, ``first_token`` (bool);
- the counts a client's retries are read with (:mod:`chaos.analysis.retries`), in small types: ``attempt`` (int16, 0
  where the record says none: a run without a retry policy, an older file), ``prompt_tokens``, ``prompt_len``,
  ``prompt_chars`` (float32, NaN where the record says None);
- values with few distinct ones (zones, regions, replicas, failure classes, workers, session and prefix group
  ids, what was clipped, why a retry stopped, why migration was refused): :class:`Coded`, an int32 code per
  request (-1 for None) into the values seen.

``source`` gives back the full record of any request (:meth:`RequestColumns.records`), for the few figures
that need every field of a handful of requests (a straggler's, a warm-up's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from chaos.recording import records as rec
from chaos.base import stats

NS = 1_000_000_000
NUMBERS = ("id", "sent_ns", "planned_ns", "end_ns")
FLOATS = {"ttft": "ttft_s", "e2e": "e2e_s", "itl_p95": "itl_p95_s", "itl_mean": "itl_mean_s",
          **{name: name for name in ("tokens_lost", "tokens_duplicated", "tokens_out_of_order", "tokens_corrupted",
                                     "migrations")}}  # a stream's continuity (chaos.load.continuity), NaN: not known
CODED = ("zone", "region", "served_replica", "served_zone", "served_region", "served_version", "failure", "worker",
         "session", "prefix_group", "clipped", "retry_stop", "migration_refused")
SMALL = {"attempt": np.int16, "prompt_tokens": np.float32, "prompt_len": np.float32, "prompt_chars": np.float32}


def small_array(values: Any, name: str) -> np.ndarray:
    """A :data:`SMALL` column of values (floats, NaN for none): 0 for none in ``attempt``."""
    a = np.asarray(values, dtype=np.float64)
    if name == "attempt":
        return np.nan_to_num(a, nan=0.0).astype(np.int16)
    return a.astype(np.float32)


@dataclass
class Coded:
    """A column of few distinct values: ``codes[i]`` indexes ``values`` (-1: None)."""

    codes: np.ndarray
    values: list[Any]

    def known(self) -> np.ndarray:
        return self.codes >= 0

    def value(self, i: int) -> Any:
        c = int(self.codes[i])
        return None if c < 0 else self.values[c]

    def isin(self, wanted: set | frozenset) -> np.ndarray:
        """Requests whose value is one of ``wanted``."""
        hit = np.array([v in wanted for v in self.values] + [False], dtype=bool)
        return hit[self.codes]  # -1 picks the trailing False

    def same_as(self, other: "Coded") -> np.ndarray:
        """Requests whose value is known in both columns and equal."""
        index = {v: i for i, v in enumerate(other.values)}
        mine_in_other = np.array([index.get(v, -2) for v in self.values] + [-3], dtype=np.int64)
        return (self.codes >= 0) & (mine_in_other[self.codes] == other.codes)

    def take(self, idx: np.ndarray | slice) -> "Coded":
        return Coded(self.codes[idx], self.values)


def encode(values: Sequence[Any]) -> Coded:
    """Values (None for none) as a :class:`Coded` column."""
    index: dict[Any, int] = {}
    codes = np.fromiter((-1 if v is None else index.setdefault(v, len(index)) for v in values), dtype=np.int32,
                        count=len(values))
    return Coded(codes, list(index))


def merge_coded(parts: list[Coded]) -> Coded:
    """Several blocks' columns as one, their values unified."""
    index: dict[Any, int] = {}
    out = []
    for p in parts:
        remap = np.array([index.setdefault(v, len(index)) for v in p.values] + [-1], dtype=np.int32)
        out.append(remap[p.codes])
    codes = np.concatenate(out) if out else np.zeros(0, dtype=np.int32)
    return Coded(codes, list(index))


def end_ns(sent_ns: np.ndarray, e2e: np.ndarray) -> np.ndarray:
    """``sent_ns + int((e2e_s or 0) * NS)``: the instant the client saw each request end."""
    return sent_ns + (np.nan_to_num(e2e, nan=0.0) * NS).astype(np.int64)


@dataclass
class RequestColumns:
    """The requests of a run as columns, sorted by send instant (ties in record order). See the module doc."""

    id: np.ndarray
    sent_ns: np.ndarray
    planned_ns: np.ndarray
    end_ns: np.ndarray
    ttft: np.ndarray
    e2e: np.ndarray
    itl_p95: np.ndarray
    itl_mean: np.ndarray
    tokens_lost: np.ndarray
    tokens_duplicated: np.ndarray
    tokens_out_of_order: np.ndarray
    tokens_corrupted: np.ndarray
    migrations: np.ndarray
    ok: np.ndarray
    measure: np.ndarray
    stream: np.ndarray
    first_token: np.ndarray
    attempt: np.ndarray
    prompt_tokens: np.ndarray
    prompt_len: np.ndarray
    prompt_chars: np.ndarray
    coded: dict[str, Coded]
    # the full record of the request at a row: source(rows) -> [RequestRecord], in rows' order
    source: Callable[[np.ndarray], list[rec.RequestRecord]] = field(repr=False, default=lambda rows: [])

    def __len__(self) -> int:
        return len(self.sent_ns)

    def __getattr__(self, name: str) -> Coded:
        coded = self.__dict__.get("coded")
        if coded is not None and name in coded:
            return coded[name]
        raise AttributeError(name)

    def latency(self) -> np.ndarray:
        """TTFT for a streamed request, end-to-end for one that was not (NaN: none)."""
        return np.where(self.stream, self.ttft, self.e2e)

    def take(self, idx: np.ndarray) -> "RequestColumns":
        """The rows ``idx`` (a mask or indices, in send order), their records still reachable."""
        rows = np.flatnonzero(idx) if idx.dtype == bool else idx
        source = self.source
        return RequestColumns(
            **{name: getattr(self, name)[rows] for name in (*NUMBERS, *FLOATS, "ok", "measure", "stream",
                                                            "first_token", *SMALL)},
            coded={k: c.take(rows) for k, c in self.coded.items()}, source=lambda sub: source(rows[sub]))

    def records(self, idx: np.ndarray | None = None) -> list[rec.RequestRecord]:
        """The full records of the rows ``idx`` (every row when None), in send order."""
        rows = np.arange(len(self)) if idx is None else (np.flatnonzero(idx) if idx.dtype == bool else idx)
        return self.source(rows) if len(rows) else []

    def slo_met(self, slo) -> np.ndarray:
        """:meth:`chaos.analysis.windows.SLO.met` of every request (a None figure never misses)."""
        met = self.ok.copy()
        for limit, values in ((slo.ttft_s, self.ttft), (slo.itl_s, self.itl_p95), (slo.e2e_s, self.e2e)):
            if limit is not None:
                met &= ~(values > limit)  # NaN (None) compares False: not a miss
        return met


def from_arrays(arrays: dict[str, np.ndarray], coded: dict[str, Coded],
                source: Callable[[np.ndarray], list[rec.RequestRecord]]) -> RequestColumns:
    """Columns in record order (``arrays``: id, sent_ns, planned_ns, the float fields by record name, ok, phase
    ``measure``, stream, the :data:`SMALL` ones; a small one missing: none said) put in send order; ``source``
    takes record-order rows."""
    order = np.argsort(arrays["sent_ns"], kind="stable")
    sent = arrays["sent_ns"][order]
    floats = {name: arrays[field_][order] for name, field_ in FLOATS.items()}
    return RequestColumns(
        id=arrays["id"][order], sent_ns=sent, planned_ns=arrays["planned_ns"][order],
        end_ns=end_ns(sent, floats["e2e"]), **floats, ok=arrays["ok"][order], measure=arrays["measure"][order],
        stream=arrays["stream"][order], first_token=~np.isnan(floats["ttft"]),
        **{name: (arrays[name] if name in arrays else small_array(np.full(len(sent), np.nan), name))[order]
           for name in SMALL},
        coded={k: c.take(order) for k, c in coded.items()}, source=lambda rows: source(order[rows]))


def _float(v: Any) -> float:
    return np.nan if v is None else float(v)


def record_arrays(rs: Sequence[rec.RequestRecord]) -> tuple[dict[str, np.ndarray], dict[str, Coded]]:
    """The arrays :func:`from_arrays` takes, of a list of records, in their order."""
    n = len(rs)
    arrays = {name: np.fromiter((getattr(r, name) for r in rs), dtype=np.int64, count=n)
              for name in ("id", "sent_ns", "planned_ns")}
    for field_ in FLOATS.values():
        arrays[field_] = np.fromiter((_float(getattr(r, field_)) for r in rs), dtype=np.float64, count=n)
    arrays["ok"] = np.fromiter((bool(r.ok) for r in rs), dtype=bool, count=n)
    arrays["measure"] = np.fromiter((r.phase == rec.MEASURE for r in rs), dtype=bool, count=n)
    arrays["stream"] = np.fromiter((bool(r.stream) for r in rs), dtype=bool, count=n)
    for name in SMALL:
        arrays[name] = small_array(np.fromiter((_float(getattr(r, name)) for r in rs), dtype=np.float64, count=n), name)
    return arrays, {name: encode([getattr(r, name) for r in rs]) for name in CODED}


def from_records(requests: Sequence[rec.RequestRecord]) -> RequestColumns:
    """The columns of a list of records (a live run's, a test's); the records themselves are the source."""
    rs = list(requests)
    arrays, coded = record_arrays(rs)
    return from_arrays(arrays, coded, lambda rows: [rs[i] for i in rows])


def of(run: rec.RunRecords) -> RequestColumns:
    """The run's requests as columns: the column reader's, else built from its records (a list may have been
    changed since: built again at each call)."""
    return run.columns if run.columns is not None else from_records(run.requests)


def percentile(values: np.ndarray, q: float) -> float | None:
    """:func:`chaos.base.stats.percentile` (nearest rank) of an array, as a Python number."""
    if not len(values):
        return None
    k = stats.rank(len(values), q) - 1
    return np.partition(values, k)[k].item()
