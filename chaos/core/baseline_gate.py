"""The baseline gate: no fault is injected into a system that is already out of steady state.

After the warm-up and ``baseline_s`` of measured load, before the method, :func:`chaos.core.run.start_load`
calls :func:`check`: the experiment's own steady-state definition (``steady_state``:
:class:`chaos.analysis.SteadyState`) is judged on the baseline's measured requests by the same
code that judges recovery (:func:`chaos.analysis.judge_windows`, windows of ``window_s`` starting
at the baseline's first send and at every send, wholly inside the baseline, judged when they hold
``min_requests`` requests; in bound when the success ratio is at least ``min_success_ratio`` and,
when ``max_p95_ttft_s`` is set, the p95 latency of the successes is within it). The baseline is
**steady** when at least one window was judged and every judged window is in bound.

- steady: the method goes on.
- out of steady state: :class:`Unsteady` is raised before any fault; the run ends with verdict
  ERROR (:mod:`chaos.core.verdict`: no measurement of the fault), the reason with its figures
  ("baseline: 16 of 61 requests failed (deadline 16); ...; nothing injected"). No inject mark, the
  victim untouched (:meth:`chaos.core.run.Run.measuring` is False from then on, so every action refuses).
  With the option ``inject_anyway`` (``availproof run --inject-anyway``, the configuration's
  ``availproof_inject_anyway`` under plain ``chaos run``) the method goes on and the run is marked
  (``injected_anyway``): a study of an overloaded system, not a measurement of a fault's cost.
- not judged (no measured request ended in the baseline, e.g. ``baseline_s`` 0, or none of its
  windows held ``min_requests``: insufficient evidence): the method goes on, and the log and the
  summary say why.

The load's **timeout** is checked at the gate too (:mod:`chaos.load.timeout_fit`): when the longest planned
output cannot finish within ``load.timeout_s`` at the token rate measured so far (warm-up and baseline),
the run is refused the same way (steady false, the reason saying what would fit), since every such
request would fail as a deadline whatever the fault; the figures are in ``baseline_gate.timeout``. The
warm-up's requests already measure that rate: :func:`check_timeout` refuses such a run right after the
warm-up, without waiting the baseline out (its reason ends "(measured in the warm-up)").

The baseline's requests are the measured ones (phase ``measure``, sent after the warm-up) that ended
before the gate: a request still in flight then (a hang, up to the load's ``timeout_s``) is not seen.

``summary.json`` always has ``baseline_gate`` (:func:`summary_field`)::

    {"judged": bool, "steady": bool | null, "requests": int, "failed": int,
     "failures": {class: count}, "reason": str | null, "injected_anyway": bool,
     "timeout": {timeout_s, longest_output_tokens, per_token_s, ttft_p95_s, needs_s, fits, why} | null}

:func:`judge` is pure (records in, that object out): a soak command calls it on its own span.
"""

from __future__ import annotations

from typing import Any, Iterable

from chaos import analysis
from chaos.recording import records as rec
from chaos.load import timeout_fit
from chaos.base.stats import percentile

NS = analysis.NS
NOT_REACHED = ("the run ended before its baseline was judged (a stop condition, an error or an interrupt during "
               "the warm-up or the baseline)")


class Unsteady(Exception):
    """The baseline was out of steady state: nothing may be injected (the run's verdict is ERROR)."""


def _gate(requests: int = 0, failed: int = 0, failures: dict[str, int] | None = None, judged: bool = False,
          steady: bool | None = None, reason: str | None = None) -> dict[str, Any]:
    return {"judged": judged, "steady": steady, "requests": requests, "failed": failed,
            "failures": dict(failures or {}), "reason": reason, "injected_anyway": False}


def summary_field(gate: dict[str, Any] | None) -> dict[str, Any]:
    """What ``summary.json``'s ``baseline_gate`` says: the gate's judgement, or that none was made."""
    return dict(gate) if gate is not None else _gate(reason=NOT_REACHED)


def blocks(gate: dict[str, Any] | None) -> bool:
    """The gate stopped the run: judged out of steady state and not injected anyway."""
    return bool(gate) and gate.get("steady") is False and not gate.get("injected_anyway")


def _classes(failures: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0])))


