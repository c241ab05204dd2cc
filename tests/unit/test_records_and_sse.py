import json

import pytest
from hypothesis import given, settings, strategies as st

from chaos.recording import records as rec
from chaos.load.sse import MalformedStream, SSEParser, parse_openai_event


def test_writer_flushes_each_line_and_reader_skips_a_torn_tail(tmp_path):
    path = tmp_path / "r.ndjson"
    ev = rec.Events()
    w = rec.RecordWriter(path).attach(ev)
    ev.emit(ev.run_started, {"run_id": "x"})
    r = rec.RequestRecord(id=1, target="t", url="u", zone="z", route="/v1/x", phase="measure", planned_ns=1,
                          sent_ns=2, sent_offset_s=0.0, ok=True)
    ev.emit(ev.request_done, r)
    # visible on disk before close: flushed per line
    assert len(path.read_text().splitlines()) == 2
    ev.emit(ev.fault_marked, rec.FaultMark(event=rec.INJECT_START, fault_id="f", scope="node", target="n", t_ns=3))
    with open(path, "a") as f:
        f.write('{"kind":"request","id":')  # a crash mid-write
    back = rec.read(path)
    assert back.header["run_id"] == "x" and back.requests == [r] and back.marks[0].scope == "node"
    assert back.torn_lines == 1 and back.partial
    w.close()
    w.write({"kind": "request"})  # after close: ignored, no exception


def test_sse_parser_events_comments_crlf_and_split_chunks():
    p = SSEParser()
    stream = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata: line2\n\nevent: x\ndata: [DONE]\n\n"
    events = []
    for i in range(len(stream)):
        events += p.feed(stream[i:i + 1])
    assert events == ['{"a":1}', "line1\nline2", "[DONE]"]
    assert not p.pending()


def test_sse_parser_rejects_huge_lines_and_invalid_utf8():
    with pytest.raises(MalformedStream, match="longer"):
        SSEParser(max_line=100).feed(b"data: " + b"x" * 200)
    with pytest.raises(MalformedStream, match="UTF-8"):
        SSEParser().feed(b"data: \xff\xfe\n\n")


def test_openai_events():
    c = parse_openai_event(json.dumps({"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}))
    assert c.has_token and c.text == "hi"
    c = parse_openai_event(json.dumps({"choices": [{"delta": {"role": "assistant", "content": ""}}]}))
    assert not c.has_token
    c = parse_openai_event(json.dumps({"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 3}}))
    assert c.completion_tokens == 7
    for bad in ("not json", "[1,2]", json.dumps({"error": {"message": "boom"}}), json.dumps({"choices": [1]})):
        with pytest.raises(MalformedStream):
            parse_openai_event(bad)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=30))
def test_sse_parser_fuzz_never_raises_anything_but_malformed(chunks):
    p = SSEParser(max_line=256)
    try:
        for c in chunks:
            for data in p.feed(c):
                try:
                    parse_openai_event(data)
                except MalformedStream:
                    pass
    except MalformedStream:
        pass


def test_prometheus_exporter_counts_from_events():
    import httpx

    from chaos.system import metrics

    ev = rec.Events()
    exp = metrics.Exporter().attach(ev)
    port = exp.serve(0)
    try:
        base = dict(url="u", zone="z", route="/v1/x", planned_ns=1, sent_ns=1, sent_offset_s=0.0)
        ev.emit(ev.request_done, rec.RequestRecord(id=1, target="a", phase="measure", ok=True, ttft_s=0.2, e2e_s=1.0, **base))
        ev.emit(ev.request_done, rec.RequestRecord(id=2, target="a", phase="measure", ok=False,
                                                   failure=rec.CONNECT_REFUSED, **base))
        ev.emit(ev.request_done, rec.RequestRecord(id=3, target="a", phase="warmup", ok=False, **base))
        ev.emit(ev.fault_marked, rec.FaultMark(event=rec.INJECT_START, fault_id="f", scope="zone", target="z", t_ns=1))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False).text
    finally:
        exp.close()
    assert 'availproof_requests_total{failure_class="",outcome="ok",target="a",zone="z"} 1.0' in text
    assert 'availproof_requests_total{failure_class="connect_refused",outcome="failed",target="a",zone="z"} 1.0' in text
    assert 'availproof_fault_active{scope="zone",target="z"} 1.0' in text
    assert 'availproof_ttft_seconds_count{target="a"} 1.0' in text
