"""The scorecard's four dimensions (faults, detectors, loads, health-check periods), what each means on each app,
and the combinations that do not apply, each with its reason (never run as something else and reported as it).

Detectors. Serve calls each replica's ``check_health`` every ``health_check_period_s`` and takes a replica out
after ``SERVE_HEALTH_FAILURES`` failed (or timed-out) checks in a row; the rig cannot switch that off, so every
cell runs with it. What differs is what the replica's ``check_health`` looks at:

- ``none``: no progress detector (the app's ``stall_s`` unset). Stream target: ``StreamTarget.check_health``
  fails only once its engine child errored or died (modelled on vLLM's). vLLM app: ``LLMServer.check_health``,
  vLLM's ``AsyncLLM.check_health``, which fails only once the engine errored (EngineDeadError).
- ``serve``: Serve's own health check alone. Stream target: the same deployment as ``none`` (the replica's
  check is the engine-errored one above, nothing else can be taken away): not run twice, its figures are
  ``none``'s. vLLM app: not applicable: Serve LLM's ``LLMServer`` always asks vLLM's check_health; a replica
  with Serve's actor-liveness check alone is not what anyone deploys and the rig ships none.
- ``vllm``: vLLM's ``check_health``. vLLM app: the same deployment as ``none`` (Serve LLM's check *is*
  vLLM's): its figures are ``none``'s. Stream target: not applicable (no vLLM engine; the stream target's
  check modelled on it is ``none``).
- ``v1``: the progress watchdog v1 (``serve_apps/watchdog.py``: requests in flight and no token for
  ``stall_s``), ``app: {stall_s, watchdog: 1}``, both apps.
- ``v2``: the watchdog v2 (``serve_apps/watchdog_v2.py``: engine-step heartbeat, oldest request without a first
  token, per-stream token age, idle canary), ``app: {stall_s, watchdog: 2}``, both apps.
- ``v2-exit``: the watchdog v2 whose replica ends itself and its engine at the first check that finds a stall
  (``serve_apps/replica_exit.py``), ``app: {stall_s, watchdog: 2, on_stall: exit}``, both apps: Serve takes a dead
  actor out at that check instead of after ``SERVE_HEALTH_FAILURES`` failed ones.

Periods: ``default`` is Serve LLM's deployment default, health_check_period_s 10 and health_check_timeout_s 10
(Ray 2.60 ``ray/llm/_internal/serve/constants.py`` DEFAULT_HEALTH_CHECK_PERIOD_S / _TIMEOUT_S, env
RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_PERIOD_S / _TIMEOUT_S, applied in ``ray/llm/_internal/serve/core/server/
builder.py``; plain Serve's are 10 and 30, ``ray/serve/_private/constants.py``); ``apps`` is the rig's apps'
2 s and 5 s (:class:`serve_apps.config.AppSpec`).

Loads (each a change of the fault experiment's load, :meth:`chaos.core.run_spec.RunSpec.with_load`): ``steady`` the
experiment's own (8 req/s Poisson on the stream target, 2 on vLLM); ``sparse`` Poisson at 0.1 req/s (one
request per 10 s); ``none`` no traffic: the harness accepts no rate of 0 and sends its first request at 0, so a
constant rate of one request per twice the load's length: that one request falls in the warm-up, none after
(the hypothesis probes' own requests run before the injection and after the recovery window only); detection
is still measured, from the sampler (the capacity plane), not from requests. ``long-prefill``: 10 % of
requests with a prefill of at least 2 x stall_s; :func:`long_prefill_reason` says why no app reaches it.
"""

from __future__ import annotations

import json
from pathlib import Path

from serve_apps.config import AppSpec, StreamOptions

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SERVE_HEALTH_FAILURES = 3  # Ray 2.60 REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD (ray/serve/_private/constants.py)
SERVE_LLM_DEFAULT_PERIOD_S = 10.0  # Ray 2.60 ray/llm/_internal/serve/constants.py DEFAULT_HEALTH_CHECK_PERIOD_S
SERVE_LLM_DEFAULT_TIMEOUT_S = 10.0  # ... DEFAULT_HEALTH_CHECK_TIMEOUT_S
TEMPLATE_TOKENS = 8  # the chat template's tokens on the tiny model (chaos.load.workload.LoadShape.template_tokens)
LONG_PREFILL_SHARE = 0.10

# fault -> (its shipped experiment without a detector, what it is, or None and why it is not applicable)
FAULTS: dict[str, tuple[str | None, str]] = {
    "wedge": ("engine-wedge.json", "the engine's step blocked for good, I/O threads alive, never healed by the rig"),
    "stall": ("engine-stall.json", "admission stopped for good: running requests finish, new ones never start"),
    "garbage": ("engine-garbage.json", "wrong tokens at full speed for good, health check passing"),
    "straggler": ("engine-slow.json", "a straggler for 20 s: every engine step slowed evenly by its factor (4), "
                                      "then released by the engine itself"),
    "sigstop": ("engine-hang.json", "SIGSTOP of the engine process for 20 s, then SIGCONT (heals itself; a "
                                    "frozen process, not a wedge)"),
    "rank-hang": ("rank-hang.json", "one rank of a two-rank engine hung in its step for good (the engine waits in "
                                    "its collective, no timeout), never healed by the rig"),
}
DETECTORS = ("none", "serve", "vllm", "v1", "v2", "v2-exit")
WATCHDOGS = ("v1", "v2", "v2-exit")  # the detectors with a stall_s
LOADS = ("steady", "long-prefill", "sparse", "none")
PERIODS = {"default": (SERVE_LLM_DEFAULT_PERIOD_S, SERVE_LLM_DEFAULT_TIMEOUT_S),
           "apps": (AppSpec.health_check_period_s, AppSpec.health_check_timeout_s)}
