"""`availproof run`: one experiment file through Chaos Toolkit's own API, with its outputs and verdict.

Chaos Toolkit drives the run (the steady-state hypothesis, the method, the rollbacks); the
experiment's control (:mod:`chaos.ctk.control`) hooks :mod:`chaos.run`, the core, into it.

Outputs in the run directory: ``journal.json`` (Chaos Toolkit), ``records.ndjson`` (every
request and fault mark), ``summary.json`` (recovery per scope, bound results), ``junit.xml``.
Verdict: 0 every bound met, 1 a bound violated or unmeasurable (or the hypothesis deviated), 2 set-up error.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

from chaos import bounds
from chaos import experiment as exp_mod

PASS, VIOLATED, ERROR = 0, 1, 2


def _chaos_logging() -> None:
    logger = logging.getLogger("chaostoolkit")
    if not any(getattr(h, "_availproof", False) for h in logger.handlers):
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter("[%(asctime)s %(levelname)s] %(message)s", "%H:%M:%S"))
        h._availproof = True
        logger.addHandler(h)
        logger.setLevel(logging.INFO)


def run_experiment(path: str | Path, out_dir: Path, app: str = "stream", cluster_dir: Path | None = None,
                   extra_config: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """Run one experiment file; return (verdict, result) where result holds the summary."""
    from chaoslib.experiment import ensure_experiment_is_valid
    from chaoslib.experiment import run_experiment as ctk_run

    experiment = exp_mod.load(path)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = experiment.setdefault("configuration", {})
    config["availproof_out"] = str(out_dir)
    config["availproof_app"] = app
    if cluster_dir is not None:
        config["availproof_cluster_dir"] = str(cluster_dir)
    for k, v in (extra_config or {}).items():
        config[k] = v
    _chaos_logging()
    ensure_experiment_is_valid(experiment)
    t0 = time.monotonic()
    # SIGTERM as Ctrl-C: Chaos Toolkit then marks the run interrupted and plays the rollbacks.
    # SIGINT too, even where the shell started us with it ignored (a background job): Ctrl-C
    # must always interrupt. (Stop conditions interrupt through the control: chaos.ctk.control.)
    previous = {}
    if _main_thread():
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        journal = ctk_run(experiment, settings={"runtime": {"rollbacks": {"strategy": "always"}}})
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    wall = time.monotonic() - t0
    (out_dir / "journal.json").write_text(json.dumps(journal, indent=2, default=str))
    ours = journal.get("availproof") or {}
    summary = ours.get("summary")
    status = journal.get("status")
    if summary is None or not summary.get("faults"):
        reason = _first_failure(journal) or f"experiment {status}"
        verdict = ERROR  # nothing was injected: no measurement, neither a pass nor a violation
        result = {"experiment": str(path), "status": status, "deviated": journal.get("deviated"),
                  "wall_s": round(wall, 1), "summary": summary, "error": reason}
        return verdict, result
    if status == "interrupted" and not summary.get("stop_reason"):
        return ERROR, {"experiment": str(path), "status": status, "deviated": journal.get("deviated"),
                       "wall_s": round(wall, 1), "summary": summary,
                       "error": "interrupted (Ctrl-C or SIGTERM): the rollbacks ran; the summary is partial"}
    if summary.get("stop_reason"):
        return VIOLATED, {"experiment": str(path), "status": status, "deviated": journal.get("deviated"),
                          "wall_s": round(wall, 1), "summary": summary,
                          "error": f"stop condition: {summary['stop_reason']}"}
    met = summary["bounds"]["all_met"] and not journal.get("deviated")
    result = {"experiment": str(path), "status": status, "deviated": journal.get("deviated"),
              "wall_s": round(wall, 1), "summary": summary, "error": None if met else _violations(summary, journal)}
    failed_activity = _first_failure(journal)
    if failed_activity and not failed_activity.startswith("steady-state"):
        # the experiment did not run as written (e.g. a restart inside the method failed): the
        # figures are still in the summary, but the run does not count as a pass or a violation
        result["error"] = f"method activity failed: {failed_activity}"
        return ERROR, result
    return (PASS if met else VIOLATED), result


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def _first_failure(journal: dict) -> str | None:
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


def _violations(summary: dict, journal: dict) -> str:
    bad = bounds.describe_failures(summary["bounds"]["results"])
    if not bad:
        return _first_failure(journal) or "steady state deviated"
    return "; ".join(bad)


def junit_xml(results: list[dict[str, Any]]) -> str:
    from xml.sax.saxutils import escape, quoteattr

    fails = sum(1 for r in results if r.get("verdict") == VIOLATED)
    errors = sum(1 for r in results if r.get("verdict") == ERROR)
    cases = []
    for r in results:
        name = Path(r["experiment"]).stem
        body = ""
        if r.get("verdict") == VIOLATED:
            body = f"<failure message={quoteattr(r.get('error') or 'bound violated')}/>"
        elif r.get("verdict") == ERROR:
            body = f"<error message={quoteattr(r.get('error') or 'error')}/>"
        summary = r.get("summary") or {}
        out = escape(json.dumps({k: summary.get(k) for k in ("scope", "requests")}, default=str))
        cases.append(f'  <testcase classname="availproof" name={quoteattr(name)} time="{r.get("wall_s", 0)}">'
                     f"{body}<system-out>{out}</system-out></testcase>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="availproof" tests="{len(results)}" '
            f'failures="{fails}" errors="{errors}">\n' + "\n".join(cases) + "\n</testsuite>\n")

