"""engine-garbage and engine-stall (issue 44): faults the engine holds while it steps on, for as long as its mark
naming the run exists. The hook's pure parts (the ids shifted, the admission gate, a mark never recreated), vLLM's
step wrapper, the stream target's real engine child (garbage: its words are not the answer's and the client's exact
check says corrupted; stall: a running request completes, a new one gets no token), the local backend's proof and
release (only its own run's), and the KubeRay scripts through a real shell."""

import asyncio
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.recording import records as rec
from chaos import scopes
from chaos.backends import base, engine_faults
from chaos.backends.kuberay import KubeRayBackend, wedge as kw
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.local import engines
from chaos.backends.local.backend import LocalBackend
from chaos.load import continuity, integrity
from chaos.scopes.engine_garbage import garble_engine
from chaos.scopes.engine_stall import stall_engine
from serve_apps import engine_faults as app, held_faults, stream_tokens
from serve_apps.stream_engine import generate, wait_ready

from .stream_engine_helpers import engine, one_engine_backend, until  # noqa: F401 - engine: the fixture


@pytest.mark.parametrize("name,fault,method", [("engine-garbage", garble_engine, "garble_engine"),
                                               ("engine-stall", stall_engine, "stall_engine")])
def test_the_scopes_say_what_they_are_and_both_backends_run_them(name, fault, method):
    s = scopes.get(name)
    assert (s.fault, s.backend_methods) == (fault, (method,))
    assert s.zoned and s.every_target_affected and s.conflict_class == "replica-level"
    assert set(s.accesses(kube_access.Asked())) == set(kube_access.EXEC)
    for backend in (LocalBackend, KubeRayBackend):
        assert base.scope_capability(name) in base.capabilities_of(backend)
        assert not s.missing_on(backend)
    assert engine_faults.marked_fault(name) == name.removeprefix("engine-")


# ---------------------------------------------------------------- the hook (pure)
def test_every_id_is_shifted_and_stays_in_the_vocabulary():
    assert held_faults.corrupt_ids([0, 1, 2, 50256]) == [1, 0, 1, 50255]
    out = SimpleNamespace(new_token_ids=[5, 6])
    assert held_faults.corrupt_outputs({0: SimpleNamespace(outputs=[out])}) == 2 and out.new_token_ids == [4, 5]
    assert held_faults.corrupt_outputs(None) == 0


def test_the_gate_refuses_new_requests_only_and_opens_again():
    class Manager:
        def allocate_slots(self, request, n):
            return f"blocks for {n}"

    m = Manager()
    waiting, running = (SimpleNamespace(status=SimpleNamespace(name=s)) for s in ("WAITING", "RUNNING"))
    assert held_faults.close_admission(m) and not held_faults.close_admission(m)
    assert m.allocate_slots(waiting, 3) is None and m.allocate_slots(running, 3) == "blocks for 3"
    assert held_faults.open_admission(m) and m.allocate_slots(waiting, 3) == "blocks for 3"


def test_a_mark_the_rig_removed_is_never_written_back(tmp_path):
    clock = [0.0]
    held = held_faults.Held("stall", "run-1", str(tmp_path / "mark"), look_s=0.1, clock=lambda: clock[0])
    assert held.start() and engine_faults.mark_steps((tmp_path / "mark").read_text()) == 0
    held.step(), held.step()
    clock[0] = 0.2
    assert held.holding() and engine_faults.mark_steps((tmp_path / "mark").read_text()) == 2
    (tmp_path / "mark").unlink()
    clock[0] = 0.4
    assert not held.holding() and not (tmp_path / "mark").exists()


@pytest.fixture
def tmpdir_hook(tmp_path, monkeypatch):
    monkeypatch.setattr(app, "TOMBSTONE_DIR", str(tmp_path))
    app.HOLDING.clear()
    yield tmp_path
    app.HOLDING.clear()


def test_vllm_s_step_wrapper_corrupts_the_steps_tokens_until_the_mark_is_gone(tmpdir_hook, monkeypatch):
    class Core:
        def step(self):
            return {0: SimpleNamespace(outputs=[SimpleNamespace(new_token_ids=[7])])}, True

    trigger = app.Trigger()
    app.install(Core, [], trigger)
    monkeypatch.setattr(app.os, "getpid", lambda: 57)
    monkeypatch.setattr(held_faults, "LOOK_S", 0.0)
    Path(app.request_path(57)).write_text(engine_faults.held_request("garbage", "run-1"))
    trigger.arm()
    outputs, _ = Core().step()
    assert outputs[0].outputs[0].new_token_ids == [6]  # wrong from this step on
    assert engine_faults.mark_run(Path(app.mark_path("garbage", 57)).read_text()) == "run-1"
    app.HOLDING["garbage"].look_s = 0.0
    Path(app.mark_path("garbage", 57)).unlink()  # the run's end
    assert Core().step()[0][0].outputs[0].new_token_ids == [7] and not app.HOLDING


def test_vllm_s_step_wrapper_closes_the_scheduler_s_admission_and_opens_it_at_the_release(tmpdir_hook, monkeypatch):
    class Manager:
        def allocate_slots(self, request):
            return "blocks"

    class Core:
        scheduler = SimpleNamespace(kv_cache_manager=Manager())

        def step(self):
            return {}, True

    trigger = app.Trigger()
    app.install(Core, [], trigger)
    monkeypatch.setattr(app.os, "getpid", lambda: 58)
    Path(app.request_path(58)).write_text(engine_faults.held_request("stall", "run-1"))
    trigger.arm()
    new = SimpleNamespace(status=SimpleNamespace(name="WAITING"))
    Core().step()
    assert Core.scheduler.kv_cache_manager.allocate_slots(new) is None  # nothing new admitted
    app.HOLDING["stall"].look_s = 0.0
    Core().step()
    assert engine_faults.mark_steps(Path(app.mark_path("stall", 58)).read_text()) >= 1  # it steps on
    Path(app.mark_path("stall", 58)).unlink()
    Core().step()
    assert Core.scheduler.kv_cache_manager.allocate_slots(new) == "blocks" and not app.HOLDING


