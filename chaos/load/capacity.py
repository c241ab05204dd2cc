"""Capacity: the highest rate the deployment sustains within the SLO, found by a stepped sweep.

`availproof capacity EXPERIMENT` (:mod:`chaos.core.capacity_run`) offers the experiment's load shape at
rates that step geometrically (``start_rps``, ``start_rps * factor``, ... while at most ``max_rps``,
at most ``max_steps`` of them), injects no fault, and keeps the result in ``capacity.json``
(``chaos/schemas/capacity.schema.json``). An experiment can then state its rate as a share of it
(``load.utilization``: :mod:`chaos.load.utilization`). Plain Python: no Ray.

A step sends for ``warmup_s`` (sent, recorded, not counted), then for ``step_s`` (measured). Of its
measured requests (:data:`chaos.recording.records.MEASURE`):

- ``rate_offered``: the step's rate; ``rate_achieved``: measured requests sent / ``step_s``;
- ``goodput_rps``: measured requests that met the SLO (:meth:`chaos.analysis.SLO.met`: succeeded,
  within TTFT, inter-token and end-to-end limits) / ``step_s``;
- ``attainment``: the share of the measured requests sent that met the SLO;
- ``failed``; ``p95_ttft_s`` of the successful ones (nearest rank, :func:`chaos.base.stats.percentile`).

The decision (:func:`decide`, a pure function of the steps measured so far and the plan), step by step:

1. a step that sent no measured request stops the sweep (``no_requests``: too short a step);
2. the SLO breaks: attainment below ``target_attainment``, or failed requests above
   ``max_failed_share`` of those sent: stop (``slo_broke``);
3. goodput stops rising although more was sent: a step that sent at least ``min_gain`` (5 %) more than
   the best step before it (its ``rate_achieved`` over that step's) and whose goodput gains less than
   ``min_gain`` over that step's: stop (``goodput_plateau``; the extra load sent was not served within
   the SLO). A step within the SLO that sent no more than the best step before it (bursty arrivals over
   a short step draw fewer requests than the rate offers as often as more: 2026-12-05, gamma arrivals of
   burstiness 0.5 over 15 s sent 3.8 req/s at 2.25 offered and 3.3 at 3.375) says nothing against the
   deployment: it is sustained, its achieved rate beside it, and the sweep goes on;
4. ``max_steps`` measured (``max_steps``), or the next rate above ``max_rps`` (``max_rate``): stop.

Before 2 and 3, a step whose client fell behind its schedule (the p99 of sent - planned over its
measured requests, ``send_lag_p99_s``, above ``max_send_lag_s``, 50 ms) stops the sweep
(``client_behind``): an open loop sends every request however late, so such a step measured the
rig's process, not the deployment. A step that raised (``error``) or Ctrl-C (``interrupted``) ends
it with the steps measured kept. When the sweep ended on any of these or on 4 with a sustained rate,
that rate is a **lower bound** (``sustained_is_lower_bound``): the deployment may carry more.

A step is **sustained** when it is within the SLO and (but for the first) its goodput rose: every
step before the one that stopped the sweep. The sustained rate is the highest rate offered of a
sustained step; ``None`` with its reason when there is none (the first step broke the SLO, or sent
nothing): never 0.

Every loop is bounded: the steps by ``max_steps``, each step in time by its duration, the drain of
requests in flight (``drain_s``, else the request timeout) and a margin (:func:`step_bound_s`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from chaos.recording import records as rec
from chaos.analysis import SLO
from chaos.base.errors import UsageError
from chaos.load.workload import LoadShape
from chaos.base.stats import percentile

FORMAT_VERSION = 1
MAX_RPS = 5000.0  # the load shape's own limit (chaos.load.workload.LoadShape.rate)
MAX_STEPS = 50
STEP_MARGIN_S = 10.0  # beyond a step's sending and drain, before it is stopped

# why a sweep ended
NO_REQUESTS, SLO_BROKE, GOODPUT_PLATEAU, MAX_STEPS_RULE, MAX_RATE = (
    "no_requests", "slo_broke", "goodput_plateau", "max_steps", "max_rate")
INTERRUPTED, STEP_ERROR, CLIENT_BEHIND = "interrupted", "error", "client_behind"
RULES = (NO_REQUESTS, SLO_BROKE, GOODPUT_PLATEAU, MAX_STEPS_RULE, MAX_RATE, INTERRUPTED, STEP_ERROR, CLIENT_BEHIND)
# the sweep ended before it found where the SLO breaks or goodput stops rising: the deployment may carry more
LOWER_BOUND_RULES = (MAX_STEPS_RULE, MAX_RATE, INTERRUPTED, STEP_ERROR, CLIENT_BEHIND)


@dataclass(frozen=True)
class SweepPlan:
    """The rates to offer, how long each step lasts and when the sweep stops."""

    start_rps: float = 1.0
    factor: float = 1.5
    max_rps: float = 200.0
    max_steps: int = 12
    step_s: float = 20.0  # measured per step
    warmup_s: float = 5.0  # sent before each step's measurement, not counted
    target_attainment: float = 0.99  # the share of requests that must meet the SLO
    max_failed_share: float = 0.01  # failed requests beyond this share of those sent break the SLO
    min_gain: float = 0.05  # goodput must rise by at least this over the best step before
    max_send_lag_s: float = 0.05  # p99 of sent - planned beyond this: the client, not the deployment, fell behind

    def __post_init__(self):
        problems = []
        if not _finite(self.start_rps) or not 0 < self.start_rps <= MAX_RPS:
            problems.append(f"start rate must be in (0, {MAX_RPS:.0f}] req/s, got {self.start_rps}")
        if not _finite(self.factor) or not 1.01 <= self.factor <= 10:
            problems.append(f"factor must be in [1.01, 10], got {self.factor}")
        if not _finite(self.max_rps) or not self.start_rps <= self.max_rps <= MAX_RPS:
            problems.append(f"max rate must be in [start rate, {MAX_RPS:.0f}] req/s, got {self.max_rps}")
        if not isinstance(self.max_steps, int) or not 1 <= self.max_steps <= MAX_STEPS:
            problems.append(f"max steps must be 1..{MAX_STEPS}, got {self.max_steps}")
        if not _finite(self.step_s) or not 0 < self.step_s <= 3600:
            problems.append(f"step duration must be in (0, 3600] s, got {self.step_s}")
        if not _finite(self.warmup_s) or not 0 <= self.warmup_s <= 3600:
            problems.append(f"warm-up must be in [0, 3600] s, got {self.warmup_s}")
        if not _finite(self.target_attainment) or not 0 < self.target_attainment <= 1:
            problems.append(f"target attainment must be in (0, 1], got {self.target_attainment}")
        if not _finite(self.max_failed_share) or not 0 <= self.max_failed_share <= 1:
            problems.append(f"max failed share must be in [0, 1], got {self.max_failed_share}")
        if not _finite(self.min_gain) or not 0 <= self.min_gain <= 10:
            problems.append(f"min gain must be in [0, 10], got {self.min_gain}")
        if problems:
            raise UsageError("capacity: " + "; ".join(problems))

    def rates(self) -> list[float]:
        """The rates offered, in order: ``start_rps * factor**k`` while at most ``max_rps``, ``max_steps`` at most."""
        out = []
        for k in range(self.max_steps):
            r = round(self.start_rps * self.factor ** k, 3)
            if r > self.max_rps * (1 + 1e-9):
                break
            out.append(r)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rates": self.rates()}


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Step:
    """One step's figures, from its measured requests."""

    index: int  # 1, 2, ...
    rate_offered: float
    duration_s: float  # the measured part (step_s)
    sent: int
    met_slo: int
    failed: int
    p95_ttft_s: float | None
    send_lag_p99_s: float | None = None  # p99 of (sent - planned): how far behind its schedule the client sent

    @property
    def rate_achieved(self) -> float:
        return self.sent / self.duration_s

    @property
    def goodput_rps(self) -> float:
        return self.met_slo / self.duration_s

    @property
    def attainment(self) -> float | None:
        return self.met_slo / self.sent if self.sent else None

    @property
    def failed_share(self) -> float | None:
        return self.failed / self.sent if self.sent else None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rate_offered": self.rate_offered, "duration_s": self.duration_s,
                "sent": self.sent, "rate_achieved": round(self.rate_achieved, 3),
                "met_slo": self.met_slo, "goodput_rps": round(self.goodput_rps, 3),
                "attainment": None if self.attainment is None else round(self.attainment, 4),
                "failed": self.failed, "p95_ttft_s": self.p95_ttft_s, "send_lag_p99_s": self.send_lag_p99_s}


