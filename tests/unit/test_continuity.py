"""Token-level continuity (issue 47, the harness's side): each stream's tokens lost, duplicated, out of order and
corrupted, its migrations and their gaps (chaos/load/continuity.py) on synthetic streams, a finish_reason abort
or error as a failure of its own class, and the summary's ``continuity`` per fault (chaos/analysis/continuity.py)
re-derived alike by the line reader and the column reader; records without continuity give null with the reason."""

import asyncio
import json

import pytest

from chaos import analysis
from chaos.recording import record_columns, records as rec
from chaos.load import continuity, integrity
from chaos.load.sse import Chunk, MalformedStream
from chaos.load.workload import LoadShape
from serve_apps import stream_tokens
from tests.unit.loopback import run_against
from tests.unit.test_analysis import NS, T0, mark, req, steady
from tests.unit.test_sessions import OpenAIServer

BODY = {"model": "m", "max_tokens": 8, "stream": True, "prompt": "zone lost again"}
KEY = stream_tokens.prompt_key("zone lost again")
WORDS = [stream_tokens.word(KEY, i) for i in range(8)]


def stream(words, finish="length", fingerprint=stream_tokens.FINGERPRINT, marks=(), gap_at=None, gap_s=0.0,
           usage=8, golden=None):
    """A record of a stream of ``words`` (one event each, the first bare, the others after a space), 10 ms apart
    (``gap_s`` more before the ``gap_at``-th), marked ``migrated`` at the events of ``marks``."""
    check = integrity.StreamCheck(BODY)
    times, t = [], 0.0
    for j, w in enumerate(words):
        text = w if j == 0 else " " + w
        check.event(Chunk(text, True, finish if j == len(words) - 1 else None, None, None, None, fingerprint,
                          migrated=marks.index(j) + 1 if j in marks else None))
        t += 0.010 + (gap_s if j == gap_at else 0.0)
        times.append(t)
    r = req(1, 1.0)
    r.output_tokens = usage
    continuity.fill(r, check, times, done=True, golden=golden)
    return r


def counts(r):
    return (r.tokens_lost, r.tokens_duplicated, r.tokens_out_of_order, r.tokens_corrupted)


def test_a_clean_stream_gives_zeros():
    r = stream(WORDS)
    assert counts(r) == (0, 0, 0, 0) and r.migrations == 0 and r.migration_gaps_ms == []
    assert r.continuity_why is None and r.migration_refused is None


def test_a_dropped_token_is_lost():
    assert counts(stream(WORDS[:3] + WORDS[4:])) == (1, 0, 0, 0)
    assert counts(stream(WORDS[:2] + WORDS[5:])) == (3, 0, 0, 0)


def test_a_repeated_token_is_duplicated():
    assert counts(stream(WORDS[:4] + [WORDS[3]] + WORDS[4:])) == (0, 1, 0, 0)
    assert counts(stream(WORDS[:6] + WORDS[3:])) == (0, 3, 0, 0)  # a continuation that replayed three tokens


def test_a_corrupted_token_is_counted_whatever_it_reads():
    assert counts(stream(WORDS[:2] + ["garbage"] + WORDS[3:])) == (0, 0, 0, 1)  # no word of the answer
    assert counts(stream(WORDS[:2] + [stream_tokens.word(KEY, 9)] + WORDS[3:])) == (0, 0, 0, 1)  # a wrong word
    assert counts(stream(WORDS[:3] + ["zzz"] + WORDS[3:])) == (0, 0, 0, 1)  # a word put in


def test_a_token_out_of_order():
    assert counts(stream(WORDS[:2] + [WORDS[3], WORDS[2]] + WORDS[4:])) == (0, 0, 1, 0)


def test_a_migrated_stream_counts_its_migration_and_its_gap():
    r = stream(WORDS, marks=(5,), gap_at=5, gap_s=0.250)
    assert r.migrations == 1 and r.migration_gaps_ms == [260.0] and counts(r) == (0, 0, 0, 0)
    twice = stream(WORDS, marks=(2, 6), gap_at=6, gap_s=0.1)
    assert twice.migrations == 2 and twice.migration_gaps_ms == [10.0, 110.0]


