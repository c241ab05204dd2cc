"""The progress watchdog's rule at its edges (serve_apps/watchdog.py), on a clock the test moves, and how
the Serve config carries stall_s to both apps' engine deployments."""

import asyncio
from types import SimpleNamespace

import pytest

from serve_apps import config
from serve_apps.watchdog import Stalled, Watchdog, stall_s_of
from serve_apps.watchdog_v2 import WatchdogV2


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock():
    return Clock()


def test_it_fires_at_exactly_stall_s_with_work_in_flight_and_not_before(clock):
    dog = Watchdog(10, clock)
    dog.begin()
    clock.t += 9.999
    assert dog.stalled() is None
    dog.check()  # no raise
    clock.t += 0.001
    assert dog.stalled() == "no token for 10.0 s with 1 request in flight (stall_s 10)"
    with pytest.raises(Stalled, match=r"^no token for 10\.0 s with 1 request in flight \(stall_s 10\)$"):
        dog.check()


def test_the_reason_counts_the_requests_and_the_time(clock):
    dog = Watchdog(10, clock)
    for _ in range(4):
        dog.begin()
    clock.t += 12.34
    assert dog.stalled() == "no token for 12.3 s with 4 requests in flight (stall_s 10)"


def test_a_token_resets_the_clock(clock):
    dog = Watchdog(10, clock)
    dog.begin()
    clock.t += 9
    dog.progress()
    clock.t += 9
    assert dog.stalled() is None
    clock.t += 1
    assert dog.stalled() is not None
    dog.progress()  # the engine moves again: healthy again
    assert dog.stalled() is None


def test_with_nothing_in_flight_it_never_fires(clock):
    dog = Watchdog(10, clock)
    clock.t += 3600
    assert dog.stalled() is None
    dog.begin()
    dog.end()
    clock.t += 3600
    assert dog.stalled() is None
    dog.end()  # an extra end does not go below zero
    assert dog.in_flight == 0


def test_requests_ending_are_not_progress_but_the_last_one_ending_clears_it(clock):
    dog = Watchdog(10, clock)
    dog.begin()
    dog.begin()
    clock.t += 8
    dog.end()  # a client gave up: the engine did nothing
    clock.t += 2
    assert dog.stalled() == "no token for 10.0 s with 1 request in flight (stall_s 10)"
    dog.end()
    assert dog.stalled() is None


def test_work_appearing_starts_the_clock_and_more_work_does_not_restart_it(clock):
    dog = Watchdog(10, clock)
    clock.t += 100  # idle for long: not a stall
    dog.begin()
    clock.t += 6
    dog.begin()  # a new request while the first waits: the engine is no less stuck
    clock.t += 4
    assert dog.stalled() is not None


def test_off_by_default_and_switched_on_and_off_in_place(clock):
    dog = Watchdog(clock=clock)
    dog.begin()
    clock.t += 100
    assert dog.stalled() is None
    dog.configure(10)
    assert dog.stalled() is not None  # what is in flight is kept
    dog.configure(None)
    assert dog.stalled() is None
    dog.configure(0)
    assert dog.stall_s is None


def test_watch_counts_a_stream_in_flight_and_its_items_as_progress(clock):
    dog = Watchdog(10, clock)

    async def stream():
        for i in range(3):
            clock.t += 5
            yield i

    async def main():
        got = []
        async for item in dog.watch(stream()):
            got.append((item, dog.in_flight, clock.t - dog.since))
        return got

    assert asyncio.run(main()) == [(0, 1, 0.0), (1, 1, 0.0), (2, 1, 0.0)]
    assert dog.in_flight == 0


def test_a_cancelled_stream_leaves_nothing_in_flight_and_is_closed(clock):
    dog = Watchdog(10, clock)
    closed = []

    async def stuck():
        try:
            yield "first"
            await asyncio.sleep(3600)
            yield "never"
        finally:
            closed.append(True)

    async def main():
        async def consume():
            async for _ in dog.watch(stuck()):
                pass
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        assert dog.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert dog.in_flight == 0 and closed == [True]


