"""A client that retries (load.retry, chaos/load/retry.py): the policy, the harness sending attempts through its
transport seam (httpx.MockTransport, no cluster), and every attempt recorded with its logical request."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from chaos.recording import records as rec
from chaos.base.errors import UsageError
from chaos.load import retry
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target


def _sse(n_tokens: int = 3) -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": f" w{i}"},
                            "finish_reason": "length" if i == n_tokens - 1 else None}]} for i in range(n_tokens)]
    events.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n_tokens}})
    return b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"


def _ok() -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse())


class Script:
    """A transport's handler answering each logical request (its prompt) by a script of answers, one per attempt;
    past its end, 200."""

    def __init__(self, answers):
        self.answers = answers  # a list of callables () -> Response (or raising), or a dict prompt index -> list
        self.calls: list[float] = []
        self.seen: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        import time

        self.calls.append(time.monotonic())
        key = request.content  # every attempt of a logical request sends the same body
        n = self.seen[key] = self.seen.get(key, 0) + 1
        return self.answers[n - 1](request) if n <= len(self.answers) else _ok()


def _run(handler, retry_policy, **shape):
    shape = LoadShape(**{"mode": "closed", "concurrency": 1, "duration_s": 30, "warmup_s": 0, "timeout_s": 5,
                         "max_requests": 1, "model": "m", "seed": 3, "retry": retry_policy, **shape})
    events = rec.Events()
    got: list[rec.RequestRecord] = []
    events.request_done.append(got.append)
    run = LoadRun([Target("t", "http://127.0.0.1:9", "zone-a")], shape, events, transport=httpx.MockTransport(handler))
    footer = run.run()
    return got, footer


def _status(code, **headers):
    return lambda request: httpx.Response(code, headers=headers, content=b"busy")


def _refused(request):
    raise httpx.ConnectError("connection refused", request=request)


# ---------------------------------------------------------------- the policy
def test_the_policy_is_off_by_default_and_validated():
    assert LoadShape().retry is None
    shape = LoadShape(retry={"attempts": 3, "backoff_base_s": 0.1, "retry_on": ["connect", "5xx", "timeout"]})
    assert isinstance(shape.retry, retry.RetryPolicy) and shape.retry.retry_on == ("connect", "5xx", "timeout")
    assert LoadShape.from_dict(shape.to_dict()).retry == shape.retry  # what a load worker is given
    assert shape.drain_bound_s() == 3 * 10 + 2 * 2.0 + 1  # every attempt to its deadline, the capped waits
    for bad, says in [({"attempts": 0}, "attempts"), ({"retry_on": ["teapot"]}, "retry_on"),
                      ({"backoff_base_s": 3, "backoff_cap_s": 1}, "backoff"), ({"per_attempt_timeout_s": 60}, "per_attempt"),
                      ({"budget": {"ratio": 0}}, "budget"), ({"jitter": "some"}, "jitter"), ({"tries": 2}, "tries")]:
        with pytest.raises(UsageError, match=says):
            LoadShape(retry=bad)


def test_backoff_is_full_jitter_bounded_by_the_exponential_ceiling_and_seeded():
    p = retry.RetryPolicy(attempts=6, backoff_base_s=0.1, backoff_cap_s=0.5)
    draws = {n: [retry.backoff_s(p, 7, i, n) for i in range(400)] for n in range(1, 6)}
    for n, ds in draws.items():
        ceiling = min(0.5, 0.1 * 2 ** (n - 1))
        assert all(0 <= d <= ceiling for d in ds)
        assert max(ds) > 0.9 * ceiling and min(ds) < 0.1 * ceiling  # spread over the whole range: full jitter
    assert [retry.backoff_s(p, 7, i, 2) for i in range(50)] == draws[2][:50]  # the same seed, the same waits
    assert [retry.backoff_s(p, 8, i, 2) for i in range(50)] != draws[2][:50]  # another seed, other waits
    flat = retry.RetryPolicy(backoff_base_s=0.1, backoff_cap_s=0.3, jitter="none")
    assert [retry.backoff_s(flat, 1, 0, n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.3, 0.3]


def test_retry_after_reads_seconds_and_http_dates():
    assert retry.retry_after_s("3", 1000.0) == 3.0
    assert retry.retry_after_s("Thu, 01 Jan 1970 00:16:50 GMT", 1000.0) == 10.0
    assert retry.retry_after_s("soon", 1000.0) is None and retry.retry_after_s(None, 0) is None


def test_a_budget_allows_a_fraction_of_the_requests_started_in_its_window():
    b = retry.RetryBudget(retry.Budget(ratio=0.2, window_s=10, min_retries=1))
    for i in range(20):
        b.started(i * 0.1)
    allowed = 0
    while b.allows(2.0):
        b.spend(2.0)
        allowed += 1
    assert allowed == 4  # 0.2 x 20 started in the last 10 s
    assert not b.allows(11.0)  # the retries are still in the window, the requests that paid for them are not
    assert b.allows(12.5)  # all gone from the window: the floor of 1 remains


# ---------------------------------------------------------------- the harness: attempts recorded
def test_attempts_are_recorded_with_their_logical_request_until_one_succeeds():
    script = Script([_status(503), _refused])
    got, footer = _run(script, {"attempts": 3, "backoff_base_s": 0.01, "retry_on": ["connect", "5xx"]})
    assert [(r.id, r.attempt, r.ok, r.failure) for r in got] == [
        (0, 1, False, rec.HTTP_5XX), (0, 2, False, rec.CONNECT_REFUSED), (0, 3, True, None)]
    assert got[0].backoff_s is None and all(0 <= r.backoff_s <= 0.02 for r in got[1:])
    assert all(r.retry_stop is None for r in got)
    assert footer["sent"] == 3 and footer["retries"] == 2 and footer["ok"] == 1


def test_attempts_stop_when_used_up_and_say_why():
    got, _ = _run(Script([_status(500)] * 5), {"attempts": 2, "backoff_base_s": 0.01, "retry_on": ["5xx"]})
    assert [(r.attempt, r.retry_stop) for r in got] == [(1, None), (2, retry.STOP_ATTEMPTS)]
    got, _ = _run(Script([_status(429)]), {"attempts": 3, "backoff_base_s": 0.01, "retry_on": ["5xx"]})
    assert [(r.attempt, r.retry_stop) for r in got] == [(1, retry.STOP_NOT_RETRIED)]  # 429 was not asked for
    got, _ = _run(Script([_status(429)]), {"attempts": 3, "backoff_base_s": 0.01, "retry_on": ["429"]})
    assert [(r.attempt, r.ok) for r in got] == [(1, False), (2, True)]


def test_without_a_policy_nothing_is_retried_and_the_records_say_no_attempt():
    got, footer = _run(Script([_status(503)]), None)
    assert [(r.attempt, r.ok, r.retry_stop) for r in got] == [(None, False, None)] and "retries" not in footer


def test_retry_after_is_honoured_capped_or_ignored_as_said():
    import time

    policy = {"attempts": 2, "backoff_base_s": 0.01, "backoff_cap_s": 0.01, "retry_on": ["503"]}
    script = Script([_status(503, **{"Retry-After": "1"})])
    t = time.monotonic()
    got, _ = _run(script, {**policy, "honour_retry_after": True})
    assert [r.ok for r in got] == [False, True] and got[0].retry_after_s == 1.0
    assert got[1].backoff_s == 1.0 and script.calls[1] - script.calls[0] >= 0.99  # waited what it asked
    capped = Script([_status(503, **{"Retry-After": "30"})])
    got, _ = _run(capped, {**policy, "honour_retry_after": True, "retry_after_cap_s": 0.2})
    assert got[1].backoff_s == 0.2 and 0.2 <= capped.calls[1] - capped.calls[0] < 5
    ignored = Script([_status(503, **{"Retry-After": "30"})])
    got, _ = _run(ignored, policy)
    assert got[0].retry_after_s == 30.0 and got[1].backoff_s <= 0.01 and ignored.calls[1] - ignored.calls[0] < 1
    assert time.monotonic() - t < 10


class _BrokenAfterOneToken(httpx.AsyncByteStream):
    async def __aiter__(self):
        yield b'data: {"choices": [{"index": 0, "delta": {"content": " w0"}, "finish_reason": null}]}\n\n'
        raise httpx.ReadError("connection reset")


def _broken(request):
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_BrokenAfterOneToken())


def test_no_retry_after_the_first_token_unless_said():
    policy = {"attempts": 3, "backoff_base_s": 0.01, "retry_on": ["reset", "5xx"]}
    got, _ = _run(Script([_broken]), policy)
    assert [(r.attempt, r.failure, r.ttft_s is not None, r.retry_stop) for r in got] == [
        (1, rec.STREAM_BROKEN, True, retry.STOP_FIRST_TOKEN)]
    got, _ = _run(Script([_broken]), {**policy, "after_first_token": True})
    assert [(r.attempt, r.ok) for r in got] == [(1, False), (2, True)]


def test_a_retry_budget_stops_retries():
    # 10 logical requests, each failing its first two attempts: a budget of 10 % (no floor) in a long window
    # allows one retry in all; without it every request is retried
    policy = {"attempts": 3, "backoff_base_s": 0.001, "retry_on": ["5xx"]}
    got, _ = _run(Script([_status(500), _status(500)]), policy, max_requests=10)
    assert sum(1 for r in got if r.attempt > 1) == 20 and all(r.ok for r in got if r.attempt == 3)
    got, _ = _run(Script([_status(500), _status(500)]), {**policy, "budget": {"ratio": 0.1, "window_s": 60,
                                                                            "min_retries": 0}}, max_requests=10)
    assert [(r.id, r.attempt) for r in got if r.attempt > 1] == [(0, 2)]  # 0.1 x 1 started: one retry
    assert [r.retry_stop for r in got if not r.ok] == [None] + [retry.STOP_BUDGET] * 10  # then refused to all


def test_a_session_keeps_its_shape_with_retries_on():
    script = Script([_status(503)])
    got, _ = _run(script, {"attempts": 2, "backoff_base_s": 0.001, "retry_on": ["5xx"]}, max_requests=4,
                  duration_s=5, prompt_words=(4, 8), max_tokens=(4, 8),
                  sessions={"turns": 2, "prefix_groups": 1, "system_prompt_tokens": 8, "think_time_s": 0.0})
    firsts = [r for r in got if r.attempt == 1]
    assert firsts and all(r.session is not None for r in got)
    by_id: dict[int, list] = {}
    for r in got:
        by_id.setdefault(r.id, []).append(r)
    for attempts in by_id.values():  # every attempt of a turn is the same turn of the same session
        assert len({(r.session, r.turn) for r in attempts}) == 1 and attempts[-1].ok


# ---------------------------------------------------------------- the analysis: attempts grouped, amplification
from chaos import analysis
from chaos.core import bounds
from chaos.analysis import figures
from chaos.recording import record_columns, request_columns as rc  # noqa: E402
from chaos.analysis import retries as retries_mod  # noqa: E402

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
POLICY = {"attempts": 3, "backoff_base_s": 0.01, "retry_on": ["5xx"]}


def attempt(i, t, n=None, ok=True, phase="measure", zone="a", prompt_len=10, worker=0, stop=None):
    sent = T0 + int(round(t * NS))
    return rec.RequestRecord(id=i, target=f"w-{zone}", url="http://127.0.0.1:1", zone=zone, route="/v1/chat/completions",
                             phase=phase, planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else rec.HTTP_5XX, status=200 if ok else 503,
                             ttft_s=0.01 if ok else None, e2e_s=0.02, itl_p95_s=0.01, prompt_len=prompt_len,
                             prompt_chars=5 * prompt_len, worker=worker, attempt=n, retry_stop=stop)


def logical(i, t, tries, succeeds=True, **kw):
    """A logical request sent at ``t``: ``tries`` attempts 50 ms apart, the last one succeeding (or not)."""
    return [attempt(i, t + 0.05 * k, k + 1, ok=succeeds and k == tries - 1,
                    stop=None if succeeds or k < tries - 1 else retry.STOP_ATTEMPTS, **kw) for k in range(tries)]


def the_run(rs, end_t=30.0, policy=POLICY, inject_t=10.0):
    marks = [rec.FaultMark("inject_start", "f1", "replica", "x", T0 + int(inject_t * NS), ["a"])]
    header = {"run_id": "r", "load": {"retry": policy}}
    return rec.RunRecords(header=header, requests=sorted(rs, key=lambda r: r.sent_ns), marks=marks,
                          footer={"stopped_ns": T0 + int(end_t * NS)})


def hundred():
    """100 logical requests from the injection at 10 s, 10 a second: 30 retried once, 10 twice (5 of them
    failing all three attempts), the others sent once; the twice-retried ones have prompts twice as long."""
    out = []
    for i in range(100):
        k = i % 10
        tries = 2 if k in (1, 2, 3) else 3 if k == 4 else 1
        out += logical(i, 10 + i * 0.1, tries, succeeds=not (k == 4 and i % 20 == 4), prompt_len=20 if k == 4 else 10)
    return out


def test_attempts_are_grouped_into_logical_requests():
    rs = hundred() + logical(7, 10.0, 2, worker=1)  # another worker's request of the same id is its own
    rs += [attempt(3, 29.0), attempt(3, 29.5)]  # no attempt said (an older file): each record its own request
    lg = retries_mod.logical_requests(rc.from_records(sorted(rs, key=lambda r: r.sent_ns)))
    assert len(lg.first) == 100 + 1 + 2
    assert sorted(lg.attempts.tolist()) == sorted([1] * 60 + [2] * 30 + [3] * 10 + [2] + [1, 1])
    assert int(np.count_nonzero(~lg.ok)) == 5 and lg.prompt_basis == "prompt_len"


def test_amplification_on_synthetic_records_has_the_known_answer():
    s = analysis.analyse(the_run(hundred()), analysis.SteadyState(window_s=2.0, min_requests=3))
    r = s["faults"][0]["service"]["retries"]
    assert (r["logical_requests"], r["logical_failed"], r["retried"], r["attempts"]) == (100, 5, 40, 150)
    assert r["amplification"] == 1.5 and r["attempts_per_request_mean"] == 1.5
    assert (r["attempts_per_request_p99"], r["attempts_per_request_max"]) == (3, 3)
    # prompt tokens: 60 x 10 + 30 x 10 + 10 x 20 = 1100 asked; 60 x 10 + 30 x 2 x 10 + 10 x 3 x 20 = 1800 sent
    assert r["prompt_amplification"] == round(1800 / 1100, 4) and r["prompt_basis"] == "prompt_len"
    assert r["failed_by_stop"] == {"attempts": 5} and r["logical_failed_ratio"] == 0.05
    bins = {b["from_s"]: b for b in r["timeline"]}
    assert [bins[t]["amplification"] for t in (0.0, 2.0, 4.0, 6.0, 8.0)] == [1.5] * 5  # 20 asked, 30 sent each
    assert bins[10.0]["logical_requests"] == 0 and bins[10.0]["amplification"] is None
    assert r["peak_amplification"] == 1.5 and r["bin_s"] == 2.0
    assert s["faults"][0]["affected"]["retries"]["logical_requests"] == 100  # a replica fault: every zone
    assert s["requests"]["total"] == 150  # the request counts stay attempts


def test_the_peak_is_the_worst_bin_from_the_injection_not_before():
    rs = []
    for i in range(40):  # a baseline from 2 s: 10 a second, the bin [6, 8) s retrying each twice
        rs += logical(1000 + i, 2 + i * 0.2, 3 if 6 <= 2 + i * 0.2 < 8 else 1)
    for i in range(100):  # the fault: the first bin's requests each sent twice, then none retried
        rs += logical(i, 10 + i * 0.1, 2 if i < 20 else 1)
    s = analysis.analyse(the_run(rs), analysis.SteadyState(window_s=2.0, min_requests=3))
    r = s["faults"][0]["service"]["retries"]
    assert [b["amplification"] for b in r["timeline"][:3]] == [3.0, 1.0, 2.0]  # [6, 8) s: before
    assert r["peak_amplification"] == 2.0 and r["peak_at_s"] == 0.0
    assert r["amplification"] == 1.2  # 120 attempts for the fault's 100 logical requests
    (res,) = bounds.check(s, {"max_amplification": 1.5})
    assert (res["value"], res["status"], res["met"]) == (2.0, bounds.VIOLATED, False)
    (res,) = bounds.check(s, {"max_amplification": 2.0})
    assert res["status"] == bounds.MET


def test_without_a_policy_retries_are_null_with_the_reason_and_the_bound_does_not_apply():
    s = analysis.analyse(the_run(hundred(), policy=None), analysis.SteadyState(window_s=2.0))
    f = s["faults"][0]
    assert f["service"]["retries"] is None and f["affected"]["retries"] is None
    assert f["unmeasurable"]["service.retries"] == retries_mod.NO_POLICY
    (res,) = bounds.check(s, {"max_amplification": 1.5})
    assert (res["met"], res["status"]) == (None, bounds.NOT_APPLICABLE) and "no retry policy" in res["reason"]
    assert bounds.all_met([res])
    assert figures.RT_PEAK.value(f, "service") is None and figures.RT_PEAK.key("affected") == \
        "affected.retries.peak_amplification"


def test_a_peak_too_thin_to_judge_is_null_with_its_reason():
    rs = logical(0, 10.0, 3) + logical(1, 13.0, 1)
    s = analysis.analyse(the_run(rs), analysis.SteadyState(window_s=2.0, min_requests=3))
    f = s["faults"][0]
    assert f["service"]["retries"]["peak_amplification"] is None
    assert "at least 3 logical requests" in f["unmeasurable"]["service.retries.peak_amplification"]
    (res,) = bounds.check(s, {"max_amplification": 1.5})
    assert res["status"] == bounds.UNMEASURABLE


def _write(path, rs, policy=POLICY, drop=()):
    lines = [{"kind": "run", "run_id": "r", "started_ns": T0, "load": {"retry": policy}, "targets": []}]
    lines += [{k: v for k, v in vars(r).items() if k not in drop} for r in sorted(rs, key=lambda r: r.sent_ns)]
    lines += [{"kind": "mark", **vars(rec.FaultMark("inject_start", "f1", "replica", "x", T0 + 10 * NS, ["a"]))},
              {"kind": "end", "stopped_ns": T0 + 30 * NS}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_both_readers_give_the_same_retries(tmp_path):
    p = _write(tmp_path / "records.ndjson", hundred())
    steady = analysis.SteadyState(window_s=2.0, min_requests=3)
    by_lines = analysis.analyse(rec.read(p), steady)["faults"][0]["service"]["retries"]
    by_columns = analysis.analyse(record_columns.parse(p), steady)["faults"][0]["service"]["retries"]
    assert by_lines == by_columns and by_lines["amplification"] == 1.5


def test_old_record_files_without_attempts_still_read_as_one_attempt_per_logical_request(tmp_path):
    old = [attempt(i, 10 + i * 0.1) for i in range(50)] + [attempt(i, 10 + i * 0.1 + 0.05, ok=False) for i in range(5)]
    new_fields = ("attempt", "backoff_s", "retry_after_s", "retry_stop")
    p = _write(tmp_path / "records.ndjson", old, drop=new_fields)
    assert '"attempt"' not in p.read_text()
    for read in (rec.read, record_columns.parse):
        run = read(p)
        assert len(run.requests) == 55 and run.torn_lines == 0
        cols = rc.of(run)
        assert (cols.attempt == 0).all()
        lg = retries_mod.logical_requests(cols)
        assert len(lg.first) == 55 and (lg.attempts == 1).all()  # ids repeat, yet each record is its own
        r = analysis.analyse(run, analysis.SteadyState(window_s=2.0))["faults"][0]["service"]["retries"]
        assert r["amplification"] == 1.0 and r["logical_failed"] == 5


def test_a_policy_brings_the_amplification_bound_at_its_default():
    spec, said = bounds.with_defaults({"max_failed_requests": 5}, retrying=True)
    assert bounds.DEFAULT_MAX_AMPLIFICATION == 1.5 and spec == {"max_failed_requests": 5, "max_amplification": 1.5}
    assert "load.retry" in said
    assert bounds.with_defaults({"max_amplification": 2.0}, True) == ({"max_amplification": 2.0}, None)
    assert bounds.with_defaults({"max_failed_requests": 5}, False) == ({"max_failed_requests": 5}, None)


def test_the_schema_s_defaults_are_the_policy_s():
    from chaos import schemas

    props = schemas.schema(schemas.EXTENSION)["$defs"]["load"]["properties"]["retry"]["properties"]
    policy = retry.RetryPolicy()
    for key, spec in props.items():
        if key != "budget":
            assert (list(v) if isinstance(v := getattr(policy, key), tuple) else v) == spec["default"], key
    budget = retry.Budget()
    assert {k: getattr(budget, k) for k in props["budget"]["properties"]} == \
        {k: s["default"] for k, s in props["budget"]["properties"].items()}


def test_a_run_with_retries_matches_the_published_schemas(tmp_path):
    from chaos.core import summary as summary_mod
    from tests.unit.test_summary import schema

    p = _write(tmp_path / "records.ndjson", hundred())
    for _, obj in rec.iter_lines(p):
        schema("records-line").validate(obj)
    s = summary_mod.derive(record_columns.parse(p), analysis.Definitions(analysis.SteadyState(window_s=2.0)),
                           {"max_amplification": 1.5})
    schema("summary").validate(json.loads(json.dumps(s)))
    assert [r["status"] for r in s["bounds"]["results"]] == [bounds.MET]
    s["faults"][0]["service"]["retries"]["amplification"] = 0.5  # not vacuous: fewer attempts than requests
    with pytest.raises(Exception, match="is not valid under any of the given schemas"):
        schema("summary").validate(json.loads(json.dumps(s)))


# ---------------------------------------------------------------- retries and token continuity, attempt by attempt
def _target_events(request, indices, finish_last=True):
    """The stream target's events for the token ``indices`` of the request's answer (its words, its fingerprint)."""
    from chaos.load import integrity
    from serve_apps import stream_tokens

    body = json.loads(request.content)
    words = stream_tokens.text(integrity.prompt_of(body), body["max_tokens"]).split(" ")
    out = []
    for n, k in enumerate(indices):
        finish = "length" if finish_last and n == len(indices) - 1 else None
        out.append({"choices": [{"index": 0, "text": words[k] if n == 0 else " " + words[k], "finish_reason": finish}],
                    "system_fingerprint": stream_tokens.FINGERPRINT})
    return [b"data: %s\n\n" % json.dumps(e).encode() for e in out], len(words)


class _Events(httpx.AsyncByteStream):
    def __init__(self, chunks, then_reset):
        self.chunks, self.then_reset = chunks, then_reset

    async def __aiter__(self):
        for c in self.chunks:
            yield c
        if self.then_reset:
            raise httpx.ReadError("connection reset")


def _drops_a_token_then_breaks(request):
    chunks, _ = _target_events(request, [0, 1, 3], finish_last=False)  # token 2 never sent, then the reset
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Events(chunks, True))


def _whole_answer(request):
    chunks, n = _target_events(request, list(range(json.loads(request.content)["max_tokens"])))
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}}
    chunks += [b"data: %s\n\n" % json.dumps(usage).encode(), b"data: [DONE]\n\n"]
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Events(chunks, False))


def test_each_attempt_counts_its_own_continuity_and_the_retries_count_one_logical_request(tmp_path):
    from chaos.load import continuity

    policy = {"attempts": 3, "backoff_base_s": 0.001, "retry_on": ["reset"], "after_first_token": True}
    got, _ = _run(Script([_drops_a_token_then_breaks, _whole_answer]), policy, route="completions",
                  max_tokens=(6, 6), prompt_words=(3, 3), mode="open", rate=10.0)  # open: sent on t0, measured
    first, second = got
    assert (first.id, first.attempt, first.ok, first.failure) == (second.id, 1, False, rec.STREAM_BROKEN)
    assert (second.attempt, second.ok, second.output_tokens) == (2, True, 6)
    # per attempt: the broken one lost token 2 (below the highest received, 3); the retry starts its answer again
    # from token 0, none of it counted against the first attempt's tokens
    def counts(r):
        return r.tokens_lost, r.tokens_duplicated, r.tokens_out_of_order, r.tokens_corrupted

    assert counts(first) == (1, 0, 0, 0) and counts(second) == (0, 0, 0, 0)
    assert first.continuity_why is None and second.continuity_why is None

    # the summary, by both readers: 1 logical request (not failed: its retry succeeded) of 2 attempts; the fault's
    # continuity counts both attempts' streams, the lost token the first attempt's
    inject = first.sent_ns - NS // 1000
    lines = [{"kind": "run", "run_id": "r", "started_ns": inject, "load": {"retry": policy},
              "continuity": continuity.FORMAT, "targets": []}]
    lines += [vars(r) for r in got]
    lines += [{"kind": "mark", **vars(rec.FaultMark("inject_start", "f1", "replica", "x", inject, ["zone-a"]))},
              {"kind": "end", "stopped_ns": second.sent_ns + 5 * NS}]
    p = tmp_path / "records.ndjson"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    steady = analysis.SteadyState(window_s=2.0, min_requests=1)
    faults = [analysis.analyse(read(p), steady)["faults"][0] for read in (rec.read, record_columns.parse)]
    assert faults[0] == faults[1]
    f = faults[1]
    r = f["service"]["retries"]
    assert (r["logical_requests"], r["logical_failed"], r["retried"], r["attempts"]) == (1, 0, 1, 2)
    assert r["amplification"] == 2.0 and f["service"]["requests"] == 2
    c = f["continuity"]
    assert (c["streams"], c["streams_checked"], c["tokens_lost"], c["tokens_duplicated"]) == (2, 2, 1, 0)
