"""device-loss from inside the engine (serve_apps/device_loss.py, issue 46): a node's marker makes the running engine's
next step fail (or hang, then fail), and every new engine on the node fail (or hang) as it starts, on the stream
target's real engine child and on vLLM's step wrapper and plugin; the marker is the rig's to remove, by its token."""

import asyncio
import json
import os
import shutil
import time
import uuid

import pytest

from serve_apps import device_loss as dl, engine_faults
from serve_apps.stream_engine import EngineProcess
from serve_apps.stream_target import StreamTarget
from tests.unit.stream_engine_helpers import until

Target = StreamTarget.func_or_class.__mro__[1]  # the class as written, under Serve's ingress wrapper


@pytest.fixture
def node(monkeypatch):
    """A node key of this test's own (the engine child reads its marker under /tmp by it), removed at the end."""
    key = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(dl.NODE_ENV, key)
    yield key
    shutil.rmtree(dl.node_dir(key), ignore_errors=True)


def mark(key, mode="error", xid=79, token="tok"):
    return dl.set_marker(key, "run-1", "device-loss-1", token, mode, xid)


def kinds(key, pid=None):
    return [(r["kind"], r["at"]) for r in dl.look(key)["failures"] if pid is None or r["pid"] == pid]


# ---------------------------------------------------------------- the stream target's engine child
def test_the_marker_makes_the_running_engines_next_step_fail(node):
    e = EngineProcess(faults=True)
    try:
        assert e.wait_started(10) and e.state() == "ok"
        time.sleep(0.3)
        assert e.state() == "ok" and kinds(node) == []  # no marker: it steps on
        mark(node)
        assert until(lambda: e.state() == "errored", 5), e.state()
        assert e.reason() == dl.MESSAGE and e.proc.wait(5) == dl.ERROR_EXIT
        assert kinds(node, e.pid) == [("failed", "step")]
    finally:
        e.close()


def test_a_new_engine_on_the_node_fails_at_its_start(node):
    mark(node)
    e = EngineProcess(faults=True)
    try:
        assert e.wait_started(10)  # its one word: failed
        assert e.error == dl.MESSAGE and e.steps.count == 0
        assert kinds(node, e.pid) == [("failed", "init")]
    finally:
        e.close()


def test_another_nodes_marker_is_not_this_ones(node):
    other = f"{node}-other"
    try:
        mark(other)
        e = EngineProcess(faults=True)
        try:
            assert e.wait_started(10) and e.error is None and until(lambda: e.steps.count > 40, 5)
        finally:
            e.close()
    finally:
        shutil.rmtree(dl.node_dir(other), ignore_errors=True)


def test_hang_mode_stops_the_steps_while_it_holds_then_the_engine_fails(node):
    e = EngineProcess(faults=True)
    try:
        assert e.wait_started(10)
        mark(node, mode="hang", token="t1")
        assert until(lambda: ("hung", "step") in kinds(node, e.pid), 5)
        seen = e.steps.count
        time.sleep(0.4)
        assert e.steps.count <= seen + 1 and e.proc.poll() is None  # alive, not stepping: hung
        assert until(lambda: e.state() == "hung", 3)
        assert dl.clear(node, "t1")["removed"]  # the device back: its context is not, the engine fails
        assert until(lambda: e.state() == "errored", 5) and kinds(node, e.pid) == [("hung", "step"), ("failed", "step")]
    finally:
        e.close()


def test_hang_mode_holds_a_new_engines_start_and_lets_it_start_once_removed(node):
    mark(node, mode="hang", token="t1")
    e = EngineProcess(faults=True)
    try:
        assert not e.wait_started(0.6) and until(lambda: kinds(node, e.pid) == [("hung", "init")], 3)
        dl.clear(node, "t1")
        assert e.wait_started(5) and e.error is None and until(lambda: e.steps.count > 5, 5)
    finally:
        e.close()


