"""A model-free token-streaming target: a real Ray Serve deployment with the OpenAI surface.

For clusters that cannot run a model (kind, fast CI): it waits a configurable "prefill"
delay, then emits one token every ``token_s`` seconds with multiplicative jitter (the i-th token a
function of the prompt and i alone, :mod:`serve_apps.stream_tokens`, so a client can check each one), over
``/v1/completions`` and ``/v1/chat/completions`` (SSE streaming or not) and lists its one
model at ``/v1/models``. It is a load target with realistic timing, not a fake vLLM: it
computes nothing and says so in every response (``system_fingerprint``).

A migrating ingress (:mod:`serve_apps.migrating_ingress`, ``app.migration``) calls :meth:`StreamTarget.answer`
through a Serve handle instead of HTTP, and sends a broken stream's continuation to another replica: this target
continues it faithfully, its tokens going on at the original answer's index k (a chat whose last message is the
assistant's with ``continue_final_message``; a completion with ``continuation_of_prompt_chars``:
:func:`serve_apps.continuation.target_prompt`).

``/-/whoami`` tells which replica, process, node and zone answered (for placement checks); every
answer to a request says which replica, zone, region and app version served it in its headers
(:mod:`serve_apps.served_by`).

Each replica simulates vLLM's prefix cache (:mod:`serve_apps.prefix_cache`: an LRU of prefix block
hashes): the first token waits ``prefill_s`` plus ``uncached_token_s`` per prompt token not
served from the cache, and the usage reports the cached ones
(``usage.prompt_tokens_details.cached_tokens``). A prompt whose tokens (words) plus ``max_tokens``
pass ``max_model_len`` is refused with a 400, as vLLM refuses it.

Each replica reads its weights whole at its start (:mod:`serve_apps.stream_weights`; the deployment's
``weights_path``, the rig's file by default) and refuses to start (its constructor raises, as vLLM's does on a
truncated safetensors file) when they cannot be loaded: the ``restart-fails`` scope's hook. It refuses to start too
when its engine fails as it starts, its node's device lost (``device-loss``, :mod:`serve_apps.device_loss`).

With ``ranks`` N >= 2 (``app.ranks``) its engine is a rank group (:mod:`serve_apps.stream_ranks`): the engine child and
N - 1 rank processes that must each complete every step, as a tensor-parallel vLLM engine's workers (``rank-hang``,
``rank-death``); a rank that died ends the engine (``engine rank died``), so its health check fails.

Each replica runs an engine child process (:mod:`serve_apps.stream_engine`) and depends on it as a
vLLM replica depends on its EngineCore, every token of every request (streamed or not) going through it:
the engine steps (every 5 ms) and a token goes out once its delay elapsed and the engine stepped since the
request's previous token:

- engine **stopped** (the ``engine`` scope SIGSTOPs the child alone, as it stops vLLM's EngineCore): no
  token comes out for any request from then on; requests in flight and new ones wait, then go on once it
  continues; the health check passes (vLLM's does: a gray failure);
- engine **slowed** (``engine-slow``: every step F times as long, from inside, and each token's delay F times: its
  streams F times slower, evenly; ``engine-stutter``: a duty cycle of SIGSTOP and SIGCONT: tokens come out only
  while it runs, so its streams slow by about the cycle's factor, in bursts, as vLLM's do);
- engine **errored** (``engine-error``: SIGUSR1 to the child, which leaves its tombstone,
  :mod:`serve_apps.engine_faults`) or
  **dead** (``engine-crash``: SIGKILL): requests fail, a stream in flight ending with an error event
  (as vLLM's does), a new request with a 500, the message saying which (``engine error (injected)``,
  ``engine process died``); the health check fails, so Serve replaces the replica.

The progress watchdog (:mod:`serve_apps.watchdog`, off unless the deployment's ``user_config`` sets
``stall_s``) fails the health check of a replica with requests in flight and no token for ``stall_s``; with
``"watchdog": 2`` in the ``user_config``, v2 (:mod:`serve_apps.watchdog_v2`) instead: the engine child's
steps are its heartbeat (:meth:`serve_apps.stream_engine.Steps.beat`), each request is watched from its
admission (its prompt's words its prompt tokens), and its idle canary is one token of the engine
(:meth:`StreamTarget.canary`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve

from serve_apps import continuation, served_by, stream_tokens, stream_weights, watchdog, watchdog_v2
from serve_apps.prefix_cache import PrefixCache
from serve_apps.stream_engine import EngineDead, EngineProcess, generate, wait_ready

FINGERPRINT = stream_tokens.FINGERPRINT

api = FastAPI(title="availproof stream target")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)


def _engine_dead(e: EngineDead) -> JSONResponse:
    return JSONResponse({"error": {"message": str(e), "type": "EngineDeadError"}}, status_code=500)


class StreamReplica:
    """The stream target's replica as written: served as its own FastAPI ingress (:data:`StreamTarget`), or behind the
    migrating ingress as a plain deployment of the same name (:data:`StreamEngine`: Serve takes one FastAPI
    ingress per app), called through its handle (:meth:`answer`)."""

    def __init__(self, model: str = "availproof-tiny", prefill_s: float = 0.05, token_s: float = 0.02,
                 jitter: float = 0.2, max_tokens_cap: int = 512, max_model_len: int = 512,
                 uncached_token_s: float = 0.002, block_tokens: int = 16, prefix_cache_blocks: int = 256,
                 weights_path: str | None = None, weights_load_s: float = 0.0, ranks: int = 1):
        # its weights read whole before anything starts, as vLLM reads its checkpoint: a replica that cannot load
        # them refuses to start (raises; restart-fails, serve_apps.stream_weights); the rig's file by default. The
        # read takes weights_load_s (the deployed app's: serve_apps.config.StreamOptions), as a checkpoint's does
        self.weights_path = weights_path or stream_weights.default_path()
        stream_weights.provision(self.weights_path)  # only where absent (a node's first start): the rig's file
        time.sleep(max(0.0, weights_load_s))
        self.weights_sha256 = stream_weights.load(self.weights_path)
        self.model = model
        self.max_model_len = max_model_len
        self.uncached_token_s = uncached_token_s
        self.cache = PrefixCache(prefix_cache_blocks, block_tokens)
        self._served: dict[str, dict] | None = None
        self.prefill_s = prefill_s
        self.token_s = token_s
        self.jitter = jitter
        self.cap = max_tokens_cap
        self.rng = random.Random()
        self.started = time.time()
        self.watchdog = watchdog.Watchdog()
        self.engine = EngineProcess(faults=True, ranks=ranks)  # ranks: its rank group (serve_apps/stream_ranks.py)
        self.watchdog_v2 = watchdog_v2.WatchdogV2(heartbeat=self.engine.steps.beat)
        # started: its engine-error hook is in place; or why not (a lost device, device-loss; an early end), at once
        why = self.engine.start_failure()
        if why is not None:
            self.engine.close()
            raise RuntimeError(why)

    def reconfigure(self, user_config, rank=None):
        """Serve's ``user_config``: ``stall_s`` turns the progress watchdog on (:mod:`serve_apps.watchdog`;
        ``"watchdog": 2``: :mod:`serve_apps.watchdog_v2`, the other one off; with it ``"on_stall": "exit"``). The
        ``rank`` parameter makes Serve call this on every replica start and every change of the user_config, also
        when it is removed (then with None: off), not only when one is set."""
        version, stall_s = watchdog_v2.config_of(user_config)
        self.watchdog.configure(stall_s if version == 1 else None)
        self.watchdog_v2.configure(stall_s if version == 2 else None, watchdog_v2.on_stall_of(user_config))

    async def check_health(self):
        """Serve's health check: fails once the engine errored or died, as vLLM's (``AsyncLLM.check_health``
        raises only once the engine errored: a hung engine is not noticed), and when the progress watchdog
        (if on: v1 or v2) says the engine stalled; v2 starts its idle canary from here when one is due."""
        reason = self.engine.reason()
        if reason is not None:
            raise RuntimeError(f"engine process {self.engine.pid}: {reason}")
        self.watchdog.check()
        self.watchdog_v2.maybe_canary(self.canary)  # a canary due starts first: a later one clears a failed one
        self.watchdog_v2.check()

    async def canary(self) -> None:
        """The idle canary of the watchdog v2: taken in by the engine (a stalled one never does), then one token
        from it (its next step), nothing else."""
        await wait_ready(self.engine)
        async for _ in generate(self.engine, ["canary"], [0.0]):
            pass

    def __del__(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()

    def _served_desc(self) -> dict[str, dict]:
        """Who serves (serve_apps.served_by): this replica, its node's zone and region, the app version
        (``identity``), and what its engine resolved (``engine``: the simulated prefix cache; the deployment's
        request router)."""
        if self._served is None:
            engine = {"prefix_caching": self.cache.capacity > 0, "block_size": self.cache.block,
                      "kv_cache_tokens": self.cache.capacity_tokens, "router": served_by.router_name()}
            self._served = {"identity": served_by.identity(), "engine": engine}
        return self._served

    def _served_headers(self) -> dict[str, str]:
        desc = self._served_desc()
        return served_by.headers(desc["identity"], desc["engine"])

    async def answer(self, body: dict, chat: bool):
        """The answer to ``body`` for a migrating ingress's handle (``.options(stream=True)``): first this
        replica's description (``{served_by.MARK: ...}``, :mod:`serve_apps.served_by`), then the SSE chunks of a
        streamed answer, or one ``{"status": ..., "json": ...}`` for any other (an error, a non-streamed answer)."""
        yield {served_by.MARK: self._served_desc()}
        response = await self._respond(body, chat)
        if isinstance(response, StreamingResponse):
            async with contextlib.aclosing(response.body_iterator) as chunks:  # closed when the ingress lets go
                async for chunk in chunks:
                    yield chunk
        else:
            yield {"status": response.status_code, "json": json.loads(response.body)}

    def _delay(self, base: float) -> float:
        return max(0.0, base * (1 + self.rng.uniform(-self.jitter, self.jitter)))

    async def _parse(self, request: Request):
        try:
            body = await request.json()
        except ValueError:
            return None, _error(400, "body is not JSON")
        return self._check(body)

    def _check(self, body):
        if not isinstance(body, dict):
            return None, _error(400, "body must be a JSON object")
        if body.get("model", self.model) != self.model:
            return None, _error(404, f"model {body.get('model')!r} not found")
        n = body.get("max_tokens", 16)
        if not isinstance(n, int) or n < 1:
            return None, _error(400, "max_tokens must be a positive integer")
        return body, None

    @api.get("/v1/models")
    async def models(self):
        return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "availproof",
                                             "created": int(self.started)}]}

    @api.get("/-/whoami")
    async def whoami(self):
        import ray

        ctx = ray.get_runtime_context()
        labels = {}
        try:
            labels = ctx.get_node_labels()
        except Exception:  # noqa: BLE001 - labels are informative only
            pass
        return {"replica": serve.get_replica_context().replica_id.unique_id, "pid": os.getpid(),
                "node_id": ctx.get_node_id(), "zone": labels.get("zone"), "node": labels.get("node")}

    @api.post("/v1/completions")
    async def completions(self, request: Request):
        return await self._generate(request, chat=False)

    @api.post("/v1/chat/completions")
    async def chat(self, request: Request):
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, chat: bool):
        response = await self._answer(request, chat)
        response.headers.update(self._served_headers())
        return response

    async def _answer(self, request: Request, chat: bool):
        body, err = await self._parse(request)
        if err:
            return err
        return await self._respond(body, chat)

    async def _respond(self, body, chat: bool):
        body, err = self._check(body)
        if err:
            return err
        n = min(body.get("max_tokens", 16), self.cap)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        try:  # a continuation's answer goes on at index `start` of its original prompt's answer
            prompt, given, start = continuation.target_prompt(body, chat)
        except continuation.BadContinuation as e:
            return _error(400, str(e))
        tokens = given.split()  # every word it was given counts: the answer so far is prompt too, as in vLLM
        # a continuation's prompt: its original's words and the `start` answered (a completion's text follows its
        # prompt with no space between, so the given words alone would count one fewer)
        prompt_tokens = len(prompt.split()) + start if start else len(tokens)
        if prompt_tokens + body.get("max_tokens", 16) > self.max_model_len:
            return _error(400, f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                               f"requested {prompt_tokens + body.get('max_tokens', 16)} tokens ({prompt_tokens} in the "
                               f"messages, {body.get('max_tokens', 16)} in the completion).")
        key = stream_tokens.prompt_key(prompt)  # the answer is a function of the prompt and the index alone
        words = [stream_tokens.word(key, i) for i in range(start, start + n)]
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        try:
            # a request waiting for a hung engine is work in flight
            with self.watchdog.request(), self.watchdog_v2.request(prompt_tokens):
                await wait_ready(self.engine)
        except EngineDead as e:
            return _engine_dead(e)
        cached = self.cache.serve(tokens)
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
        prefill = self.prefill_s + (prompt_tokens - cached) * self.uncached_token_s
        if not body.get("stream"):
            try:
                out = [w async for w in self._tokens(words, prefill, prompt_tokens)]
            except EngineDead as e:
                return _engine_dead(e)
            text = "".join(w if start + i == 0 else " " + w for i, w in enumerate(out))
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": text, "finish_reason": "length"})
            return JSONResponse({"id": rid, "object": obj, "created": int(time.time()), "model": self.model,
                                 "system_fingerprint": FINGERPRINT, "choices": [choice], "usage": usage})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(self._events(rid, chat, words, usage, include_usage, prefill, prompt_tokens, start),
                                 media_type="text/event-stream")

    def _tokens(self, words: list[str], prefill: float, prompt_tokens: int = 1):
        """The request's tokens from the engine (:func:`serve_apps.stream_engine.generate`: one a step at most,
        none while it does not step), the first after the prefill, each seen by the watchdogs."""
        delays = [self._delay(prefill)] + [self._delay(self.token_s) for _ in words[1:]]
        return self.watchdog.watch(self.watchdog_v2.watch(generate(self.engine, words, delays),
                                                          prompt_tokens=prompt_tokens))

    async def _events(self, rid, chat, words, usage, include_usage, prefill, prompt_tokens=1, start=0):
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())

        def event(choices, **extra):
            payload = {"id": rid, "object": obj, "created": created, "model": self.model,
                       "system_fingerprint": FINGERPRINT, "choices": choices, **extra}
            return f"data: {json.dumps(payload)}\n\n"

        i = 0
        try:
            async with contextlib.aclosing(self._tokens(words, prefill, prompt_tokens)) as tokens:  # closed with the stream
                async for w in tokens:
                    text = w if start + i == 0 else " " + w  # the answer's first token bare, as it began
                    finish = "length" if i == len(words) - 1 else None
                    choice = ({"index": 0, "delta": {"content": text}, "finish_reason": finish} if chat
                              else {"index": 0, "text": text, "finish_reason": finish})
                    yield event([choice])
                    i += 1
        except EngineDead as e:  # as vLLM ends a stream whose engine died: an error event, then [DONE]
            yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'EngineDeadError', 'code': 500}})}\n\n"
            yield "data: [DONE]\n\n"
            return
        if include_usage:
            yield event([], usage=usage)
        yield "data: [DONE]\n\n"


# the app on its own: the replica is the route prefix's FastAPI ingress
StreamTarget = serve.deployment(name="StreamTarget")(serve.ingress(api)(StreamReplica))
# behind serve_apps.migrating_ingress: the same replica, the same deployment name (the rig lists and picks the engine
# replicas by it), no FastAPI ingress of its own
StreamEngine = serve.deployment(name="StreamTarget")(StreamReplica)


def app_builder(args: dict) -> serve.Application:
    """Import path for Serve configs: ``serve_apps.stream_target:app_builder`` (the target its own ingress;
    with migration, ``serve_apps.migrating_ingress:app_builder`` puts one in front of it)."""
    return StreamTarget.bind(**(args or {}))
