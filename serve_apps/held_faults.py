"""The engine faults an engine *holds* while it goes on stepping: ``garbage`` (its tokens wrong), ``stall`` (it
admits no new request) and ``slow`` (every step ``factor`` times as long: an even straggler), armed by the signal
of :mod:`serve_apps.engine_faults` with a request naming one of them.

Like a wedge, such a fault is held **for as long as its mark exists** (:class:`Held`: a small JSON file beside the
wedge mark, ``/tmp/availproof-engine-<fault>-<pid>``, written by the engine as the fault begins: the run it belongs
to, when it began, and how many steps the engine took since, rewritten as it steps): nothing in the engine ends
it; the rig removes the mark at the run's end only while it still names the run, or the engine goes with its
replica. Unlike a wedge the engine keeps stepping, so the mark is looked at from the step itself, at most every
:data:`LOOK_S` (no system call on most steps).

What each does on **vLLM** (the hook wraps ``EngineCore.step``, :mod:`serve_apps.engine_faults`):

- **garbage** (:func:`corrupt_outputs`): the token ids of every output the step returns are shifted by one
  (:func:`corrupt_ids`: ``t - 1``, 0 to 1, always an id of the vocabulary) before they leave the engine, at full
  speed; the scheduler keeps the true ones (lengths, EOS and stop tokens unchanged), so what a client reads is
  wrong and nothing else is, as with a device that computes wrong logits. A check needs the right answer to tell:
  on vLLM only a golden answer can (``chaos.load.continuity``; none is recorded yet: its figure is null there).
- **stall** (:func:`close_admission`): the scheduler's KV-cache manager refuses the blocks of every request not
  yet started (``allocate_slots`` returns None for a request in status ``WAITING``), which is vLLM's own path
  for "no room for a new request" (``Scheduler.schedule``: the waiting loop stops there): requests already
  running go on and finish, new ones wait for good, the busy loop keeps stepping (``has_requests`` is true) and
  the engine answers its health check. Reopened (:func:`open_admission`) when the mark is gone.
- **slow** (:class:`Slowdown`, the request's ``factor`` F > 1): after each step the engine sleeps (F - 1) times that
  step's measured duration, so every step takes F times as long, evenly (the straggler of power or thermal capping,
  a degraded link, a noisy neighbour; ``engine-stutter``'s SIGSTOP duty cycle is the bimodal one). Its mark says the
  factor, ``base_s`` (the mean duration of the engine's steps before, :class:`Recent`) and ``step_s`` (the mean
  since, the sleep included: the engine's own measure that its hook slowed its steps). Unlike garbage and stall the
  rig ends it itself after its duration (the mark removed while it names the run), and its request says ``hold_s``
  (the duration and a margin): past it the engine removes the mark and lets go by itself, so a rig that died
  mid-fault leaves no straggler behind (the mark says ``until``, the engine's wall clock).

On the **stream target** its engine child holds the same marks and says so through its pipe
(:mod:`serve_apps.stream_engine`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable

GARBAGE, STALL, SLOW = "garbage", "stall", "slow"
HELD = (GARBAGE, STALL, SLOW)
MAX_FACTOR = 100.0  # a slower step is a hang (engine-wedge), not a straggler
LOOK_S = 0.1  # a held fault looks this often (at most) whether its mark is still there, and rewrites it

logger = logging.getLogger(__name__)


def write_atomically(path: str, text: str) -> bool:
    """``text`` into ``path`` through a temporary file and a rename; never raises (logged, False)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return True
    except OSError:
        logger.exception("availproof: %s could not be written", path)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


MARK_WIDTH = 240  # a held fault's mark is this many bytes and a newline, rewritten in place (never recreated)


def mark_text(run: Any, began: float, steps: int, detail: dict | None = None, until: float | None = None) -> str:
    """A held fault's mark: the run it belongs to, when it began (wall clock), the engine's steps since, ``until``
    (the wall-clock time the engine lets it go by itself, when the request set one) and the fault's own ``detail``
    (slow: its factor and step times), padded to :data:`MARK_WIDTH` (so a rewrite in place leaves no tail of an
    older one)."""
    return json.dumps({"run": run, "t": round(began, 3), "steps": int(steps),
                       **({} if until is None else {"until": round(until, 3)}),
                       **(detail or {})}).ljust(MARK_WIDTH) + "\n"


def hold_seconds(request: dict) -> float | None:
    """How long at most the engine holds the fault a request names (``hold_s``: a positive number; the rig sets it
    for slow, its duration and a margin, so a fault the rig never ends, because it died, ends by itself), else None
    (held until the mark is removed)."""
    s = request.get("hold_s")
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 < s < float("inf"):
        return None
    return float(s)


