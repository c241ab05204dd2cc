"""Sessions with shared prefixes (chaos/load/sessions.py) and who served each request
(serve_apps/served_by.py, chaos/load/served.py): the shape, the conversation, the length limit,
and the harness against a small OpenAI server on loopback with a per-replica prefix cache."""

import asyncio
import dataclasses
import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from chaos.recording import records as rec
from chaos import schemas
from chaos.base.errors import UsageError
from chaos.load import served, sessions
from chaos.load.workload import LoadShape, Target, request_body
from serve_apps import served_by
from serve_apps.prefix_cache import PrefixCache

EXT = schemas.schema(schemas.EXTENSION)


# ---------------------------------------------------------------- the shape
def test_schema_of_sessions_is_the_dataclass_with_its_defaults():
    props = EXT["$defs"]["load"]["properties"]["sessions"]["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(sessions.SessionSpec)}
    spec = sessions.SessionSpec()
    assert {k: v["default"] for k, v in props.items()} == dataclasses.asdict(spec)


@pytest.mark.parametrize("d, needle", [
    ({"turns": 0}, "turns must be"),
    ({"prefix_groups": 2.5}, "prefix_groups must be"),
    ({"think_time_s": -1}, "think_time_s must be"),
    ({"system_prompt_tokens": True}, "system_prompt_tokens must be"),
    ({"turn": 3}, "unknown field(s) turn"),
])
def test_bad_sessions_are_refused_naming_the_field(d, needle):
    with pytest.raises(UsageError, match="load: sessions: ") as e:
        LoadShape(sessions=d)
    assert needle in str(e.value)


def test_a_first_turn_that_cannot_fit_max_model_len_is_refused():
    with pytest.raises(UsageError, match="first turn may need .* more than max_model_len 512"):
        LoadShape(sessions={"system_prompt_tokens": 220}, prompt_words=(8, 24), max_tokens=(16, 32))
    shape = LoadShape(sessions={"system_prompt_tokens": 200}, prompt_words=(8, 24), max_tokens=(16, 32))
    assert shape.sessions.system_prompt_tokens == 200
    assert shape.to_dict()["sessions"] == {"turns": 4, "prefix_groups": 4, "system_prompt_tokens": 200,
                                           "think_time_s": 2.0}
    assert LoadShape.from_dict(shape.to_dict()).sessions == shape.sessions


def test_sessions_refuse_what_they_do_not_combine_with():
    with pytest.raises(UsageError, match="sessions: .*remove workers"):
        LoadShape(sessions={}, workers=2)
    with pytest.raises(UsageError, match="sessions: .*remove prompt_len"):
        LoadShape(sessions={}, prompt_len={"dist": "fixed", "value": 16})


# ---------------------------------------------------------------- one conversation
def conv(i=0, **kw):
    spec = sessions.SessionSpec(**{"turns": 4, "prefix_groups": 2, "system_prompt_tokens": 12, **kw})
    return sessions.Conversation(session=i, group=i % spec.prefix_groups, target=Target("t", "http://127.0.0.1:1"),
                                 seed=3, spec=spec, prompt_words=(3, 5), max_tokens=(4, 8), max_model_len=512,
                                 template_tokens=8)


def test_groups_share_a_system_prompt_and_each_turn_carries_the_conversation():
    a, b, c = conv(0), conv(1), conv(2)
    assert a.messages[0]["role"] == "system" and len(a.messages[0]["content"].split()) == 12
    assert a.messages[0] == c.messages[0] != b.messages[0]  # sessions 0 and 2 are in group 0
    lengths = sessions.Lengths()
    t1 = a.next(lengths)
    assert t1.turn == 1 and [m["role"] for m in t1.messages] == ["system", "user"]
    a.answered(t1, True, "some answer", prompt_tokens=30, lengths=lengths, completion_tokens=2)
    t2 = a.next(lengths)
    assert t2.turn == 2 and t2.messages[:2] == t1.messages
    assert t2.messages[2] == {"role": "assistant", "content": "some answer"} and t2.messages[3]["role"] == "user"
    assert sessions.render(t2.messages).startswith("system: ") and sessions.render(t2.messages).endswith("assistant:")


def test_a_failed_turn_is_sent_again_unchanged_and_counts_towards_turns():
    a, lengths = conv(turns=3), sessions.Lengths()
    t1 = a.next(lengths)
    a.answered(t1, False, "", None, lengths)
    again = a.next(lengths)
    assert again.messages == t1.messages and again.max_tokens == t1.max_tokens and again.turn == 1
    a.answered(again, True, "x", 20, lengths, 1)
    t2 = a.next(lengths)
    assert t2.turn == 2
    a.answered(t2, True, "y", 30, lengths, 1)
    assert a.next(lengths) is None and a.ended == "turns"


def test_the_same_seed_gives_the_same_conversation():
    def play():
        x, lengths, out = conv(5), sessions.Lengths(), []
        while (t := x.next(lengths)) is not None:
            out.append(t.messages)
            x.answered(t, True, "ok", 10 * len(t.messages), lengths, 1)
        return out
    assert play() == play()


def count_tokens(messages, template=8, answer_factor=1):
    """A server's count: one token per word, ``answer_factor`` per word of an answer, the template per message."""
    total = template  # the generation prompt
    for m in messages:
        n = len(m["content"].split())
        total += template + (n * answer_factor if m["role"] == "assistant" else n)
    return total


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), system=st.integers(0, 150), answer_factor=st.sampled_from([1, 2, 3]),
       fail=st.floats(0, 0.5))
