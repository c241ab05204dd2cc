"""The vLLM app's migrating ingress (issue 47): Ray Serve LLM's OpenAI ingress whose chat and completions splice a
stream broken by its ``LLMServer`` replica over a continuation sent to another one.

With ``app.migration: {limit: N}`` and ``--app llm`` (:mod:`serve_apps.config`), the app is the same
``build_openai_app`` with the same two deployments: the OpenAI ingress, whose class is :class:`OpenAiIngress` here
(through Serve LLM's own ``ingress_cls_config``, the limit in its ``ingress_extra_kwargs``: ``migration_limit``),
and the engine replicas, Ray's ``LLMServer`` as the rig's (:mod:`serve_apps.llm_served`), unchanged. The class
keeps Ray's name, so the deployments keep theirs (``OpenAiIngress``, ``LLMServer:<model>``): the rig lists, picks
and kills the engine replicas by their deployment's name (:data:`chaos.system.placement.MODEL_DEPLOYMENTS`),
never the ingress, with migration on or off.

What it changes is ``/v1/chat/completions`` and ``/v1/completions``: instead of Ray's one handle call, the
request goes through :func:`serve_apps.migration_response.respond` (the stream target's migrating ingress's too)
over :class:`LLMServerTransport`, the ``LLMServer`` deployment's handle (``stream=True``, its ``chat`` or
``completions`` with a ``ChatCompletionRequest`` or ``CompletionRequest``, as Ray's ingress calls it). The splice
(:mod:`serve_apps.migration_splice`) sees the engine's items as the stream target's: the replica's description
first (:mod:`serve_apps.served_by`), then SSE strings (Ray batches them in lists: flattened here), or an
``ErrorResponse`` (turned into ``{"status": code, "json": ...}``). A **break** on this path: the handle raises
(the replica died: ``ActorDiedError``, or ``RayTaskError`` wrapping vLLM's ``EngineDeadError`` when the engine was
already dead as the request came), or an error event of 500 (vLLM's stream generator turns the engine's
``EngineDeadError`` into ``{"error": {"type": "InternalServerError", "code": 500, "message": "EngineCore
encountered an issue..."}}``), or the stream ends without its ``finish_reason``.

The policy is vLLM's: the ``sampling`` refusal applies (temperature above 0 or not given,
:mod:`serve_apps.migration_refusal`), no default budget (``max_tokens`` absent: the context is the limit, and the
continuation's prompt grows by as many tokens as its answer is short of), and tokens are counted by vLLM's own
count (``continuous_usage_stats``, :attr:`serve_apps.migration_splice.Policy.usage_tokens`). The request as the
client wrote it (its JSON, not the parsed model's defaults) is what is continued and judged. Everything else
(``/v1/models``, errors before the first event, the served-by headers, Ray's request timeout until the response
starts) is as without migration; a non-streamed request is asked of the engine as a stream and collected.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from ray.llm._internal.serve.constants import DEFAULT_LLM_ROUTER_HTTP_TIMEOUT
from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest, CompletionRequest
from ray.llm._internal.serve.core.ingress.ingress import router_request_timeout
from ray.llm._internal.serve.core.ingress.utils import _sanitize_chat_completion_request as sanitize_chat
from ray.llm._internal.serve.core.protocol import RawRequestInfo
from ray.serve._private.http_util import session_id_from_headers

from serve_apps import llm_served, served_by
from serve_apps.migration_response import respond
from serve_apps.migration_splice import Policy


def splice_items(item: Any) -> list[Any]:
    """An item of ``LLMServer``'s stream as the splice's items: its description and SSE strings as they are, a
    batch (a list) flattened, a pydantic answer as ``{"status", "json"}`` (an ``ErrorResponse``: its code, 500
    when it gives none; a whole answer: 200)."""
    if isinstance(item, list):
        return [x for i in item for x in splice_items(i)]
    if isinstance(item, (str, bytes)) or served_by.served_item(item) is not None:
        return [item]
    if hasattr(item, "model_dump"):
        payload = item.model_dump()
        err = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(err, dict):
            code = err.get("code")
            return [{"status": code if isinstance(code, int) and code >= 400 else 500, "json": payload}]
        return [{"status": 200, "json": payload}]
    return [item]


def engine_request(body: dict[str, Any], chat: bool, request_id: str | None = None):
    """``body`` as the request model ``LLMServer`` takes (Ray's, vLLM's fields); ``request_id`` when given and the
    body sets none (a continuation's own id, so that the engine's logs tell it from the original). Raises what the
    model's validation raises for a body it refuses (pydantic's ``ValidationError``, vLLM's ``VLLMValidationError``)."""
    if request_id and "request_id" not in body:
        body = {**body, "request_id": request_id}
    if chat:
        return sanitize_chat(ChatCompletionRequest.model_validate(body))
    return CompletionRequest.model_validate(body)


