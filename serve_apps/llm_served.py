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

The engine's ``LLMServer`` also carries the progress watchdog (:mod:`serve_apps.watchdog`, off unless the
deployment's ``user_config`` sets ``stall_s``, read in :meth:`LLMServer.reconfigure`): each ``chat`` and
``completions`` stream is a request in flight while it runs, and each item it yields is progress; so is
each batch of outputs vLLM's ``AsyncLLM`` pulls from its engine core (``engine_core.get_output_async``, the
one place every token of every request comes out, streamed or not: a non-streamed answer yields its one
item only at its end). :meth:`LLMServer.check_health` asks Ray's (the engine dead) and then the watchdog.

With ``"watchdog": 2`` in the ``user_config`` the progress watchdog v2 (:mod:`serve_apps.watchdog_v2`) is on
instead: its heartbeat is the engine's step counter that the engine-side hook writes
(:mod:`serve_apps.heartbeat`, the file of the replica's child process whose command line says
``EngineCore``: :meth:`LLMServer.engine_beat`); each ``chat`` and ``completions`` stream is a request from
its first item to its end, its prompt tokens estimated from its text (characters / 4), a non-streamed one
watched by the heartbeat alone (its one item comes at its end); its idle canary is one request of one
token straight to vLLM's ``AsyncLLM.generate`` (:meth:`LLMServer.canary`).
"""

from __future__ import annotations

import contextvars
import logging
import os
import uuid

from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress as _OpenAiIngress
from ray.llm._internal.serve.core.server.llm_server import LLMServer as _LLMServer

from serve_apps import engine_faults, heartbeat, served_by, watchdog, watchdog_v2
from serve_apps.served_by import engine_info, prepend_served, set_headers, strip_served

_HOLDER: contextvars.ContextVar[dict | None] = contextvars.ContextVar("availproof_served_by", default=None)
logger = logging.getLogger("ray.serve")


class LLMServer(_LLMServer):
    """Ray Serve LLM's ``LLMServer``; ``chat`` and ``completions`` say first which replica serves, and the
    progress watchdog sees them."""

    _availproof_served: dict | None = None
    _availproof_watchdog: watchdog.Watchdog | None = None
    _availproof_watchdog_v2: watchdog_v2.WatchdogV2 | None = None
    _availproof_beat: heartbeat.Reader | None = None

    def _served(self) -> dict:
        if self._availproof_served is None:
            self._availproof_served = {"identity": served_by.identity(), "engine": engine_info(self.engine)}
        return self._availproof_served

    @property
    def progress_watchdog(self) -> watchdog.Watchdog:
        if self._availproof_watchdog is None:
            self._availproof_watchdog = watchdog.Watchdog()
        return self._availproof_watchdog

    @property
    def progress_watchdog_v2(self) -> watchdog_v2.WatchdogV2:
        if self._availproof_watchdog_v2 is None:
            self._availproof_watchdog_v2 = watchdog_v2.WatchdogV2(heartbeat=self.engine_beat)
        return self._availproof_watchdog_v2

    def engine_beat(self) -> heartbeat.Beat | None:
        """The engine's step heartbeat: the file of this replica's ``EngineCore`` child (found at the first
        look that finds one); None while there is none (no plugin, an in-process engine)."""
        if self._availproof_beat is None:
            pids = heartbeat.engine_children(os.getpid())
            if not pids:
                return None
            self._availproof_beat = heartbeat.Reader(pids[0], engine_faults.heartbeat_path(pids[0]))
        return self._availproof_beat.read()

    async def canary(self) -> None:
        """The idle canary of the watchdog v2: one request of a one-word prompt and one output token, to
        vLLM's ``AsyncLLM`` (``engine._engine_client``) directly."""
        from vllm import SamplingParams

        client = self.engine._engine_client
        async for _ in client.generate("ok", SamplingParams(max_tokens=1), f"availproof-canary-{uuid.uuid4().hex}"):
            pass

    async def start(self):
        await super().start()
        observe_engine_outputs(self.engine, self.progress_watchdog, self.progress_watchdog_v2)

    def reconfigure(self, user_config, rank=None):
        """Serve's ``user_config``: ``stall_s`` turns the progress watchdog on (``"watchdog": 2``: v2, the
        other one off; with it ``"on_stall": "exit"``). The ``rank`` parameter makes Serve call this on every
        replica start and every change of the user_config, also when it is removed (then with None: off), not
        only when one is set."""
        version, stall_s = watchdog_v2.config_of(user_config)
        self.progress_watchdog.configure(stall_s if version == 1 else None)
        self.progress_watchdog_v2.configure(stall_s if version == 2 else None, watchdog_v2.on_stall_of(user_config))

    async def check_health(self) -> None:
        await super().check_health()  # raises once the engine errored (EngineDeadError)
        self.progress_watchdog.check()  # v1: requests in flight and no token came for stall_s
        # v2: a canary due starts first (a later one clears a failed one), then its four signals
        self.progress_watchdog_v2.maybe_canary(self.canary)
        self.progress_watchdog_v2.check()

    async def chat(self, request, raw_request_info=None):
        return self._watched(prepend_served(self._served(), await super().chat(request, raw_request_info)),
                             request)

    async def completions(self, request, raw_request_info=None):
        return self._watched(prepend_served(self._served(), await super().completions(request, raw_request_info)),
                             request)

    def _watched(self, stream, request=None):
        """``stream`` in flight for the watchdogs until it ends or is closed; its items, but the replica's
        description, are progress (v2: tokens of this request, its prompt tokens estimated)."""
        def is_token(item):
            return served_by.served_item(item) is None

        v2 = self.progress_watchdog_v2.watch(stream, is_token=is_token, prompt_tokens=prompt_tokens_of(request),
                                             streamed=bool(getattr(request, "stream", False)))
        return self.progress_watchdog.watch(v2, is_token=is_token)


