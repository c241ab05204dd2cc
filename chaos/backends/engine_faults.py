"""What the engine faults with the replica alive share on every backend: pure logic, no process touched.

- ``engine-stutter`` (:class:`Throttle`): a straggler, its engine process(es) throttled by a duty cycle of
  SIGSTOP and SIGCONT. ``factor`` is the slowdown: the engine runs one ``period_s`` of every ``factor``
  (factor 4: running 1 period, stopped 3, a cycle of 4 x ``period_s``). The cycle goes on until the heal (at
  ``duration_s``) stops it, and ends by itself :data:`SELF_STOP_MARGIN_S` later whatever happens to the
  rig (a local thread, a shell loop in the pod), leaving the engine continued.
- Its proof (:func:`duty_cycle_checks`): one look is several samples of the engine's state spread over two
  cycles (:func:`sampling`); the engine must be seen stopped (state ``T``) in at least one and running in
  another: a duty cycle, not a hang and not nothing.
- ``engine-error`` (:func:`handles`): the rig sends ``SIGUSR1`` to the engine, whose fault hook (installed
  by the app when ``AVAILPROOF_ENGINE_FAULTS=1``) makes it fail from inside its step loop. A process with no
  handler for it would be killed by its default action (a crash, not an engine error): such an engine is
  refused before anything is sent, from its signal masks (``/proc/PID/status``: ``SigCgt``, ``SigBlk``,
  ``SigIgn``). Its proof (:func:`tombstone_checks`): each signalled engine's *tombstone*
  (:func:`serve_apps.engine_faults.tombstone_path`), which the hook writes as it raises the error, the
  engine's own word (a stale one is removed before the signal); and the replica's process alive. Not "the
  engine process gone": vLLM's outlives its error until Serve replaces the replica.
- ``engine-wedge`` (:func:`wedge_request`, :func:`wedge_checks`, :func:`release_outcome`): the same signal, with
  a request left first that names the fault (``wedge``), the run and whether to spin; the engine's step blocks for
  as long as its wedge mark (:func:`serve_apps.engine_faults.wedge_path`) exists. Its proof: each engine's mark
  naming this run, and each engine alive and *not stopped* (a wedge is not a SIGSTOP), the replica alive; the
  rig removes the mark at the run's end only while it still names the run.
- ``engine-garbage`` and ``engine-stall`` (:func:`held_request`, :func:`held_checks`): the same signal with a request
  naming ``garbage`` or ``stall``; the engine *holds* the fault while it steps on, for as long as its mark
  (:func:`serve_apps.engine_faults.mark_path`, :mod:`serve_apps.held_faults`) exists, which it rewrites with its
  steps since. Their proof: each engine's mark naming this run, each engine alive and not stopped, and for a stall
  the engine stepping on (its mark counts steps since the stall began: running requests went on). Released as the
  wedge is.
- ``engine-slow`` (``held_request("slow", run, factor)``): the same signal, held the same way; from its next step on
  every step of the engine takes ``factor`` times as long (:mod:`serve_apps.held_faults`). Its proof: the mark naming
  this run, the engine alive, not stopped and stepping, and its mean step since the fault at least half the factor
  times its mean step before (both the engine's own measure, in its mark). Unlike the others the rig ends it after
  its duration (the mark removed while it names the run).
"""

from __future__ import annotations

import json
import math
import signal
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from chaos.base.errors import UsageError

ENGINE = "EngineCore"  # in the command line of an engine process: vLLM's VLLM::EngineCore, availproof::EngineCore
ERROR_SIGNAL = signal.SIGUSR1  # what arms the app's engine-fault hook
SELF_STOP_MARGIN_S = 5.0  # a duty cycle the heal did not stop ends by itself this long after its duration
STOPPED = ("T", "t")
GONE = (None, "gone", "Z", "X")
MAX_CYCLE_S = 20.0  # a longer cycle stops the engine longer than a hang's health checks take
MAX_SAMPLES = 60  # one look at a duty cycle samples the engine's state at most this many times


