"""The stream target's engine steps (serve_apps/stream_engine.py :class:`Steps` and :func:`generate`), with
simulated steps and no process: a token goes out once its delay elapsed and the engine stepped since the
request's previous token; one step lets each request out at most one token; a duty cycle slows a stream
by about its factor; errored and dead raise; with frequent steps the pacing is the delays' alone."""

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from serve_apps import engine_faults, stream_engine
from serve_apps.stream_engine import EngineDead, Steps, generate


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def engine(steps):
    """What generate needs of an engine: its steps and why it is gone."""
    return SimpleNamespace(steps=steps, reason=steps.reason)


async def stepping(steps, every_s, until):
    """A running engine: a step every ``every_s`` while ``until()`` is false."""
    while not until():
        steps.step()
        await asyncio.sleep(every_s)


def test_the_states_by_the_clock_and_the_pipe():
    clock = Clock()
    s = Steps(clock)
    assert s.state() == "ok" and s.reason() is None
    clock.t += stream_engine.HUNG_AFTER_S + 0.01
    assert s.state() == "hung" and s.reason() is None  # hung is not gone: tokens wait, nothing raises
    s.record(b"...")
    assert s.count == 3 and s.state() == "ok"
    s.record(b"." + engine_faults.ERROR_BYTE)
    assert s.count == 4 and s.state() == "errored" and s.reason() == engine_faults.MESSAGE
    d = Steps(clock)
    d.end()
    clock.t += 10
    assert d.state() == "dead" and d.reason() == stream_engine.DIED  # for good


def test_no_token_without_a_step():
    s = Steps()

    async def main():
        out = []

        async def consume():
            async for w in generate(engine(s), ["a", "b", "c"], [0.0, 0.0, 0.0], poll_s=0.01):
                out.append(w)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.2)  # delays long elapsed, polled many times: no step, no token
        assert out == []
        s.step()
        await asyncio.sleep(0.05)
        assert out == ["a"]  # one step, one token
        s.step()
        s.step()
        await asyncio.sleep(0.05)
        assert out == ["a", "b"]  # steps since the previous token: one token, however many steps
        s.step()
        await asyncio.wait_for(task, 1)
        return out

    assert asyncio.run(main()) == ["a", "b", "c"]


def test_one_step_lets_each_request_out_one_token():
    s = Steps()

    async def main():
        outs = [[] for _ in range(3)]

        async def consume(out):
            async for w in generate(engine(s), [f"w{i}" for i in range(10)], [0.0] * 10, poll_s=0.01):
                out.append(w)

        tasks = [asyncio.create_task(consume(o)) for o in outs]
        await asyncio.sleep(0.02)
        for n in range(1, 6):
            s.step()
            await asyncio.sleep(0.02)
            assert [len(o) for o in outs] == [n, n, n]
        s.step(5)  # five steps read at once (one chunk from the pipe): still one token each
        await asyncio.sleep(0.02)
        assert [len(o) for o in outs] == [6, 6, 6]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def test_a_step_from_the_reader_thread_wakes_a_waiting_token_at_once():
    s = Steps()

    async def main():
        threading.Timer(0.1, s.step).start()  # as the pipe's reader does
        t0 = time.monotonic()
        out = [w async for w in generate(engine(s), ["a"], [0.0], poll_s=10.0)]
        return out, time.monotonic() - t0

    out, took = asyncio.run(main())
    assert out == ["a"] and 0.09 <= took < 0.5  # woken by the step, not by the (10 s) poll


def stream_time(steps, words, delay, duty=None, every_s=0.002):
    """How long ``words`` tokens take, each after ``delay``, with the engine stepping every ``every_s``
    and, with ``duty`` = (run_s, stop_s), stopped for stop_s of every run_s + stop_s."""

    async def main():
        done = False
        running = {"on": True}

        async def engine_loop():
            while not done:
                if running["on"]:
                    steps.step()
                await asyncio.sleep(every_s)

        async def cycle():
            run_s, stop_s = duty
            while not done:
                running["on"] = False
                await asyncio.sleep(stop_s)
                running["on"] = True
                await asyncio.sleep(run_s)

        tasks = [asyncio.create_task(engine_loop())] + ([asyncio.create_task(cycle())] if duty else [])
        t0 = time.monotonic()
        stamps = []
        async for _ in generate(engine(steps), [f"w{i}" for i in range(words)], [delay] * words, poll_s=0.05):
            stamps.append(time.monotonic() - t0)
        done = True
        await asyncio.gather(*tasks)
        return stamps

    return asyncio.run(main())


def test_healthy_pacing_is_the_delays_alone_when_steps_are_frequent():
    stamps = stream_time(Steps(), 30, 0.01)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert min(gaps) >= 0.0095  # never before its delay
    assert stamps[-1] < 30 * 0.01 * 1.25 + 0.05  # and not held back by the steps


def test_a_factor_4_duty_cycle_slows_a_50_token_stream_about_4_times():
    """Running 0.1 s, stopped 0.3 s (factor 4), tokens every 10 ms: about 11 tokens a cycle (the one whose
    delay elapsed during the stop, then one a delay) instead of 40: ~3.6x."""
    healthy = stream_time(Steps(), 50, 0.01)[-1]
    slowed = stream_time(Steps(), 50, 0.01, duty=(0.1, 0.3))[-1]
    ratio = slowed / healthy
    print(f"50 tokens: {healthy:.2f} s running, {slowed:.2f} s under a factor-4 duty cycle: x{ratio:.2f}")
    assert 3.0 <= ratio <= 4.6


def test_an_errored_engine_raises_with_its_reason_even_with_steps_pending():
    s = Steps()

    async def main():
        gen = generate(engine(s), ["a", "b", "c"], [0.0] * 3, poll_s=0.01)
        asyncio.get_running_loop().call_later(0.02, s.step)
        first = await gen.__anext__()
        s.record(b"..." + engine_faults.ERROR_BYTE)  # steps since the first token, and the error
        with pytest.raises(EngineDead, match=r"^engine error \(injected\)$"):
            await gen.__anext__()
        return first

    assert asyncio.run(main()) == "a"


def test_an_error_wakes_and_fails_a_token_waiting_for_a_step():
    s = Steps()

    async def main():
        threading.Timer(0.1, s.record, args=(engine_faults.ERROR_BYTE,)).start()
        t0 = time.monotonic()
        with pytest.raises(EngineDead, match=r"^engine error \(injected\)$"):
            async for _ in generate(engine(s), ["a"], [0.0], poll_s=10.0):
                pass
        return time.monotonic() - t0

    assert asyncio.run(main()) < 0.5


def test_a_dead_engine_wakes_and_fails_a_waiting_token_at_once():
    s = Steps()

    async def main():
        threading.Timer(0.1, s.end).start()
        t0 = time.monotonic()
        with pytest.raises(EngineDead, match="^engine process died$"):
            async for _ in generate(engine(s), ["a"], [0.0], poll_s=10.0):
                pass
        return time.monotonic() - t0

    assert asyncio.run(main()) < 0.5
    with pytest.raises(EngineDead, match="^engine process died$"):
        asyncio.run(stream_engine.wait_ready(engine(s)))
