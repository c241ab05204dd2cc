"""The column reader (chaos.recording.record_columns) against the line reader (chaos.recording.records.read, the reference), and the
figures computed on columns against the known answers of a synthetic run."""

import json
import random

import numpy as np
import pytest

from bench import synthetic_run
from chaos import analysis
from chaos.recording import record_columns, records as rec, request_columns as rc

NS = 1_000_000_000
T0 = 1_780_000_000 * NS


def request(i, t, **kw):
    sent = T0 + int(t * NS)
    base = dict(id=i, target=f"w-{i % 3}", url="http://10.0.0.1:8000", zone=("zone-a", "zone-b", None)[i % 3],
                route="/v1/chat/completions", phase="measure" if t >= 1 else "warmup", planned_ns=sent - 1000 * (i % 2),
                sent_ns=sent, sent_offset_s=t, ok=i % 7 != 0, status=200, ttft_s=0.05 + i / 1e4, e2e_s=0.4,
                itl_mean_s=0.01, itl_p95_s=0.02, chunks=4, served_replica=f"r{i % 4}" if i % 5 else None,
                served_zone="zone-b", region="r1", served_region="r1" if i % 2 else "r2", worker=i % 2,
                session=i // 4 if i % 3 == 0 else None, prefix_group=i % 5 if i % 4 == 0 else None,
                clipped="prompt" if i % 11 == 0 else None, stream=i % 6 != 0)
    base.update(kw)
    if not base["ok"]:
        base.update(failure=(rec.CONNECT_REFUSED, rec.STREAM_BROKEN, None)[i % 3], ttft_s=None if i % 2 else 0.07)
    return rec.RequestRecord(**base)


def every_kind(path):
    """A records file with every kind of line, written as the rig writes it."""
    w = rec.RecordWriter(path, fsync_interval_s=60)
    w.write({"kind": "run", "run_id": "r", "format_version": 2, "load": {"mode": "open"}})
    for i in range(60):
        w.write(request(i, i * 0.1))
        if i == 20:
            w.write(rec.FaultMark(rec.INJECT_START, "f1", "zone", "zone-a", T0 + 2 * NS, ["zone-a"], {"x": 1}))
            w.write(rec.Sample(T0 + 2 * NS, 0.01, True, 0.002, False, None, {"M": {"zone-a": 1}}, {"zone-a": 1}))
            w.write({"kind": "soak", "event": "clock", "t_ns": T0})
        if i == 40:
            w.write(rec.FaultMark(rec.HEAL_END, "f1", "zone", "zone-a", T0 + 4 * NS, ["zone-a"]))
            w.write(rec.Sample(T0 + NS, 0.01, False, None, True, "RUNNING", None, None, {"gcs": "down"}))
            w.write({"kind": "stop", "reason": "too many failures"})
            w.write({"kind": "run", "run_id": "second header, ignored"})
    w.write({"kind": "end", "stopped_ns": T0 + 7 * NS})
    w.close()
    return path


def same(path):
    """The column reader's records equal the line reader's; returns the column reader's."""
    lines, cols = rec.read(path), record_columns.parse(path)
    for name in ("header", "marks", "samples", "soak", "stop_reason", "footer", "torn_lines"):
        assert getattr(cols, name) == getattr(lines, name), name
    assert list(cols.requests) == lines.requests and len(cols.requests) == len(lines.requests)
    want, got = rc.from_records(lines.requests), cols.columns
    for name in (*rc.NUMBERS, *rc.FLOATS, "ok", "measure", "stream", "first_token", *rc.SMALL):
        assert np.array_equal(getattr(got, name), getattr(want, name), equal_nan=True), name
        assert getattr(got, name).dtype == getattr(want, name).dtype, name
    for name in rc.CODED:
        assert [getattr(got, name).value(i) for i in range(len(got))] == \
               [getattr(want, name).value(i) for i in range(len(want))], name
    assert got.records(np.arange(len(got))) == want.records(np.arange(len(want)))
    return cols