def measure(index: int, rate: float, records: list[rec.RequestRecord], slo: SLO, duration_s: float) -> Step:
    """A step's figures from its records (warm-up requests left out)."""
    measured = [r for r in records if r.phase == rec.MEASURE]
    ttfts = [r.ttft_s for r in measured if r.ok and r.ttft_s is not None]
    lags = [max(0, r.sent_ns - r.planned_ns) / 1e9 for r in measured]
    lag = percentile(lags, 0.99)
    return Step(index=index, rate_offered=rate, duration_s=duration_s, sent=len(measured),
                met_slo=sum(1 for r in measured if slo.met(r)), failed=sum(1 for r in measured if not r.ok),
                p95_ttft_s=percentile(ttfts, 0.95), send_lag_p99_s=None if lag is None else round(lag, 6))


@dataclass
class Judgement:
    """What the decision made of one step."""

    within_slo: bool
    broke: str | None = None  # why the SLO broke (or why the step says nothing)
    gain: float | None = None  # goodput over the best step before, minus 1 (None: the first step)
    sustained: bool = False
    client_behind: str | None = None  # the client sent late: not a judgement of the deployment
    sent_no_more: bool = False  # goodput did not rise, nor did what was sent: sustained, no plateau

    def to_dict(self) -> dict[str, Any]:
        return {"within_slo": self.within_slo, "broke": self.broke,
                "goodput_gain": None if self.gain is None or math.isinf(self.gain) else round(self.gain, 4),
                "sustained": self.sustained, "client_behind": self.client_behind, "sent_no_more": self.sent_no_more}