SPARSE_RATE = 0.1


def detector_reason(detector: str, app: str) -> str | None:
    """Why ``detector`` is not run as a cell of its own on ``app`` (None: it is)."""
    if app == "stream" and detector == "serve":
        return ("the same deployment as none on the stream target (Serve's check cannot be turned off and the "
                "replica's check_health asks only whether its engine errored or died): not run twice, its figures "
                "are none's")
    if app == "stream" and detector == "vllm":
        return ("not applicable on the stream target: no vLLM engine (its check_health, modelled on vLLM's, is the "
                "none cell's)")
    if app == "llm" and detector == "serve":
        return ("not applicable on the vLLM app: Serve LLM's LLMServer.check_health always asks vLLM's; a replica "
                "with Serve's actor-liveness check alone is not deployed by anyone, and the rig ships none")
    if app == "llm" and detector == "vllm":
        return ("the same deployment as none on the vLLM app (Serve LLM's check_health is vLLM's "
                "AsyncLLM.check_health, which cannot be turned off): not run twice, its figures are none's")
    return None


def fault_reason(fault: str, app: str) -> str | None:
    """Why ``fault`` is not run on ``app`` (None: it is)."""
    experiment, what = FAULTS[fault]
    if experiment is None:
        return f"{fault}: {what}"
    ranks = int(json.loads((EXPERIMENTS / experiment).read_text())["extensions"][0].get("app", {}).get("ranks", 1))
    if ranks > 1 and app == "llm":
        return (f"{fault}: not run on the vLLM app: its ranks are the MultiprocExecutor's workers, which exist only "
                f"with tensor_parallel_size >= 2 (app.ranks {ranks}: {ranks} CPU workers per replica, a core or more "
                "each, three replicas); not measurable on the 2-core machines this scorecard was built on. Run its "
                f"experiment ({experiment}) with --app llm where the cores allow")
    return None


def alias_of(detector: str, app: str) -> str | None:
    """The detector whose cell a not-run ``detector`` shares its deployment with (None: no such cell)."""
    if (app, detector) in (("stream", "serve"), ("llm", "vllm")):
        return "none"
    return None


def long_prefill_figures(stall_s: float, opts: StreamOptions | None = None) -> dict:
    """The stream target's longest prefill within max_model_len against 2 x stall_s (its TTFT charge:
    prefill_s + uncached_token_s per prompt token not cached; a prompt at most max_model_len - the template -
    one output token long)."""
    opts = opts or StreamOptions()
    max_prompt = opts.max_model_len - TEMPLATE_TOKENS - 1
    longest = opts.prefill_s + max_prompt * opts.uncached_token_s
    needed = 2 * stall_s
    return {"max_prompt_tokens": max_prompt, "longest_prefill_s": round(longest, 3), "needed_s": needed,
            "uncached_token_s_needed": round((needed - opts.prefill_s) / max_prompt, 4),
            "reachable": longest >= needed}


def long_prefill_reason(app: str, stall_s: float) -> str | None:
    """Why the long-prefill load cannot be run on ``app`` (None: it can)."""
    if app == "stream":
        f = long_prefill_figures(stall_s)
        if f["reachable"]:
            return None
        return (f"not reachable on the stream target: its longest prefill is {f['longest_prefill_s']:g} s "
                f"(prefill_s {StreamOptions.prefill_s:g} + {f['max_prompt_tokens']} prompt tokens x uncached_token_s "
                f"{StreamOptions.uncached_token_s:g}, max_model_len {StreamOptions.max_model_len}), below 2 x stall_s "
                f"= {f['needed_s']:g} s; it would need uncached_token_s >= {f['uncached_token_s_needed']:g}, which "
                "an experiment cannot set (its app block has no stream options)")
    return (f"not established on the vLLM app: a prompt is at most {StreamOptions.max_model_len - TEMPLATE_TOKENS - 1} "
            f"tokens (max_model_len 512) and the tiny model's prefill of it on CPU is unmeasured and nowhere near "
            f"2 x stall_s = {2 * stall_s:g} s as far as the runs show; null until a prefill that long is measured")


def period_settings(period: str) -> dict[str, float]:
    p, t = PERIODS[period]
    return {"health_check_period_s": p, "health_check_timeout_s": t}


def detector_settings(detector: str, stall_s: float) -> dict:
    """The app block's detector keys (none, serve, vllm: none of them)."""
    if detector == "v1":
        return {"stall_s": stall_s, "watchdog": 1}
    if detector == "v2":
        return {"stall_s": stall_s, "watchdog": 2}
    if detector == "v2-exit":
        return {"stall_s": stall_s, "watchdog": 2, "on_stall": "exit"}
    return {}


def detection_horizon_s(period: str, detector: str, stall_s: float) -> float:
    """How long after the injection a cell keeps the load on (its recovery window): long enough for the slowest
    expected detection, the detector's stall_s and Serve's failed checks each up to a period plus a timeout, and
    30 s of margin; a detection later than this is read as none (said in the table)."""
    p, t = PERIODS[period]
    stall = stall_s if detector in WATCHDOGS else 0.0
    return round(stall + SERVE_HEALTH_FAILURES * (p + t) + 30.0, 1)
