"""The engine faults an engine *holds* while it goes on stepping: ``garbage`` (its tokens wrong) and ``stall`` (it
admits no new request), armed by the signal of :mod:`serve_apps.engine_faults` with a request naming one of them.

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

On the **stream target** its engine child holds the same marks and says so through its pipe
(:mod:`serve_apps.stream_engine`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable

GARBAGE, STALL = "garbage", "stall"
HELD = (GARBAGE, STALL)
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


MARK_WIDTH = 160  # a held fault's mark is this many bytes and a newline, rewritten in place (never recreated)


def mark_text(run: Any, began: float, steps: int) -> str:
    """A held fault's mark: the run it belongs to, when it began (wall clock) and the engine's steps since, padded
    to :data:`MARK_WIDTH` (so a rewrite in place leaves no tail of an older one)."""
    return json.dumps({"run": run, "t": round(began, 3), "steps": int(steps)}).ljust(MARK_WIDTH) + "\n"


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
    rewrites it in place with the steps so far (the engine's word that it steps on); a mark that is gone ends
    the fault. ``clock`` is a seam for tests."""

    def __init__(self, fault: str, run: Any, path: str, look_s: float = LOOK_S,
                 clock: Callable[[], float] = time.monotonic):
        self.fault, self.run, self.path = fault, run, path
        self.look_s, self.clock = look_s, clock
        self.began = time.time()
        self.steps = 0
        self.looked = clock()

    def start(self) -> bool:
        """Write the mark (False: it could not be: the fault is not held, its proof then fails)."""
        return write_atomically(self.path, mark_text(self.run, self.began, 0))

    def step(self) -> None:
        self.steps += 1

    def holding(self) -> bool:
        """Whether the fault still holds (its mark there); looks, and rewrites it, at most every ``look_s``."""
        now = self.clock()
        if now - self.looked < self.look_s:
            return True
        self.looked = now
        return rewrite(self.path, mark_text(self.run, self.began, self.steps))


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