@dataclass
class Decision:
    stop: str | None  # one of RULES, or None: offer the next rate
    reason: str | None
    judged: list[Judgement] = field(default_factory=list)
    sustained_rps: float | None = None
    sustained_reason: str | None = None  # why there is no sustained rate


def decide(steps: list[Step], plan: SweepPlan, ended: tuple[str, str] | None = None) -> Decision:
    """Whether to stop after the steps measured so far, why, and the sustained rate (see the module's
    docstring). ``ended``: (rule, reason) when the sweep ended before the decision said stop (Ctrl-C)."""
    judged: list[Judgement] = []
    stop = None
    for k, step in enumerate(steps):
        j = _judge(step, steps[:k], plan)
        judged.append(j)
        if step.sent == 0:
            stop = (NO_REQUESTS, f"step {step.index} ({step.rate_offered:g} req/s) sent no measured request "
                                 f"in {step.duration_s} s: lengthen the step (--step-s)")
        elif j.client_behind:
            stop = (CLIENT_BEHIND, f"the client fell behind its schedule at step {step.index} "
                                   f"({step.rate_offered:g} req/s): {j.client_behind}; the step says nothing of "
                                   f"the deployment (more workers: load.workers)")
        elif j.broke:
            stop = (SLO_BROKE, f"the SLO broke at step {step.index} ({step.rate_offered:g} req/s): {j.broke}")
        elif not j.sustained:
            stop = (GOODPUT_PLATEAU, f"goodput stopped rising at step {step.index} ({step.rate_offered:g} req/s): "
                                     f"{step.goodput_rps:.3f} req/s, {j.gain * 100:+.1f} % over the best step before "
                                     f"(at least {plan.min_gain * 100:.0f} % needed)")
        if stop:
            break
    if stop is None:
        rates = plan.rates()
        if len(steps) >= len(rates):
            stop = ((MAX_STEPS_RULE, f"{plan.max_steps} steps measured (--max-steps)") if len(rates) == plan.max_steps
                    else (MAX_RATE, f"the next rate would exceed the max rate of {plan.max_rps:g} req/s (--max-rate)"))
        elif ended is not None:
            stop = ended
    sustained = [s.rate_offered for s, j in zip(steps, judged) if j.sustained]
    d = Decision(stop=stop[0] if stop else None, reason=stop[1] if stop else None, judged=judged)
    if sustained:
        d.sustained_rps = max(sustained)
    elif stop is not None:
        d.sustained_reason = _none_sustained(steps, judged, plan, stop)
    return d


