"""`availproof run`: one experiment file through Chaos Toolkit's own API, with its outputs and verdict.

Chaos Toolkit drives the experiment (the steady-state hypothesis, the method, the rollbacks); the
experiment's control (:mod:`chaos.ctk.control`) hands its moments to the run core (:mod:`chaos.core.moments`,
:mod:`chaos.core.run`), which drives the load, the recovery window, the analysis and the verdict. The exit
code is the verdict's, as under plain ``chaos run``.

Outputs in the run directory: ``journal.json`` (Chaos Toolkit), ``records.ndjson`` (every
request and fault mark), ``summary.json`` (recovery per scope, bound results), ``junit.xml``.
Verdict (:mod:`chaos.core.verdict`): PASS 0 every bound met, VIOLATED or UNMEASURED 1 a bound violated or
unmeasurable (or the hypothesis deviated, or a stop condition tripped), ERROR 2 a set-up error, a step
of the run that failed, or a run that measured nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

from chaos.core import moments, run_spec
from chaos.core import run as core
from chaos.core import verdict as verdict_mod
from chaos.core.options import Options
from chaos.core.run_spec import RunSpec

PASS, VIOLATED, ERROR = (verdict_mod.EXIT[w] for w in (verdict_mod.PASS, verdict_mod.VIOLATED, verdict_mod.ERROR))


def _chaos_logging() -> None:
    logger = logging.getLogger("chaostoolkit")
    if not any(getattr(h, "_availproof", False) for h in logger.handlers):
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter("[%(asctime)s %(levelname)s] %(message)s", "%H:%M:%S"))
        h._availproof = True
        logger.addHandler(h)
        logger.setLevel(logging.INFO)


def run_experiment(path: str | Path, out_dir: Path, app: str = "stream", cluster_dir: Path | None = None,
                   options: Options | None = None, spec: RunSpec | None = None) -> tuple[int, dict[str, Any]]:
    """Run one experiment file; return (exit code, result) where result holds the summary and the
    verdict (:mod:`chaos.core.verdict`, decided once by the control after the experiment).

    The run is opened here, around the Chaos Toolkit call: a set-up error raises (one line, exit 2)
    before anything is injected, and Chaos Toolkit is never called. The run is handed to the control in
    Chaos Toolkit's configuration (:class:`chaos.ctk.session.HandOver`), where its actions and probes find it.
    ``spec``: the file as the command parsed it already (:func:`chaos.core.validate.run_spec`); None: parsed here, once."""
    from chaoslib.experiment import ensure_experiment_is_valid
    from chaoslib.experiment import run_experiment as ctk_run

    from chaos.ctk.session import HandOver

    if options is None:
        options = Options(app=app, out_dir=out_dir, **({"cluster_dir": cluster_dir} if cluster_dir else {}))
    options.out_dir = out_dir
    options.experiment_file = Path(path)  # its load.capacity is relative to it (chaos.load.utilization)
    if spec is None:
        spec = run_spec.build(path, options)
    experiment = spec.document()  # Chaos Toolkit's own copy
    _chaos_logging()
    ensure_experiment_is_valid(experiment)
    t0 = time.monotonic()
    run = core.open_run(spec, options)
    run.driver = "availproof"
    # SIGTERM as Ctrl-C: Chaos Toolkit then marks the run interrupted and plays the rollbacks.
    # SIGINT too, even where the shell started us with it ignored (a background job): Ctrl-C
    # must always interrupt. (Stop conditions interrupt through the control: chaos.ctk.control.)
    previous = {}
    if _main_thread():
        interrupt = functools.partial(_interrupt, run)
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, interrupt)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    journal: dict[str, Any] = {}
    try:
        journal = ctk_run(experiment, settings={"runtime": {"rollbacks": {"strategy": "always"}}},
                          event_handlers=[HandOver(run)])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not run.closed:  # the control's last hook never ran (Chaos Toolkit raised)
            journal = journal or {"status": "aborted"}
            moments.end_experiment(run, journal)
    wall = time.monotonic() - t0
    v = run.verdict or verdict_mod.decide(run.summary, journal)  # journal.json: written by the run's end
    result = {"experiment": str(path), "status": journal.get("status"), "deviated": journal.get("deviated"),
              "wall_s": round(wall, 1), "summary": run.summary, "verdict_detail": v,
              "error": "; ".join(v["reasons"]) if v["word"] != verdict_mod.PASS else None}
    return v["exit_code"], result


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _interrupt(run: core.Run, signum, frame):
    """Ctrl-C or SIGTERM: ``run`` is told (no recovery window: it heals at once), then Chaos Toolkit
    marks the run interrupted and plays the rollbacks."""
    run.interrupted = True
    raise KeyboardInterrupt("SIGTERM" if signum == signal.SIGTERM else "SIGINT")


def junit_xml(results: list[dict[str, Any]]) -> str:
    """JUnit from the runs' verdicts (:mod:`chaos.core.verdict`): VIOLATED and UNMEASURED a failure, ERROR an error."""
    from xml.sax.saxutils import escape, quoteattr

    words = [verdict_mod.of_result(r) for r in results]
    fails = sum(1 for v in words if v["word"] in (verdict_mod.VIOLATED, verdict_mod.UNMEASURED))
    errors = sum(1 for v in words if v["word"] == verdict_mod.ERROR)
    cases = []
    for r, v in zip(results, words):
        name = Path(r["experiment"]).stem
        why = "; ".join(v["reasons"]) or v["word"]
        body = ""
        if v["word"] in (verdict_mod.VIOLATED, verdict_mod.UNMEASURED):
            body = f"<failure type={quoteattr(v['word'])} message={quoteattr(why)}/>"
        elif v["word"] == verdict_mod.ERROR:
            body = f"<error message={quoteattr(why)}/>"
        summary = r.get("summary") or {}
        out = escape(json.dumps({k: summary.get(k) for k in ("scope", "requests")}, default=str))
        cases.append(f'  <testcase classname="availproof" name={quoteattr(name)} time="{r.get("wall_s", 0)}">'
                     f"{body}<system-out>{out}</system-out></testcase>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="availproof" tests="{len(results)}" '
            f'failures="{fails}" errors="{errors}">\n' + "\n".join(cases) + "\n</testsuite>\n")
