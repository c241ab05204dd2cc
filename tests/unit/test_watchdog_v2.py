"""The progress watchdog v2 (serve_apps/watchdog_v2.py) on clocks the test moves: each signal fires (a wedge
with requests in flight, an admission stall while other streams progress, one stream stuck while others
progress, an idle canary unanswered or failed) and does not fire where v1 goes wrong or a healthy engine is
slow (a long prefill while the engine steps, a client-cancelled request, no traffic with a healthy canary, a
slow reader, a non-streamed answer); thresholds scale with the observed step time; the user_config."""

import asyncio

import pytest

from serve_apps import config
from serve_apps.heartbeat import Beat
from serve_apps.watchdog import Watchdog
from serve_apps.watchdog_v2 import K, PRIOR_S_PER_TOKEN, Stalled, WatchdogV2, config_of


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Engine:
    """A heartbeat the test moves: steps at the clock's time; ``p99`` the step time's 99th percentile."""

    def __init__(self, clock, p99=0.01):
        self.clock, self.count, self.last, self.p99 = clock, 0, clock(), p99

    def step(self, n=1):
        self.count += n
        self.last = self.clock()

    def beat(self):
        return Beat(self.count, self.last, None, self.p99)


@pytest.fixture
def clock():
    return Clock()


def dog_and_engine(clock, stall_s=5.0, p99=0.01):
    engine = Engine(clock, p99)
    return WatchdogV2(stall_s, clock, engine.beat), engine


def run_for(clock, engine, seconds, every=0.5, each=None):
    """Move the clock ``seconds`` in ``every`` steps, the engine stepping at each, ``each()`` called after."""
    end = clock.t + seconds
    while clock.t < end - 1e-9:
        clock.t = min(end, clock.t + every)
        if engine is not None:
            engine.step()
        if each:
            each()


def learn(dog, clock, n=10, prompt_tokens=10, ttft=0.1, gap=0.05, tokens=4):
    """``n`` finished requests: first token after ``ttft``, then ``tokens`` - 1 more ``gap`` apart."""
    for _ in range(n):
        h = dog.begin(prompt_tokens)
        clock.t += ttft
        dog.token(h)
        for _ in range(tokens - 1):
            dog.pulling(h)
            clock.t += gap
            dog.token(h)
        dog.end(h)


# ---------------------------------------------------------------- each signal fires


def test_a_wedge_with_requests_in_flight_fires_at_the_step_threshold(clock):
    dog, engine = dog_and_engine(clock)
    h = dog.begin(10)
    run_for(clock, engine, 1.0)  # the engine steps, the prefill goes on
    clock.t += 4.999  # then no step
    assert dog.stalled() is None
    clock.t += 0.001
    assert dog.stalled() == "the engine has not stepped for 5.0 s with 1 request waiting on it (threshold 5.0 s)"
    with pytest.raises(Stalled, match="has not stepped"):
        dog.check()
    engine.step()  # it steps again and the prefill ends: healthy again
    dog.token(h)
    assert dog.stalled() is None


def test_the_step_threshold_scales_with_the_observed_step_time(clock):
    dog, engine = dog_and_engine(clock, stall_s=5.0, p99=2.0)  # a slow engine: 2 s steps
    assert dog.step_threshold(engine.beat()) == K * 2.0
    dog.begin()
    clock.t += 7.9
    assert dog.stalled() is None  # v1 would have fired at 5 s
    clock.t += 0.1
    assert "has not stepped for 8.0 s" in dog.stalled()


def test_an_admission_stall_fires_while_other_streams_progress(clock):
    dog, engine = dog_and_engine(clock)
    learn(dog, clock)  # 10 tokens' prompts answered in 0.1 s: 0.01 s a prompt token
    running = dog.begin(10)
    dog.token(running)
    stuck = dog.begin(10)  # never admitted by the engine

    def decode():
        dog.pulling(running)
        dog.token(running)
    run_for(clock, engine, 4.9, every=0.05, each=decode)
    assert dog.stalled() is None
    run_for(clock, engine, 0.2, every=0.05, each=decode)
    reason = dog.stalled()
    assert reason == ("admission stall: a request has had no first token for 5.1 s (10 prompt tokens; "
                      "threshold 5.0 s) while the engine steps; 1 such"), reason
    v1 = Watchdog(5.0, clock)  # what v1 sees of the same: tokens keep coming, so never
    v1.begin()
    v1.progress()
    assert v1.stalled() is None
    dog.token(stuck)
    assert dog.stalled() is None


