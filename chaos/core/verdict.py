"""The one verdict of a run, decided once after the experiment and read by everything else.

:func:`decide` is called by the Chaos Toolkit control's ``after_experiment`` hook (the final
journal in hand: status, deviated, failed activities) and written into ``summary.json`` under
``verdict``; the runner's exit code, JUnit, the suite table and the report read it from there
(:func:`of`), and ``availproof analyse`` decides it again from the new summary and the run's
``journal.json``. Nothing else makes a verdict word.

The words, in the order they are decided:

- ``ERROR`` (exit 2): the set-up failed, the run's faults could not be healed, a step of the run
  failed (its load, its analysis), the baseline was out of steady state (nothing injected:
  :mod:`chaos.core.baseline_gate`), the experiment aborted, nothing was injected, a fault was not
  seen in effect, the run was interrupted (Ctrl-C, SIGTERM) without a stop condition, or a method
  activity failed: the run is no measurement, neither a pass nor a violation;
- ``VIOLATED`` (exit 1): a stop condition tripped, a bound was violated, or the steady-state
  hypothesis deviated;
- ``UNMEASURED`` (exit 1): no bound violated, but one could not be measured (a bound that
  cannot be measured is never met);
- ``PASS`` (exit 0): every stated bound met (a run with no bounds stated passes and says so).
"""

from __future__ import annotations

from typing import Any

from chaos.core import bounds

PASS, VIOLATED, UNMEASURED, ERROR = "PASS", "VIOLATED", "UNMEASURED", "ERROR"
EXIT = {PASS: 0, VIOLATED: 1, UNMEASURED: 1, ERROR: 2}


# how a verdict says the run's own errors (read back by :func:`recorded_errors` when a summary is re-derived)
RUN_FAILED = "the run failed: "
NOT_HEALED = "the run's faults were not healed: "
RECOVER_HINT = " (`availproof recover` restores the cluster)"


def _make(word: str, reasons: list[str]) -> dict[str, Any]:
    return {"word": word, "exit_code": EXIT[word], "reasons": reasons}


def first_failure(journal: dict | None) -> str | None:
    """The first failed activity of the journal (method, then the hypothesis), as one line."""
    journal = journal or {}
    for run in journal.get("run") or []:
        if run.get("status") == "failed":
            return f"{run['activity'].get('name')}: {str(run.get('exception', ''))[-300:]}".replace("\n", " ")
    ssh = journal.get("steady_states") or {}
    for phase in ("before", "after"):
        s = ssh.get(phase) or {}
        if s and not s.get("steady_state_met", True):
            bad = [p["activity"]["name"] for p in s.get("probes", []) if not p.get("tolerance_met", True)]
            return f"steady-state hypothesis {phase} the method not met: {', '.join(bad)}"
    return None


def decide(summary: dict[str, Any] | None, journal: dict[str, Any] | None = None,
           setup_error: str | None = None, run_error: str | None = None,
           heal_error: str | None = None) -> dict[str, Any]:
    """The verdict of one run: ``{"word", "exit_code", "reasons"}``. ``journal`` None: a run
    re-derived without its journal (only the summary's own facts count). ``run_error``: a step of
    the run that failed (its load, its analysis); ``heal_error``: the run's faults could not be healed."""
    if setup_error:
        return _make(ERROR, [f"set-up failed, nothing injected: {setup_error}"])
    journal = journal or {}
    status = journal.get("status")
    if heal_error:
        return _make(ERROR, [f"{NOT_HEALED}{heal_error}{RECOVER_HINT}"])
    if run_error:
        return _make(ERROR, [f"{RUN_FAILED}{run_error}"])
    gate = (summary or {}).get("baseline_gate") or {}
    if gate.get("steady") is False and not gate.get("injected_anyway"):  # the gate stopped it before any fault
        return _make(ERROR, [gate.get("reason") or "baseline: out of steady state; nothing injected"])
    if status == "aborted":
        return _make(ERROR, [f"the experiment aborted: {first_failure(journal) or 'an activity raised'}"])
    if not summary or not summary.get("faults"):
        return _make(ERROR, [f"nothing was injected: {first_failure(journal) or f'experiment {status}'}"])
    not_in_effect = [f"fault not in effect: {f['scope']} {f['target']}" for f in summary["faults"]
                     if (f.get("effect") or {}).get("verified") is False]
    if not_in_effect:
        return _make(ERROR, not_in_effect)
    stop = summary.get("stop_reason")
    if status == "interrupted" and not stop:
        return _make(ERROR, ["interrupted (Ctrl-C or SIGTERM): the rollbacks ran; the summary is partial"])
    if stop:
        return _make(VIOLATED, [f"stop condition: {stop}"])
    failed = first_failure(journal)
    if failed and not failed.startswith("steady-state"):
        # the experiment did not run as written (e.g. a restart inside the method failed): the
        # figures are in the summary, but the run counts as neither a pass nor a violation
        return _make(ERROR, [f"method activity failed: {failed}"])
    results = (summary.get("bounds") or {}).get("results") or []
    why = bounds.describe_failures(results)
    if bounds.violated(results):
        return _make(VIOLATED, why)
    if bounds.unmeasured(results):
        return _make(UNMEASURED, why)
    if (summary.get("bounds") or {}).get("all_met") is False:
        return _make(VIOLATED, why or ["bounds not met"])
    if journal.get("deviated"):
        return _make(VIOLATED, [failed or "steady state deviated"])
    if not (summary.get("bounds") or {}).get("stated") and not results:
        return _make(PASS, ["no bounds stated: nothing was checked"])
    return _make(PASS, [])


def recorded_errors(*verdicts: dict[str, Any] | None) -> dict[str, str | None]:
    """The run's own errors as the verdicts it recorded say them (summary.json's, the journal's
    ``availproof.verdict``, which ``availproof analyse`` never rewrites): ``{"run_error", "heal_error"}``,
    each the first one a verdict says, else None. A run's error and its failed heal are known only at its
    end, after its records are closed: re-deriving its summary from the records passes them to
    :func:`decide` again, so a run that ended ERROR stays ERROR."""
    out: dict[str, str | None] = {"run_error": None, "heal_error": None}
    for v in verdicts:
        if not isinstance(v, dict) or v.get("word") != ERROR or not isinstance(v.get("reasons"), list):
            continue
        for r in v["reasons"]:
            if not isinstance(r, str):
                continue
            if r.startswith(NOT_HEALED) and out["heal_error"] is None:
                e = r[len(NOT_HEALED):]
                out["heal_error"] = (e[:-len(RECOVER_HINT)] if e.endswith(RECOVER_HINT) else e) or "not healed"
            elif r.startswith(RUN_FAILED) and out["run_error"] is None:
                out["run_error"] = r[len(RUN_FAILED):] or "failed"
    return out


def of(summary: dict[str, Any] | None, journal: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict a summary carries; one decided from it (and the journal) for a summary written
    before verdicts were recorded."""
    if summary and isinstance(summary.get("verdict"), dict):
        return summary["verdict"]
    return decide(summary, journal)


def of_result(result: dict[str, Any]) -> dict[str, Any]:
    """The verdict of one entry of a suite's results (the runner's ``verdict_detail``; an entry made
    for a set-up error carries its own)."""
    if isinstance(result.get("verdict_detail"), dict):
        return result["verdict_detail"]
    if result.get("summary") is None and result.get("error"):
        return decide(None, setup_error=result["error"])
    return of(result.get("summary"))