@pytest.fixture(params=[32 << 20, 700], ids=["one block", "many blocks"])
def blocks(request, monkeypatch):
    monkeypatch.setattr(record_columns, "BLOCK_BYTES", request.param)
    return request.param


def test_every_kind_of_line_reads_as_the_line_reader_reads_it(tmp_path, blocks):
    cols = same(every_kind(tmp_path / "records.ndjson"))
    # a second run header is counted torn by the line reader (and so here)
    assert len(cols.requests) == 60 and cols.torn_lines == 1 and cols.stop_reason == "too many failures"
    assert cols.header["run_id"] == "r" and len(cols.marks) == 2 and [s.t_ns for s in cols.samples] == [T0 + NS, T0 + 2 * NS]


DAMAGE = {
    "truncated last line": lambda lines: lines[:-1] + [lines[-1][: len(lines[-1]) // 2]],
    "last line without its newline": lambda lines: lines[:-1] + [lines[-1].rstrip("\n")],
    "not JSON in the middle": lambda lines: lines[:30] + ['{"id": 5, "kind": "requ\n'] + lines[30:],
    "a blank line": lambda lines: lines[:10] + ["\n", "   \n"] + lines[10:],
    "not an object": lambda lines: lines[:10] + ["[1, 2]\n", "5\n", "null\n"] + lines[10:],
    "unknown or no kind": lambda lines: lines[:10] + ['{"kind": "what"}\n', '{"id": 1}\n'] + lines[10:],
    "bytes that are not UTF-8": lambda lines: lines[:10] + ['{"kind": "request", "target": "\udcff"}\n'] + lines[10:],
}


def _field(lines, i, **changes):
    obj = json.loads(lines[i])
    obj.update(changes)
    for k in [k for k, v in changes.items() if v is KeyError]:
        del obj[k]
    return lines[:i] + [json.dumps(obj) + "\n"] + lines[i + 1:]


TYPES = {
    "id a string": dict(id="x"), "id a float": dict(id=1.0), "id a bool": dict(id=True), "ok a number": dict(ok=1),
    "sent_ns a float": dict(sent_ns=1.5), "chunks null": dict(chunks=None), "ok missing (its default)": dict(ok=KeyError),
    "chunks missing (its default)": dict(chunks=KeyError), "stream null": dict(stream=None),
    "stream missing (its default)": dict(stream=KeyError), "url missing": dict(url=KeyError),
    "target a number": dict(target=5), "zone an object": dict(zone={"a": 1}), "ttft a string": dict(ttft_s="0.1"),
    "worker a string (not checked)": dict(worker="w"), "a field of its own": dict(mine=[1, {"b": 2}]),
    "sent_offset_s a bool": dict(sent_offset_s=True), "output_tokens a float": dict(output_tokens=2.0),
    "itl_max_s a string (checked by the line reader, read by no figure)": dict(itl_max_s="0.1"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_lines_are_reported_as_the_line_reader_reports_them(tmp_path, blocks, damage):
    path = every_kind(tmp_path / "records.ndjson")
    lines = path.read_text(errors="surrogateescape").splitlines(keepends=True)
    path.write_bytes("".join(DAMAGE[damage](lines)).encode(errors="surrogateescape"))
    assert same(path).torn_lines >= (0 if "newline" in damage else 1)


@pytest.mark.parametrize("change", TYPES)
def test_a_request_of_other_types_is_read_as_the_line_reader_reads_it(tmp_path, blocks, change):
    path = every_kind(tmp_path / "records.ndjson")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(_field(lines, 12, **TYPES[change])))
    same(path)


def test_an_empty_file_and_a_file_of_no_request(tmp_path):
    (tmp_path / "empty.ndjson").write_bytes(b"")
    assert len(same(tmp_path / "empty.ndjson").columns) == 0
    (tmp_path / "header.ndjson").write_text('{"kind": "run", "run_id": "x"}\n{"kind": "end", "stopped_ns": 5}')
    assert same(tmp_path / "header.ndjson").footer == {"kind": "end", "stopped_ns": 5}


def test_a_command_reads_an_unchanged_file_once(tmp_path):
    path = every_kind(tmp_path / "records.ndjson")
    assert record_columns.read(path) is not record_columns.read(path)  # outside a command: read each time
    with record_columns.shared():
        first = record_columns.read(path)
        assert record_columns.read(tmp_path / "." / "records.ndjson") is first
        with open(path, "a") as f:
            f.write(json.dumps(vars(request(99, 6.0))) + "\n")
        again = record_columns.read(path)
        assert again is not first and len(again.requests) == 61


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("synthetic")
    synthetic_run.write(d / "records.ndjson", 10_000, rate=300.0, inject_at=0.4, outage_s=10.0)
    return d


def test_the_figures_on_columns_are_the_figures_on_records_and_the_known_answers(synthetic):
    path = synthetic / "records.ndjson"
    steady = analysis.SteadyState(window_s=5.0, min_success_ratio=0.99, max_p95_ttft_s=2.0)
    lines = rec.read(path)
    cols = same(path)
    on_columns = analysis.analyse(cols, steady)
    assert analysis.analyse(lines, steady) == on_columns
    want = synthetic_run.expected(10_000, rate=300.0, inject_at=0.4, outage_s=10.0)
    f = on_columns["faults"][0]
    assert on_columns["requests"]["total"] == want["total"] and on_columns["requests"]["measured"] == want["measured"]
    assert f["failed"]["by_class"][rec.CONNECT_REFUSED] == want["refused"]
    assert f["affected"]["time_to_first_success_s"] == want["affected_first_success_s"]
    assert f["failed"]["unaffected_zones"] == 0 and f["affected"]["zones"] == ["zone-a"]
    assert f["affected"]["recovered"] is True and f["service"]["time_to_impact_s"] == 0.0


@pytest.mark.parametrize("p95", [None, 0.3])
def test_windows_judged_on_columns_are_the_windows_judged_on_records(p95):
    rng = random.Random(7)
    steady = analysis.SteadyState(window_s=1.0, min_success_ratio=0.9, max_p95_ttft_s=p95, min_requests=3)
    for trial in range(30):
        rs = sorted((request(i, 2 + rng.uniform(0, 20), ok=rng.random() > 0.1 * (trial % 4),
                             ttft_s=rng.choice([None, rng.uniform(0, 0.5)]), stream=rng.random() > 0.2)
                     for i in range(rng.randrange(0, 200))), key=lambda r: r.sent_ns)
        end = T0 + int(rng.uniform(5, 25) * NS)
        rs = [r for r in rs if r.sent_ns < end]
        want = analysis.judge_windows(rs, T0 + 2 * NS, end, steady)
        cols = rc.from_records(rs)
        starts, good = analysis.windows.window_states(cols.sent_ns, cols.ok, cols.latency(), T0 + 2 * NS, end, steady)
        assert list(zip(starts.tolist(), good.tolist())) == want
        onset = rng.choice([None, T0 + 5 * NS])
        assert analysis.recovery((starts, good), onset) == _recovery_by_loop(want, onset)


def _recovery_by_loop(windows, onset):
    """The recovery figures as the rig computed them one window at a time (before the columns): the oracle."""
    if onset is None:
        onset = next((s for s, good in windows if not good), None)
        if onset is None:
            return {"disrupted": False, "first": None, "steady": None, "relapses": 0, "judged": bool(windows)}
    after = [(s, good) for s, good in windows if s >= onset]
    first = next((s for s, good in after if good), None)
    relapses, prev, steady = 0, None, None
    for s, good in after:
        if good and steady is None:
            steady = s
        elif not good:
            if prev is True and first is not None:
                relapses += 1
            steady = None
        prev = good
    return {"disrupted": True, "first": first, "steady": steady, "relapses": relapses, "judged": bool(after)}
