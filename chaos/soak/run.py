"""``availproof soak``: one ordinary run of the rig (:mod:`chaos.core.run`) in which the faults of a drawn schedule
(:mod:`chaos.soak.schedule`) arrive on the run's own clock.

The lifecycle (:func:`execute`), on a prepared soak (:func:`chaos.soak.spec.prepare`, every input checked before):

1. :func:`chaos.core.run.open_run` (the cluster up, the app deployed, the records open); the schedule
   (``schedule.to_dict()``), the experiments, the RATES and the ``claim_from`` path go into the run header
   (``soak``) before the load starts;
2. :func:`chaos.core.run.start_load`: the sampler, the front door's load, the stop conditions, the warm-up and the
   baseline, then the baseline gate: a soak whose baseline is unsteady injects nothing (verdict ERROR);
3. the soak's clock starts (a ``soak`` line ``clock``); at each injected fault's ``instant_s`` its experiment's
   fault action (:mod:`chaos.ctk.actions`, the same :mod:`chaos.scopes.faults` function and arguments its method calls)
   runs in its own thread, so faults overlap (a second arrives while the first heals). Each is proven by its
   fault function (:func:`chaos.scopes.faults.prove`): one not seen in effect makes the soak ERROR (the verdict names
   it). A ``soak`` line ``injected`` ties the schedule's index to its fault id; one the run could not inject
   is a ``skipped`` line saying why (its scope's previous fault still running, one it conflicts with still
   running, the run not measuring, the injection refused); one whose call raised after it acted, ``failed``
   (the soak's verdict is ERROR);
4. the load stays on to the schedule's ``end_s`` (the last fault's heal plus its recovery window);
5. every fault healed (:func:`chaos.core.run.heal_injected`, the rollback: :func:`chaos.scopes.faults.heal`), the load
   still on; then :func:`chaos.core.run.finish` (the usual figures; each fault's analysis window ends at the next
   injection, as always) and the summary's ``soak`` (:func:`derive`: exactly
   :func:`chaos.soak.check.soak_summary` on the schedule as run), the verdict, the run closed.

A stop condition or Ctrl-C / SIGTERM ends the schedule: no further fault, the running ones end their own outage
(bounded), everything injected is healed, the summary written (a second Ctrl-C while healing is said, not
obeyed). ``availproof analyse`` derives the ``soak`` object again from the records (:func:`derive`: the schedule
from the header, the run-time outcome from the ``soak`` lines, the claim computed again from the recorded
``claim_from`` and RATES)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from typing import Any, Callable

from chaos.core import baseline_gate
from chaos.recording import record_columns, records as rec
from chaos.core import run as core
from chaos.soak import check as soak_check, figures
from chaos.soak.schedule import Planned, Schedule, conflict
from chaos.soak.spec import Prepared, compute_claim

NO_CLAIM = "no claim to compare with: the soak was run without --claim-from SUITE_DIR"


# ---------------------------------------------------------------- the figures, from the records alone
def as_run(schedule: Schedule, lines: list[dict[str, Any]]) -> Schedule:
    """The schedule as the run went: the faults injected (a ``soak`` line ``injected``), the drawn skips plus those
    the run skipped (its ``skipped`` / ``failed`` lines' why, or not reached), the overlaps of faults injected."""
    got = {ln["index"]: ln for ln in lines if ln.get("event") == "injected" and "index" in ln}
    lost = {ln["index"]: ln for ln in lines if ln.get("event") in ("skipped", "failed") and "index" in ln}
    injected, skipped = [], list(schedule.skipped)
    for p in schedule.injected:
        if p.index in got:
            injected.append(p)
        else:
            ln = lost.get(p.index)
            why = (f"{'failed after it acted' if ln['event'] == 'failed' else 'not injected'}: {ln.get('why')}"
                   if ln else "not reached: the soak ended before its instant (a stop condition, an interrupt)")
            skipped.append(dataclasses.replace(p, why=why))
    done = {p.index for p in injected}
    overlaps = [o for o in schedule.overlaps if all(i in done for i in o["faults"])]
    return dataclasses.replace(schedule, injected=injected, skipped=sorted(skipped, key=lambda p: p.index),
                               overlaps=overlaps)


def claim_for(header: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The claim the soak is compared with, computed again from the header's ``claim_from`` and RATES; (doc, why not)."""
    if not header.get("claim_from"):
        return None, NO_CLAIM
    try:
        with record_columns.apart():  # the suite's runs read without putting out the soak's own records
            return compute_claim(header["claim_from"], header["faults"], header.get("claim")), None
    except Exception as e:  # noqa: BLE001 - a claim that cannot be made leaves the prediction null, said why
        return None, f"the claim from {header['claim_from']} could not be computed: {type(e).__name__}: {e}"[:300]


def derive(records: rec.RunRecords, claim_doc: dict[str, Any] | None = None, why_no_claim: str | None = None
           ) -> dict[str, Any]:
    """The summary's ``soak``: :func:`chaos.soak.check.soak_summary` on the schedule as run (``claim_doc`` None:
    computed again from the header, or the prediction null with why)."""
    header = records.header.get("soak") or {}
    schedule = as_run(Schedule.from_dict(header["schedule"]), records.soak)
    if claim_doc is None and why_no_claim is None:
        claim_doc, why_no_claim = claim_for(header)
    out = soak_check.soak_summary(schedule, records, claim_doc or {})
    if claim_doc is None:
        frm = out["prediction"]["from"]
        frm["left_out"], frm["unmeasurable"] = {}, why_no_claim
    return out


def context(records: rec.RunRecords) -> dict[str, Any]:
    """What the soak report says beside the figures: the schedule's parameters and each fault as run."""
    h = records.header.get("soak") or {}
    s = h.get("schedule") or {}
    ids = {m.fault_id: m for m in records.marks if m.event == rec.INJECT_START}
    ran = [{k: ln.get(k) for k in ("event", "index", "scope", "planned_s", "at_s", "fault_id", "why")}
           for ln in records.soak if ln.get("event") != "clock"]
    for r in ran:
        m = ids.get(r.get("fault_id"))
        r["target"] = m.target if m else None
    return {"seed": s.get("seed"), "speedup": s.get("speedup"), "duration_s": s.get("duration_s"),
            "end_s": s.get("end_s"), "rates_per_s": s.get("rates_per_s"), "faults": h.get("faults"),
            "experiments": h.get("experiments"), "claim_from": h.get("claim_from"),
            "as_run": sorted(ran, key=lambda r: (r.get("index") is None, r.get("index") or 0))}


def reanalyse(run_dir, summary: dict[str, Any]) -> bool:
    """``availproof analyse`` on a soak (its header has ``soak``): ``soak`` and ``soak_context`` into ``summary``
    again, from the records (the machine's load kept from the summary in place); False for any other run."""
    from pathlib import Path

    from chaos.core import evidence
    from chaos.base.errors import UsageError

    path = Path(run_dir) / "records.ndjson"
    header = next((obj for _, obj in rec.iter_lines(path) if isinstance(obj, dict) and obj.get("kind") == "run"), {})
    if not header.get("soak"):  # the header read alone: no other run's records are read twice
        return False
    records = record_columns.read(path)  # in columns; read once within the command (record_columns.shared)
    try:  # the machine's load is known only from the summary written during the soak
        old = evidence.recorded_summary(run_dir) or {}
    except UsageError:  # damaged: the load is then not known
        old = {}
    summary["soak"] = derive(records)
    summary["soak_context"] = {**context(records), "machine_load": (old.get("soak_context") or {}).get("machine_load")}
    return True


# ---------------------------------------------------------------- the run
class FaultThread(threading.Thread):
    """One scheduled fault: its experiment's action, called on the run (its outage and heal are the action's own)."""

    def __init__(self, run: core.Run, p: Planned, action: Callable[..., Any], args: dict[str, Any], t0: float):
        super().__init__(name=f"soak-fault-{p.index}", daemon=True)
        self.run_, self.p, self.action, self.args, self.t0 = run, p, action, args, t0
        self.result: dict[str, Any] | None = None
        self.error: str | None = None

    def _line(self, event: str, **kw: Any) -> None:
        self.run_.writer.write({"kind": "soak", "event": event, "t_ns": rec.now_ns(), "index": self.p.index,
                                "scope": self.p.scope, "planned_s": self.p.instant_s, **kw})

    def run(self) -> None:
        from chaos.ctk.session import configuration_for  # the action finds the run in its configuration

        marker = self.run_.marker
        before = set(marker.attempted)
        try:
            self.result = self.action(**self.args, configuration=configuration_for(self.run_))
        except BaseException as e:  # noqa: BLE001 - recorded: refused (nothing done) or failed after it acted
            why = f"{type(e).__name__}: {e}"[:300]
            mine = [fid for fid in marker.attempted if fid not in before and fid.startswith(f"{self.p.scope}-")]
            if mine:
                self.error = why
                self._line("failed", fault_id=mine[0], at_s=round(marker.started[mine[0]] - self.t0, 3), why=why)
                core.log(f"soak fault #{self.p.index} ({self.p.scope}) FAILED after it acted: {why}")
            else:
                self._line("skipped", why=f"the injection was refused: {why}")
                core.log(f"soak fault #{self.p.index} ({self.p.scope}) skipped: the injection was refused: {why}")
            return
        fid = (self.result or {}).get("fault_id")
        at = round(marker.started[fid] - self.t0, 3) if fid in marker.started else None
        self._line("injected", fault_id=fid, at_s=at)
        effect = (self.result or {}).get("effect") or {}
        if effect.get("verified") is False:
            core.log(f"soak fault #{self.p.index} ({self.p.scope} {self.result.get('target')}) UNPROVEN: not seen in "
                     "effect; the soak's verdict is ERROR")


def _wait_until(run: core.Run, deadline: float, stop: threading.Event) -> None:
    """Wait for ``deadline`` (monotonic) while the load runs and nothing stopped the soak; a line every 10 s."""
    last = time.monotonic()
    while time.monotonic() < deadline and not stop.is_set() and not run.interrupted:
        if run.load is not None and not run.load.running:
            stop.set()
            break
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        if time.monotonic() - last >= 10:
            core.log(f"  {run.load.progress_line()}")
            last = time.monotonic()


def inject_all(run: core.Run, prep: Prepared, stop: threading.Event, threads: list[FaultThread]) -> None:
    """The schedule on the run's clock: each injected fault at its instant, in its own thread; then the load on
    to ``end_s``. What the run cannot inject is skipped with why."""
    from chaos.ctk import actions

    s = prep.schedule
    t0 = time.monotonic()
    run.writer.write({"kind": "soak", "event": "clock", "t_ns": rec.now_ns()})
    core.log(f"soak clock started: {len(s.injected)} faults scheduled over {s.end_s:.0f} s "
             f"({len(s.skipped)} skipped by the schedule's rules, {len(s.overlaps)} overlaps planned)")
    for p in sorted(s.injected, key=lambda q: (q.instant_s, q.index)):
        _wait_until(run, t0 + p.instant_s, stop)
        if stop.is_set() or run.interrupted:
            return
        why = None
        for t in threads:
            if t.is_alive() and (t.p.scope == p.scope or conflict(s.faults[t.p.scope], s.faults[p.scope])):
                why = (f"{t.p.scope} fault #{t.p.index} (at {t.p.instant_s:.1f} s) is still running, past its "
                       f"planned heal at {t.p.heal_at_s:.1f} s")
                break
        if why is None and not run.measuring():
            why = "the run is not measuring (its load is off, a stop condition, or it is finishing)"
        if why is not None:
            run.writer.write({"kind": "soak", "event": "skipped", "t_ns": rec.now_ns(), "index": p.index,
                              "scope": p.scope, "planned_s": p.instant_s, "why": why})
            core.log(f"soak fault #{p.index} ({p.scope}) skipped: {why}")
            continue
        func, args = prep.actions[p.scope]
        core.log(f"soak fault #{p.index}: {p.scope} ({func}) at {time.monotonic() - t0:.1f} s "
                 f"(scheduled {p.instant_s:.1f} s)")
        t = FaultThread(run, p, getattr(actions, func), dict(args), t0)
        threads.append(t)
        t.start()
    _wait_until(run, t0 + s.end_s, stop)


def _join(threads: list[FaultThread], prep: Prepared) -> None:
    """Let the running faults end their own outage (each at most its heal time and a margin)."""
    for t in threads:
        t.join(timeout=prep.schedule.faults[t.p.scope].heal_s + 120)
        if t.is_alive():
            core.log(f"soak fault #{t.p.index} ({t.p.scope}) still running after its heal time: healing it now")


def execute(prep: Prepared, options, log: Callable[[str], None] = core.log) -> tuple[int, dict[str, Any]]:
    """Run the prepared soak (module docstring); returns (exit code, summary)."""
    run = core.open_run(prep.spec, options)  # no per-fault bounds: the soak is compared with the claim (soak_spec)
    run.driver = "availproof"
    run.header_extra = {"soak": prep.header}
    stop = threading.Event()
    run.on_stop = lambda reason: (stop.set(), True)[1]
    threads: list[FaultThread] = []
    status = "completed"
    previous = {}
    interrupts = []

    def interrupt(signum, frame):
        run.interrupted = True
        stop.set()
        interrupts.append(signum)
        if len(interrupts) == 1:
            raise KeyboardInterrupt("SIGTERM" if signum == signal.SIGTERM else "SIGINT")
        log("interrupt: still healing what the soak injected (the records and the summary are owed)")

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, interrupt)
    load = {"before": _loadavg()}
    try:
        try:
            core.start_load(run)
            inject_all(run, prep, stop, threads)
        except core.Stopped:
            pass  # the stop reason is in the summary
        except baseline_gate.Unsteady as e:
            log(f"soak: {e}")
        except KeyboardInterrupt:
            status = "interrupted"
            log("interrupted: no further fault; healing what was injected")
        stop.set()
        _join(threads, prep)
        load["after"] = _loadavg()
        if run.marker.attempted:
            try:
                core.heal_injected(run)
            except Exception as e:  # noqa: BLE001 - the verdict says it (heal_error); the summary is still owed
                log(f"could not heal the soak's faults ({type(e).__name__}: {e}); `availproof recover` restores "
                    "the cluster")
        failed = [t for t in threads if t.error]
        if failed and run.error is None:
            run.error = "; ".join(f"soak fault #{t.p.index} ({t.p.scope}) failed after it acted: {t.error}"
                                  for t in failed)[:300]
        summary = core.finish(run)
        records = record_columns.read(run.records_path)  # in columns (shared with the soak report: cmd_soak)
        summary["soak"] = derive(records, prep.claim_doc, None if prep.claim_doc is not None else NO_CLAIM)
        summary["soak_context"] = {**context(records), "machine_load": load}
        summary["scope"] = "soak"
        core.write_json(run.out_dir / "summary.json", summary)
        v = core.conclude(run, {"status": status})
        return v["exit_code"], summary
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
        core.close(run)


def _loadavg() -> dict[str, Any]:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return {}
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2), "cpus": os.cpu_count()}
