"""The column reader: ``records.ndjson`` parsed once, in one pass, into columns (:mod:`chaos.recording.request_columns`).

:func:`read` gives the same :class:`chaos.recording.records.RunRecords` as the line reader (:func:`chaos.recording.records.read`,
the reference: the same header, marks, samples, soak lines, footer, stop reason and torn lines), with its
requests as columns (``RunRecords.columns``) and ``requests`` a list that reads each request's full record
from the file only when something asks for it (:class:`LazyRequests`).

How: the file is memory-mapped and cut into blocks of whole lines (:data:`BLOCK_BYTES`); Arrow's JSON reader
(``pyarrow.json``, C++, threaded) parses each block into the request fields the figures read (:data:`SCHEMA`,
other fields ignored); a block's columns are kept as numpy arrays and its bytes dropped from memory, so the
memory held grows with the columns (~100 bytes a request), not with the file. The lines that are not requests
(the header, marks, samples, soak lines, the end) are few: each is parsed with :func:`json.loads` and read as
the line reader reads it. A block Arrow cannot take as it is (a torn or damaged line, a field of another type,
a blank line or any line that does not open an object, a request missing a field the line reader requires) is read line by line by the line reader's
own rules, so what is torn is counted as it always was; a last line without its newline (a crash mid-write)
is always read that way.

One difference is known: a request line that lacks the ``zone`` key altogether (the writer always writes it)
reads as zone null here, where the line reader counts it torn.

Within one command (:func:`shared`), a file read once is not read again while it is unchanged (its path, size,
modification time and inode): ``analyse``, the report, the timeline and the claim share one read.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import mmap
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from chaos.recording import records as rec, request_columns as rc

BLOCK_BYTES = 32 << 20
ARROW_BLOCK_BYTES = 4 << 20  # Arrow's own unit of work (threads): a line longer than this makes the block fall back
_INT, _FLOAT, _STR, _BOOL = pa.int64(), pa.float64(), pa.string(), pa.bool_()
SCHEMA = pa.schema([("id", _INT), ("target", _STR), ("url", _STR), ("zone", _STR), ("route", _STR), ("phase", _STR),
                    ("planned_ns", _INT), ("sent_ns", _INT), ("sent_offset_s", _FLOAT), ("ok", _BOOL),
                    ("failure", _STR), ("ttft_s", _FLOAT), ("e2e_s", _FLOAT), ("itl_mean_s", _FLOAT),
                    ("itl_p95_s", _FLOAT), ("output_tokens", _INT), ("chunks", _INT), ("stream", _BOOL),
                    ("region", _STR), ("served_replica", _STR), ("served_zone", _STR), ("served_region", _STR),
                    ("served_version", _STR),
                    ("worker", _INT), ("session", _INT), ("prefix_group", _INT), ("clipped", _STR),
                    ("attempt", _FLOAT), ("prompt_tokens", _FLOAT), ("prompt_len", _FLOAT), ("prompt_chars", _FLOAT),
                    ("retry_stop", _STR),
                    ("tokens_lost", _FLOAT), ("tokens_duplicated", _FLOAT), ("tokens_out_of_order", _FLOAT),
                    ("tokens_corrupted", _FLOAT), ("migrations", _FLOAT), ("migration_refused", _STR),
                    ("kind", _STR),
                    # read by no figure, but typed by the line reader's rules: of another type, the block falls back
                    ("itl_max_s", _FLOAT)])
# a request whose line has null (or nothing) in one of these is read by the line reader's rules: a required
# field missing is a torn line there, and ``ok``, ``chunks`` and ``stream`` have defaults that null is not
NOT_NULL = ("id", "target", "url", "route", "phase", "planned_ns", "sent_ns", "sent_offset_s", "ok", "chunks",
            "stream")


class LazyRequests(Sequence):
    """The run's requests as :class:`chaos.recording.records.RequestRecord` objects, read from the file at the first use
    (and then kept): a command that reads only the columns never builds them."""

    def __init__(self, count: int, load: Callable[[], list[rec.RequestRecord]]):
        self._count, self._load, self._items = count, load, None

    def _all(self) -> list[rec.RequestRecord]:
        if self._items is None:
            self._items = self._load()
        return self._items

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self) -> Iterator[rec.RequestRecord]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented


class _Reading(rec.LineReader):
    """What one read gathers, in file order: the request blocks' columns, and the other lines read by kind
    (:class:`chaos.recording.records.LineReader`, the line reader's own rules)."""

    def __init__(self, data):
        super().__init__()
        self.data = data
        self.blocks: list[tuple[dict[str, np.ndarray], dict[str, rc.Coded]]] = []
        self.starts: list[np.ndarray] = []  # each request line's first byte and end, per block
        self.ends: list[np.ndarray] = []

    def line(self, a: int, b: int) -> Any:
        try:
            return json.loads(self.data[a:b])
        except (ValueError, UnicodeDecodeError):
            return None

    def by_lines(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """A block read line by line, by the line reader's rules."""
        reqs, kept_a, kept_b = [], [], []
        for a, b in zip(starts.tolist(), ends.tolist()):
            r = self.add(self.line(a, b))
            if r is not None:
                reqs.append(r)
                kept_a.append(a)
                kept_b.append(b)
        if reqs:
            self.blocks.append(rc.record_arrays(reqs))
            self.starts.append(np.array(kept_a, dtype=np.int64))
            self.ends.append(np.array(kept_b, dtype=np.int64))

    def by_arrow(self, starts: np.ndarray, ends: np.ndarray) -> bool:
        """A block parsed by Arrow; False when it cannot be (then nothing of it was taken)."""
        a, b = int(starts[0]), int(ends[-1])
        view = np.frombuffer(self.data, dtype=np.uint8, count=b - a, offset=a)
        if (view[starts - a] != ord("{")).any():  # not an object (a blank line, null: Arrow 26 crashes on a lone null)
            return False
        try:
            table = pajson.read_json(
                pa.BufferReader(pa.py_buffer(memoryview(self.data)[a:b])),
                read_options=pajson.ReadOptions(use_threads=True, block_size=ARROW_BLOCK_BYTES),
                parse_options=pajson.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return False
        if table.num_rows != len(starts):  # a blank line: Arrow skips it, the line reader counts it torn
            return False
        is_req = pc.fill_null(pc.equal(table.column("kind"), "request"), False).to_numpy(zero_copy_only=False)
        reqs = table.filter(pa.array(is_req))
        if any(reqs.column(name).null_count for name in NOT_NULL):
            return False
        for i in np.flatnonzero(~is_req).tolist():
            self.add(self.line(int(starts[i]), int(ends[i])))  # not a request: kept by kind
        if len(reqs):
            arrays = {name: reqs.column(name).to_numpy() for name in ("id", "sent_ns", "planned_ns", "ok", "stream")}
            for f in rc.FLOATS.values():
                arrays[f] = pc.fill_null(reqs.column(f), np.nan).to_numpy()
            for name in rc.SMALL:
                arrays[name] = rc.small_array(pc.fill_null(reqs.column(name), np.nan).to_numpy(), name)
            arrays["measure"] = pc.equal(reqs.column("phase"), rec.MEASURE).to_numpy(zero_copy_only=False)
            self.blocks.append((arrays, {name: _coded(reqs.column(name)) for name in rc.CODED}))
            self.starts.append(starts[is_req])
            self.ends.append(ends[is_req])
        return True

    def request_source(self) -> tuple[int, Callable[[np.ndarray], list[rec.RequestRecord]]]:
        starts = np.concatenate(self.starts) if self.starts else np.zeros(0, dtype=np.int64)
        ends = np.concatenate(self.ends) if self.ends else np.zeros(0, dtype=np.int64)
        data = self.data

        def source(rows: np.ndarray) -> list[rec.RequestRecord]:
            return [rec.request_from(json.loads(data[a:b])) for a, b in zip(starts[rows].tolist(), ends[rows].tolist())]

        return len(starts), source


def _coded(column: pa.ChunkedArray) -> rc.Coded:
    encoded = pc.dictionary_encode(column.combine_chunks())
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    return rc.Coded(codes, encoded.dictionary.to_pylist())


def _blocks(data, size: int) -> Iterator[tuple[np.ndarray, np.ndarray, bool]]:
    """(line starts, line ends, whole) of each block of whole lines; the last line without its newline is a
    block of its own, not whole (``whole`` False: read it line by line)."""
    start = 0
    while start < size:
        stop = min(start + BLOCK_BYTES, size)
        if stop < size:
            cut = data.rfind(b"\n", start, stop)
            stop = (data.find(b"\n", stop) if cut < 0 else cut) + 1 or size  # a line longer than a block: whole
        view = np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start)
        ends = np.flatnonzero(view == 10).astype(np.int64) + start + 1
        starts = np.concatenate(([start], ends[:-1])).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        if len(ends):
            yield starts, ends, True
        tail = int(ends[-1]) if len(ends) else start
        if tail < stop:  # the file's last line, without its newline
            yield np.array([tail], dtype=np.int64), np.array([stop], dtype=np.int64), False
        if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            page = start - start % mmap.PAGESIZE
            data.madvise(mmap.MADV_DONTNEED, page, stop - page)  # its bytes are read: out of memory
        start = stop


def parse(path: str | Path) -> rec.RunRecords:
    """Read a records file into columns (see the module docstring); several run headers keep the first."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    reading = _Reading(data)
    for starts, ends, whole in _blocks(data, size):
        if not (whole and reading.by_arrow(starts, ends)):
            reading.by_lines(starts, ends)
    count, source = reading.request_source()
    arrays: dict[str, np.ndarray] = {}
    if reading.blocks:
        for name in reading.blocks[0][0]:
            arrays[name] = np.concatenate([b[0][name] for b in reading.blocks])
        coded = {name: rc.merge_coded([b[1][name] for b in reading.blocks]) for name in rc.CODED}
    else:
        arrays = {name: np.zeros(0, dtype=np.int64) for name in ("id", "sent_ns", "planned_ns")}
        arrays.update({f: np.zeros(0) for f in rc.FLOATS.values()})
        arrays.update({name: np.zeros(0, dtype=bool) for name in ("ok", "measure", "stream")})
        arrays.update({name: rc.small_array(np.zeros(0), name) for name in rc.SMALL})
        coded = {name: rc.Coded(np.zeros(0, dtype=np.int32), []) for name in rc.CODED}
    del reading.blocks[:]
    columns = rc.from_arrays(arrays, coded, source)
    del arrays
    _give_back()
    return reading.run(LazyRequests(count, lambda: source(np.arange(count))), columns)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)


def _give_back() -> None:
    """Return the memory the blocks' parse freed to the system (Arrow's pool keeps it, glibc's heap too): what
    the command holds after the read is its columns, not the peak of its blocks (after each block instead: 7 %
    less peak for 10 % more time, 2026-12-06)."""
    pa.default_memory_pool().release_unused()
    trim = getattr(_LIBC, "malloc_trim", None)  # glibc only
    if trim is not None:
        trim(0)


_shared: dict[tuple, rec.RunRecords] | None = None


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Within it, :func:`read` reads an unchanged file once (the last one read is kept: one run's columns)."""
    global _shared
    outer = _shared
    if outer is None:
        _shared = {}
    try:
        yield
    finally:
        if outer is None:
            _shared = None


@contextlib.contextmanager
def apart() -> Iterator[None]:
    """Within it, :func:`read` neither uses nor changes what :func:`shared` keeps: a command's side reads (a soak's
    claim reading its suite's runs) do not put out the run the command is about."""
    global _shared
    outer, _shared = _shared, None
    try:
        yield
    finally:
        _shared = outer


def read(path: str | Path) -> rec.RunRecords:
    """The records of ``path`` as columns, read once within :func:`shared`."""
    if _shared is None:
        return parse(path)
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _shared:
        _shared.clear()
        _shared[key] = parse(path)
    return _shared[key]