def test_one_stream_stuck_while_others_progress_fires(clock):
    dog, engine = dog_and_engine(clock)
    learn(dog, clock)  # gaps of 0.05 s: the token threshold is stall_s
    a, b = dog.begin(10), dog.begin(10)
    dog.token(a)
    dog.token(b)
    dog.pulling(b)  # b asks for its next token, which never comes

    def decode():
        dog.pulling(a)
        dog.token(a)
    run_for(clock, engine, 4.9, every=0.05, each=decode)
    assert dog.stalled() is None
    run_for(clock, engine, 0.2, every=0.05, each=decode)
    assert dog.stalled() == ("stuck stream: 1 stream had no token for 5.1 s (threshold 5.0 s) while the engine "
                             "steps (1 other in flight)")
    dog.end(b)  # its client gave up: nothing stuck any more
    assert dog.stalled() is None


def test_the_token_threshold_scales_with_the_observed_gaps(clock):
    dog, engine = dog_and_engine(clock)
    learn(dog, clock, gap=3.0)  # a straggler: 3 s between tokens
    assert dog.token_threshold(engine.beat()) == pytest.approx(K * 3.0)


def test_an_idle_canary_unanswered_fires(clock):
    dog, engine = dog_and_engine(clock)
    never = asyncio.Event()

    async def main():
        clock.t += 9.9
        assert dog.maybe_canary(never.wait) is False  # not idle long enough
        clock.t += 0.1
        assert dog.maybe_canary(never.wait) is True
        assert dog.maybe_canary(never.wait) is False  # one under way: not another
        await asyncio.sleep(0)
        clock.t += 4.9
        assert dog.stalled() is None
        clock.t += 0.1
        assert dog.stalled() == "idle canary unanswered for 5.0 s (threshold 5.0 s)"
        never.set()  # answered at last
        await asyncio.sleep(0.01)
        assert dog.stalled() is None and dog.canaries == 1

    asyncio.run(main())


def test_a_failed_canary_fires_until_the_engine_answers(clock):
    dog, engine = dog_and_engine(clock)

    async def broken():
        raise RuntimeError("engine dead")

    async def main():
        clock.t += 10
        dog.maybe_canary(broken)
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert dog.stalled() == "idle canary failed: RuntimeError: engine dead"
    h = dog.begin()
    dog.token(h)  # a token: the engine answers
    assert dog.stalled() is None


def test_a_failed_canary_is_cleared_by_a_later_one_while_idle_and_a_broken_probe_is_no_finding(clock):
    """Idle after a failed canary: the next canary (due idle_s later, started before the check) clears it when the
    engine answers; a probe that breaks on the rig's side (AttributeError) says nothing about the engine."""
    dog, engine = dog_and_engine(clock)
    answers = []

    async def broken():
        raise RuntimeError("engine dead")

    async def fine():
        answers.append(1)

    async def rig_bug():
        raise AttributeError("'AsyncLLM' object has no attribute '_engine_client'")

    async def main():
        clock.t += 10
        dog.maybe_canary(broken)
        await asyncio.sleep(0.01)
        assert dog.stalled() == "idle canary failed: RuntimeError: engine dead"
        clock.t += 10  # idle on: the next canary is due, and answers
        assert dog.maybe_canary(fine) is True
        await asyncio.sleep(0.01)
        assert answers == [1] and dog.stalled() is None
        clock.t += 10
        dog.maybe_canary(rig_bug)
        await asyncio.sleep(0.01)
        assert dog.stalled() is None and dog.canary_unavailable.startswith("AttributeError")

    asyncio.run(main())


def test_without_a_heartbeat_a_token_of_any_request_stands_in_for_a_step(clock):
    dog = WatchdogV2(5.0, clock)
    h = dog.begin(streamed=False)
    clock.t += 4
    dog.progress()  # the engine core's outputs (vLLM): some request got a token
    clock.t += 4.9
    assert dog.stalled() is None
    clock.t += 0.1
    assert dog.stalled().startswith("the engine has not produced a token for 5.0 s with 1 request")
    dog.end(h)


# ---------------------------------------------------------------- and does not fire


def test_a_long_prefill_while_the_engine_steps_does_not_fire(clock):
    dog, engine = dog_and_engine(clock)
    learn(dog, clock, prompt_tokens=100, ttft=0.5)  # 5 ms a prompt token (queueing included)
    long = dog.begin(4000)  # its budget: 4 x 4000 x 5 ms = 80 s
    v1 = Watchdog(5.0, clock)
    v1.begin()
    fired = []
    run_for(clock, engine, 30, every=0.5, each=lambda: fired.append(dog.stalled()))  # chunked: it steps
    assert set(fired) == {None}
    assert v1.stalled() == "no token for 30.0 s with 1 request in flight (stall_s 5)"  # v1's false positive
    dog.token(long)
    assert dog.stalled() is None


def test_a_cold_replica_s_first_long_prefill_does_not_fire_either(clock):
    dog, engine = dog_and_engine(clock)
    dog.begin(2000)  # no first token seen yet: the prior, 10 ms a token
    assert dog.first_token_threshold(2000, engine.beat()) == K * 2000 * PRIOR_S_PER_TOKEN
    run_for(clock, engine, 60, each=lambda: None)
    assert dog.stalled() is None


