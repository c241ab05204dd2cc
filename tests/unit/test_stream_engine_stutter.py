"""The stream target's stepping engine driven for real: a stopped engine child lets out no token at once
(long before it counts as hung), and engine-stutter's own duty cycle (chaos/backends/local/throttle.py, the
rig's default throttle: factor 4, running 0.2 s of every 0.8 s) slows a stream about 4 times."""

import asyncio
import os
import signal
import time

import pytest

from chaos.backends.engine_faults import Throttle
from chaos.backends.local.throttle import DutyCycle
from serve_apps import stream_engine
from serve_apps.stream_engine import EngineProcess, generate


@pytest.fixture
def engine():
    e = EngineProcess()
    assert e.wait_started(10)
    yield e
    if e.proc.poll() is None:
        os.kill(e.pid, signal.SIGCONT)
    e.close()


def stamps_of(engine, n, delay):
    async def main():
        t0 = time.monotonic()
        return [time.monotonic() - t0 async for _ in generate(engine, [f"w{i}" for i in range(n)], [delay] * n)]

    return asyncio.run(main())


def test_a_stopped_engine_lets_no_token_out_at_once_not_after_the_hung_delay(engine):
    words = [f"w{i}" for i in range(30)]
    marks = {}

    async def main():
        out = []
        async for w in generate(engine, words, [0.0] + [0.02] * 29):
            out.append((time.monotonic(), w))
            if len(out) == 3:
                os.kill(engine.pid, signal.SIGSTOP)
                marks["stop"] = time.monotonic()
                asyncio.get_running_loop().call_later(0.5, resume)
        return out

    def resume():
        marks["state"] = engine.state()
        marks["cont"] = time.monotonic()
        os.kill(engine.pid, signal.SIGCONT)

    out = asyncio.run(main())
    stop, cont = marks["stop"], marks["cont"]
    assert [w for _, w in out] == words
    assert marks["state"] == "ok"  # 0.5 s stopped: not hung yet (HUNG_AFTER_S), and still no token
    assert len([t for t, _ in out if stop < t < cont]) <= 1  # a step already in the pipe at most
    assert [t for t, _ in out if stop + 0.05 < t < cont] == []


def test_engine_stutters_duty_cycle_slows_a_stream_about_by_its_factor(engine):
    throttle = Throttle()  # the rig's default: factor 4, period_s 0.2
    healthy = stamps_of(engine, 50, 0.02)[-1]
    cycle = DutyCycle([engine.pid], throttle)
    cycle.start()
    try:
        slowed = stamps_of(engine, 50, 0.02)[-1]
    finally:
        cycle.stop()
    ratio = slowed / healthy
    print(f"50 tokens at 20 ms: {healthy:.2f} s running, {slowed:.2f} s under engine-stutter's duty cycle "
          f"({throttle.text()}): x{ratio:.2f}")
    assert 2.8 <= ratio <= 4.8
    assert engine.state() == "ok"  # never hung: stopped 0.6 s at a time
