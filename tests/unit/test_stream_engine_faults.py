"""The stream target's engine child driven for real: stopped (SIGSTOP) it lets no token out for any request,
in flight or new, until it continues (SIGCONT); errored (SIGUSR1, with AVAILPROOF_ENGINE_FAULTS=1) it
leaves its tombstone, says so and stays errored; without the variable SIGUSR1 is a crash (dead), as before
the hook existed."""

import asyncio
import contextlib
import glob
import os
import signal
import time

import pytest

from serve_apps import engine_faults, stream_engine
from serve_apps.stream_engine import EngineDead, EngineProcess, generate


def wait_for(engine, state, timeout=5.0):
    end = time.monotonic() + timeout
    while engine.state() != state and time.monotonic() < end:
        time.sleep(0.02)
    return engine.state()


def remove_tombstone(pid):
    for p in (engine_faults.tombstone_path(pid), *glob.glob(f"{engine_faults.tombstone_path(pid)}.*.tmp")):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(p)


@pytest.fixture
def engine():
    e = EngineProcess()
    assert e.wait_started(10) and e.state() == "ok"
    yield e
    e.close()
    remove_tombstone(e.pid)  # a SIGUSR1 left one


def test_sigusr1_with_the_hook_is_an_error_reported_by_the_engine_not_a_crash(engine):
    os.kill(engine.pid, signal.SIGUSR1)
    assert wait_for(engine, "errored") == "errored"
    assert engine.error == engine_faults.MESSAGE  # it came through the pipe, not only from the exit status
    assert engine.proc.wait(timeout=5) == engine_faults.ERROR_EXIT
    assert engine.reason() == "engine error (injected)"
    time.sleep(stream_engine.HUNG_AFTER_S + 0.2)
    assert engine.state() == "errored"  # for good
    with pytest.raises(EngineDead, match=r"engine error \(injected\)"):
        asyncio.run(stream_engine.wait_ready(engine))


def test_without_the_variable_sigusr1_keeps_its_default_meaning(monkeypatch):
    monkeypatch.setenv(engine_faults.ENV, "1")  # the replica's own: not the engine's when faults=False
    e = EngineProcess(faults=False)
    try:
        assert e.wait_started(10)
        os.kill(e.pid, signal.SIGUSR1)
        assert wait_for(e, "dead") == "dead"
        assert e.proc.wait(timeout=5) == -signal.SIGUSR1  # terminated by the signal: nothing was installed
        assert e.error is None and e.reason() == "engine process died"
    finally:
        e.close()


def test_the_replica_sets_the_variable_for_its_engine_alone(monkeypatch):
    monkeypatch.delenv(engine_faults.ENV, raising=False)
    e = EngineProcess(faults=True)
    try:
        with open(f"/proc/{e.pid}/environ", "rb") as f:
            assert f"{engine_faults.ENV}=1".encode() in f.read().split(b"\0")
        assert engine_faults.ENV not in os.environ
    finally:
        e.close()


