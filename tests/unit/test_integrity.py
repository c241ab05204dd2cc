"""Streams that end wrong (chaos/load/integrity.py): each new failure class on synthetic streams, from the
stream target (whose every token is known: serve_apps/stream_tokens.py) and from a server whose tokens are
not (vLLM), and through the harness against a loopback server that truncates and corrupts on purpose."""

import json

from chaos.recording import records as rec
from chaos.load import integrity
from chaos.load.sse import Chunk
from chaos.load.workload import LoadShape
from serve_apps import stream_tokens
from tests.unit.loopback import run_against
from tests.unit.test_sessions import OpenAIServer

BODY = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "zone lost again"}]}


def chunks(texts, finish="length", fingerprint=stream_tokens.FINGERPRINT):
    return [Chunk(t, True, finish if i == len(texts) - 1 else None, None, None, None, fingerprint)
            for i, t in enumerate(texts)]


def target_texts(body=BODY, n=5):
    words = stream_tokens.text(integrity.prompt_of(body), n).split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def judge(cs, usage, body=BODY):
    check = integrity.StreamCheck(body)
    for c in cs:
        check.event(c)
    return check.verdict(usage)


def test_the_stream_targets_answer_is_a_function_of_the_prompt_and_the_index():
    a = stream_tokens.text("zone lost again", 5)
    assert a == stream_tokens.text("  zone   lost again ", 5)  # the words, as the target reads them
    assert a != stream_tokens.text("zone lost", 5) and stream_tokens.text("zone lost again", 3) == " ".join(a.split()[:3])
    assert integrity.prompt_of(BODY) == "zone lost again"
    assert integrity.prompt_of({"prompt": "a b"}) == "a b"


def test_a_whole_answer_passes():
    assert judge(chunks(target_texts()), 5) is None


def test_no_finish_reason_is_a_silent_truncation():
    got = judge(chunks(target_texts(), finish=None), 5)
    assert got == (rec.TRUNCATED, "the stream ended with [DONE] but no finish_reason, after 5 token events")


def test_an_answer_cut_short_is_truncated_and_a_wrong_token_is_corrupted():
    assert judge(chunks(target_texts()[:3]), 5) == (rec.TRUNCATED, "3 of the answer's 5 tokens, then it ended")
    assert judge(chunks(target_texts()[:3]), None)[0] == rec.TRUNCATED  # against max_tokens
    wrong = target_texts()
    wrong[2] = " garbage"
    assert judge(chunks(wrong), 5) == (rec.CORRUPTED, "token 2 is 'garbage', the target's answer has "
                                                      f"{stream_tokens.text('zone lost again', 5).split()[2]!r} there")


def test_more_token_events_than_the_usage_counts_is_corruption_for_any_server():
    assert judge(chunks(["a", " b", " c"], fingerprint=None), 2) == (
        rec.CORRUPTED, "3 token events for 2 tokens in the server's usage")
    # fewer events than tokens is a vLLM stream's right (several tokens in one event): not held against it
    assert judge(chunks(["ab", " cd"], fingerprint=None), 4) is None


class Mangler(OpenAIServer):
    """A loopback OpenAI server answering as the stream target would, except that the n-th request is
    truncated (no finish_reason) and the m-th corrupted."""

    def __init__(self, truncate: int, corrupt: int):
        super().__init__()
        self.truncate, self.corrupt = truncate, corrupt

    async def answer(self, body, writer):
        i, self.n = self.n, self.n + 1
        words = stream_tokens.text(integrity.prompt_of(body), body["max_tokens"]).split(" ")
        if i == self.corrupt:
            words[1] = "oops"
        events = []
        for k, w in enumerate(words):
            finish = None if (i == self.truncate or k < len(words) - 1) else "length"
            events.append({"choices": [{"index": 0, "text": w if k == 0 else " " + w, "finish_reason": finish}],
                           "system_fingerprint": stream_tokens.FINGERPRINT})
        events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(words)}})
        payload = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(payload), payload))
        await writer.drain()


def test_the_harness_classifies_truncated_and_corrupted_streams():
    shape = LoadShape(mode="closed", concurrency=1, duration_s=30, max_requests=10, warmup_s=0, timeout_s=5,
                      route="completions", model="m", max_tokens=(4, 6), prompt_words=(2, 4))
    got, _, _, _ = run_against(Mangler(truncate=3, corrupt=6), shape)
    by_id = {r.id: r for r in got}
    assert len(got) == 10 and by_id[3].failure == rec.TRUNCATED and by_id[6].failure == rec.CORRUPTED
    assert by_id[3].got_first_token and by_id[6].got_first_token  # mid-stream failures, counted as such
    assert sorted(r.id for r in got if not r.ok) == [3, 6]
