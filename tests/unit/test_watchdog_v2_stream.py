"""The progress watchdog v2 wired into the stream target's replica (serve_apps/stream_target.py, its own class
without Serve around it) over a real engine child: its steps are the heartbeat, so a wedged engine (the real
engine-wedge hook: the step blocked, the process alive) fails the health check with a stream waiting; a
prefill three times stall_s while the engine steps does not; with no traffic its canary asks the engine for a
token and fails the check while a stopped engine does not answer."""

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
from starlette.requests import Request

from serve_apps import engine_faults
from serve_apps.stream_target import StreamTarget
from serve_apps.watchdog_v2 import Stalled

Target = StreamTarget.func_or_class.__mro__[1]  # the class as written, under Serve's ingress wrapper
V2 = {"stall_s": 0.5, "watchdog": 2}


@pytest.fixture
def target():
    t = Target(prefill_s=0.01, token_s=0.02, jitter=0.0, uncached_token_s=0.005)
    yield t
    pid = t.engine.pid
    for path in (engine_faults.wedge_path(pid), engine_faults.request_path(pid)):
        Path(path).unlink(missing_ok=True)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    t.engine.close()


def request(prompt="the zone", **body) -> Request:
    data = json.dumps({"prompt": prompt, "max_tokens": 8, **body}).encode()

    async def receive():
        return {"type": "http.request", "body": data, "more_body": False}

    return Request({"type": "http", "method": "POST", "headers": [], "path": "/v1/completions"}, receive)


async def health(target) -> str | None:
    try:
        await target.check_health()
    except Stalled as e:
        return str(e)
    return None


def test_a_wedged_engine_fails_the_health_check_with_a_stream_waiting(target):
    target.reconfigure(V2, rank=None)
    pid = target.engine.pid

    async def main():
        resp = await target._answer(request(stream=True, max_tokens=200), chat=False)
        chunks = []

        async def read():
            async for c in resp.body_iterator:
                chunks.append(c)
        reader = asyncio.create_task(read())
        while len(chunks) < 3:
            await asyncio.sleep(0.01)
        assert await health(target) is None
        Path(engine_faults.request_path(pid)).write_text(json.dumps({"fault": "wedge", "run": "test"}))
        os.kill(pid, signal.SIGUSR1)
        wedged = time.monotonic()
        reasons = []
        while not reasons or reasons[-1] is None:
            await asyncio.sleep(0.05)
            reasons.append(await health(target))
            assert time.monotonic() - wedged < 5, reasons
        took = time.monotonic() - wedged
        Path(engine_faults.wedge_path(pid)).unlink()  # released: the engine steps on, the stream ends
        await asyncio.wait_for(reader, 20)
        return reasons[-1], took, chunks

    reason, took, chunks = asyncio.run(main())
    assert reason.startswith("the engine has not stepped for ") and "1 request waiting on it" in reason, reason
    assert 0.4 < took < 3.0  # its threshold and a few health asks (2.05 s once at load 9, 2026-12-06)
    assert chunks[-1].strip() == "data: [DONE]" and len(chunks) == 201
    assert asyncio.run(health(target)) is None


def test_a_long_prefill_while_the_engine_steps_does_not_fail_it(target):
    target.reconfigure(V2, rank=None)
    prompt = " ".join(f"w{i}" for i in range(300))  # 300 uncached tokens x 5 ms: 1.5 s to the first token

    async def main():
        task = asyncio.create_task(target._answer(request(prompt, max_tokens=4), chat=False))
        reasons = []
        while not task.done():
            reasons.append(await health(target))
            await asyncio.sleep(0.1)
        return await task, reasons

    started = time.monotonic()
    resp, reasons = asyncio.run(main())
    assert time.monotonic() - started > 3 * V2["stall_s"]
    assert resp.status_code == 200 and len(reasons) > 10 and set(reasons) == {None}


def test_with_no_traffic_the_canary_asks_the_engine_and_a_stopped_one_fails_the_check(target):
    target.reconfigure(V2, rank=None)
    dog = target.watchdog_v2
    dog.idle_s = 0.3
    pid = target.engine.pid

    async def until(look, timeout_s=5.0):  # polled, not slept: a loaded machine answers later
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await look():
                return True
            await asyncio.sleep(0.02)
        return False

    async def answered():
        return dog.canary_since is None

    async def second_started():
        await health(target)  # the check starts the canary when one is due
        return dog.canaries == 2

    async def failing():
        return await health(target) is not None

    async def cleared():
        await health(target)
        return dog.canary_failure is None and dog.canary_since is None

    async def main():
        await asyncio.sleep(0.35)
        assert await health(target) is None and dog.canaries == 1  # started in the background
        assert await until(answered) and await health(target) is None
        os.kill(pid, signal.SIGSTOP)  # no request in flight: v1 could never see it
        try:
            assert await until(second_started)
            assert await until(failing)
            reason = await health(target)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert await until(cleared, 10.0)  # the engine steps again: the canary under way is answered
        return reason, await health(target)

    reason, after = asyncio.run(main())
    assert reason is not None and reason.startswith("idle canary unanswered for "), reason
    assert after is None and dog.canary_failure is None