def prompt_tokens_of(request) -> int:
    """A chat or completion request's prompt tokens before tokenizing: a list of ids counted, text estimated
    (:func:`serve_apps.watchdog_v2.estimated_tokens`)."""
    messages = getattr(request, "messages", None)
    if messages:
        return watchdog_v2.estimated_tokens(" ".join(
            str(m.get("content") or "") if isinstance(m, dict) else str(getattr(m, "content", "") or "")
            for m in messages))
    prompt = getattr(request, "prompt", None)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list):
        prompt = " ".join(str(p) for p in prompt)
    return watchdog_v2.estimated_tokens(str(prompt or ""))


def observe_engine_outputs(engine, *dogs) -> bool:
    """Every batch of outputs vLLM's ``AsyncLLM`` pulls from its engine core is progress for ``dogs``
    (:meth:`serve_apps.watchdog.Watchdog.progress`; v2's, where it has no heartbeat):
    ``engine`` (Serve LLM's ``VLLMEngine``) ``._engine_client`` (``AsyncLLM``) ``.engine_core``
    (``AsyncMPClient``) ``.get_output_async``, wrapped on that one instance (``AsyncLLM``'s output handler
    looks it up on each call: ``vllm/v1/engine/async_llm.py`` ``_run_output_handler``). A batch with
    ``outputs`` carries new tokens (or ends requests); one with only scheduler stats does not. Where that
    is not there (another engine), False: only the streams' items are progress."""
    core = getattr(getattr(engine, "_engine_client", None), "engine_core", None)
    get = getattr(core, "get_output_async", None)
    if get is None:
        logger.warning("progress watchdog: the engine's outputs are not observed (no engine_core."
                       "get_output_async); a non-streamed request longer than stall_s looks stalled")
        return False

    async def get_output_async():
        outputs = await get()
        if getattr(outputs, "outputs", None):
            for dog in dogs:
                dog.progress()
        return outputs

    core.get_output_async = get_output_async
    return True


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
