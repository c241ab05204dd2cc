"""The stream target's replica (serve_apps/stream_target.py, its own class without Serve around it) over a
real engine child, in each of the engine's states: stopped (no token for any request, the health check
passing unless the progress watchdog is on), errored (SIGUSR1: requests answered with the injected error,
the health check failing) and dead (SIGKILL: the same, said as a crash)."""

import asyncio
import contextlib
import json
import os
import signal
import time

import pytest
from starlette.requests import Request

from serve_apps import engine_faults, stream_engine
from serve_apps.stream_target import StreamTarget
from serve_apps.watchdog import Stalled

Target = StreamTarget.func_or_class.__mro__[1]  # the class as written, under Serve's ingress wrapper


@pytest.fixture
def target():
    t = Target(prefill_s=0.01, token_s=0.02, jitter=0.0)
    yield t
    t.engine.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(engine_faults.tombstone_path(t.engine.pid))  # a SIGUSR1 left one


def request(**body) -> Request:
    data = json.dumps({"prompt": "the zone", "max_tokens": 8, **body}).encode()

    async def receive():
        return {"type": "http.request", "body": data, "more_body": False}

    return Request({"type": "http", "method": "POST", "headers": [], "path": "/v1/completions"}, receive)


def events(chunks):
    return [json.loads(c[len("data: "):]) if c.strip() != "data: [DONE]" else "[DONE]" for c in chunks]


def wait_for(engine, state, timeout=5.0):
    end = time.monotonic() + timeout
    while engine.state() != state and time.monotonic() < end:
        time.sleep(0.02)
    return engine.state()


def test_a_stopped_engine_streams_nothing_passes_the_health_check_and_resumes(target):
    pid = target.engine.pid

    async def main():
        resp = await target._answer(request(stream=True, max_tokens=80), chat=False)
        chunks, health = [], []
        async def read():
            async for c in resp.body_iterator:
                chunks.append((time.monotonic(), c))
                if len(chunks) == 3:
                    os.kill(pid, signal.SIGSTOP)
        reader = asyncio.create_task(read())
        while target.engine.state() != "hung":
            await asyncio.sleep(0.02)
        hung = time.monotonic()
        for _ in range(5):  # a gray failure: hung, and healthy to Serve
            await target.check_health()
            health.append(target.engine.state())
            await asyncio.sleep(0.1)
        cont = time.monotonic()
        os.kill(pid, signal.SIGCONT)
        await asyncio.wait_for(reader, 20)
        return chunks, hung, cont, health

    chunks, hung, cont, health = asyncio.run(main())
    assert health == ["hung"] * 5
    assert [t for t, _ in chunks if hung + 0.1 < t < cont] == []
    got = events([c for _, c in chunks])
    assert got[-1] == "[DONE]" and len(got) == 81 and got[-2]["choices"][0]["finish_reason"] == "length"
    asyncio.run(target.check_health())


def test_with_the_watchdog_a_stopped_engine_fails_the_health_check_while_requests_wait(target):
    target.reconfigure({"stall_s": 0.5}, rank=None)
    pid = target.engine.pid
    os.kill(pid, signal.SIGSTOP)
    assert wait_for(target.engine, "hung") == "hung"

    async def main():
        waiting = [asyncio.create_task(target._answer(request(), chat=False)) for _ in range(2)]
        await asyncio.sleep(0.2)
        await target.check_health()  # in flight, but not for stall_s yet
        await asyncio.sleep(0.4)
        with pytest.raises(Stalled, match=r"^no token for 0\.\d s with 2 requests in flight \(stall_s 0\.5\)$"):
            await target.check_health()
        os.kill(pid, signal.SIGCONT)
        answers = await asyncio.wait_for(asyncio.gather(*waiting), 10)
        return answers

    answers = asyncio.run(main())
    assert [a.status_code for a in answers] == [200, 200]
    assert json.loads(answers[0].body)["choices"][0]["text"].count(" ") == 7  # all 8 tokens, once it went on
    asyncio.run(target.check_health())  # nothing in flight
    target.reconfigure(None, rank=None)
    assert target.watchdog.stall_s is None


def test_an_errored_engine_fails_requests_with_its_reason_and_the_health_check(target):
    async def main():
        resp = await target._answer(request(stream=True, max_tokens=200), chat=True)
        chunks = []
        async for c in resp.body_iterator:
            chunks.append(c)
            if len(chunks) == 2:
                os.kill(target.engine.pid, signal.SIGUSR1)
        after = await target._answer(request(), chat=False)
        return events(chunks), after

    got, after = asyncio.run(main())
    assert got[-1] == "[DONE]" and got[-2]["error"]["message"] == "engine error (injected)"
    assert got[-2]["error"]["type"] == "EngineDeadError" and len(got) < 200
    assert after.status_code == 500 and json.loads(after.body)["error"]["message"] == "engine error (injected)"
    assert target.engine.state() == "errored"
    with pytest.raises(RuntimeError, match=r"engine error \(injected\)"):
        asyncio.run(target.check_health())


def test_a_dead_engine_fails_requests_and_the_health_check_as_a_crash(target):
    os.kill(target.engine.pid, signal.SIGKILL)
    assert wait_for(target.engine, "dead") == "dead"
    after = asyncio.run(target._answer(request(stream=True), chat=False))
    assert after.status_code == 500 and json.loads(after.body)["error"]["message"] == stream_engine.DIED
    with pytest.raises(RuntimeError, match="engine process died"):
        asyncio.run(target.check_health())


def test_a_non_streamed_answer_waits_for_a_stopped_engine_too(target):
    pid = target.engine.pid

    async def main():
        task = asyncio.create_task(target._answer(request(max_tokens=100), chat=False))  # 2 s of tokens
        await asyncio.sleep(0.2)
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        await asyncio.sleep(stream_engine.HUNG_AFTER_S + 2.5)
        assert not task.done()  # without the stop it would be done by now
        os.kill(pid, signal.SIGCONT)
        resp = await asyncio.wait_for(task, 10)
        return resp, time.monotonic() - stopped

    resp, took = asyncio.run(main())
    assert resp.status_code == 200 and took > stream_engine.HUNG_AFTER_S + 2.5
    assert len(json.loads(resp.body)["choices"][0]["text"].split()) == 100
