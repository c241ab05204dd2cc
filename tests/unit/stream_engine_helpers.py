"""What the tests of the engine-side faults over the stream target's real engine child share (engine-garbage,
engine-stall, engine-slow, engine-wedge): the engine fixture, a poll, and the local backend's view of one engine.

The fixture is imported by name into a test module (``from .stream_engine_helpers import engine``)."""

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from serve_apps import engine_faults as app, held_faults
from serve_apps.stream_engine import EngineProcess


BASE_STEPS = 20  # the fixture's engine has stepped this many steps (~0.1 s) before a test injects into it


def until(cond, timeout=5.0) -> bool:
    """Poll ``cond`` every 50 ms until it holds (True) or ``timeout`` seconds have passed (False): polled, not
    slept, so that a loaded machine answers later rather than fails."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def engine():
    """The stream target's real engine child, with the fault hook; at the end every file a fault left for its pid
    (the held faults' marks, the wedge's mark, a request not taken, an errored engine's tombstone) is removed."""
    e = EngineProcess(faults=True)
    assert e.wait_started(10)
    assert until(lambda: e.steps.count >= BASE_STEPS, 10)  # an engine serving for a while: slow's base is measured
    yield e
    for f in held_faults.HELD:
        Path(app.mark_path(f, e.pid)).unlink(missing_ok=True)
    for path in (app.wedge_path(e.pid), app.request_path(e.pid), app.tombstone_path(e.pid)):
        Path(path).unlink(missing_ok=True)
    e.close()


def one_engine_backend(engine_pid, run_id="run-1"):
    """What the local backend's engine faults read of the backend: its run and the engine's pid (the one child)."""
    return SimpleNamespace(run_id=run_id, engine_pids=lambda r, to: [engine_pid])
