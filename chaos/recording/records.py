"""Request records and fault marks on one timeline, as NDJSON written incrementally.

One file per run, one JSON object per line, three kinds:

- ``{"kind": "run", ...}``      the run header: format version, id, start instant, load shape, seeds,
  targets, and the definitions and bounds the run is analysed with (so that the records alone
  suffice to derive the summary again: ``availproof analyse``)
- ``{"kind": "request", ...}``  one finished request (success or failure), see :class:`RequestRecord`
- ``{"kind": "mark", ...}``     one fault event, see :class:`FaultMark`
- ``{"kind": "sample", ...}``   one observation of the control plane and capacity, see :class:`Sample`
- ``{"kind": "stop", ...}``     a stop condition ended the run early (``reason``): the run does not pass
- ``{"kind": "soak", ...}``     a soak's own line (``event``: clock, injected, skipped, failed; :mod:`chaos.soak.run`)

Every instant is ``time.time_ns()`` taken at the event and written once. Each line is
flushed when written and the file is fsync'ed at least once a second, so a crash of the rig
loses at most the requests still in flight. The reader skips a torn last line (and reports
it) instead of failing.

The published format of a line is ``chaos/schemas/records-line.schema.json``
(``FORMAT_VERSION``; a header without ``format_version`` is format 1, which had no
definitions in it).

Producers publish through :class:`chaos.recording.events.Events` (typed hooks, re-exported here: ``records.Events``):
the NDJSON writer, the Prometheus exporter and the stop conditions all subscribe to the same stream, each
called guarded (an observer that fails is logged, never stops the run).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from chaos.base import scope_registry as scopes
from chaos.recording.events import Events  # noqa: F401 - re-exported: records.Events

# Failure classes: one per distinguishable way a request can fail.
CONNECT_REFUSED = "connect_refused"
CONNECT_TIMEOUT = "connect_timeout"
READ_TIMEOUT = "read_timeout"
DEADLINE = "deadline"  # the per-request overall timeout expired
HTTP_5XX = "http_5xx"
HTTP_4XX = "http_4xx"
# refused at once because the service is full (issue 48): a 429, or a 503 that says so (a Retry-After header, or
# Ray Serve's backpressure message; chaos.load.failures.refused), not a timeout and not a broken server
REFUSED = "refused"
CONNECTION_CLOSED = "connection_closed"  # closed/reset before the first token
STREAM_BROKEN = "stream_broken"  # failed after the first token: a mid-stream failure
MALFORMED = "malformed_response"
TRUNCATED = "truncated"  # ended cleanly but short: no finish_reason, or fewer tokens than it must have (chaos.load.integrity)
CORRUPTED = "corrupted"  # content that differs from what it must be, or more tokens than the usage says
ABORTED = "aborted"  # ended with finish_reason abort or error: the server gave the answer up (chaos.load.integrity)
OTHER = "other"
FAILURE_CLASSES = (CONNECT_REFUSED, CONNECT_TIMEOUT, READ_TIMEOUT, DEADLINE, HTTP_5XX, HTTP_4XX,
                   CONNECTION_CLOSED, STREAM_BROKEN, MALFORMED, TRUNCATED, CORRUPTED, ABORTED, OTHER, REFUSED)

# Fault mark events and scopes.
INJECT_START, INJECT_END, HEAL_START, HEAL_END = "inject_start", "inject_end", "heal_start", "heal_end"
MARK_EVENTS = (INJECT_START, INJECT_END, HEAL_START, HEAL_END)
# a look at what a fault left behind, after its injection (its detail only: chaos.system.orphan_watch's orphan check);
# not one of a fault's four marks, but read back with them
LOOKED_AFTER = "looked_after"
READ_MARK_EVENTS = MARK_EVENTS + (LOOKED_AFTER,)


def __getattr__(name: str) -> Any:
    """``SCOPES``: the registered scopes' names (:mod:`chaos.scopes`), read at each use, so that a
    scope registered at run time is one of them."""
    if name == "SCOPES":
        return scopes.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


WARMUP, MEASURE = "warmup", "measure"
FORMAT_VERSION = 2


@dataclass
class RequestRecord:
    """One request, successful or not. Times in seconds unless the name says ``_ns``."""

    id: int
    target: str  # name of the target (e.g. the node whose proxy was used)
    url: str
    zone: str | None  # failure domain of the target, when known
    route: str  # /v1/chat/completions, /v1/completions
    phase: str  # warmup | measure
    planned_ns: int  # when the schedule said to send (open loop); = sent_ns in closed loop
    sent_ns: int  # wall clock at send
    sent_offset_s: float  # monotonic seconds since the run started
    ok: bool = False
    status: int | None = None  # HTTP status, when a response arrived
    failure: str | None = None  # one of FAILURE_CLASSES
    detail: str | None = None  # short text: the exception or body excerpt
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_mean_s: float | None = None
    itl_p95_s: float | None = None
    itl_max_s: float | None = None
    output_tokens: int | None = None  # from the server's usage when given, else chunks counted
    prompt_tokens: int | None = None
    chunks: int = 0  # content chunks received
    max_tokens: int | None = None
    prompt_chars: int | None = None
    stream: bool = True
    # who served it (the replica's response headers, serve_apps.served_by; None: not said) and the client's region
    region: str | None = None  # the target's region, when known (the client's, for a target of one region)
    served_replica: str | None = None  # the Serve replica id that served it (vLLM: the LLMServer replica)
    served_zone: str | None = None
    served_region: str | None = None
    served_version: str | None = None  # the app version that answered (AVAILPROOF_APP_VERSION)
    engine: dict | None = None  # what the replica's engine resolved: on the first response of each replica only
    # a session's turn (load.sessions, chaos.load.sessions)
    session: int | None = None
    turn: int | None = None  # user messages in the conversation, this one included
    prefix_group: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, when the server says
    worker: int | None = None  # the harness process that sent it (load.workers; 0 with one)
    prompt_len: int | None = None  # prompt tokens planned (load.prompt_len or a trace; None: prompt_words)
    clipped: str | None = None  # what max_model_len cut from the planned lengths: prompt, output, prompt+output
    # a client that retries (load.retry, chaos.load.retry): every attempt is a line of its own, ``id`` its
    # logical request's; None in runs without a policy and in older files: one attempt per logical request
    attempt: int | None = None  # 1 for the first attempt, 2 for the first retry, ...
    backoff_s: float | None = None  # what the client waited before this attempt (a retry's)
    retry_after_s: float | None = None  # the wait the answer's Retry-After asked for, when it said one
    retry_stop: str | None = None  # a failed logical request's last attempt: why no other was sent
    # token-level continuity of a stream (chaos.load.continuity; None: not measured, continuity_why says why, or
    # not a stream, or recorded before it was measured)
    tokens_lost: int | None = None
    tokens_duplicated: int | None = None
    tokens_out_of_order: int | None = None
    tokens_corrupted: int | None = None
    continuity_why: str | None = None
    migrations: int | None = None  # continuations a migrating ingress marked ("migrated": k)
    migration_gaps_ms: list | None = None  # per migration: last token before to first after, ms
    migration_refused: str | None = None  # the ingress refused to migrate it, and why ("migration_refused")
    kind: str = "request"

    @property
    def got_first_token(self) -> bool:
        return self.ttft_s is not None


@dataclass
class FaultMark:
    """One fault event on the run's timeline."""

    event: str  # inject_start | inject_end | heal_start | heal_end | looked_after
    fault_id: str  # ties the four events of one fault together
    scope: str  # a registered scope's name (chaos/scopes/): replica, engine, node, zone, ...
    target: str  # what was hit (node name, zone, replica id, ...)
    t_ns: int
    zones: list[str] = field(default_factory=list)  # failure domains the fault affects
    detail: dict[str, Any] = field(default_factory=dict)
    kind: str = "mark"