def test_a_broken_streams_missing_tail_is_its_failure_not_lost_tokens():
    r = stream(WORDS[:5], finish=None)
    r2 = stream(WORDS[:5])  # ended with a finish_reason: the answer's 8 tokens were due
    assert counts(r) == (0, 0, 0, 0) and counts(r2) == (3, 0, 0, 0)


def test_vllm_without_a_golden_answer_is_null_with_the_reason_and_with_one_is_checked():
    r = stream(["The", "cat", "sat"], fingerprint=None)
    assert counts(r) == (None, None, None, None) and continuity.NO_GOLDEN in r.continuity_why
    r = stream(["The", "cat", "sat"], fingerprint=None, usage=3, golden=["The", " dog", " sat"])
    assert counts(r) == (0, 0, 0, 1) and r.continuity_why is None
    assert counts(stream(["The", "cat", "sat"], fingerprint=None, usage=3, golden=["The", " cat", " sat"])) == (0,) * 4


def test_a_refused_migration_is_read_from_the_error_event():
    check = integrity.StreamCheck(BODY)
    check.parse(json.dumps({"choices": [{"text": WORDS[0], "finish_reason": None}], "migrated": 1,
                            "system_fingerprint": stream_tokens.FINGERPRINT}))
    with pytest.raises(MalformedStream):
        check.parse(json.dumps({"error": {"message": "engine died"}, "migration_refused": "guided"}))
    r = req(1, 1.0)
    continuity.fill(r, check, [0.01], done=False)
    assert r.migration_refused == "guided" and r.migrations == 1 and r.migration_gaps_ms == []


@pytest.mark.parametrize("finish", ["abort", "error"])
def test_finish_reason_abort_or_error_is_a_failure_of_its_own(finish):
    check = integrity.StreamCheck({**BODY, "max_tokens": 3})
    for j, w in enumerate(WORDS[:2]):
        check.event(Chunk(w, True, finish if j == 1 else None, None, None, None, None))
    assert check.verdict(2) == (rec.ABORTED, f"finish_reason {finish!r} after 2 token events")


class Migrator(OpenAIServer):
    """Answers as the stream target would; request 2 migrates once (the marker, 200 ms later) and request 4
    ends with finish_reason abort."""

    async def answer(self, body, writer):
        i, self.n = self.n, self.n + 1
        words = stream_tokens.text(integrity.prompt_of(body), body["max_tokens"]).split(" ")
        events = []
        for k, w in enumerate(words):
            finish = ("abort" if i == 4 else "length") if k == len(words) - 1 else None
            e = {"choices": [{"index": 0, "text": w if k == 0 else " " + w, "finish_reason": finish}],
                 "system_fingerprint": stream_tokens.FINGERPRINT}
            if i == 2 and k == 2:
                e["migrated"] = 1
            events.append(e)
        events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(words)}})
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for k, e in enumerate(events):
            if i == 2 and k == 2:
                await writer.drain()
                await asyncio.sleep(0.2)
            data = b"data: %s\n\n" % json.dumps(e).encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        await writer.drain()



def test_the_harness_records_continuity_migrations_and_aborts():
    shape = LoadShape(mode="closed", concurrency=1, duration_s=30, max_requests=6, warmup_s=0, timeout_s=5,
                      route="completions", model="m", max_tokens=(4, 6), prompt_words=(2, 4))
    got, _, _, run = run_against(Migrator(), shape)
    by_id = {r.id: r for r in got}
    assert "continuity" in run.header()
    assert [counts(r) for r in got] == [(0, 0, 0, 0)] * 6
    assert by_id[2].migrations == 1 and len(by_id[2].migration_gaps_ms) == 1 and by_id[2].migration_gaps_ms[0] >= 150
    assert all(r.migrations == 0 for r in got if r.id != 2)
    assert by_id[4].failure == rec.ABORTED and sorted(r.id for r in got if not r.ok) == [4]


