"""The vLLM app's served-by headers (serve_apps/llm_served.py) through Ray Serve LLM's own classes:
the rig's LLMServer says who it is ahead of its stream, the rig's OpenAiIngress takes that off and
sets the x-availproof-* headers, whatever follows is what Ray's ingress makes of it. No Ray, no
engine: a fake engine and a fake handle stand in for them (importing Serve LLM takes ~10 s)."""

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("ray.llm")
# Ray's LLMServer has an async __del__, never awaited outside Serve
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

from ray.llm._internal.serve.core.configs.llm_config import LLMConfig  # noqa: E402
from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest, ModelCard  # noqa: E402

from serve_apps import llm_app, served_by  # noqa: E402
from serve_apps.config import AppSpec, LLMOptions, _deployment_common  # noqa: E402
from serve_apps.llm_served import LLMServer, OpenAiIngress  # noqa: E402


class FakeEngine:
    def __init__(self):
        cache = SimpleNamespace(enable_prefix_caching=True, block_size=128, num_gpu_blocks=20)
        self._engine_client = SimpleNamespace(vllm_config=SimpleNamespace(
            cache_config=cache, model_config=SimpleNamespace(max_model_len=512)))

    async def chat(self, request, raw):
        for t in ("a", "b"):
            yield f'data: {{"choices":[{{"delta":{{"content":"{t}"}}}}]}}\n\n'


class Handle:
    """What the ingress calls: our LLMServer's chat, as Serve would stream it."""

    def __init__(self, server):
        self.chat = SimpleNamespace(remote=lambda body, raw: self._stream(server, body, raw))

    def options(self, **kw):
        return self

    @staticmethod
    async def _stream(server, body, raw):
        async for item in await server.chat(body, raw):
            yield item


def test_the_config_names_the_rigs_classes_which_keep_rays_names():
    spec = AppSpec(app="llm")
    spec.llm = LLMOptions(model_path="/tmp/model")
    cfg = LLMConfig.model_validate(llm_app.llm_config(spec, _deployment_common(spec)))
    assert cfg.server_cls is LLMServer and LLMServer.__name__ == "LLMServer"
    assert OpenAiIngress.__name__ == "OpenAiIngress"
    assert cfg.engine_kwargs["enable_prefix_caching"] and cfg.engine_kwargs["enable_prompt_tokens_details"]


def test_a_streamed_chat_carries_the_serving_replicas_headers_and_nothing_more():
    spec = AppSpec(app="llm")
    spec.llm = LLMOptions(model_path="/tmp/model")
    server = LLMServer.sync_init(LLMConfig.model_validate(llm_app.llm_config(spec, _deployment_common(spec))),
                                 engine_cls=lambda c: None)
    server.engine = FakeEngine()
    ingress = OpenAiIngress(llm_deployments={"availproof-tiny": Handle(server)},
                            model_cards={"availproof-tiny": ModelCard(id="availproof-tiny", object="model",
                                                                      owned_by="x", permission=[], metadata={})})
    body = ChatCompletionRequest(model="availproof-tiny", messages=[{"role": "user", "content": "x"}], stream=True)

    async def main():
        resp = await ingress._process_llm_request(body, call_method="chat", raw_request=None)
        return resp, [c async for c in resp.body_iterator]

    resp, chunks = asyncio.run(main())
    assert resp.headers[served_by.VERSION] == "initial"  # outside a replica: no id, no labels, the version
    engine = served_by.parse_engine(resp.headers[served_by.ENGINE])
    assert engine == {"router": None, "prefix_caching": True, "block_size": 128, "kv_cache_tokens": 2560,
                      "max_model_len": 512}
    text = "".join(chunks)
    assert served_by.MARK not in text and text.endswith("data: [DONE]\n\n") and '"content":"a"' in text