def rewrite(path: str, text: str) -> bool:
    """``text`` over the mark ``path`` in place, never creating it (a mark the rig removed stays removed, whatever
    the timing); False when it is gone, True otherwise (one that cannot be written is still there)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        os.pwrite(fd, text.encode(), 0)
    except OSError:
        pass
    finally:
        os.close(fd)
    return True


class Held:
    """One fault this engine holds while its mark (``path``) exists. :meth:`start` writes the mark; each step
    calls :meth:`step` (counted) and :meth:`holding`, which looks at the mark at most every ``look_s`` and
    rewrites it in place with the steps so far (the engine's word that it steps on) and ``detail()`` (the fault's
    own figures, or None); a mark that is gone ends the fault. ``clock`` is a seam for tests."""

    def __init__(self, fault: str, run: Any, path: str, look_s: float = LOOK_S,
                 clock: Callable[[], float] = time.monotonic, detail: Callable[[], dict] | None = None,
                 hold_s: float | None = None):
        self.fault, self.run, self.path, self.detail = fault, run, path, detail
        self.look_s, self.clock = look_s, clock
        self.began = time.time()
        self.steps = 0
        self.looked = clock()
        # past this (``clock``) the engine lets the fault go by itself, its mark removed: a rig that died ends nothing
        self.deadline = None if hold_s is None else self.looked + hold_s
        self.until = None if hold_s is None else self.began + hold_s  # the same, wall clock, for the mark

    def start(self) -> bool:
        """Write the mark (False: it could not be: the fault is not held, its proof then fails)."""
        return write_atomically(self.path, self.text())

    def text(self) -> str:
        return mark_text(self.run, self.began, self.steps, self.detail() if self.detail else None, self.until)

    def step(self) -> None:
        self.steps += 1

    def holding(self) -> bool:
        """Whether the fault still holds (its mark there, its deadline not passed); looks, and rewrites it, at most
        every ``look_s``. Past its deadline the engine removes the mark itself and lets go."""
        now = self.clock()
        if now - self.looked < self.look_s:
            return True
        self.looked = now
        if self.expired(now):
            try:
                os.unlink(self.path)
            except OSError:
                pass
            return False
        return rewrite(self.path, self.text())

    def expired(self, now: float | None = None) -> bool:
        """Past the deadline the request set (never, without one)."""
        return self.deadline is not None and (self.clock() if now is None else now) >= self.deadline


def slow_factor(request: dict) -> float | None:
    """The factor a request to hold ``slow`` names: a number above 1 and at most :data:`MAX_FACTOR`, else None."""
    f = request.get("factor")
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 1.0 < f <= MAX_FACTOR:
        return None
    return float(f)


class Recent:
    """The mean duration of an engine's recent steps (an exponential mean, weight ``alpha`` for the newest), None
    before the first: what ``slow`` compares its steps with."""

    def __init__(self, alpha: float = 0.1):
        self.alpha, self.mean = alpha, None

    def add(self, seconds: float) -> None:
        self.mean = seconds if self.mean is None else self.mean + self.alpha * (seconds - self.mean)


class Slowdown:
    """``slow`` held: each step followed by a sleep of (``factor`` - 1) times its measured duration (:meth:`extra`),
    so it takes ``factor`` times as long; the steps' mean duration before (``base_s``) and since (``step_s``, the
    sleep included) for the mark (:meth:`detail`)."""

    def __init__(self, factor: float, base_s: float | None):
        self.factor, self.base_s = factor, base_s
        self.total_s, self.n = 0.0, 0

    def extra(self, step_s: float) -> float:
        return max(0.0, (self.factor - 1.0) * step_s)

    def record(self, seconds: float) -> None:
        """One step that ran the model, ``seconds`` long with its sleep."""
        self.total_s += seconds
        self.n += 1

    def detail(self) -> dict:
        return {"factor": self.factor, "base_s": None if self.base_s is None else round(self.base_s, 6),
                "step_s": round(self.total_s / self.n, 6) if self.n else None}


def corrupt_ids(ids) -> list[int]:
    """Token ids shifted by one (``t - 1``; 0 to 1): every id wrong, every one still in the vocabulary."""
    return [t - 1 if t > 0 else 1 for t in ids]


def corrupt_outputs(outputs) -> int:
    """The new token ids of every request's output in a step's outputs (vLLM: ``{client: EngineCoreOutputs}``, or
    None) corrupted in place (:func:`corrupt_ids`); how many tokens."""
    n = 0
    for eco in (outputs or {}).values():
        for out in getattr(eco, "outputs", None) or ():
            ids = getattr(out, "new_token_ids", None)
            if ids:
                out.new_token_ids = corrupt_ids(ids)
                n += len(ids)
    return n


_GATED = "__availproof_admission_closed__"


def close_admission(manager) -> bool:
    """vLLM's KV-cache manager ``manager`` made to refuse the blocks of every request not yet started (its
    ``allocate_slots`` returns None for one whose status is ``WAITING``; a running one is served as before), on the
    instance; False if it already refuses."""
    if getattr(manager, _GATED, False):
        return False
    allocate = manager.allocate_slots

    def refuse_new(request, *args, **kwargs):
        if getattr(getattr(request, "status", None), "name", None) == "WAITING":
            return None  # vLLM's "the request cannot be scheduled": it stays waiting
        return allocate(request, *args, **kwargs)

    manager.allocate_slots = refuse_new
    setattr(manager, _GATED, True)
    return True


def open_admission(manager) -> bool:
    """Undo :func:`close_admission` (the class's ``allocate_slots`` again); False if it was not closed."""
    if not getattr(manager, _GATED, False):
        return False
    del manager.allocate_slots
    delattr(manager, _GATED)
    return True