def test_property_no_turn_is_ever_sent_that_passes_max_model_len(seed, system, answer_factor, fail):
    """Whatever the answers' lengths (a random-weight model's re-encode into more tokens), the turns
    sent stay within max_model_len, and sessions do get past their first turn."""
    rng = random.Random(seed)
    lengths, turns_sent = sessions.Lengths(), []
    for i in range(6):
        spec = sessions.SessionSpec(turns=20, prefix_groups=3, system_prompt_tokens=system, think_time_s=0)
        c = sessions.Conversation(session=i, group=i % 3, target=None, seed=seed, spec=spec, prompt_words=(8, 24),
                                  max_tokens=(16, 32), max_model_len=512, template_tokens=8)
        while (t := c.next(lengths)) is not None:
            prompt = count_tokens(t.messages, answer_factor=answer_factor)
            assert prompt + t.max_tokens <= 512, (prompt, t.max_tokens)
            turns_sent.append(t.turn)
            ok = rng.random() >= fail
            generated = rng.randint(1, t.max_tokens)
            c.answered(t, ok, " ".join(["tok"] * generated), prompt, lengths, generated)
        assert c.ended in ("turns", "max_model_len")
    if system <= 100:
        assert max(turns_sent) >= 2


def test_request_body_carries_the_messages():
    shape = LoadShape(sessions={})
    a = conv()
    t = a.next(sessions.Lengths())
    from chaos.load.workload import PlannedRequest

    req = PlannedRequest(id=0, offset_s=0, target=a.target, prompt=sessions.render(t.messages), max_tokens=t.max_tokens,
                         messages=t.messages, session=0, turn=1, prefix_group=0)
    path, body = request_body(shape, req)
    assert path == "/v1/chat/completions" and body["messages"] == t.messages
    shape.route = "completions"
    path, body = request_body(shape, req)
    assert path == "/v1/completions" and body["prompt"] == sessions.render(t.messages)


# ---------------------------------------------------------------- the prefix cache
def test_prefix_cache_serves_leading_blocks_it_holds_and_evicts_the_least_recent():
    c = PrefixCache(capacity_blocks=4, block_tokens=2)
    a = "s1 s2 s3 s4 u1".split()
    assert c.serve(a) == 0 and len(c) == 2  # two full blocks cached
    assert c.serve(a + "x y".split()) == 4  # the shared prefix: both blocks
    assert c.serve("s1 s2 zz s4 u1".split()) == 2  # diverges in the second block
    assert c.serve("s1 s2".split()) == 0  # never all of a prompt: one block is always computed
    c.serve("p1 p2 p3 p4 p5 p6".split())  # three new blocks: the oldest go
    assert len(c) == 4 and c.serve(a) == 2  # s1 s2 was used last above, so it stayed


# ---------------------------------------------------------------- who served
def test_served_headers_round_trip_onto_the_record_and_the_engine_once_per_replica():
    ident = {"replica": "r1", "zone": "zone-a", "region": "east", "node": "w1", "version": "v2"}
    h = served_by.headers(ident, {"prefix_caching": True, "block_size": 16, "kv_cache_tokens": 4096, "router": "X"})
    assert h[served_by.REPLICA] == "r1" and json.loads(h[served_by.ENGINE])["kv_cache_tokens"] == 4096
    seen: set[str] = set()
    rs = []
    for _ in range(2):
        r = rec.RequestRecord(id=0, target="t", url="u", zone="zone-b", route="/", phase="measure", planned_ns=0,
                              sent_ns=0, sent_offset_s=0)
        served.read(r, h, seen)
        rs.append(r)
    assert (rs[0].served_replica, rs[0].served_zone, rs[0].served_region, rs[0].served_version) == \
        ("r1", "zone-a", "east", "v2")
    assert rs[0].engine["prefix_caching"] is True and rs[1].engine is None
    env = served.engines(rs)
    assert env["kv_cache_tokens"] == 4096 and env["replicas"] == {"r1": rs[0].engine}
    assert served_by.headers({"replica": None}) == {} and served_by.parse_engine("[1]") is None


