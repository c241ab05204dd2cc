"""The vLLM path of request migration (issue 47, serve_apps/llm_migrating.py): the continuation a vLLM stream gets
(chat: the partial answer continued with continue_final_message; completions: prompt + text so far; max_tokens
reduced by the tokens streamed, exactly), what vLLM is refused (sampling), and the splice over Ray Serve LLM's
LLMServer handle: a fake LLMServer that answers as a greedy engine would (a fixed answer, continued from wherever
the text so far ends), with several tokens in one event, Ray's batches, vLLM's continuous usage, and a break where a
test says (the handle raises, vLLM's dead-engine error event, a stream ending without its finish_reason). No Ray
cluster, no engine (importing Serve LLM takes ~10 s)."""

import asyncio
import json

import pytest

pytest.importorskip("ray.llm")

from ray.llm._internal.serve.core.configs.openai_api_models import (  # noqa: E402
    ChatCompletionRequest, CompletionRequest, ModelCard)
from starlette.requests import Request  # noqa: E402

from serve_apps import continuation, llm_migrating, served_by  # noqa: E402
from serve_apps.migration_refusal import refusal  # noqa: E402
from serve_apps.migration_splice import DONE, Event, Policy, Response, Splice  # noqa: E402

ANSWER = ["The", " zone", " fa", "ils", ",", " traffic", " mo", "ves", " on", ".", " A", " node"] * 3  # greedy
PROMPT = "a node fails and"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the zone fails"}]
CHAT = {"model": "availproof-tiny", "messages": MESSAGES, "max_tokens": 10, "temperature": 0.0, "stream": True,
        "stream_options": {"include_usage": True}}
COMPLETION = {"model": "availproof-tiny", "prompt": PROMPT, "max_tokens": 10, "temperature": 0.0, "stream": True,
              "stream_options": {"include_usage": True}}
GROUPS = (1, 2, 1)  # tokens per event, in turn: vLLM may put several in one (a held-back character)


def test_a_vllm_chat_continuation_continues_the_partial_answer_with_the_budget_left_exactly():
    original = {**CHAT, "min_tokens": 4, "echo": True}
    body = continuation.body(original, True, "The zone fa", 3, None, mark_prompt=False)
    assert body["messages"] == MESSAGES + [{"role": "assistant", "content": "The zone fa"}]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert (body["max_tokens"], body["min_tokens"], body["stream"]) == (7, 1, True)
    assert "echo" not in body and continuation.PROMPT_CHARS not in body  # nothing sent twice, no stream-target field
    assert original["messages"] == MESSAGES and original["max_tokens"] == 10  # the original untouched
    request = llm_migrating.engine_request(body, True)  # what LLMServer takes: vLLM's own validation passes
    assert isinstance(request, ChatCompletionRequest) and request.continue_final_message
    assert not request.add_generation_prompt and request.max_tokens == 7


def test_a_vllm_completion_continuation_is_the_prompt_and_the_text_so_far_with_the_budget_left_exactly():
    body = continuation.body(COMPLETION, False, "The zone fails,", 5, None, mark_prompt=False)
    assert body["prompt"] == PROMPT + "The zone fails," and body["max_tokens"] == 5
    assert continuation.PROMPT_CHARS not in body
    no_budget = {k: v for k, v in COMPLETION.items() if k != "max_tokens"}
    assert "max_tokens" not in continuation.body(no_budget, False, "The", 1, None, mark_prompt=False)  # the context
    assert continuation.body({**no_budget, "max_completion_tokens": 9}, False, "The", 1, None)[
        "max_completion_tokens"] == 8
    request = llm_migrating.engine_request(body, False, "req-1-m1")
    assert isinstance(request, CompletionRequest) and request.prompt == PROMPT + "The zone fails,"
    assert request.request_id == "req-1-m1"


@pytest.mark.parametrize("change, why", [
    ({"temperature": None}, "sampling"),  # not given: vLLM's default 1.0
    ({"temperature": 0.7}, "sampling"),
    ({"temperature": 0}, None),
    ({"response_format": {"type": "json_object"}}, "guided"),
    ({"n": 2}, "n>1"),
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"echo": True}, "echo"),
])
def test_what_vllm_refuses(change, why):
    body = {**COMPLETION, **change}
    body = {k: v for k, v in body.items() if v is not None}
    assert refusal(body, "llm") == why
    if why == "sampling":
        assert refusal(body, "stream") is None  # the stream target continues any temperature exactly


class Died(RuntimeError):
    """What the handle raises when the LLMServer replica died (ActorDiedError, in the real thing)."""