def test_the_stream_replica_refuses_to_start_and_a_running_one_fails_its_health_check(node):
    t = Target(prefill_s=0.01, token_s=0.02, jitter=0.0)
    try:
        mark(node)
        assert until(lambda: t.engine.state() == "errored", 5)
        with pytest.raises(RuntimeError, match="GPU this engine runs on is lost"):
            asyncio.run(t.check_health())
    finally:
        t.engine.close()
    with pytest.raises(RuntimeError, match="failed at its start: device error"):
        Target(prefill_s=0.01, token_s=0.02, jitter=0.0)


# ---------------------------------------------------------------- vLLM: the step wrapper and the plugin
def test_vllm_s_step_raises_the_device_error_and_the_plugin_fails_a_new_engine(node, monkeypatch):
    class Fresh:  # an EngineCore of its own (install wraps a class's own step)
        def step(self):
            return ({}, True)

    engine_faults.install(Fresh, [], engine_faults.Trigger())
    monkeypatch.setattr(dl, "STEP", dl.StepWatch(look_s=0.0))
    core = Fresh()
    assert core.step() == ({}, True)
    mark(node, xid=48)
    with pytest.raises(dl.DeviceLost, match="XID 48: double-bit ECC error.*uncorrectable ECC error encountered"):
        core.step()
    assert kinds(node, os.getpid()) == [("failed", "step")]
    monkeypatch.setenv(engine_faults.ENV, "1")
    with pytest.raises(dl.DeviceLost):  # before vLLM is even imported: the start fails
        engine_faults.register()
    assert ("failed", "init") in kinds(node, os.getpid())


def test_the_step_watch_looks_at_most_every_look_s_and_a_hang_blocks_until_removed(node):
    now = [0.0]
    w = dl.StepWatch(look_s=0.1, clock=lambda: now[0])
    w.check()
    mark(node, mode="hang", token="t")
    w.check()  # looked at 0.0: not again before 0.1
    now[0] = 0.2
    slept = []

    def sleep(s):
        slept.append(s)
        if len(slept) == 3:
            dl.clear(node, "t")

    with pytest.raises(dl.DeviceLost):
        w.check(sleep=sleep)
    assert len(slept) == 3 and [k for k, _ in kinds(node)] == ["hung", "failed"]


def test_a_hang_at_start_goes_on_once_the_marker_is_gone(node):
    mark(node, mode="hang", token="t")
    calls = []
    dl.at_start(sleep=lambda s: calls.append(dl.clear(node, "t")))
    assert len(calls) == 1 and kinds(node) == [("hung", "init")]


# ---------------------------------------------------------------- the rig's side: only its own marker
def test_clear_removes_only_the_marker_holding_the_token(node):
    mark(node, token="mine")
    out = dl.clear(node, "theirs")
    assert not out["removed"] and out["state"] == "another" and dl.read_marker(node)["token"] == "mine"
    assert dl.clear(node, "mine") == {"removed": True, "state": "ours", "why": None}
    gone = dl.clear(node, "mine")
    assert not gone["removed"] and gone["state"] == "gone"


def test_a_marker_is_not_written_over_another(node):
    mark(node, token="first")
    with pytest.raises(RuntimeError, match="already on this node"):
        mark(node, token="second")
    assert dl.read_marker(node)["token"] == "first"


def test_the_command_line_sets_looks_and_clears(node, capsys):
    assert dl.main(["set", "--node", node, "--run", "r", "--fault", "f", "--token", "k", "--mode", "hang"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "hang"
    assert dl.main(["look", "--node", node]) == 0
    assert json.loads(capsys.readouterr().out)["marker"]["token"] == "k"
    assert dl.main(["set", "--node", node, "--token", "x"]) == 1
    assert "already" in json.loads(capsys.readouterr().out)["error"]
    assert dl.main(["clear", "--node", node, "--token", "k"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] is True
    assert dl.read_marker(node) is None


def test_a_new_marker_clears_an_earlier_faults_records(node):
    mark(node, token="a")
    dl.record("failed", "step", dl.read_marker(node), node, pid=1)
    dl.clear(node, "a")
    mark(node, token="b")
    assert dl.look(node)["failures"] == [] and dl.read_marker(node)["token"] == "b"