def test_the_vllm_ingress_takes_the_servers_description_off_the_stream():
    async def main():
        holder: dict = {}
        source = served_by.prepend_served({"identity": {"replica": "r9", "zone": "zone-c"}, "engine": None},
                                          _agen([["data: a\n\n"], ["data: b\n\n"]]))
        items = [x async for x in served_by.strip_served(source, holder)]
        return items, holder
    items, holder = asyncio.run(main())
    assert items == [["data: a\n\n"], ["data: b\n\n"]] and holder["identity"]["replica"] == "r9"

    class Response:
        headers: dict = {}
    resp = Response()
    resp.headers = {}
    served_by.set_headers(resp, holder)
    assert resp.headers == {served_by.REPLICA: "r9", served_by.ZONE: "zone-c"}

    async def plain():  # a stream without a description passes as it is
        return [x async for x in served_by.strip_served(_agen([{"error": 1}, "x"]), {})]
    assert asyncio.run(plain()) == [{"error": 1}, "x"]


async def _agen(items):
    for x in items:
        yield x


# ---------------------------------------------------------------- the harness with sessions, end to end
class Replica:
    def __init__(self, name, zone):
        self.name, self.zone, self.cache = name, zone, PrefixCache(64, 4)


class OpenAIServer:
    """Chat completions, streamed with usage and cached tokens, by two replicas taking turns; refuses
    (400) a prompt whose words plus max_tokens pass 512, as vLLM refuses one."""

    def __init__(self):
        self.replicas = [Replica("r-a", "zone-a"), Replica("r-b", "zone-b")]
        self.bodies: list[dict] = []
        self.n = 0
        self.handlers: set[asyncio.Task] = set()

    async def start(self):
        self.srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.srv.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        self.srv.close()
        for t in self.handlers:
            t.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    async def handle(self, reader, writer):
        self.handlers.add(asyncio.current_task())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                body = json.loads(await reader.readexactly(length))
                self.bodies.append(body)
                await self.answer(body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def answer(self, body, w):
        replica = self.replicas[self.n % 2]
        self.n += 1
        words = " ".join(m["content"] for m in body["messages"]).split()
        headers = served_by.headers({"replica": replica.name, "zone": replica.zone, "region": "east",
                                     "version": "initial"}, {"prefix_caching": True, "block_size": 4})
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
        if len(words) + body["max_tokens"] > 512:
            msg = b'{"error": "too long"}'
            w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n%s\r\n%s" % (len(msg), extra, msg))
            return
        cached = replica.cache.serve(words)
        n = body["max_tokens"]
        events = [{"choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": "length" if i == n - 1
                                else None}]} for i in range(n)]
        events.append({"choices": [], "usage": {"prompt_tokens": len(words), "completion_tokens": body["max_tokens"],
                                                "prompt_tokens_details": {"cached_tokens": cached}}})
        payload = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n%s\r\n%s"
                % (len(payload), extra, payload))
        await w.drain()


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_harness_runs_sessions_that_carry_their_conversation_and_records_who_served(mode):
    from tests.unit.loopback import run_against

    shape = LoadShape(mode=mode, arrival="constant" if mode == "open" else "poisson", rate=60, concurrency=3,
                      duration_s=2.0, warmup_s=0, timeout_s=5, model="m", prompt_words=(8, 24), max_tokens=(16, 32),
                      sessions={"turns": 8, "prefix_groups": 2, "system_prompt_tokens": 100, "think_time_s": 0.01})
    got, footer, server, _ = run_against(OpenAIServer(), shape, "zone-a", "east")
    assert got and footer["sent"] == len(got)
    assert all(r.ok for r in got), [r.detail for r in got if not r.ok][:3]  # never a 400
    assert {r.served_replica for r in got} == {"r-a", "r-b"} and {r.served_zone for r in got} == {"zone-a", "zone-b"}
    assert sum(1 for r in got if r.engine) == 2  # each replica's engine described once
    assert all(r.session is not None and r.prefix_group == r.session % 2 and r.region == "east" for r in got)
    by_session: dict[int, list[rec.RequestRecord]] = {}
    for r in sorted(got, key=lambda r: r.sent_ns):
        by_session.setdefault(r.session, []).append(r)
    assert max(len(v) for v in by_session.values()) >= 3
    for rs in by_session.values():
        assert [r.turn for r in rs] == list(range(1, len(rs) + 1))
        assert all(a.prompt_tokens < b.prompt_tokens for a, b in zip(rs, rs[1:]))  # the conversation grows
    # each body carries the conversation so far: system, then user/assistant pairs, then the new message
    assert all(len(b["messages"]) % 2 == 0 and b["messages"][0]["role"] == "system" for b in server.bodies)
    longest = max(server.bodies, key=lambda b: len(b["messages"]))
    assert [m["role"] for m in longest["messages"][1:4]] == ["user", "assistant", "user"]
    assert longest["messages"][2]["content"].startswith(" w0 w1")  # the answer streamed, carried on
    # later turns are served partly from the prefix cache, and say so
    assert any(r.cached_tokens and r.cached_tokens >= 100 for r in got if r.turn and r.turn > 1)
    assert all(r.cached_tokens is not None for r in got)
