"""The migrating ingress's splice (serve_apps/migration_splice.py) over a fake transport: engine replicas that answer
as the stream target does (token i of the original prompt's answer, a continuation going on at its index k,
serve_apps/continuation.py) and break where a test says (the handle raises, an EngineDeadError event or answer, a
stream ending without its last token). What the client gets is judged by the harness's own checks
(chaos.load.integrity, chaos.load.continuity): indices go on without a gap, nothing repeated, the markers."""

import asyncio
import json

import pytest

from chaos.load import continuity, integrity, sse
from chaos.load.integrity import prompt_of
from serve_apps import continuation, migrating_ingress, served_by, stream_tokens
from serve_apps.migration_splice import DONE, Event, Policy, Response, Served, Splice, collect

CHAT = {"model": "availproof-tiny", "messages": [{"role": "user", "content": "the zone fails"}], "max_tokens": 12,
        "stream": True, "stream_options": {"include_usage": True}}
COMPLETION = {"model": "availproof-tiny", "prompt": "a node fails and traffic moves", "max_tokens": 12, "stream": True,
              "stream_options": {"include_usage": True}}


class ReplicaDied(RuntimeError):
    """What Serve's handle raises when the replica's actor died (ActorDiedError, in the real thing)."""


class FakeEngines:
    """A transport whose answers follow ``plan``: one (replica id, break) per request sent, break None (a whole
    answer) or (after how many tokens, how: raise | dead-event | end | dead-json)."""

    def __init__(self, plan):
        self.plan = list(plan)
        self.requests = []
        self.closed = 0

    def open(self, body, chat):
        self.requests.append(body)
        replica, brk = self.plan.pop(0)
        return self._answer(body, chat, replica, brk)

    async def _answer(self, body, chat, replica, brk):
        try:
            yield {served_by.MARK: {"identity": {"replica": replica, "zone": "zone-" + replica[-1]}, "engine": {}}}
            after, how = brk if brk else (None, None)
            if how == "dead-json" and after == 0:
                yield {"status": 500, "json": {"error": {"message": "engine process died", "type": "EngineDeadError"}}}
                return
            prompt, given, start = continuation.target_prompt(body, chat)
            n = body.get("max_tokens", 16)
            key = stream_tokens.prompt_key(prompt)
            rid = f"cmpl-{replica}"
            for i in range(n):
                if after is not None and i == after:
                    if how == "raise":
                        raise ReplicaDied(f"replica {replica} died")
                    if how == "dead-event":
                        yield "data: " + json.dumps({"error": {"message": "engine process died",
                                                               "type": "EngineDeadError", "code": 500}}) + "\n\n"
                        yield "data: [DONE]\n\n"
                    if how == "end":
                        yield "data: [DONE]\n\n"
                    return
                w = stream_tokens.word(key, start + i)
                text = w if start + i == 0 else " " + w
                finish = "length" if i == n - 1 else None
                choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish} if chat else \
                    {"index": 0, "text": text, "finish_reason": finish}
                if chat and i == 0:  # vLLM opens a chat stream with the role
                    yield "data: " + json.dumps({"id": rid, "created": 1, "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}) + "\n\n"
                yield "data: " + json.dumps({"id": rid, "created": 1, "system_fingerprint": stream_tokens.FINGERPRINT,
                                             "choices": [choice]}) + "\n\n"
            if how == "after-finish":  # the last token given, then the replica gone before its usage and [DONE]
                raise ReplicaDied(f"replica {replica} died after its last token")
            if (body.get("stream_options") or {}).get("include_usage"):
                words = len(prompt.split()) + start  # as the stream target counts a continuation's prompt
                yield "data: " + json.dumps({"id": rid, "created": 1, "choices": [], "usage": {
                    "prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}}) + "\n\n"
            yield "data: [DONE]\n\n"
        finally:
            self.closed += 1


class Sleeps:
    """A clock the splice's backoff advances (no real sleeping)."""

    def __init__(self):
        self.now = 0.0
        self.waits = []

    def clock(self):
        return self.now

    async def sleep(self, s):
        self.waits.append(s)
        self.now += s


def run(engines, body, chat, limit=2, deadline=10.0):
    sleeps = Sleeps()
    splice = Splice(engines, body, chat, Policy(limit=limit, retry_deadline_s=deadline), sleep=sleeps.sleep,
                    clock=sleeps.clock)

    async def main():
        return [item async for item in splice.run()]

    return splice, asyncio.run(main()), sleeps


def judged(items, body):
    """The client's events through the harness's checks: (check, record-like with the continuity figures, done)."""
    check = integrity.StreamCheck(body)
    usage = None
    done = False
    error = None
    for item in items:
        if not isinstance(item, Event):
            continue
        if item.data == DONE:
            done = True
            continue
        try:
            chunk = check.parse(json.dumps(item.data))
        except sse.MalformedStream as e:
            error = e
            continue
        usage = chunk.completion_tokens if chunk.completion_tokens is not None else usage

    class R:
        output_tokens = usage

    r = R()
    continuity.fill(r, check, [float(i) for i in range(len(check.texts))], done)
    return check, r, error


def events(items):
    return [i.data for i in items if isinstance(i, Event)]


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("how", ["raise", "dead-event", "end"])
def test_a_broken_stream_goes_on_at_the_next_index_nothing_lost_or_repeated(chat, how):
    body = CHAT if chat else COMPLETION
    engines = FakeEngines([("r-a", (5, how)), ("r-b", None)])
    splice, items, _ = run(engines, body, chat)
    check, r, error = judged(items, body)
    assert error is None
    assert splice.migrations == 1 and r.migrations == 1 and check.marks == [5]  # the 6th token opens continuation 1
    assert (r.tokens_lost, r.tokens_duplicated, r.tokens_out_of_order, r.tokens_corrupted) == (0, 0, 0, 0)
    assert r.output_tokens == 12  # the usage counts the whole answer, not the continuation's 7
    assert check.verdict(r.output_tokens) is None  # the harness's integrity: the whole answer, as it must be
    assert "".join(check.texts) == stream_tokens.text(prompt_of(body), 12)
    cont = engines.requests[1]
    assert cont["max_tokens"] == 7
    marked = [e for e in events(items) if isinstance(e, dict) and "migrated" in e]
    assert len(marked) == 1 and marked[0]["served_by"][served_by.REPLICA] == "r-b"
    opened = marked[0]["choices"][0]
    assert (opened["delta"]["content"] if chat else opened["text"]) == " " + stream_tokens.word(
        stream_tokens.prompt_key(prompt_of(body)), 5)  # the marker on the token, not on a role-only opening
    assert {e["id"] for e in events(items) if isinstance(e, dict)} == {"cmpl-r-a"}  # the first answer's id throughout
    assert engines.closed == 2  # the broken stream let go


def test_up_to_the_limit_then_refused_with_limit():
    engines = FakeEngines([("r-a", (3, "raise")), ("r-b", (2, "raise")), ("r-c", (2, "dead-event"))])
    splice, items, _ = run(engines, CHAT, True, limit=2)
    check, r, error = judged(items, CHAT)
    assert splice.migrations == 2 and check.marks == [3, 5]
    assert error is not None and check.refused == "limit" and r.migration_refused == "limit"
    assert (r.tokens_lost, r.tokens_duplicated, r.tokens_corrupted) == (0, 0, 0)  # what came is right
    assert events(items)[-1] == DONE
    # two migrations within the limit: both saved
    engines = FakeEngines([("r-a", (3, "raise")), ("r-b", (2, "raise")), ("r-c", None)])
    splice, items, _ = run(engines, CHAT, True, limit=2)
    check, r, error = judged(items, CHAT)
    assert error is None and r.migrations == 2 and check.verdict(r.output_tokens) is None


@pytest.mark.parametrize("extra, why", [({"guided_json": {"type": "object"}}, "guided"), ({"n": 2}, "n>1")])
def test_a_refused_request_fails_as_before_saying_why(extra, why):
    body = {**CHAT, **extra}
    engines = FakeEngines([("r-a", (4, "raise")), ("r-b", None)])
    splice, items, _ = run(engines, body, True)
    check, r, error = judged(items, body)
    assert error is not None and check.refused == why and len(engines.requests) == 1  # nothing re-sent
    assert len(check.texts) == 4


def test_a_continuation_landing_on_the_failed_replica_is_sent_again_and_not_counted():
    engines = FakeEngines([("r-a", (4, "raise")), ("r-a", None), ("r-a", None), ("r-b", None)])
    splice, items, sleeps = run(engines, COMPLETION, False)
    check, r, error = judged(items, COMPLETION)
    assert error is None and splice.migrations == 1 and r.migrations == 1 and splice.retries == 2
    assert sleeps.waits == [0.2, 0.4]  # backoff from 0.2 s, doubling (at most 1 s)
    assert check.verdict(r.output_tokens) is None
    assert not any(isinstance(i, Served) and i.desc["identity"]["replica"] == "r-a" for i in items[1:])


def test_a_continuation_failing_before_its_first_token_is_sent_again_and_not_counted():
    engines = FakeEngines([("r-a", (4, "raise")), ("r-b", (0, "dead-json")), ("r-c", (0, "raise")), ("r-d", None)])
    splice, items, _ = run(engines, CHAT, True, limit=1)
    check, r, error = judged(items, CHAT)
    assert error is None and splice.migrations == 1 and splice.retries == 2 and check.verdict(r.output_tokens) is None
    assert splice.failed == {"r-a", "r-b", "r-c"}


def test_no_other_replica_within_the_deadline_fails_the_stream():
    engines = FakeEngines([("r-a", (4, "raise"))] + [("r-a", None)] * 30)
    splice, items, sleeps = run(engines, CHAT, True, deadline=3.0)
    check, r, error = judged(items, CHAT)
    assert error is not None and check.refused == "no-replica"
    assert sum(sleeps.waits) == pytest.approx(3.0) and max(sleeps.waits) == 1.0


def test_a_break_before_any_token_resends_the_original_and_marks_it():
    engines = FakeEngines([("r-a", (0, "dead-json")), ("r-b", None)])
    splice, items, _ = run(engines, COMPLETION, False)
    check, r, error = judged(items, COMPLETION)
    assert engines.requests[1] == engines.requests[0]  # no continuation fields: the original again
    assert splice.migrations == 1 and check.marks == [0] and check.verdict(r.output_tokens) is None


def test_an_error_that_is_not_a_break_is_given_on_untouched():
    class BadRequest(FakeEngines):
        async def _answer(self, body, chat, replica, brk):
            yield {served_by.MARK: {"identity": {"replica": replica}, "engine": {}}}
            yield {"status": 400, "json": {"error": {"message": "too long", "type": "invalid_request_error"}}}

    splice, items, _ = run(BadRequest([("r-a", None)]), CHAT, True)
    responses = [i for i in items if isinstance(i, Response)]
    assert len(responses) == 1 and responses[0].status == 400 and splice.migrations == 0


def test_a_refusal_before_anything_was_sent_is_a_500_saying_why():
    engines = FakeEngines([("r-a", (0, "raise"))])
    splice, items, _ = run(engines, {**CHAT, "n": 2}, True)
    responses = [i for i in items if isinstance(i, Response)]
    assert responses[0].status == 500 and responses[0].payload["migration_refused"] == "n>1"


@pytest.mark.parametrize("chat", [True, False])
def test_a_non_streamed_request_migrates_too(chat):
    """The ingress asks the engine for a stream and collects it (serve_apps.migrating_ingress.respond)."""
    body = {**(CHAT if chat else COMPLETION), "stream": False}
    body.pop("stream_options")
    engines = FakeEngines([("r-a", (6, "raise")), ("r-b", None)])

    async def main():
        return await migrating_ingress.respond(engines, body, chat, Policy(limit=1))

    response = asyncio.run(main())
    payload = json.loads(response.body)
    got = payload["choices"][0]["message"]["content"] if chat else payload["choices"][0]["text"]
    assert got == stream_tokens.text(prompt_of(body), 12)
    assert payload["usage"]["completion_tokens"] == 12 and payload["migrated"] == 1
    assert payload["usage"]["prompt_tokens"] == len(prompt_of(body).split())  # the original's, not its continuation's
    assert response.headers[served_by.REPLICA] == "r-b"  # the engine replica that finished it
    assert engines.requests[0]["stream"] is True


@pytest.mark.parametrize("extra", [{}, {"n": 2}])
def test_a_stream_broken_after_its_last_token_is_complete_not_refused(extra):
    """Its finish_reason came: nothing to continue, and nothing to refuse (a refused request, n > 1 here, or the
    limit spent, must not turn a whole answer into a failure)."""
    body = {**COMPLETION, **extra}
    engines = FakeEngines([("r-a", (None, "after-finish"))])
    splice, items, _ = run(engines, body, chat=False, limit=0)
    evs = events(items)
    assert evs[-1] == DONE and not [e for e in evs if isinstance(e, dict) and "error" in e], evs
    assert splice.refused is None and splice.migrations == 0 and len(engines.requests) == 1


def test_collect_turns_a_refusal_into_a_500():
    status, payload = collect([{"choices": [{"index": 0, "text": "a", "finish_reason": None}]},
                               {"error": {"message": "x"}, "migration_refused": "limit"}, DONE], False)
    assert status == 500 and payload["migration_refused"] == "limit"