def now_ns() -> int:
    return time.time_ns()


@dataclass
class Sample:
    """One observation of the control plane and of capacity (:mod:`chaos.system.sampler`).

    ``None`` means *not known at that instant* (the source did not answer), never zero."""

    t_ns: int  # wall clock when the sample was started
    took_s: float  # how long taking it took
    gcs_ok: bool  # the GCS answered its health check (what KubeRay's head probe asks)
    gcs_latency_s: float | None
    controller_ok: bool  # the Serve controller answered (through the dashboard's Serve API)
    app_status: str | None  # the application's status, when the controller answered
    replicas: dict[str, dict[str, int]] | None  # serving (RUNNING, PENDING_MIGRATION) replicas per deployment, per zone
    nodes_alive: dict[str, int] | None  # nodes the GCS holds ALIVE, per zone (KubeRay: Ray pods Ready)
    errors: dict[str, str] = field(default_factory=dict)  # probe -> why it gave no answer
    conditions: dict[str, str] | None = None  # KubeRay: the RayService's conditions (type -> status)
    replica_ids: dict[str, list[str]] | None = None  # serving replicas' ids per deployment (upgrades)
    starting_ids: dict[str, list[str]] | None = None  # STARTING replicas' ids per deployment (engine starts)
    front: dict[str, Any] | None = None  # the balancer's servers and counters (chaos.system.frontdoor.parse_show_stat)
    engine: dict[str, Any] | None = None  # vLLM's counters under a small KV cache (chaos.system.engine_metrics)
    kind: str = "sample"

    @property
    def control_up(self) -> bool:
        return self.gcs_ok and self.controller_ok