class LLMServerTransport:
    """The splice's transport over a handle of the ``LLMServer`` deployment (configured ``stream=True``):
    ``open(body, chat)`` calls its ``chat`` or ``completions`` and gives its items as :func:`splice_items`. The
    first call is the original request (``LLMServer`` stamps it with the Serve request id, as without migration);
    each later one, a continuation or a re-send, gets ``<request id>-m<n>``."""

    def __init__(self, handle, raw_request_info=None, request_id: str | None = None):
        self.handle = handle
        self.raw_request_info = raw_request_info
        self.request_id = request_id
        self.opened = 0

    def open(self, body: dict[str, Any], chat: bool):
        self.opened += 1
        rid = f"{self.request_id}-m{self.opened - 1}" if self.opened > 1 and self.request_id else None
        return self._answer(body, chat, rid)

    async def _answer(self, body: dict[str, Any], chat: bool, rid: str | None):
        try:
            request = engine_request(body, chat, rid)
        except Exception as e:  # noqa: BLE001 - pydantic's ValidationError, vLLM's VLLMValidationError: a 400
            # the engine's request model refuses it: the request's fault, never a break
            yield {"status": 400, "json": {"error": {"message": str(e)[:500], "type": "BadRequestError",
                                                     "code": 400}}}
            return
        response = getattr(self.handle, "chat" if chat else "completions").remote(request, self.raw_request_info)
        finished = False
        try:
            async for item in response:
                for x in splice_items(item):
                    yield x
            finished = True
        finally:
            if not finished and hasattr(response, "cancel"):  # closed early (routed away, the client gone)
                response.cancel()


async def request_json(request: Request, parsed) -> dict[str, Any]:
    """The request's JSON as the client sent it (FastAPI read it already: Starlette keeps it), else the parsed
    model's fields that were set."""
    try:
        body = await request.json()
        if isinstance(body, dict):
            return body
    except Exception:  # noqa: BLE001 - the parsed model is the fallback
        pass
    return parsed.model_dump(exclude_unset=True, mode="json")


def serve_request_id() -> str | None:
    """This request's Serve request id (the one ``LLMServer`` stamps the original with), None outside a request."""
    try:
        from ray.llm._internal.serve.utils.server_utils import get_serve_request_id

        return get_serve_request_id() or None
    except Exception:  # noqa: BLE001 - an id for logs only
        return None


class OpenAiIngress(llm_served.OpenAiIngress):
    """Ray Serve LLM's ``OpenAiIngress`` (the rig's, with the served-by headers) whose chat and completions migrate
    a broken stream to another ``LLMServer`` replica, up to ``migration_limit`` times (the module's doc)."""

    def __init__(self, llm_deployments, model_cards, *, lora_paths=None, migration_limit: int = 1,
                 retry_deadline_s: float = 10.0, **kwargs):
        super().__init__(llm_deployments, model_cards, lora_paths=lora_paths, **kwargs)
        self.migration_policy = Policy(limit=int(migration_limit), app="llm", default_max_tokens=None,
                                       retry_deadline_s=float(retry_deadline_s), usage_tokens=True)

    async def completions(self, body: CompletionRequest, request: Request):
        return await self._migrating(body, request, chat=False)

    async def chat(self, body: ChatCompletionRequest, request: Request):
        return await self._migrating(body, request, chat=True)

    async def _migrating(self, body, request: Request, chat: bool):
        raw = await request_json(request, body)
        handle = self._get_configured_serve_handle(await self._get_model_id(body.model))
        session_id = session_id_from_headers(request.headers)  # as Ray's ingress: session-aware routers see it
        if session_id:
            handle = handle.options(session_id=session_id)
        transport = LLMServerTransport(handle, RawRequestInfo.from_starlette_request(request), serve_request_id())
        async with router_request_timeout(DEFAULT_LLM_ROUTER_HTTP_TIMEOUT):
            return await respond(transport, raw, chat, self.migration_policy)
