"""The progress watchdog in the vLLM app's LLMServer (serve_apps/llm_served.py), through Ray Serve LLM's own
request path (``chat`` -> ``_run_request`` -> its Batcher) with a fake engine standing in for vLLM: a stream
is a request in flight, its items and the engine core's outputs are progress, ``check_health`` fails on a
stall after Ray's own check. No Ray cluster, no vLLM engine."""

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("ray.llm")
# Ray's LLMServer has an async __del__, never awaited outside Serve
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

from ray.llm._internal.serve.core.configs.llm_config import LLMConfig  # noqa: E402
from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest  # noqa: E402
from ray.llm._internal.serve.core.server.llm_server import LLMServer as RayLLMServer  # noqa: E402

from serve_apps import llm_app  # noqa: E402
from serve_apps.config import AppSpec, LLMOptions, _deployment_common  # noqa: E402
from serve_apps.heartbeat import Beat  # noqa: E402
from serve_apps.llm_served import LLMServer, observe_engine_outputs, prompt_tokens_of  # noqa: E402
from serve_apps.watchdog import Stalled, Watchdog  # noqa: E402
from serve_apps.watchdog_v2 import WatchdogV2  # noqa: E402


class Clock:
    t = 50.0

    def __call__(self):
        return self.t


class FakeCore:
    """vLLM's AsyncMPClient as AsyncLLM's output handler sees it: ``get_output_async`` returns a batch."""

    def __init__(self):
        self.batches: asyncio.Queue = asyncio.Queue()

    async def get_output_async(self):
        return await self.batches.get()


class FakeEngine:
    """Serve LLM's VLLMEngine as LLMServer sees it: one token, then nothing until released."""

    def __init__(self):
        cache = SimpleNamespace(enable_prefix_caching=True, block_size=128, num_gpu_blocks=20)
        self.core = FakeCore()
        self._engine_client = SimpleNamespace(engine_core=self.core, vllm_config=SimpleNamespace(
            cache_config=cache, model_config=SimpleNamespace(max_model_len=512)))
        self.release = asyncio.Event()
        self.dead = False

    async def chat(self, request, raw):
        yield 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
        await self.release.wait()
        yield 'data: {"choices":[{"delta":{"content":"b"}}]}\n\n'

    async def check_health(self):
        if self.dead:
            raise RuntimeError("EngineDeadError")


def server(stall_s=None) -> LLMServer:
    spec = AppSpec(app="llm", stall_s=stall_s)
    spec.llm = LLMOptions(model_path="/tmp/model")
    cfg = LLMConfig.model_validate(llm_app.llm_config(spec, _deployment_common(spec)))
    s = LLMServer.sync_init(cfg, engine_cls=lambda c: None)
    s._availproof_watchdog = Watchdog(clock=Clock())
    s.reconfigure(cfg.deployment_config.get("user_config"), rank=None)  # as Serve does at the replica's start
    return s


def test_the_user_config_reaches_the_deployment_and_turns_the_watchdog_on():
    s = server(stall_s=10)
    assert LLMServer.get_deployment_options(s._llm_config)["user_config"] == {"stall_s": 10}
    assert s.progress_watchdog.stall_s == 10.0
    assert server().progress_watchdog.stall_s is None


def test_a_hung_stream_fails_the_health_check_and_a_token_clears_it(monkeypatch):
    async def ray_start(self):
        self.engine = FakeEngine()

    monkeypatch.setattr(RayLLMServer, "start", ray_start)  # Ray's start builds the engine; ours then hooks it

    async def main():
        s = server(stall_s=10)
        await s.start()
        dog, engine = s.progress_watchdog, s.engine
        clock = dog.clock
        body = ChatCompletionRequest(model="availproof-tiny", messages=[{"role": "user", "content": "x"}],
                                     stream=True)
        stream = await s.chat(body, None)
        served = await stream.__anext__()  # who served: not the engine's
        assert "availproof_served_by" in served
        first = await stream.__anext__()  # the first token (Serve LLM batches them in lists)
        assert "content" in str(first) and dog.in_flight == 1
        clock.t += 9.9
        await s.check_health()  # not yet
        clock.t += 0.1
        with pytest.raises(Stalled, match=r"no token for 10\.0 s with 1 request in flight \(stall_s 10\)"):
            await s.check_health()
        # AsyncLLM's output handler pulls a batch with outputs from the engine core: progress
        engine.core.batches.put_nowait(SimpleNamespace(outputs=[object()], scheduler_stats=None))
        assert (await engine._engine_client.engine_core.get_output_async()).outputs
        await s.check_health()
        clock.t += 10
        engine.core.batches.put_nowait(SimpleNamespace(outputs=[], scheduler_stats=object()))  # stats only
        await engine._engine_client.engine_core.get_output_async()
        with pytest.raises(Stalled):
            await s.check_health()
        engine.release.set()
        rest = [item async for item in stream]
        assert "content" in str(rest) and dog.in_flight == 0
        await s.check_health()  # nothing in flight: never stalled
        engine.dead = True
        with pytest.raises(RuntimeError, match="EngineDeadError"):  # Ray's check first, as before
            await s.check_health()

    asyncio.run(main())


