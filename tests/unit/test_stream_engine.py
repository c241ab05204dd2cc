"""The stream target's engine child: what the replica knows of it when it is stopped, resumed and killed."""

import asyncio
import os
import signal
import time

import pytest

from serve_apps import stream_engine
from chaos.backends.local import procs


def wait_for(engine, state, timeout=5.0):
    end = time.monotonic() + timeout
    while engine.state() != state and time.monotonic() < end:
        time.sleep(0.05)
    return engine.state()


def test_the_engine_is_ok_hung_while_stopped_and_dead_for_good_once_killed():
    engine = stream_engine.EngineProcess()
    try:
        assert wait_for(engine, "ok") == "ok"
        assert "EngineCore" in procs.cmdline(engine.pid)  # how the backends find it
        assert procs.parent(engine.pid) == os.getpid()
        os.kill(engine.pid, signal.SIGSTOP)
        assert wait_for(engine, "hung") == "hung"
        os.kill(engine.pid, signal.SIGCONT)
        assert wait_for(engine, "ok") == "ok"
        os.kill(engine.pid, signal.SIGKILL)
        assert wait_for(engine, "dead") == "dead"
        time.sleep(stream_engine.HUNG_AFTER_S + 0.2)
        assert engine.state() == "dead"  # dead stays dead
        with pytest.raises(stream_engine.EngineDead):
            asyncio.run(stream_engine.wait_ready(engine))
    finally:
        engine.close()


def test_a_request_waits_while_the_engine_is_hung_and_goes_on_when_it_resumes():
    engine = stream_engine.EngineProcess()
    try:
        os.kill(engine.pid, signal.SIGSTOP)
        assert wait_for(engine, "hung") == "hung"

        async def request():
            asyncio.get_running_loop().call_later(0.5, os.kill, engine.pid, signal.SIGCONT)
            t0 = time.monotonic()
            await stream_engine.wait_ready(engine)
            return time.monotonic() - t0

        assert asyncio.run(request()) >= 0.4
    finally:
        engine.close()


def test_the_orphaned_engine_ends_when_its_replica_is_gone():
    """A replica SIGKILLed (replica kill, Serve's replacement) leaves no engine behind: the child's next
    beat finds the pipe closed and it exits."""
    r, w = os.pipe()
    import subprocess
    import sys
    child = subprocess.Popen([stream_engine.ARGV0, "-c", stream_engine._CHILD, str(w)], executable=sys.executable,
                             pass_fds=(w,))
    os.close(w)
    os.read(r, 1)
    os.close(r)  # the replica's end gone
    assert child.wait(timeout=5) != 0
