"""The vLLM app's two classes, each Ray Serve LLM's own with one addition: the response says who served it.

``build_openai_app`` builds two deployments: the OpenAI ingress (``OpenAiIngress``, a FastAPI
app) and the engine (``LLMServer``), the ingress calling the engine through a handle. Which
``LLMServer`` replica a request reached (the one holding the engine and its prefix cache) is
known only to that replica, and response headers can only be set by the ingress. Serve LLM's own
extension points carry it across, with nothing else changed (``serve_apps.llm_app`` names them):

- ``LLMConfig.server_cls`` = :class:`LLMServer`: its ``chat`` and ``completions`` yield one
  ``{"availproof_served_by": ...}`` item ahead of the engine's stream: the replica, node, zone,
  region and app version (:func:`serve_apps.served_by.identity`) and what the engine resolved
  (prefix caching, block size, KV cache size in tokens, ``max_model_len``, the deployment's request router);
- ``ingress_cls_config.ingress_cls`` = :class:`OpenAiIngress`: it takes that item off the
  stream before anything else sees it and sets the ``x-availproof-*`` headers
  (:mod:`serve_apps.served_by`) on the response it returns.

The classes keep Ray's names (``LLMServer``, ``OpenAiIngress``), so the deployments keep theirs
(``LLMServer:<model>``, ``OpenAiIngress``). A request the ingress turns into an error response
(the engine's first answer an error) carries no headers. This does not apply to Serve LLM's direct
streaming mode (``RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING``, where vLLM's own FastAPI app answers),
which the rig does not use.
"""

from __future__ import annotations

import contextvars

from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress as _OpenAiIngress
from ray.llm._internal.serve.core.server.llm_server import LLMServer as _LLMServer

from serve_apps import served_by
from serve_apps.served_by import engine_info, prepend_served, set_headers, strip_served

_HOLDER: contextvars.ContextVar[dict | None] = contextvars.ContextVar("availproof_served_by", default=None)


class LLMServer(_LLMServer):
    """Ray Serve LLM's ``LLMServer``; ``chat`` and ``completions`` say first which replica serves."""

    _availproof_served: dict | None = None

    def _served(self) -> dict:
        if self._availproof_served is None:
            self._availproof_served = {"identity": served_by.identity(), "engine": engine_info(self.engine)}
        return self._availproof_served

    async def chat(self, request, raw_request_info=None):
        return prepend_served(self._served(), await super().chat(request, raw_request_info))

    async def completions(self, request, raw_request_info=None):
        return prepend_served(self._served(), await super().completions(request, raw_request_info))


class OpenAiIngress(_OpenAiIngress):
    """Ray Serve LLM's ``OpenAiIngress``; its responses carry the serving replica's headers."""

    async def _get_response(self, *, body, call_method, raw_request=None):
        stream = super()._get_response(body=body, call_method=call_method, raw_request=raw_request)
        async for item in strip_served(stream, _HOLDER.get()):
            yield item

    async def _process_llm_request(self, body, call_method, raw_request=None):
        holder: dict = {}
        token = _HOLDER.set(holder)
        try:
            response = await super()._process_llm_request(body, call_method=call_method, raw_request=raw_request)
        finally:
            _HOLDER.reset(token)
        set_headers(response, holder)
        return response