class RecordWriter:
    """Append records to an NDJSON file: one line each, written and flushed at once (a crash of
    the rig's process loses nothing written), fsync'ed about once a second by a background
    thread, so the disk's latency never stalls the caller (the harness' event loop)."""

    def __init__(self, path: str | Path, fsync_interval_s: float = 1.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._fsync_interval = fsync_interval_s
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self.counts = {"run": 0, "request": 0, "mark": 0, "sample": 0, "end": 0}
        self._syncer = threading.Thread(target=self._sync_loop, name="records-fsync", daemon=True)
        self._syncer.start()

    def attach(self, events: Events) -> "RecordWriter":
        events.subscribe(events.run_started, lambda header: self.write({"kind": "run", **header}))
        for hook in (events.request_done, events.fault_marked, events.sample_taken):
            events.subscribe(hook, self.write)
        events.subscribe(events.run_stopped, lambda footer: self.write({"kind": "end", **footer}))
        return self

    def write(self, record) -> None:
        # the records hold only JSON values: their __dict__ is what asdict() would copy, far cheaper
        data = vars(record) if hasattr(record, "__dataclass_fields__") else record
        line = json.dumps(data, separators=(",", ":"), default=str) + "\n"
        kind = data.get("kind", "request")
        with self._lock:
            if self._f.closed:
                return
            self._f.write(line)
            self._f.flush()
            self.counts[kind] = self.counts.get(kind, 0) + 1
        self._dirty.set()

    def _sync_loop(self) -> None:
        while not self._closed.wait(self._fsync_interval):
            if not self._dirty.is_set():
                continue
            self._dirty.clear()
            try:
                fd = self._f.fileno()
                os.fsync(fd)  # outside the lock: writers are never held up by the disk
            except (OSError, ValueError):  # closed meanwhile
                return

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
        self._closed.set()


@dataclass
class RunRecords:
    """Everything read back from one records file."""

    header: dict[str, Any]
    requests: list[RequestRecord]
    marks: list[FaultMark]
    footer: dict[str, Any] | None  # None when the run did not stop cleanly (partial run)
    torn_lines: int = 0  # unparseable lines (a crash mid-write leaves at most one)
    samples: list[Sample] = field(default_factory=list)  # none in runs before the sampler (format 1)
    stop_reason: str | None = None  # a stop condition's reason, when one ended the run
    soak: list[dict[str, Any]] = field(default_factory=list)  # a soak's own lines (chaos.soak.run), in order
    # the requests as columns (chaos.recording.request_columns.RequestColumns) when the column reader read them
    # (chaos.recording.record_columns); None: built from ``requests`` where needed
    columns: Any = None

    @property
    def partial(self) -> bool:
        return self.footer is None


def order_by_send_time(path: str | Path) -> int:
    """Put the request lines of a records file in send order (``sent_ns``, then ``id``), each in
    the place of a request line: the header, marks, samples and the end stay where they were. The
    file is replaced atomically; a torn line stays in its place. Returns the number of request lines.

    The merge of a run with several load workers (:mod:`chaos.load.workers`): their lines reach
    the file as they finish, from every worker, and are put in send order once the run ends."""
    path = Path(path)
    raw = path.read_bytes().splitlines(keepends=True)
    slots, reqs = [], []
    for i, line in enumerate(raw):
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict) and obj.get("kind") == "request" and isinstance(obj.get("sent_ns"), int):
            slots.append(i)
            reqs.append((obj["sent_ns"], obj.get("id") if isinstance(obj.get("id"), int) else 0, line))
    reqs.sort(key=lambda x: (x[0], x[1]))
    for i, (_, _, line) in zip(slots, reqs):
        raw[i] = line if line.endswith(b"\n") else line + b"\n"
    tmp = path.with_name(path.name + ".sorting")
    with open(tmp, "wb") as f:
        f.writelines(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(reqs)


def is_run_dir(d: Path) -> bool:
    """An experiment run's directory: a ``summary.json`` or a ``records.ndjson`` in it, and not a capacity
    sweep's (``availproof capacity``: a ``capacity.json`` beside its records, or records whose first run
    header is a sweep's step), which measured no fault and is no run of an experiment."""
    d = Path(d)
    if not ((d / "summary.json").is_file() or (d / "records.ndjson").is_file()):
        return False
    if (d / "capacity.json").is_file():
        return False
    try:
        with open(d / "records.ndjson", "rb") as f:
            first = json.loads(f.readline() or b"{}")
    except (OSError, ValueError):
        return True
    return not (isinstance(first, dict) and first.get("kind") == "run" and "capacity_step" in first)


def iter_lines(path: str | Path) -> Iterator[tuple[int, dict | None]]:
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            try:
                yield i, json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                yield i, None


_REQ_FIELDS = set(RequestRecord.__dataclass_fields__)
_MARK_FIELDS = set(FaultMark.__dataclass_fields__)


_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_REQ_TYPES = {"id": int, "target": str, "url": str, "route": str, "phase": str, "planned_ns": int, "sent_ns": int,
              "sent_offset_s": _NUM, "ok": bool, "failure": (str, type(None)), "ttft_s": _OPT_NUM, "e2e_s": _OPT_NUM,
              "itl_p95_s": _OPT_NUM, "itl_mean_s": _OPT_NUM, "itl_max_s": _OPT_NUM, "zone": (str, type(None)),
              "output_tokens": (int, type(None)), "chunks": int, "attempt": (int, type(None))}
_SAMPLE_FIELDS = set(Sample.__dataclass_fields__)
_SAMPLE_TYPES = {"t_ns": int, "took_s": _NUM, "gcs_ok": bool, "gcs_latency_s": _OPT_NUM, "controller_ok": bool,
                 "app_status": (str, type(None)), "replicas": (dict, type(None)), "nodes_alive": (dict, type(None)),
                 "errors": dict, "conditions": (dict, type(None)), "replica_ids": (dict, type(None)),
                 "starting_ids": (dict, type(None)),
                 "front": (dict, type(None)), "engine": (dict, type(None))}
_MARK_TYPES = {"event": str, "fault_id": str, "scope": str, "target": str, "t_ns": int, "zones": list,
               "detail": dict}


def _build(cls, obj: dict, fields: set, types: dict):
    """The record, or None when a line is not one (missing or mistyped fields: damaged)."""
    try:
        rec_ = cls(**{k: v for k, v in obj.items() if k in fields})
    except TypeError:
        return None
    for name, t in types.items():
        v = getattr(rec_, name)
        if not isinstance(v, t) or (isinstance(v, bool) and t in (int, _NUM, _OPT_NUM)):
            return None
    return rec_


def request_from(obj: dict) -> RequestRecord | None:
    """A request line read back (a dict), or None when it is not a well-formed one."""
    return _build(RequestRecord, obj, _REQ_FIELDS, _REQ_TYPES)


class LineReader:
    """What a reader gathers from a records file, line by line, by kind: the one set of rules of both readers
    (:func:`read` and the column reader, :mod:`chaos.recording.record_columns`). Several run headers keep the first."""

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.footer: dict[str, Any] | None = None
        self.marks: list[FaultMark] = []
        self.samples: list[Sample] = []
        self.soak: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self.torn = 0

    def add(self, obj: Any) -> RequestRecord | None:
        """One line read back (``obj`` None: not JSON): a well-formed request is returned (the caller keeps it),
        any other kind is kept here; a damaged line is counted torn."""
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind == "request":
            r = request_from(obj)
            if r is None:
                self.torn += 1
            return r
        if kind == "mark" or kind == "sample":
            cls, fields, types, into = ((FaultMark, _MARK_FIELDS, _MARK_TYPES, self.marks) if kind == "mark"
                                        else (Sample, _SAMPLE_FIELDS, _SAMPLE_TYPES, self.samples))
            r = _build(cls, obj, fields, types)
            if r is None or (kind == "mark" and r.event not in READ_MARK_EVENTS):
                self.torn += 1
            else:
                into.append(r)
        elif kind == "run" and not self.header:
            self.header = obj
        elif kind == "end":
            self.footer = obj
        elif kind == "stop" and isinstance(obj.get("reason"), str):
            self.stop_reason = self.stop_reason or obj["reason"]
        elif kind == "soak" and isinstance(obj.get("event"), str):
            self.soak.append(obj)
        else:
            self.torn += 1
        return None

    def run(self, requests: Any, columns: Any = None) -> RunRecords:
        """The records read, with ``requests`` (and their ``columns``, when read as columns)."""
        return RunRecords(header=self.header, requests=requests, marks=self.marks, footer=self.footer,
                          torn_lines=self.torn, samples=sorted(self.samples, key=lambda x: x.t_ns),
                          stop_reason=self.stop_reason, soak=self.soak, columns=columns)


def read(path: str | Path) -> RunRecords:
    """Read a records file back; several run headers (trials appended) keep the first."""
    lines = LineReader()
    requests: list[RequestRecord] = []
    for _, obj in iter_lines(path):
        r = lines.add(obj)
        if r is not None:
            requests.append(r)
    return lines.run(requests)