def test_no_token_comes_out_while_the_engine_is_stopped_and_tokens_resume_after(engine):
    """Two requests: one streaming when the engine stops, one arriving while it is stopped. Neither gets a
    token from the moment the replica sees the engine hung until SIGCONT; both then finish, in order."""
    words = [f"w{i}" for i in range(40)]
    delays = [0.0] + [0.05] * 39  # 2 s of tokens: longer than HUNG_AFTER_S after the stop
    seen = {"hung": None, "cont": None}

    async def consume(name, out):
        async for w in generate(engine, words, delays, poll_s=0.02):
            out.append((time.monotonic(), w))
            if name == "first" and len(out) == 3:
                os.kill(engine.pid, signal.SIGSTOP)

    async def watch_states():
        while seen["hung"] is None:
            if engine.state() == "hung":
                seen["hung"] = time.monotonic()
            await asyncio.sleep(0.01)

    async def main():
        first, second = [], []
        t1 = asyncio.create_task(consume("first", first))
        await watch_states()
        t2 = asyncio.create_task(consume("second", second))  # a new request while hung
        await asyncio.sleep(1.5)
        seen["cont"] = time.monotonic()
        os.kill(engine.pid, signal.SIGCONT)
        await asyncio.wait_for(asyncio.gather(t1, t2), timeout=15)
        return first, second

    first, second = asyncio.run(main())
    assert [w for _, w in first] == words and [w for _, w in second] == words
    hung, cont = seen["hung"], seen["cont"]
    # a token already past its engine check when the stop was noticed may still land just after it
    during = [t for t, _ in first + second if hung + 0.1 < t < cont]
    assert during == []
    assert second[0][0] >= cont  # the new request's first token only after the engine continued
    assert any(t >= cont for t, _ in first)  # the request in flight went on after SIGCONT
    assert max(b - a for (a, _), (b, _) in zip(first, first[1:])) >= cont - hung - 0.1


def test_a_request_in_flight_fails_with_the_reason_when_the_engine_errors(engine):
    async def main():
        out = []
        with pytest.raises(EngineDead, match=r"engine error \(injected\)"):
            async for w in generate(engine, ["a"] * 100, [0.0] + [0.02] * 99, poll_s=0.02):
                out.append(w)
                if len(out) == 2:
                    os.kill(engine.pid, signal.SIGUSR1)
        return out

    assert 2 <= len(asyncio.run(main())) < 100


def test_a_hung_engine_that_is_killed_fails_the_waiting_request_as_dead(engine):
    os.kill(engine.pid, signal.SIGSTOP)
    assert wait_for(engine, "hung") == "hung"

    async def main():
        asyncio.get_running_loop().call_later(0.3, os.kill, engine.pid, signal.SIGKILL)
        with pytest.raises(EngineDead, match="engine process died"):
            async for _ in generate(engine, ["a", "b"], [0.0, 0.0], poll_s=0.02):
                pass

    asyncio.run(main())
    assert engine.state() == "dead"


@pytest.fixture
def tombstone_engine():
    """A short-lived engine with the hook, and its tombstone's path (removed before and after)."""
    e = EngineProcess(faults=True)
    path = engine_faults.tombstone_path(e.pid)
    remove_tombstone(e.pid)  # a stale one (a reused pid's)
    assert e.wait_started(10)
    yield e, path
    e.close()
    remove_tombstone(e.pid)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.rmdir(path)


def test_sigusr1_leaves_the_engines_tombstone_then_the_error(tombstone_engine):
    """The engine's own record that it raised the injected error (the rig's proof of engine-error, as vLLM's
    hook writes it): engine_faults.tombstone_path(pid), the wall-clock time, one line; nothing else left."""
    e, path = tombstone_engine
    before = time.time()
    os.kill(e.pid, signal.SIGUSR1)
    assert wait_for(e, "errored") == "errored"
    assert e.proc.wait(timeout=5) == engine_faults.ERROR_EXIT
    after = time.time()
    with open(path) as f:
        text = f.read()
    assert text.endswith("\n") and text.count("\n") == 1
    assert before - 0.001 <= float(text) <= after + 0.001  # written as %.3f
    assert glob.glob(f"{path}.*.tmp") == []  # written atomically: the temporary name replaced
    assert stream_engine.TOMBSTONE + str(e.pid) == path


def test_a_tombstone_that_cannot_be_written_does_not_stop_the_error(tombstone_engine):
    e, path = tombstone_engine
    os.mkdir(path)  # os.replace onto a directory fails
    os.kill(e.pid, signal.SIGUSR1)
    assert wait_for(e, "errored") == "errored" and e.error == engine_faults.MESSAGE
    assert e.proc.wait(timeout=5) == engine_faults.ERROR_EXIT
    assert os.path.isdir(path) and glob.glob(f"{path}.*.tmp") == []  # its temporary file removed