# ---------------------------------------------------------------- the summary's continuity
def _run_records(with_continuity=True):
    """Requests 10 a second in zones a and b over 0-20 s, a fault in zone a at 10 s; after it, in zone a, one
    stream lost a token, one repeated two, one was migrated twice (gaps 120 and 300 ms) and one refused."""
    rs = []
    for k in range(200):
        zone = "ab"[k % 2]
        r = req(k, 0.1 * k, zone=zone)
        if with_continuity:
            r.tokens_lost = r.tokens_duplicated = r.tokens_out_of_order = r.tokens_corrupted = 0
            r.migrations, r.migration_gaps_ms = 0, []
        rs.append(r)
    if with_continuity:
        rs[110].tokens_lost = 1
        rs[112].tokens_duplicated = 2
        rs[114].migrations, rs[114].migration_gaps_ms = 2, [120.0, 300.0]
        rs[116].migration_refused = "guided"
        rs[116].ok, rs[116].failure = False, rec.STREAM_BROKEN
        rs[113].tokens_corrupted = 1  # zone b: the service's, not the affected population's
    marks = [mark(rec.INJECT_START, 10.0, scope="zone", zones=("a",)), mark(rec.HEAL_END, 12.0, scope="zone")]
    header = {"run_id": "r", **({"continuity": continuity.FORMAT} if with_continuity else {})}
    return header, rs, marks


def _write(path, header, rs, marks):
    w = rec.RecordWriter(path, fsync_interval_s=60)
    w.write({"kind": "run", **header})
    for r in rs:
        w.write(r)
    for m in marks:
        w.write(m)
    w.write({"kind": "end", "stopped_ns": T0 + 20 * NS})
    w.close()
    return path


def test_the_summary_counts_each_fault_s_continuity_on_both_read_paths(tmp_path):
    path = _write(tmp_path / "records.ndjson", *_run_records())
    lines, cols = rec.read(path), record_columns.parse(path)
    on_lines, on_cols = analysis.analyse(lines, steady()), analysis.analyse(cols, steady())
    assert on_lines == on_cols
    c = on_cols["faults"][0]["continuity"]
    assert (c["tokens_lost"], c["tokens_duplicated"], c["tokens_out_of_order"], c["tokens_corrupted"]) == (1, 2, 0, 1)
    assert (c["streams_migrated"], c["migrations"], c["refused"]) == (1, 2, 1)
    assert (c["migration_gap_p50_ms"], c["migration_gap_p99_ms"]) == (120.0, 300.0)
    # the window's 100 streams and the 4 in flight at the injection (each 0.5 s long)
    assert c["streams"] == c["streams_checked"] == c["streams_checked_corrupted"] == 104
    a = c["affected"]
    assert a["streams"] == 52 and (a["tokens_lost"], a["tokens_duplicated"], a["tokens_corrupted"]) == (1, 2, 0)
    assert not any(k.startswith("continuity") for k in on_cols["faults"][0]["unmeasurable"])


def test_records_without_continuity_give_null_with_the_reason_not_zero(tmp_path):
    path = _write(tmp_path / "records.ndjson", *_run_records(with_continuity=False))
    for run in (rec.read(path), record_columns.parse(path)):
        f = analysis.analyse(run, steady())["faults"][0]
        c = f["continuity"]
        assert c["streams"] == 104
        for name in ("tokens_lost", "tokens_duplicated", "tokens_corrupted", "streams_migrated", "refused",
                     "migration_gap_p50_ms"):
            assert c[name] is None and c["affected"][name] is None
            assert f["unmeasurable"][f"continuity.{name}"] == analysis.continuity.NOT_RECORDED


def test_streams_that_could_not_be_checked_say_why():
    header, rs, marks = _run_records()
    for r in rs:
        r.tokens_lost = r.tokens_duplicated = r.tokens_out_of_order = r.tokens_corrupted = None
        r.continuity_why = f"{continuity.NO_INDEX}; {continuity.NO_GOLDEN}"
    run = rec.RunRecords(header=header, requests=rs, marks=marks, footer={"stopped_ns": T0 + 20 * NS})
    f = analysis.analyse(run, steady())["faults"][0]
    assert f["continuity"]["tokens_corrupted"] is None and f["continuity"]["streams_checked"] == 0
    assert continuity.NO_GOLDEN in f["unmeasurable"]["continuity.tokens_corrupted"]
    assert f["continuity"]["streams_migrated"] == 1  # migrations are still counted