class FakeLLMServer:
    """A handle of the LLMServer deployment (``chat`` and ``completions``, ``options``, ``.remote``) whose replicas
    answer as a greedy engine: :data:`ANSWER`, continued at the token where the text so far ends (the test fails if
    that is not a token boundary, or if the request is not the original's continuation). ``plan``: per request, the
    replica and its break: None, or (after how many events, raise | error500 | end)."""

    def __init__(self, plan, original):
        self.plan, self.original = list(plan), original
        self.requests, self.cancelled = [], 0
        self.chat = type("M", (), {"remote": lambda _, r, raw: self._answer(r, raw, True)})()
        self.completions = type("M", (), {"remote": lambda _, r, raw: self._answer(r, raw, False)})()

    def options(self, **kw):
        return self

    def _so_far(self, r, chat):
        if chat:
            messages = [dict(m) for m in r.messages]
            if not r.continue_final_message:
                assert messages == self.original["messages"]
                return ""
            assert not r.add_generation_prompt and messages[:-1] == self.original["messages"]
            return messages[-1]["content"]
        assert r.prompt.startswith(self.original["prompt"])
        return r.prompt[len(self.original["prompt"]):]

    def _answer(self, r, raw, chat):
        self.requests.append(r)
        replica, brk = self.plan.pop(0)
        return Stream(self, r, chat, replica, brk)


