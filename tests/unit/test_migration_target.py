"""The stream target (its class as written, over a real engine child, no Serve around it) answering what a migrating
ingress sends: a continuation goes on at the original answer's index k, streamed and not, chat and completions; its
handle method (``answer``) says first which replica serves; an engine that died ends the stream with an
EngineDeadError event the splice takes for a break. Then the splice over two such replicas, the first one's engine
killed mid-stream: the client's answer is the whole one, checked by the harness."""

import asyncio
import json
import signal

import pytest

from chaos.load.integrity import prompt_of
from serve_apps import continuation, served_by, stream_tokens
from serve_apps.migration_splice import Event, Policy, Splice
from serve_apps.stream_target import StreamTarget

Target = StreamTarget.func_or_class.__mro__[1]  # the class as written, under Serve's ingress wrapper
CHAT = {"model": "availproof-tiny", "messages": [{"role": "user", "content": "the zone fails"}], "max_tokens": 10}
COMPLETION = {"model": "availproof-tiny", "prompt": "a node fails", "max_tokens": 10}


@pytest.fixture
def targets():
    made = []

    def make():
        t = Target(prefill_s=0.0, token_s=0.005, jitter=0.0, uncached_token_s=0.0)
        made.append(t)
        return t

    yield make
    for t in made:
        t.engine.close()


def so_far(body, k):
    key = stream_tokens.prompt_key(prompt_of(body))
    return "".join(w if i == 0 else " " + w for i, w in enumerate(stream_tokens.word(key, i) for i in range(k)))


async def items(target, body, chat):
    return [x async for x in target.answer(body, chat)]


@pytest.mark.parametrize("chat", [True, False])
def test_a_continuation_goes_on_at_index_k_of_the_original_answer(targets, chat):
    t = targets()
    original = CHAT if chat else COMPLETION
    k = 3
    cont = continuation.body({**original, "stream": True}, chat, so_far(original, k), k, 16)
    got = asyncio.run(items(t, cont, chat))
    assert served_by.served_item(got[0]) is not None  # the replica's description first
    texts = []
    for chunk in got[1:]:
        data = chunk[len("data: "):].strip()
        if data != "[DONE]":
            c = json.loads(data)["choices"][0]
            texts.append(c["delta"]["content"] if chat else c["text"])
    assert so_far(original, k) + "".join(texts) == stream_tokens.text(prompt_of(original), 10)
    assert len(texts) == 7  # max_tokens reduced by the 3 streamed
    # not streamed: the same continuation, as one answer
    status = asyncio.run(items(t, {**cont, "stream": False}, chat))[1]
    assert status["status"] == 200
    choice = status["json"]["choices"][0]
    assert so_far(original, k) + (choice["message"]["content"] if chat else choice["text"]) == \
        stream_tokens.text(prompt_of(original), 10)
    # its prompt counts the original's words and the k answered (as vLLM counts prompt + text): the splice takes k
    # off to report the whole answer's prompt (a completion's text follows its prompt with no space: one fewer word)
    assert status["json"]["usage"]["prompt_tokens"] == len(prompt_of(original).split()) + k


def test_a_continuation_with_add_generation_prompt_is_a_400_as_in_vllm(targets):
    t = targets()
    cont = continuation.body({**CHAT, "stream": True}, True, "a", 1, 16)
    got = asyncio.run(items(t, {**cont, "add_generation_prompt": True}, True))
    assert got[1]["status"] == 400


class TwoTargets:
    """A transport over real stream targets: the first answer from ``first``, the others from ``second``."""

    def __init__(self, first, second):
        self.targets = [first, second]

    def open(self, body, chat):
        t = self.targets[0] if len(self.targets) == 2 else self.targets[-1]
        if len(self.targets) == 2:
            self.targets.pop(0)
        return t.answer(body, chat)


def test_the_engine_killed_mid_stream_the_answer_goes_on_from_the_other_replica(targets):
    a, b = targets(), targets()
    a._served = {"identity": {"replica": "r-a"}, "engine": {}}
    b._served = {"identity": {"replica": "r-b"}, "engine": {}}
    body = {**COMPLETION, "max_tokens": 40, "stream": True}
    splice = Splice(TwoTargets(a, b), body, False, Policy(limit=1))

    async def main():
        out = []
        async for item in splice.run():
            out.append(item)
            tokens = [i for i in out if isinstance(i, Event) and isinstance(i.data, dict) and i.data.get("choices")]
            if len(tokens) == 5 and a.engine.proc.poll() is None:
                a.engine.proc.send_signal(signal.SIGKILL)  # engine-crash, on the first replica
        return out

    out = asyncio.run(main())
    text = "".join(i.data["choices"][0]["text"] for i in out if isinstance(i, Event) and isinstance(i.data, dict)
                   and i.data.get("choices"))
    assert splice.migrations == 1 and splice.refused is None
    assert text == stream_tokens.text(prompt_of(body), 40)
    marked = [i.data for i in out if isinstance(i, Event) and isinstance(i.data, dict) and "migrated" in i.data]
    assert marked[0]["served_by"][served_by.REPLICA] == "r-b"