def test_a_client_cancelled_request_leaves_nothing_in_flight_and_never_fires(clock):
    dog, engine = dog_and_engine(clock)

    async def stream():
        yield "first"
        await asyncio.sleep(3600)  # the engine has it, the client leaves
        yield "never"

    async def main():
        async def consume():
            async for _ in dog.watch(stream(), prompt_tokens=10):
                pass
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        assert dog.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert dog.in_flight == 0
    clock.t += 3600  # the engine idle since (no work, no steps: as vLLM's)
    assert dog.stalled() is None


def test_no_traffic_with_a_healthy_canary_never_fires(clock):
    dog, engine = dog_and_engine(clock)
    answered = []

    async def probe():
        engine.step()  # the engine steps once for it and answers
        answered.append(clock.t)

    async def main():
        for _ in range(30):  # a health check a second for 30 s, no traffic
            clock.t += 1
            dog.check()
            dog.maybe_canary(probe)
            await asyncio.sleep(0)

    asyncio.run(main())
    assert dog.canaries == 3 and answered == [1010.0, 1020.0, 1030.0]  # one per 10 s of idleness
    assert dog.stalled() is None


def test_traffic_holds_the_canary_back(clock):
    dog, engine = dog_and_engine(clock)
    for _ in range(30):
        clock.t += 1
        h = dog.begin()
        dog.token(h)
        dog.end(h)
        assert not dog.canary_due()
    h = dog.begin()
    clock.t += 60
    assert not dog.canary_due()  # something in flight: the other signals watch it


def test_a_slow_reader_is_not_a_stuck_stream(clock):
    dog, engine = dog_and_engine(clock)
    h = dog.begin(10)
    dog.token(h)  # its consumer holds the token and does not ask for the next for a minute
    run_for(clock, engine, 60)
    assert dog.stalled() is None
    dog.pulling(h)
    run_for(clock, engine, 5)
    assert dog.stalled().startswith("stuck stream")


def test_a_non_streamed_answer_is_watched_by_the_engine_s_steps_alone(clock):
    dog, engine = dog_and_engine(clock)
    dog.begin(10, streamed=False)  # its one item comes at its end
    run_for(clock, engine, 60)
    assert dog.stalled() is None
    clock.t += 5
    assert "has not stepped" in dog.stalled()


def test_off_it_never_fires_and_never_probes(clock):
    dog, engine = dog_and_engine(clock, stall_s=None)
    dog.begin()
    clock.t += 3600
    assert dog.stalled() is None and not dog.canary_due()


def test_watch_marks_waiting_only_while_its_consumer_asks(clock):
    dog, engine = dog_and_engine(clock)

    async def stream():
        for i in range(3):
            clock.t += 1
            yield i

    async def main():
        seen = []
        async for _ in dog.watch(stream(), prompt_tokens=10):
            (flight,) = dog._flights.values()
            seen.append(flight.waiting_since)
            clock.t += 100  # the consumer holds it: not waiting on the engine
            assert dog.stalled() is None
        return seen

    assert asyncio.run(main()) == [None, None, None]
    assert dog.in_flight == 0 and len(dog.gaps.samples) == 2 and set(dog.gaps.samples) == {1.0}


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize("user_config, expected", [
    (None, (1, None)), ({"stall_s": 5}, (1, 5.0)), ({"stall_s": 5, "watchdog": 1}, (1, 5.0)),
    ({"stall_s": 5, "watchdog": 2}, (2, 5.0)), ({"watchdog": 2}, (2, None))])
def test_the_version_from_the_user_config(user_config, expected):
    assert config_of(user_config) == expected


@pytest.mark.parametrize("user_config", [{"stall_s": 5, "watchdog": 3}, {"stall_s": 5, "watchdog": "2"},
                                         {"stall_s": 5, "watchdog": True}, {"stall_s": 5, "watch": 2}])
def test_a_bad_version_is_refused(user_config):
    with pytest.raises(ValueError):
        config_of(user_config)


def test_the_serve_config_carries_the_version_only_for_v2():
    spec = config.AppSpec(stall_s=5)
    assert config.serve_config(spec)["applications"][0]["deployments"][0]["user_config"] == {"stall_s": 5}
    spec.watchdog = 1
    assert config.serve_config(spec)["applications"][0]["deployments"][0]["user_config"] == {"stall_s": 5}
    spec.watchdog = 2
    cfg = config.serve_config(spec)
    assert cfg["applications"][0]["deployments"][0]["user_config"] == {"stall_s": 5, "watchdog": 2}
    config.validate(cfg)
    spec.watchdog = 3
    with pytest.raises(ValueError):
        config.serve_config(spec)