def judge(requests: Iterable[rec.RequestRecord], steady: analysis.SteadyState, end_ns: int,
          start_ns: int | None = None) -> dict[str, Any]:
    """The steady state of the measured requests sent from ``start_ns`` (default: the first one's send)
    that ended by ``end_ns``, judged as recovery is (see the module doc); the ``baseline_gate`` object
    (``injected_anyway`` False: the caller decides)."""
    rs = sorted((r for r in requests if r.phase == rec.MEASURE and (start_ns is None or r.sent_ns >= start_ns)
                 and analysis.request_end_ns(r) <= end_ns), key=lambda r: r.sent_ns)
    failed = [r for r in rs if not r.ok]
    failures: dict[str, int] = {}
    for r in failed:
        failures[r.failure or rec.OTHER] = failures.get(r.failure or rec.OTHER, 0) + 1
    failures = dict(sorted(failures.items()))
    counts = {"requests": len(rs), "failed": len(failed), "failures": failures}
    if not rs:
        return _gate(reason="baseline: no measured request ended before the method (baseline_s 0, or every "
                            "baseline request still in flight): nothing to judge")
    t0 = start_ns if start_ns is not None else rs[0].sent_ns
    span_s = (end_ns - t0) / NS
    failed_text = (f"{len(failed)} of {len(rs)} requests failed"
                   + (f" ({_classes(failures)})" if failed else ""))
    why: dict[str, float] = {}  # what put a window out of bound: "ratio", "latency" (its worst p95)

    def window(ws: list[rec.RequestRecord]) -> bool | None:
        state = analysis.window_state(ws, steady)  # the steady state's own judgement of a window
        if state is False:
            ok = [r for r in ws if r.ok]
            if len(ok) / len(ws) < steady.min_success_ratio:
                why["ratio"] = 0.0
            else:
                p95 = percentile([x for x in map(analysis.latency, ok) if x is not None], 0.95)
                why["latency"] = max(why.get("latency", 0.0), p95 if p95 is not None else float("inf"))
        return state

    windows = analysis.judge_windows(rs, t0, end_ns, steady, window)
    if not windows:
        return _gate(**counts, reason=(
            f"baseline: {failed_text}; {analysis.INSUFFICIENT}: no {steady.window_s:g} s steady-state window with "
            f"at least {steady.min_requests} requests lies inside the {span_s:.1f} s baseline: not judged"))
    bad = sum(1 for _, good in windows if not good)
    if not bad:
        return _gate(**counts, judged=True, steady=True)
    criteria = []
    if "ratio" in why:
        criteria.append(f"success ratio below {steady.min_success_ratio:g}")
    if "latency" in why:
        criteria.append(f"p95 latency up to {why['latency']:.2f} s, above {steady.max_p95_ttft_s:g} s")
    return _gate(**counts, judged=True, steady=False, reason=(
        f"baseline: {failed_text}; {bad} of {len(windows)} {steady.window_s:g} s windows out of steady state "
        f"({'; '.join(criteria)})"))


def check_timeout(run, log=print) -> dict[str, Any] | None:
    """Right after the warm-up (before the baseline's ``baseline_s``): when the longest planned output
    cannot finish within ``load.timeout_s`` at the token rate of the requests answered so far (the
    warm-up's), the run is refused at once, as :func:`check` would refuse it at the baseline's end (no
    need to wait the baseline out for a verdict the warm-up already gives). Returns the refused gate (or
    None when the timeout fits, cannot be judged yet, or the run injects anyway: :func:`check` judges it
    again on the whole baseline); raises :class:`Unsteady` as :func:`check` does."""
    if getattr(run.options, "inject_anyway", False):
        return None
    try:
        records = rec.read(run.records_path)
    except OSError:
        return None  # the gate at the baseline's end says why
    now = rec.now_ns()
    fit = timeout_fit.judge([r for r in records.requests if analysis.request_end_ns(r) <= now],
                            timeout_fit.longest_output(run.settings.load), run.settings.load.timeout_s)
    if fit["fits"] is not False:
        return None
    ended = [r for r in records.requests if r.phase == rec.MEASURE and analysis.request_end_ns(r) <= now]
    gate = _gate(requests=len(ended), failed=sum(1 for r in ended if not r.ok), judged=True, steady=False,
                 reason=f"baseline: {fit['why']} (measured in the warm-up)")
    gate["timeout"] = fit
    return _decide(run, gate, log)


def check(run, log=print) -> dict[str, Any]:
    """The gate of a run (:class:`chaos.core.run.Run`) after its warm-up and baseline, before its method:
    :func:`judge` on its records so far, kept in ``run.baseline_gate``; raises :class:`Unsteady` when
    the baseline is out of steady state and the run's options do not say ``inject_anyway``."""
    try:
        records = rec.read(run.records_path)
        now = rec.now_ns()
        gate = judge(records.requests, run.settings.steady_state, end_ns=now)
        fit = timeout_fit.judge([r for r in records.requests if analysis.request_end_ns(r) <= now],
                                timeout_fit.longest_output(run.settings.load), run.settings.load.timeout_s)
    except OSError as e:
        gate = _gate(reason=f"baseline: the records could not be read ({type(e).__name__}: {e}): not judged")
        fit = None
    gate["timeout"] = fit
    if fit is not None and fit["fits"] is False and gate["steady"] is not False:
        gate.update(judged=True, steady=False, reason=f"baseline: {fit['why']}")
    return _decide(run, gate, log)


def _decide(run, gate: dict[str, Any], log) -> dict[str, Any]:
    """Keep ``gate`` as the run's, say it, and stop the run (:class:`Unsteady`) when it is out of steady
    state and the run does not inject anyway."""
    run.baseline_gate = gate
    if not gate["judged"]:
        log(f"baseline not judged: {gate['reason']}; the method goes on")
    elif gate["steady"]:
        log(f"baseline steady: {gate['requests']} requests, {gate['failed']} failed")
    elif getattr(run.options, "inject_anyway", False):
        gate["injected_anyway"] = True
        gate["reason"] += "; injected anyway (inject_anyway)"
        log(f"BASELINE OUT OF STEADY STATE: {gate['reason']}: the method goes on; the run is marked so")
    else:
        gate["reason"] += "; nothing injected"
        log(f"BASELINE OUT OF STEADY STATE: {gate['reason']} (--inject-anyway to inject all the same)")
        raise Unsteady(gate["reason"])
    return gate