def test_a_stream_closed_early_by_its_consumer_closes_its_source(clock):
    dog = Watchdog(10, clock)
    closed = []

    async def source():
        try:
            for i in range(10):
                yield i
        finally:
            closed.append(True)

    async def main():
        gen = dog.watch(source())
        assert await gen.__anext__() == 0
        await gen.aclose()

    asyncio.run(main())
    assert dog.in_flight == 0 and closed == [True]


def test_the_request_block_is_in_flight_until_it_ends_however_it_ends(clock):
    dog = Watchdog(10, clock)
    with pytest.raises(RuntimeError):
        with dog.request():
            assert dog.in_flight == 1
            raise RuntimeError
    assert dog.in_flight == 0


@pytest.mark.parametrize("user_config, stall_s", [(None, None), ({}, None), ({"stall_s": None}, None),
                                                  ({"stall_s": 0}, None), ({"stall_s": 10}, 10.0),
                                                  ({"stall_s": 2.5}, 2.5)])
def test_stall_s_from_the_user_config(user_config, stall_s):
    assert stall_s_of(user_config) == stall_s


@pytest.mark.parametrize("user_config", [{"stall_s": -1}, {"stall_s": "10"}, {"stall_s": True}, {"stal_s": 10},
                                         [10], 10])
def test_a_bad_user_config_is_refused(user_config):
    with pytest.raises(ValueError):
        stall_s_of(user_config)


def test_the_serve_config_carries_stall_s_to_the_stream_targets_deployment_only_when_set():
    spec = config.AppSpec()
    dep = config.serve_config(spec)["applications"][0]["deployments"][0]
    assert "user_config" not in dep  # off: the config is what it was before the watchdog
    spec.stall_s = 10
    cfg = config.serve_config(spec)
    assert cfg["applications"][0]["deployments"][0]["user_config"] == {"stall_s": 10}
    config.validate(cfg)
    assert stall_s_of(cfg["applications"][0]["deployments"][0]["user_config"]) == 10.0


def test_the_serve_config_carries_stall_s_to_the_llm_engine_deployment_not_the_ingress():
    spec = config.AppSpec(app="llm", stall_s=10)
    spec.llm = config.LLMOptions(model_path="/tmp/model")
    args = config.serve_config(spec)["applications"][0]["args"]
    assert args["llm_configs"][0]["deployment_config"]["user_config"] == {"stall_s": 10}
    assert "user_config" not in args["ingress_deployment_config"]  # the ingress has no reconfigure


def test_both_apps_reconfigure_also_when_the_user_config_is_removed():
    """Serve calls ``reconfigure`` when a user_config is set, or always when it takes ``rank``
    (ray/serve/_private/replica.py ``call_reconfigure``): so removing stall_s turns the watchdog off."""
    import inspect

    from serve_apps.stream_target import StreamTarget

    reconfigure = StreamTarget.func_or_class.reconfigure
    assert "rank" in inspect.signature(reconfigure).parameters
    target = SimpleNamespace(watchdog=Watchdog(), watchdog_v2=WatchdogV2())
    reconfigure(target, {"stall_s": 3}, rank=None)
    assert target.watchdog.stall_s == 3.0 and target.watchdog_v2.stall_s is None
    reconfigure(target, {"stall_s": 3, "watchdog": 2}, rank=None)  # v2 instead of v1, in place
    assert target.watchdog.stall_s is None and target.watchdog_v2.stall_s == 3.0
    reconfigure(target, None, rank=None)
    assert target.watchdog.stall_s is None and target.watchdog_v2.stall_s is None


def test_serves_rank_rule_is_what_the_apps_rely_on():
    """Ray's own code: with a ``rank`` parameter ``reconfigure`` is called even with no user_config."""
    import inspect

    from ray.serve._private import replica

    src = inspect.getsource(replica.UserCallableWrapper.call_reconfigure)
    assert 'user_subscribed_to_rank = "rank" in params' in src
    assert "if user_config is not None or user_subscribed_to_rank:" in src