class Stream:
    """One answer, as Serve streams LLMServer's: its description, then Ray's batches (lists) of SSE strings."""

    def __init__(self, server, r, chat, replica, brk):
        self.server, self.r, self.chat, self.replica, self.brk = server, r, chat, replica, brk
        self.gen = self._items()

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await self.gen.__anext__()

    def cancel(self):
        self.server.cancelled += 1

    def _event(self, text, finish, count, usage):
        c = ({"index": 0, "delta": {"content": text}, "finish_reason": finish} if self.chat
             else {"index": 0, "text": text, "finish_reason": finish})
        e = {"id": f"chatcmpl-{self.replica}", "created": 1, "model": "availproof-tiny", "choices": [c]}
        if usage:
            e["usage"] = {"prompt_tokens": 20, "completion_tokens": count, "total_tokens": 20 + count}
        return "data: " + json.dumps(e) + "\n\n"

    async def _items(self):
        yield {served_by.MARK: {"identity": {"replica": self.replica}, "engine": {}}}
        so_far = self.server._so_far(self.r, self.chat)
        k = next(i for i in range(len(ANSWER) + 1) if "".join(ANSWER[:i]) == so_far)  # StopIteration: not a seam
        n = self.r.max_tokens if self.r.max_tokens is not None else len(ANSWER) - k
        opts = self.r.stream_options
        usage = bool(opts and opts.include_usage and opts.continuous_usage_stats)
        after, how = self.brk or (None, None)
        events = []
        if self.chat:  # vLLM opens a chat stream with the role
            opening = self._event("", None, 0, usage)
            events.append(opening.replace('"content": ""', '"role": "assistant", "content": ""'))
        done, g = 0, 0
        while done < n:
            size = min(GROUPS[g % len(GROUPS)], n - done)
            g += 1
            text = "".join(ANSWER[k + done:k + done + size])
            done += size
            events.append(self._event(text, "length" if done == n else None, done, usage))
        if opts and opts.include_usage:
            events.append("data: " + json.dumps({"id": "x", "created": 1, "choices": [], "usage": {
                "prompt_tokens": 20 + k, "completion_tokens": n, "total_tokens": 20 + k + n}}) + "\n\n")
        events.append("data: [DONE]\n\n")
        for i in range(0, len(events), 2):  # Ray's batching: two SSE strings in one item
            if after is not None and i >= after:
                if how == "raise":
                    raise Died(f"replica {self.replica} died")
                if how == "error500":  # vLLM's stream generator on EngineDeadError
                    yield ["data: " + json.dumps({"error": {
                        "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                        "type": "InternalServerError", "param": None, "code": 500}}) + "\n\n", "data: [DONE]\n\n"]
                return  # end: the stream ends without its finish_reason
            yield events[i:i + 2]


def splice(server, body, chat, limit=2):
    transport = llm_migrating.LLMServerTransport(server, None, "req-1")
    s = Splice(transport, body, chat, Policy(limit=limit, app="llm", default_max_tokens=None, usage_tokens=True))

    async def main():
        return [i async for i in s.run()]

    return s, asyncio.run(main())


def texts(items, chat):
    out = []
    for i in items:
        if isinstance(i, Event) and isinstance(i.data, dict) and i.data.get("choices"):
            c = i.data["choices"][0]
            out.append(c["delta"].get("content", "") if chat else c["text"])
    return out


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("how", ["raise", "error500", "end"])
def test_a_broken_vllm_stream_goes_on_from_another_replica_nothing_lost_nothing_repeated(chat, how):
    body = CHAT if chat else COMPLETION
    server = FakeLLMServer([("r-a", (4, how)), ("r-b", None)], body)
    s, items = splice(server, body, chat)
    got = "".join(texts(items, chat))
    assert got == "".join(ANSWER[:10])  # the greedy answer, whole, once: the continuation's budget was exact
    first, second = server.requests
    assert first.stream_options.continuous_usage_stats  # asked of the engine, for its count
    assert not first.model_fields_set & {"request_id"} and second.request_id == "req-1-m1"
    streamed = s.tokens - second.max_tokens
    assert second.max_tokens == 10 - streamed and streamed > 0
    so_far = "".join(ANSWER[:streamed])
    if chat:
        assert dict(second.messages[-1]) == {"role": "assistant", "content": so_far}
    else:
        assert second.prompt == PROMPT + so_far
    evs = [i.data for i in items if isinstance(i, Event)]
    marked = [e for e in evs if isinstance(e, dict) and "migrated" in e]
    assert len(marked) == 1 and marked[0]["migrated"] == 1 and marked[0]["served_by"][served_by.REPLICA] == "r-b"
    assert evs[-1] == DONE and not [e for e in evs if isinstance(e, dict) and "error" in e]
    usages = [e["usage"] for e in evs if isinstance(e, dict) and "usage" in e]
    assert len(usages) == 1 and usages[0]["completion_tokens"] == 10  # the whole answer's; none on token events
    assert len({e["id"] for e in evs if isinstance(e, dict)}) == 1  # the first answer's id throughout


def test_the_limit_and_sampling_are_refused_as_docs_say():
    server = FakeLLMServer([("r-a", (4, "raise")), ("r-b", (2, "raise"))], COMPLETION)
    s, items = splice(server, COMPLETION, False, limit=1)
    assert s.refused == "limit" and items[-2].data["migration_refused"] == "limit" and len(server.requests) == 2
    sampled = {k: v for k, v in COMPLETION.items() if k != "temperature"}
    server = FakeLLMServer([("r-a", (4, "error500"))], sampled)
    s, items = splice(server, sampled, False)
    assert s.refused == "sampling" and len(server.requests) == 1
    assert items[-2].data["migration_refused"] == "sampling" and items[-1].data == DONE


def test_a_body_vllm_refuses_is_its_400_and_an_early_close_cancels_the_handle_call():
    bad = {**CHAT, "continue_final_message": True, "add_generation_prompt": True}
    s, items = splice(FakeLLMServer([], bad), bad, True)
    responses = [i for i in items if isinstance(i, Response)]
    assert len(responses) == 1 and responses[0].status == 400 and s.migrations == 0

    server = FakeLLMServer([("r-a", None)], CHAT)

    async def first_event():
        gen = llm_migrating.LLMServerTransport(server).open(dict(CHAT), True)
        got = [await gen.__anext__(), await gen.__anext__()]
        await gen.aclose()
        return got

    got = asyncio.run(first_event())
    assert served_by.served_item(got[0]) == {"identity": {"replica": "r-a"}, "engine": {}}
    assert server.cancelled == 1


def test_the_ingress_answers_a_chat_over_a_break_with_the_first_replicas_headers():
    card = ModelCard(id="availproof-tiny", object="model", owned_by="x", permission=[], metadata={})
    server = FakeLLMServer([("r-a", (2, "raise")), ("r-b", None)], CHAT)
    ingress = llm_migrating.OpenAiIngress(llm_deployments={"availproof-tiny": server},
                                          model_cards={"availproof-tiny": card}, migration_limit=2)
    raw = json.dumps(CHAT).encode()

    async def receive():
        return {"type": "http.request", "body": raw, "more_body": False}

    request = Request({"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [],
                       "query_string": b""}, receive)

    async def main():
        response = await ingress.chat(ChatCompletionRequest.model_validate(CHAT), request)
        return response, [c async for c in response.body_iterator]

    response, chunks = asyncio.run(main())
    assert response.headers[served_by.REPLICA] == "r-a"
    events = [json.loads(d[6:]) for d in "".join(chunks).split("\n\n") if d.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events if e.get("choices")) == \
        "".join(ANSWER[:10])
    assert [e["migrated"] for e in events if "migrated" in e] == [1]
