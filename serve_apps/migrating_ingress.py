"""The migrating ingress (issue 47): a Serve deployment in front of the stream target's engine replicas, so that a
stream whose replica breaks goes on from another one.

With ``app.migration: {limit: N}`` in an experiment (:mod:`serve_apps.config`), the stream target app is two
deployments: ``MigratingIngress`` (this one: the app's route prefix, the FastAPI app) and ``StreamTarget`` (the
engine replicas: their zone placement, health checks and watchdog ``user_config`` as without migration), which the
ingress calls through a ``DeploymentHandle`` (:meth:`serve_apps.stream_target.StreamReplica.answer`; the
deployment :data:`serve_apps.stream_target.StreamEngine`, a FastAPI ingress no more: Serve takes one per app). The app's
name and route stay; the rig lists and picks the engine replicas by their deployment's name
(:data:`chaos.system.placement.MODEL_DEPLOYMENTS`), never the ingress's.

It forwards ``/v1/completions`` and ``/v1/chat/completions`` (streamed or not), ``/v1/models`` and ``/-/whoami``
(the engine replica's). Every answer is spliced by :class:`serve_apps.migration_splice.Splice`: on a break (the
handle raised because the replica died, an ``EngineDeadError`` from a dead or errored engine, a stream that ended
without its last token) a continuation goes to another replica, up to ``limit`` times; the module's doc there
says the markers (``"migrated": k``, ``"migration_refused": why``), the routing away from the failed replica (a
continuation that lands on it, or fails before its first token, is sent again within 10 s, not counted as a
migration) and what is refused (:mod:`serve_apps.migration_refusal`).

The HTTP answer is :func:`serve_apps.migration_response.respond`'s (the vLLM app's migrating ingress,
:mod:`serve_apps.llm_migrating`, shares it). A non-streamed request migrates too: the ingress asks the engine for
a stream (with its usage) and collects it (:func:`serve_apps.migration_splice.collect`) into the JSON answer, which
carries ``"migrated": k`` when it did.

Served-by headers (:mod:`serve_apps.served_by`) name the engine replica, never the ingress: a non-streamed
answer's the last one's (after a migration, the one that finished it); a stream's are sent before its first event,
so they name the replica that began it, and each continuation's first event names the one serving from there
(``"served_by"``, the same headers as a JSON object).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve

from serve_apps.migration_response import respond
from serve_apps.migration_splice import Policy
from serve_apps.stream_target import StreamEngine

api = FastAPI(title="availproof migrating ingress")


class HandleTransport:
    """The splice's transport over a Serve ``DeploymentHandle`` of the engine deployment (streamed calls of its
    ``answer``)."""

    def __init__(self, handle):
        self.handle = handle.options(stream=True)

    def open(self, body: dict, chat: bool):
        return self.handle.answer.remote(body, chat)


@serve.deployment(name="MigratingIngress")
@serve.ingress(api)
class MigratingIngress:
    def __init__(self, engine, limit: int = 1, default_max_tokens: int | None = 16, retry_deadline_s: float = 10.0):
        self.engine = engine
        self.policy = Policy(limit=limit, app="stream", default_max_tokens=default_max_tokens,
                             retry_deadline_s=retry_deadline_s)

    @api.get("/v1/models")
    async def models(self):
        return await self.engine.models.remote()

    @api.get("/-/whoami")
    async def whoami(self):
        return await self.engine.whoami.remote()

    @api.post("/v1/completions")
    async def completions(self, request: Request):
        return await self._forward(request, chat=False)

    @api.post("/v1/chat/completions")
    async def chat(self, request: Request):
        return await self._forward(request, chat=True)

    async def _forward(self, request: Request, chat: bool):
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON", "type": "invalid_request_error"}}, 400)
        if not isinstance(body, dict):
            return JSONResponse({"error": {"message": "body must be a JSON object", "type": "invalid_request_error"}},
                                400)
        return await respond(HandleTransport(self.engine), body, chat, self.policy)


def app_builder(args: dict) -> serve.Application:
    """Import path for Serve configs with migration on: ``serve_apps.migrating_ingress:app_builder``. ``args``: the
    stream target's arguments and ``migration`` (``{"limit": N}``)."""
    args = dict(args or {})
    migration = args.pop("migration", None) or {}
    return MigratingIngress.bind(StreamEngine.bind(**args), limit=int(migration.get("limit", 1)))