# ---------------------------------------------------------------- the stream target's real engine child
def _answer(e, prompt="the zone fails", n=8):
    key = stream_tokens.prompt_key(prompt)

    async def go():
        await wait_ready(e)
        return [w async for w in generate(e, [stream_tokens.word(key, i) for i in range(n)], [0.0] * n, poll_s=0.02)]
    return asyncio.run(asyncio.wait_for(go(), 5))


def test_the_garbled_stream_engine_s_words_are_wrong_and_the_exact_check_says_corrupted(engine):
    body = {"prompt": "the zone fails", "max_tokens": 8}
    assert integrity.deterministic(" ".join(_answer(engine)), body, 8) is None  # healthy first
    assert engines.hold(one_engine_backend(engine.pid), SimpleNamespace(replica_id="r1"), "garbage")() == [engine.pid]
    assert until(lambda: engine.steps.garbage)
    words = _answer(engine)
    key = stream_tokens.prompt_key(body["prompt"])
    assert all(w != stream_tokens.word(key, i) for i, w in enumerate(words))  # every token wrong
    assert integrity.deterministic(" ".join(words), body, 8)[0] == rec.CORRUPTED
    assert continuity.target_counts(words, key, 8, True)["tokens_corrupted"] == 8
    assert engine.state() == "ok" and engine.reason() is None  # at full speed, the health check passing
    checks = engines.held_checks({"pids": [engine.pid]}, "garbage", "run-1")
    assert [c["ok"] for c in checks] == [True, True], checks


def test_the_stalled_stream_engine_finishes_a_running_request_and_starts_no_new_one(engine):
    key = stream_tokens.prompt_key("p")

    async def go():
        await wait_ready(engine)  # admitted before the stall: running
        running = generate(engine, [stream_tokens.word(key, i) for i in range(20)], [0.0] + [0.03] * 19, poll_s=0.02)
        first = await running.__anext__()
        engines.hold(one_engine_backend(engine.pid), SimpleNamespace(replica_id="r1"), "stall")()
        rest = [w async for w in running]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(wait_ready(engine, poll_s=0.02), 1.0)  # a new request: never admitted
        return [first] + rest

    assert asyncio.run(go()) == [stream_tokens.word(key, i) for i in range(20)]
    assert engine.steps.stalled and engine.state() == "ok"
    assert until(lambda: [c["ok"] for c in engines.held_checks({"pids": [engine.pid]}, "stall", "run-1")]
                  == [True, True, True])


def test_the_run_s_end_releases_only_its_own_hold_and_the_engine_is_healthy_again(engine):
    engines.hold(one_engine_backend(engine.pid), SimpleNamespace(replica_id="r1"), "stall")()
    assert until(lambda: engine.steps.stalled)
    (kept,) = engines.release("another-run", [engine.pid], "stall")
    assert (kept["released"], kept["found"]) == (False, "another run's mark")
    time.sleep(0.3)
    assert engine.steps.stalled and Path(app.mark_path("stall", engine.pid)).exists()
    (done,) = engines.release("run-1", [engine.pid], "stall")
    assert (done["released"], done["engine"], done["found"]) == (True, "alive", "admitting nothing new (this run's mark)")
    assert until(lambda: not engine.steps.stalled)
    assert _answer(engine, "p", 3) == [stream_tokens.word(stream_tokens.prompt_key("p"), i) for i in range(3)]


def test_a_hold_that_never_took_is_unproven(engine):
    """No signal sent: no mark, the proof fails (nothing is claimed)."""
    assert [c["ok"] for c in engines.held_checks({"pids": [engine.pid]}, "garbage", "run-1")] == [False, True]
    assert [c["ok"] for c in engines.held_checks({"pids": [engine.pid]}, "stall", "run-1")] == [False, True, False]


# ---------------------------------------------------------------- the KubeRay scripts, through a real shell
@pytest.mark.parametrize("fault", ["garbage", "stall"])
def test_kuberay_s_scripts_hold_prove_and_release_through_a_shell(engine, fault):
    request = engine_faults.held_request(fault, "run-9").strip()
    out = subprocess.run(["sh", "-c", kw.wedge_script([engine.pid], request, fault)], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == [str(engine.pid)]
    assert until(lambda: engine.steps.garbage if fault == "garbage" else engine.steps.stalled)

    def ok():
        said = subprocess.run(["sh", "-c", kw.marks_script([engine.pid], fault)], capture_output=True, text=True).stdout
        checks = engine_faults.held_checks(fault, [engine.pid], kw.parse_marks(said), kw.parse_states(said), "run-9")
        return all(c["ok"] for c in checks)
    assert until(ok)
    other = subprocess.run(["sh", "-c", kw.release_script([engine.pid], "run-8", fault)], capture_output=True, text=True)
    assert other.stdout.split() == ["kept", str(engine.pid)] and Path(app.mark_path(fault, engine.pid)).exists()
    ours = subprocess.run(["sh", "-c", kw.release_script([engine.pid], "run-9", fault)], capture_output=True, text=True)
    assert ours.stdout.split() == ["released", str(engine.pid)] and not Path(app.mark_path(fault, engine.pid)).exists()
    assert until(lambda: not (engine.steps.garbage or engine.steps.stalled))
