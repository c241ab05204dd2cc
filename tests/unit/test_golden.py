"""Golden answers on vLLM (issue 44, chaos/load/golden.py): the whole-word tokens picked from a tokenizer built
offline (deterministic), the constrained request's body, the prompt set, golden answers learnt in the warm-up only,
and synthetic vLLM streams with a dropped, a repeated, an out-of-order and a corrupted token each detected; null
with the reason without a golden answer; the harness end to end against a fake vLLM."""

import asyncio
import json

import pytest

from chaos.load import continuity, golden, integrity
from chaos.load.sse import Chunk
from chaos.load.workload import LoadShape, Router, Target, plan, request_body
from chaos.recording import records as rec
from serve_apps import checkpoint
from tests.unit.loopback import run_against
from tests.unit.test_analysis import req
from tests.unit.test_sessions import OpenAIServer

BODY = {"model": "m", "max_tokens": 6, "stream": True, "prompt": "zone lost again"}
GOLDEN = [" zone", " node", " head", " kill", " serve", " bound"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    checkpoint.build_tokenizer(d)
    return d


def test_the_allowed_tokens_are_whole_words_and_the_same_every_time(tokenizer_dir, tmp_path):
    ids, texts = golden.vocabulary(tokenizer_dir / "tokenizer.json")
    checkpoint.build_tokenizer(tmp_path)  # trained again: the same vocabulary
    assert golden.vocabulary(tmp_path / "tokenizer.json") == (ids, texts)
    assert len(ids) >= 32 and ids == sorted(ids) and len(set(texts)) == len(texts)
    assert all(golden.WORD.fullmatch(t) for t in texts) and " replica" in texts
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    assert [tok.decode([i]) for i in ids] == texts
    assert tok.decode(ids[:5]) == "".join(texts[:5])  # in a row each decodes as alone
    assert tok.encode("".join(texts[:5])).ids == ids[:5]  # and the text re-tokenizes to them (a continuation)
    c, said = golden.constraint(tokenizer_dir)
    assert c["allowed_token_ids"] == ids and c["tokens"] == texts and golden.problems(c) == [] and "whole-word" in said
    assert golden.constraint(tmp_path / "none")[0] is None  # a user's checkpoint without tokenizer.json


def test_a_constrained_request_is_greedy_whole_words_and_cycles_through_its_prompt_set():
    c = {"allowed_token_ids": [5, 9], "tokens": [" a", " b"], "repetition_penalty": 1000.0}
    shape = LoadShape(mode="closed", route="completions", max_requests=9, prompt_set=3, constraint=c)
    reqs = list(plan(shape, Router([Target("t", "http://127.0.0.1:1")])))
    assert [(r.prompt, r.max_tokens) for r in reqs[3:6]] == [(r.prompt, r.max_tokens) for r in reqs[:3]]
    assert len({r.prompt for r in reqs}) == 3
    _, body = request_body(shape, reqs[0])
    assert body["temperature"] == 0.0 and body["allowed_token_ids"] == [5, 9] and body["ignore_eos"] is True
    assert body["repetition_penalty"] == 1000.0
    unset = list(plan(LoadShape(mode="closed", max_requests=9), Router([Target("t", "http://127.0.0.1:1")])))
    assert "allowed_token_ids" not in request_body(LoadShape(), unset[0])[1]
    with pytest.raises(Exception, match="constraint.tokens"):
        LoadShape(constraint={"allowed_token_ids": [1], "tokens": ["no space"]})
    assert golden.prompt_set_for(LoadShape(rate=5, warmup_s=5)) == 12


def test_for_app_constrains_llm_only(tokenizer_dir):
    said = []
    shape = golden.for_app(LoadShape(rate=2, warmup_s=10), "llm", str(tokenizer_dir), log=said.append)
    assert shape.constraint["tokens"] and shape.prompt_set == 10 and len(said) == 2
    assert golden.for_app(LoadShape(), "stream", None).constraint is None


def test_golden_answers_are_learnt_in_the_warm_up_only_the_first_one_kept():
    g = golden.Goldens({"allowed_token_ids": [1], "tokens": [" a"]})
    assert g.reference(BODY) == (None, continuity.NO_GOLDEN)
    assert not g.learn(BODY, GOLDEN, rec.MEASURE)
    assert g.learn(BODY, [" zone node", " head"] + GOLDEN[3:], rec.WARMUP)  # events of several tokens split
    assert not g.learn(BODY, GOLDEN[::-1], rec.WARMUP)
    assert g.reference(BODY) == (GOLDEN, None)
    assert g.reference({**BODY, "max_tokens": 5}) == (None, continuity.NO_GOLDEN)
    assert g.to_dict()["answers"] == {continuity.golden_key(BODY): GOLDEN}
    assert golden.Goldens(None).reference(BODY) == (None, golden.UNCONSTRAINED)
    assert not golden.Goldens(None).learn(BODY, GOLDEN, rec.WARMUP)


def test_a_complete_answer_unlike_its_golden_answer_fails():
    g = golden.Goldens({"allowed_token_ids": [1], "tokens": [" a"]})
    g.learn(BODY, GOLDEN, rec.WARMUP)
    assert g.verdict(BODY, GOLDEN) is None and g.verdict({**BODY, "max_tokens": 3}, [" x"]) is None
    assert g.verdict(BODY, GOLDEN[:2] + [" fail"] + GOLDEN[3:])[0] == rec.CORRUPTED
    assert g.verdict(BODY, GOLDEN + [" zone"])[0] == rec.CORRUPTED
    assert g.verdict(BODY, GOLDEN[:4]) == (rec.TRUNCATED, "4 of the golden answer's 6 tokens, then it ended")


def vllm_stream(texts, gold=GOLDEN, why=None, finish="length"):
    """A record of a vLLM stream of events ``texts`` (no fingerprint), checked against ``gold``."""
    check = integrity.StreamCheck(BODY)
    for j, t in enumerate(texts):
        check.event(Chunk(t, True, finish if j == len(texts) - 1 else None, None, None, None, None))
    r = req(1, 1.0)
    r.output_tokens = 6
    continuity.fill(r, check, [0.01 * (j + 1) for j in range(len(texts))], done=True, golden=gold, golden_why=why)
    return (r.tokens_lost, r.tokens_duplicated, r.tokens_out_of_order, r.tokens_corrupted), r


@pytest.mark.parametrize("texts, want", [
    (GOLDEN, (0, 0, 0, 0)),
    ([" zone node", " head kill serve", " bound"], (0, 0, 0, 0)),  # deltas merged: still whole tokens
    (GOLDEN[:2] + GOLDEN[3:], (1, 0, 0, 0)),  # dropped
    (GOLDEN[:3] + [GOLDEN[2]] + GOLDEN[3:], (0, 1, 0, 0)),  # repeated
    (GOLDEN[:2] + [GOLDEN[3], GOLDEN[2]] + GOLDEN[4:], (0, 0, 1, 0)),  # out of order
    (GOLDEN[:2] + [" garbage"] + GOLDEN[3:], (0, 0, 0, 1)),  # no token of the answer
    (GOLDEN[:2] + [" bound"] + GOLDEN[3:], (0, 0, 0, 1)),  # a token of it, in the wrong place
])
def test_each_defect_of_a_vllm_stream_is_told_against_its_golden_answer(texts, want):
    got, r = vllm_stream(texts)
    assert got == want and r.continuity_why is None


def test_a_vllm_stream_without_a_golden_answer_is_null_with_the_reason_not_zero():
    got, r = vllm_stream(GOLDEN, gold=None, why=continuity.NO_GOLDEN)
    assert got == (None,) * 4 and continuity.NO_GOLDEN in r.continuity_why
    got, r = vllm_stream(GOLDEN, gold=None, why=golden.UNCONSTRAINED)
    assert got == (None,) * 4 and golden.UNCONSTRAINED in r.continuity_why


class FakeVLLM(OpenAIServer):
    """Completions as a constrained vLLM would stream them (no fingerprint): the allowed tokens picked by the prompt,
    one an event (two in the second event of request 1); from request 12 on, token 2 is another word."""

    async def answer(self, body, writer):
        i, self.n = self.n, self.n + 1
        tokens = [" " + "w" * (k + 1) + "abcdefg"[len(body["prompt"]) % 7] for k in range(body["max_tokens"])]
        if i >= 12:
            tokens[2] = " garbage"
        texts = list(tokens)
        if i == 1:
            texts[1:3] = [texts[1] + texts[2]]
        events = [{"choices": [{"index": 0, "text": t, "finish_reason": "length" if k == len(texts) - 1 else None}]}
                  for k, t in enumerate(texts)]
        events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(tokens)}})
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for e in events:
            data = b"data: %s\n\n" % json.dumps(e).encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        await writer.drain()


def test_the_harness_learns_golden_answers_in_the_warm_up_and_checks_every_stream():
    c = {"allowed_token_ids": [1, 2], "tokens": [" a", " b"], "repetition_penalty": 1000.0}
    shape = LoadShape(mode="closed", concurrency=1, duration_s=30, max_requests=16, warmup_s=20, timeout_s=5,
                      route="completions", model="m", max_tokens=(4, 6), prompt_words=(2, 4), prompt_set=2,
                      constraint=c)
    got, footer, server, _ = run_against(FakeVLLM(), shape)
    assert all(b["allowed_token_ids"] == [1, 2] and b["temperature"] == 0.0 for b in server.bodies)
    by_id = {r.id: r for r in got}
    assert len(footer["goldens"]["answers"]) == 2
    for i in range(12):
        r = by_id[i]
        assert r.ok and (r.tokens_lost, r.tokens_duplicated, r.tokens_out_of_order, r.tokens_corrupted) == (0, 0, 0, 0)
    assert by_id[1].chunks == by_id[1].output_tokens - 1  # two tokens in one event: counted as two
    for i in range(12, 16):
        r = by_id[i]
        assert r.failure == rec.CORRUPTED and r.tokens_corrupted == 1 and "golden answer" in r.detail