@dataclass(frozen=True)
class Throttle:
    """A duty cycle: running ``period_s``, stopped ``(factor - 1) x period_s``, for ``duration_s``."""

    factor: float = 4.0
    period_s: float = 0.2
    duration_s: float = 20.0

    def __post_init__(self) -> None:
        for name, low in (("factor", 1.0), ("period_s", 0.0), ("duration_s", 0.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= low:
                raise UsageError(f"engine-stutter: {name} must be a number above {low:g}, got {v!r}")
        if self.period_s < 0.02:
            raise UsageError(f"engine-stutter: period_s must be at least 0.02 s (a signal's timing), "
                             f"got {self.period_s!r}")
        if self.factor * self.period_s > MAX_CYCLE_S:
            raise UsageError(f"engine-stutter: one cycle (factor x period_s = {self.factor * self.period_s:g} s) "
                             f"must be "
                             f"at most {MAX_CYCLE_S:g} s: a longer stop is a hang, and a look at it samples two cycles")

    @property
    def run_s(self) -> float:
        """Running part of each cycle."""
        return float(self.period_s)

    @property
    def stop_s(self) -> float:
        """Stopped part of each cycle."""
        return round((self.factor - 1.0) * self.period_s, 6)

    @property
    def cycle_s(self) -> float:
        return round(self.factor * self.period_s, 6)

    @property
    def bound_s(self) -> float:
        """How long the duty cycle goes on at most without a heal: its duration and the margin."""
        return self.duration_s + SELF_STOP_MARGIN_S

    @property
    def cycles(self) -> int:
        """Cycles a loop that counts them (KubeRay's) runs to cover :attr:`bound_s`."""
        return max(1, math.ceil(self.bound_s / self.cycle_s))

    def detail(self) -> dict[str, float]:
        """What the fault's marks carry of it."""
        return {"factor": self.factor, "period_s": self.period_s, "duration_s": self.duration_s,
                "run_s": self.run_s, "stop_s": self.stop_s}

    @classmethod
    def of(cls, fault: Mapping[str, Any]) -> "Throttle":
        """The throttle a fault's detail names (defaults for what it does not)."""
        d = cls()
        return cls(fault.get("factor", d.factor), fault.get("period_s", d.period_s),
                   fault.get("duration_s", d.duration_s))

    def text(self) -> str:
        return (f"stopped {self.stop_s:g} s, running {self.run_s:g} s, every {self.cycle_s:g} s "
                f"(factor {self.factor:g}) for {self.duration_s:g} s")


def sampling(t: Throttle) -> tuple[int, float]:
    """(samples, seconds between two) of one look at a duty cycle: at least two per part of a cycle, over
    two cycles, at most :data:`MAX_SAMPLES`."""
    interval = max(0.005, min(t.run_s, t.stop_s) / 2.0)
    n = math.ceil(2 * t.cycle_s / interval) + 1
    if n > MAX_SAMPLES:
        n, interval = MAX_SAMPLES, 2 * t.cycle_s / (MAX_SAMPLES - 1)
    return n, round(interval, 4)


def _check(what: str, ok: bool, seen: str) -> dict[str, Any]:
    return {"check": what, "ok": bool(ok), "seen": seen}


def duty_cycle_checks(pids: Sequence, samples: Sequence[Mapping[Any, str | None]]) -> list[dict[str, Any]]:
    """The proof of a duty cycle from ``samples`` (each: pid -> its state letter, None or "gone" when gone):
    every engine process seen stopped (``T``) in at least one sample, and running (alive, not stopped) in
    another."""
    names = ", ".join(map(str, pids)) or "none"
    n = len(samples)
    stopped = {p: sum(1 for s in samples if s.get(p) in STOPPED) for p in pids}
    running = {p: sum(1 for s in samples if s.get(p) not in STOPPED + GONE) for p in pids}
    gone = {p: sum(1 for s in samples if s.get(p) in GONE) for p in pids}
    seen = "; ".join(f"{p}: stopped in {stopped[p]}, running in {running[p]}"
                     + (f", gone in {gone[p]}" if gone[p] else "") + f" of {n} samples" for p in pids) \
        or "no process was named"
    return [_check(f"engine process(es) {names} seen stopped (state T) in at least one sample",
                   bool(pids) and n > 0 and all(stopped.values()), seen),
            _check(f"engine process(es) {names} seen running in another (a duty cycle, not a hang)",
                   bool(pids) and n > 0 and all(running.values()), seen)]


def replica_runs(pid, state: str | None) -> dict[str, Any]:
    """The replica's own process alive and not stopped: the fault is its engine's alone."""
    return _check(f"the replica's process {pid} alive and not stopped", state not in STOPPED + GONE,
                  f"state {state}" if state not in GONE else "gone")


def tombstone_checks(pids: Sequence, found: Mapping[Any, str | None]) -> dict[str, Any]:
    """Each engine in ``pids`` recorded the injected error: ``found`` maps a pid to its tombstone's text (the
    wall-clock time the hook raised) or None (no tombstone)."""
    missing = [p for p in pids if not (found.get(p) or "").strip()]
    seen = ("no engine was named" if not pids else
            ", ".join(f"{p} {'raised it' if p not in missing else 'no record'}" for p in pids))
    return _check(f"engine process(es) {', '.join(map(str, pids))} recorded the injected error (their tombstone)",
                  bool(pids) and not missing, seen)


def _mask(status: str, key: str) -> int | None:
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            try:
                return int(value.strip(), 16)
            except ValueError:
                return None
    return None


def handles(status: str, sig: int = ERROR_SIGNAL) -> tuple[bool, str]:
    """Whether the process whose ``/proc/PID/status`` is ``status`` takes ``sig`` itself (a handler: its
    ``SigCgt`` bit; or blocked, for a thread that waits for it: ``SigBlk``) rather than dying of it or
    ignoring it; and what was seen."""
    bit = 1 << (int(sig) - 1)
    caught, blocked, ignored = (_mask(status, k) for k in ("SigCgt", "SigBlk", "SigIgn"))
    name = signal.Signals(sig).name
    if caught is None:
        return False, "its signal masks could not be read (gone?)"
    if ignored is not None and ignored & bit:
        return False, f"it ignores {name}"
    if caught & bit:
        return True, f"it has a handler of {name}"
    if blocked is not None and blocked & bit:
        return True, f"it blocks {name} (a thread waits for it)"
    return False, f"no handler of {name}: its default action would kill it"


def wedge_request(run_id: str | None, spin: bool = False) -> str:
    """What the rig leaves an engine before the signal so that the signal wedges it (one line of JSON, read by
    :func:`serve_apps.engine_faults.take_request`)."""
    return json.dumps({"fault": "wedge", "run": run_id, "spin": bool(spin)}) + "\n"


def void_request(run_id: str | None) -> str:
    """What replaces a request the engine never took at the run's end: the signal already armed the engine, so its
    next step takes a request; this one makes it do nothing (:data:`serve_apps.engine_faults.VOID`)."""
    return json.dumps({"fault": "void", "run": run_id}) + "\n"


HELD = ("garbage", "stall", "slow")  # the faults an engine holds while it steps (serve_apps.held_faults.HELD)
HELD_WORDS = {"wedge": "wedged", "garbage": "producing garbage", "stall": "admitting nothing new",
              "slow": "slowed"}
MAX_SLOW_FACTOR = 100.0  # serve_apps.held_faults.MAX_FACTOR: a slower step is a hang, not a straggler


def marked_fault(scope: str | None) -> str:
    """The fault whose mark a scope's engines carry: ``engine-wedge`` wedge, ``engine-garbage`` garbage,
    ``engine-stall`` stall, ``engine-slow`` slow."""
    fault = str(scope or "").removeprefix("engine-")
    return fault if fault in HELD else "wedge"


SLOW_HOLD_MARGIN_S = 30.0  # a slow engine lets go by itself this long after the fault's duration (the rig died)


def slow_hold_s(duration_s: float) -> float:
    """How long at most an engine holds engine-slow (the request's ``hold_s``): its duration and
    :data:`SLOW_HOLD_MARGIN_S`; the rig ends it at its duration, the engine itself past this."""
    return float(duration_s) + SLOW_HOLD_MARGIN_S


def held_request(fault: str, run_id: str | None, factor: float | None = None, hold_s: float | None = None) -> str:
    """What the rig leaves an engine before the signal so that the signal makes it hold ``fault`` (garbage, stall,
    or slow with its ``factor``) for this run (one line of JSON, read by
    :func:`serve_apps.engine_faults.take_request`); ``hold_s``: how long at most the engine holds it (it then
    removes its mark and lets go by itself; slow's is :func:`slow_hold_s`), None: until the mark is removed."""
    if fault not in HELD:
        raise UsageError(f"an engine holds one of {', '.join(HELD)}, not {fault!r}")
    limit = {} if hold_s is None else {"hold_s": round(float(hold_s), 3)}
    if fault == "slow":
        return json.dumps({"fault": fault, "run": run_id, "factor": slow_factor(factor), **limit}) + "\n"
    return json.dumps({"fault": fault, "run": run_id, **limit}) + "\n"


def slow_factor(factor: Any) -> float:
    """engine-slow's factor: a number above 1 and at most :data:`MAX_SLOW_FACTOR` (refused otherwise)."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) \
            or not 1.0 < factor <= MAX_SLOW_FACTOR:
        raise UsageError(f"engine-slow: factor must be a number above 1 and at most {MAX_SLOW_FACTOR:g}, "
                         f"got {factor!r}")
    return float(factor)


def mark_field(text: str | None, name: str) -> Any:
    """A field of a held fault's mark (JSON); None when there is none or the mark cannot be read."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value.get(name) if isinstance(value, dict) else None


def slowed_by(text: str | None) -> tuple[float, float] | None:
    """What a slow mark measured: (the mean step before, the mean step since) in seconds, or None while either is
    unmeasured (no step before the fault, or none since)."""
    base, since = mark_field(text, "base_s"), mark_field(text, "step_s")
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (base, since))
    return (float(base), float(since)) if ok else None


def mark_steps(text: str | None) -> int | None:
    """The steps a held fault's mark counts since the fault began; None when there are none or it cannot be read."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def held_checks(fault: str, pids: Sequence, marks: Mapping[Any, str | None], states: Mapping[Any, str | None],
                run_id: str | None) -> list[dict[str, Any]]:
    """The proof of a held fault (garbage, stall): each engine in ``pids`` wrote its mark naming ``run_id``
    (``marks``: pid -> the mark's text or None) and is alive and not stopped (``states``); a stall also: each
    engine stepped since it began (its mark's steps at least 1: its running requests went on); slow: stepping on, and
    each engine's mean step since it began at least half the factor times its mean step before (:func:`_slower`)."""
    names = ", ".join(map(str, pids)) or "none"
    word = HELD_WORDS[fault]
    runs = {p: mark_run(marks.get(p)) for p in pids}
    seen_marks = ", ".join(f"{p} {word if runs[p] == run_id else 'no mark' if marks.get(p) is None else 'another run'}"
                           for p in pids) or "no engine was named"
    seen_states = ", ".join(f"{p} {states.get(p) or 'gone'}" for p in pids) or "no engine was named"
    out = [_check(f"engine process(es) {names} {word} (their {fault} mark, this run's)",
                  bool(pids) and run_id is not None and all(runs[p] == run_id for p in pids), seen_marks),
           _check(f"engine process(es) {names} alive and not stopped", bool(pids)
                  and all(states.get(p) not in STOPPED + GONE for p in pids), seen_states)]
    if fault == "slow":
        out.append(_slower(pids, names, marks))
    if fault in ("stall", "slow"):
        steps = {p: mark_steps(marks.get(p)) for p in pids}
        out.append(_check(f"engine process(es) {names} stepping on (running requests go on)",
                          bool(pids) and all((steps[p] or 0) >= 1 for p in pids),
                          ", ".join(f"{p} {'no count' if steps[p] is None else f'{steps[p]} steps'} since the {fault} began"
                                    for p in pids) or "no engine was named"))
    return out


def _slower(pids: Sequence, names: str, marks: Mapping[Any, str | None]) -> dict[str, Any]:
    """slow's proof that the hook acted: each engine's mean step since the fault at least half its factor times the
    mean step before (the engine's own clock; both measured, else not proven). Nearly tautological by design: the
    step time since includes the sleep the hook itself adds, so it proves the hook took the fault and slept in the
    engine's steps, not that the engine's work or a client's tokens slowed (the run's straggler figures, from the
    client's side, say that)."""
    seen, ok = [], bool(pids)
    for p in pids:
        factor, times = mark_field(marks.get(p), "factor"), slowed_by(marks.get(p))
        if times is None or not isinstance(factor, (int, float)):
            seen.append(f"{p} unmeasured (no step timed before the fault, or none since)")
            ok = False
            continue
        ratio = times[1] / times[0]
        ok = ok and ratio >= factor / 2
        seen.append(f"{p} step {times[0] * 1000:.2f} ms before, {times[1] * 1000:.2f} ms since: "
                    f"x{ratio:.2f} (factor {factor:g})")
    return _check(f"the engine's hook slowed its steps: engine process(es) {names} mean step since at least half the "
                  f"factor times the one before, by the engine's own clock (the hook's sleep included: it shows the "
                  f"hook acting, not that a client saw slower tokens)", ok,
                  ", ".join(seen) or "no engine was named")


def mark_run(text: str | None) -> str | None:
    """The run a wedge mark (or a request) names; None when there is none or it cannot be read."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value.get("run") if isinstance(value, dict) and isinstance(value.get("run"), str) else None


def wedge_checks(pids: Sequence, marks: Mapping[Any, str | None], states: Mapping[Any, str | None],
                 run_id: str | None) -> list[dict[str, Any]]:
    """The proof of a wedge: each engine in ``pids`` wrote its wedge mark naming ``run_id`` (``marks``: pid ->
    the mark's text or None), and is alive and not stopped (``states``: pid -> its state letter, None when gone):
    its step blocked (S) or spinning (R), never T, which is a hang by SIGSTOP."""
    names = ", ".join(map(str, pids)) or "none"
    runs = {p: mark_run(marks.get(p)) for p in pids}
    seen_marks = ", ".join(f"{p} {'wedged' if runs[p] == run_id else 'no mark' if marks.get(p) is None else 'another run'}"
                           for p in pids) or "no engine was named"
    seen_states = ", ".join(f"{p} {states.get(p) or 'gone'}" for p in pids) or "no engine was named"
    return [_check(f"engine process(es) {names} wedged in their step (their wedge mark, this run's)",
                   bool(pids) and run_id is not None and all(runs[p] == run_id for p in pids), seen_marks),
            _check(f"engine process(es) {names} alive and not stopped (a wedge, not SIGSTOP)",
                   bool(pids) and all(states.get(p) not in STOPPED + GONE for p in pids), seen_states)]


def release_outcome(pid: Any, mark: str | None, run_id: str | None, state: str | None,
                    fault: str = "wedge") -> dict[str, Any]:
    """What the end of a wedge (or of a held ``fault``) finds of engine ``pid``: ``released`` (its mark names this
    run: the rig removes it), or why not: the engine gone (something real ended it: its replica was replaced), no
    mark (it never took the fault), or another run's mark (left alone)."""
    ours = run_id is not None and mark_run(mark) == run_id
    alive = state not in GONE
    found = (f"{HELD_WORDS[fault]} (this run's mark)" if ours else f"no {fault} mark" if mark is None
             else "another run's mark")
    return {"pid": pid, "released": ours, "engine": "alive" if alive else "gone", "found": found}