def test_off_the_watchdog_never_fails_the_health_check():
    async def main():
        s = server()
        s.engine = FakeEngine()
        body = ChatCompletionRequest(model="availproof-tiny", messages=[{"role": "user", "content": "x"}],
                                     stream=True)
        stream = await s.chat(body, None)
        await stream.__anext__()
        await stream.__anext__()
        s.progress_watchdog.clock.t += 3600
        await s.check_health()
        assert s.progress_watchdog.in_flight == 1
        await stream.aclose()
        assert s.progress_watchdog.in_flight == 0

    asyncio.run(main())


def test_an_engine_without_the_output_seam_is_watched_by_its_streams_alone():
    assert observe_engine_outputs(SimpleNamespace(), Watchdog()) is False


# ---------------------------------------------------------------- the watchdog v2 in the same LLMServer


def server_v2(stall_s=10, beat=None):
    s = server(stall_s)
    s._availproof_watchdog_v2 = WatchdogV2(clock=s.progress_watchdog.clock, heartbeat=lambda: beat)
    s.reconfigure({"stall_s": stall_s, "watchdog": 2}, rank=None)
    return s


def test_v2_selected_in_place_turns_v1_off():
    s = server_v2()
    assert s.progress_watchdog.stall_s is None and s.progress_watchdog_v2.stall_s == 10.0
    s.reconfigure({"stall_s": 10}, rank=None)
    assert s.progress_watchdog.stall_s == 10.0 and s.progress_watchdog_v2.stall_s is None


def test_on_stall_exit_reaches_the_llm_server_s_v2_in_place():
    s = server_v2()
    s.reconfigure({"stall_s": 10, "watchdog": 2, "on_stall": "exit"}, rank=None)
    assert (s.progress_watchdog_v2.stall_s, s.progress_watchdog_v2.on_stall) == (10.0, "exit")
    s.reconfigure({"stall_s": 10, "watchdog": 2}, rank=None)
    assert s.progress_watchdog_v2.on_stall == "fail"
    with pytest.raises(ValueError, match="on_stall"):
        s.reconfigure({"stall_s": 10, "on_stall": "exit"}, rank=None)


def test_v2_sees_a_stream_stuck_while_the_engine_steps_and_its_prompt_tokens():
    async def main():
        beat = Beat(1, 50.0, None, 0.01)
        s = server_v2(beat=beat)
        s.engine = FakeEngine()
        dog = s.progress_watchdog_v2
        body = ChatCompletionRequest(model="availproof-tiny", stream=True,
                                     messages=[{"role": "user", "content": "x" * 400}])
        stream = await s.chat(body, None)
        await stream.__anext__()  # who served: not a token
        await stream.__anext__()  # the first token
        (flight,) = dog._flights.values()
        assert flight.prompt_tokens == 100 and flight.tokens == 1  # 400 characters / 4
        pull = asyncio.ensure_future(stream.__anext__())  # the client asks for the next: it never comes
        await asyncio.sleep(0)
        dog.clock.t += 10
        s._availproof_watchdog_v2.heartbeat = lambda: beat._replace(last=dog.clock.t)  # the engine steps
        with pytest.raises(Stalled, match=r"^stuck stream: 1 stream had no token for 10\.0 s"):
            await s.check_health()
        pull.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pull
        await stream.aclose()  # the client left: nothing in flight, nothing stuck
        assert dog.in_flight == 0
        await s.check_health()

    asyncio.run(main())


def test_v2_s_canary_is_one_token_straight_to_vllm(monkeypatch):
    asked = []

    async def generate(prompt, params, request_id):
        asked.append((prompt, params.max_tokens, request_id))
        yield object()

    async def main():
        s = server_v2()
        s.engine = FakeEngine()
        s.engine._engine_client.generate = generate
        s.progress_watchdog_v2.clock.t += 10  # idle since the replica started
        await s.check_health()  # starts it in the background
        await asyncio.sleep(0.01)
        return s.progress_watchdog_v2

    dog = asyncio.run(main())
    assert dog.canaries == 1 and dog.canary_since is None and dog.canary_failure is None
    assert [(p, n) for p, n, _ in asked] == [("ok", 1)] and asked[0][2].startswith("availproof-canary-")


@pytest.mark.parametrize("request_, tokens", [
    (SimpleNamespace(messages=[{"content": "a" * 40}, {"content": None}]), 10),
    (SimpleNamespace(prompt=[1, 2, 3]), 3), (SimpleNamespace(prompt="b" * 20), 5), (None, 1)])
def test_prompt_tokens_are_counted_or_estimated(request_, tokens):
    assert prompt_tokens_of(request_) == tokens