def _judge(step: Step, before: list[Step], plan: SweepPlan) -> Judgement:
    if step.sent == 0:
        return Judgement(within_slo=False, broke="no measured request")
    if step.send_lag_p99_s is not None and step.send_lag_p99_s > plan.max_send_lag_s:
        return Judgement(within_slo=False, client_behind=f"p99 of sent - planned {step.send_lag_p99_s:.3f} s, "
                                                          f"over {plan.max_send_lag_s:g} s")
    why = []
    if step.attainment < plan.target_attainment:
        why.append(f"attainment {step.attainment:.4f} below {plan.target_attainment} "
                   f"({step.met_slo} of {step.sent} met the SLO)")
    if step.failed_share > plan.max_failed_share:
        why.append(f"{step.failed} of {step.sent} failed ({step.failed_share * 100:.1f} %, more than "
                   f"{plan.max_failed_share * 100:g} %)")
    if why:
        return Judgement(within_slo=False, broke="; ".join(why))
    if not before:
        return Judgement(within_slo=True, sustained=True)
    best = max(before, key=lambda s: s.goodput_rps)
    gain = _gain(step.goodput_rps, best.goodput_rps)
    rose = gain >= plan.min_gain
    sent_more = _gain(step.rate_achieved, best.rate_achieved) >= plan.min_gain
    return Judgement(within_slo=True, gain=gain, sustained=rose or not sent_more, sent_no_more=not rose and not sent_more)


def _gain(x: float, over: float) -> float:
    """``x`` over ``over``, minus 1 (infinite from 0 to more)."""
    return (x / over - 1) if over > 0 else (math.inf if x > 0 else 0.0)


def _none_sustained(steps: list[Step], judged: list[Judgement], plan: SweepPlan, stop: tuple[str, str]) -> str:
    if not steps:
        return f"no step was measured ({stop[1]})"
    first = steps[0]
    if first.sent == 0:
        return (f"the first step ({first.rate_offered:g} req/s) sent no measured request: lengthen the step "
                f"(--step-s) or start higher (--start-rate)")
    return (f"the first step ({first.rate_offered:g} req/s) already broke the SLO: {judged[0].broke}; "
            f"start lower (--start-rate)")


# ---------------------------------------------------------------- the sweep
StepRunner = Callable[[LoadShape, int], list[rec.RequestRecord]]


def step_shape(shape: LoadShape, plan: SweepPlan, rate: float, index: int) -> LoadShape:
    """The experiment's load shape at one step's rate: its warm-up then ``step_s``, no stages, a request
    bound that the rate cannot reach (the step ends on time, not on a count), a seed of its own."""
    duration = plan.warmup_s + plan.step_s
    return dataclasses.replace(shape, rate=rate, stages=(), duration_s=duration, warmup_s=plan.warmup_s,
                               max_requests=min(10_000_000, math.ceil(rate * duration * 2) + 20),
                               seed=shape.seed + index - 1, utilization=None, capacity=None)


def step_bound_s(shape: LoadShape) -> float:
    """How long one step may take at most: its sending, the drain of requests in flight, a margin."""
    drain = shape.drain_bound_s()
    return shape.duration_s + drain + STEP_MARGIN_S


def check_shape(shape: LoadShape) -> None:
    """The load shapes a sweep can step: open loop, from arrivals (not a trace)."""
    if shape.mode != "open":
        raise UsageError("capacity: the experiment's load is a closed loop (concurrency, no rate); the sweep steps "
                         "an open loop's rate: use load.mode open")
    if shape.trace is not None:
        raise UsageError("capacity: the experiment's load replays a trace (its own rate); the sweep steps an open "
                         "loop's rate: remove load.trace")


def sweep(shape: LoadShape, slo: SLO, plan: SweepPlan, run_step: StepRunner,
          log: Callable[[str], None] = print) -> tuple[list[Step], Decision]:
    """Offer the plan's rates in turn with ``run_step(step_shape, index)`` (it returns the step's records)
    until :func:`decide` says stop; Ctrl-C ends the sweep with what was measured (rule ``interrupted``)."""
    check_shape(shape)
    steps: list[Step] = []
    rates = plan.rates()
    log(f"capacity sweep: {len(rates)} rates at most ({', '.join(f'{r:g}' for r in rates)} req/s), each "
        f"{plan.warmup_s:g} s warm-up + {plan.step_s:g} s measured; target attainment {plan.target_attainment}")
    for index, rate in enumerate(rates, 1):  # bounded: max_steps
        t0 = time.monotonic()
        try:
            records = run_step(step_shape(shape, plan, rate, index), index)
        except KeyboardInterrupt:
            return steps, decide(steps, plan, ended=(INTERRUPTED, f"interrupted during step {index} ({rate:g} req/s)"))
        except Exception as e:  # noqa: BLE001 - the steps measured are kept, the failure said
            return steps, decide(steps, plan, ended=(STEP_ERROR, f"step {index} ({rate:g} req/s) failed: "
                                                                 f"{type(e).__name__}: {str(e)[:200]}"))
        steps.append(measure(index, rate, records, slo, plan.step_s))
        decision = decide(steps, plan)
        log(f"step {index}: {row(steps[-1], decision.judged[-1])}  ({time.monotonic() - t0:.0f} s)")
        if decision.stop:
            return steps, decision
    return steps, decide(steps, plan)


def row(step: Step, j: Judgement) -> str:
    """One step as a table row (see :func:`table`)."""
    att = "-" if step.attainment is None else f"{step.attainment:.3f}"
    p95 = "-" if step.p95_ttft_s is None else f"{step.p95_ttft_s:.3f}"
    verdict = "sustained" if j.sustained else ("within SLO, no gain" if j.within_slo else "SLO broke")
    if j.sent_no_more:
        verdict = "sustained (sent no more)"  # the arrivals drew no more than the best step before
    return (f"{step.rate_offered:>9g} {step.rate_achieved:>9.2f} {step.goodput_rps:>9.2f} {att:>10} "
            f"{step.failed:>6} {p95:>9}  {verdict}")


def table(steps: list[Step], decision: Decision) -> str:
    """The steps and the sustained rate, as printed at the end of `availproof capacity`."""
    lines = [f"{'step':>4} {'offered':>9} {'achieved':>9} {'goodput':>9} {'attainment':>10} {'failed':>6} "
             f"{'p95 TTFT':>9}  verdict"]
    lines += [f"{s.index:>4} {row(s, j)}" for s, j in zip(steps, decision.judged)]
    lines.append(f"stopped: {decision.reason}")
    lower = f" at least (the sweep ended before the SLO broke or goodput stopped rising: {decision.stop})" \
        if decision.stop in LOWER_BOUND_RULES else ""
    lines.append(f"sustained: {decision.sustained_rps:g} req/s{lower}" if decision.sustained_rps is not None
                 else f"sustained: none ({decision.sustained_reason})")
    return "\n".join(lines)


# ---------------------------------------------------------------- capacity.json
LOAD_BASICS = ("mode", "arrival", "burstiness", "route", "stream", "model", "prompt_words", "max_tokens",
               "prompt_len", "output_len", "max_model_len", "sessions", "workers", "timeout_s", "seed")


def document(steps: list[Step], decision: Decision, plan: SweepPlan, slo: SLO, shape: LoadShape,
             context: dict[str, Any]) -> dict[str, Any]:
    """``capacity.json``: what was measured, how, on what, and the sustained rate (or null and why).
    ``context``: app, front, topology, experiment, cluster (what the caller knows of the deployment)."""
    load = shape.to_dict()
    return {
        "kind": "capacity",
        "format_version": FORMAT_VERSION,
        **context,
        "slo": asdict(slo),
        "load": {k: load[k] for k in LOAD_BASICS},
        "sweep": {**plan.to_dict()},
        "steps": [{**s.to_dict(), **j.to_dict()} for s, j in zip(steps, decision.judged)],
        "stopped": {"rule": decision.stop, "reason": decision.reason},
        "sustained_rps": decision.sustained_rps,
        "sustained_reason": decision.sustained_reason,
        # the sweep ended on its own limits with every step sustained: the deployment may carry more
        "sustained_is_lower_bound": decision.sustained_rps is not None and decision.stop in LOWER_BOUND_RULES,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rig": rig(),
        "machine": machine(),
    }


def rig() -> dict[str, Any]:
    """The rig's version and, in a git checkout, its commit (None when not known)."""
    import subprocess
    from pathlib import Path

    from chaos import __version__

    root = Path(__file__).resolve().parent.parent.parent
    commit = None
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                 timeout=5)
            commit = out.stdout.strip() or None if out.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"version": __version__, "git": commit}


def machine() -> dict[str, Any]:
    import os
    import platform

    return {"cpus": os.cpu_count(), "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
            "python": platform.python_version()}
