"""The core run (chaos.core.run) without a cluster: the stop conditions' decision, the Guard, and a
stop interrupting a real Chaos Toolkit run (chaoslib's run_experiment, our control, a fake
backend whose proxies refuse connections, so every request fails)."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from pathlib import Path

import pytest

from chaos.core import experiment as exp_mod
from chaos.core import provision, run as core, runner
from chaos.recording import records as rec
from tests.unit.fake_backend import OneProxyBackend
from chaos.scopes.faults import Marker

# ---------------------------------------------------------------- the decision, on a fake clock


def test_failure_ratio_must_stay_above_the_limit_for_for_s_before_stopping():
    c = core.StopConditions(max_failed_ratio=0.5, for_s=2.0, max_wall_s=1000.0, started=0.0)
    for i in range(10):  # 10 failures over the first second
        c.seen(10.0 + i * 0.1, ok=False)
    assert c.check(11.0) is None  # above the limit since now: not for 2 s yet
    for i in range(10):
        c.seen(11.0 + i * 0.1, ok=False)
    assert c.check(12.0) is None  # 1 s above
    for i in range(10):
        c.seen(12.0 + i * 0.1, ok=False)
    reason = c.check(13.0)
    assert reason == "failure ratio 1.00 above 0.5 for 2 s"


def test_a_good_spell_resets_the_failure_ratio_clock():
    c = core.StopConditions(max_failed_ratio=0.5, for_s=2.0, max_wall_s=1000.0, started=0.0)
    t = 10.0
    for _ in range(10):
        c.seen(t, ok=False)
        t += 0.1
    assert c.check(t) is None  # above since t=11
    for _ in range(40):  # 4 s of successes: the window is all good
        c.seen(t, ok=True)
        t += 0.1
    assert c.check(t) is None  # back below: the clock resets
    for _ in range(10):
        c.seen(t, ok=False)
        t += 0.1
    # 1 s of failures in a 2 s window half good: 10/30 failed, not above 0.5
    assert c.check(t) is None
    for _ in range(20):
        c.seen(t, ok=False)
        t += 0.1
    assert c.check(t) is None  # above again only since now
    assert c.check(t + 1.0) is None
    assert c.check(t + 2.5) is None  # nothing seen in the last 2 s: fewer than 5 requests, no decision


def test_fewer_than_five_requests_never_stop_and_no_ratio_means_only_the_wall_clock():
    c = core.StopConditions(max_failed_ratio=0.1, for_s=1.0, max_wall_s=1000.0, started=0.0)
    for t in (1.0, 1.5, 2.0, 2.5):
        c.seen(t, ok=False)
        assert c.check(t) is None
    assert c.check(3.0) is None
    walled = core.StopConditions(max_failed_ratio=None, for_s=1.0, max_wall_s=30.0, started=100.0)
    for i in range(50):
        walled.seen(100.0 + i * 0.1, ok=False)
    assert walled.check(129.0) is None
    assert walled.check(130.5) == "wall-clock limit of 30 s exceeded"


# ---------------------------------------------------------------- the Guard thread and the run's stop


class FakeLoad:
    def __init__(self):
        self.running = True
        self.counts = {"sent": 0, "ok": 0, "failed": 0}

    def elapsed_s(self) -> float:
        return 0.0

    def progress_line(self) -> str:
        return "t+0 s  sent 0  ok 0  failed 0"


def _run(tmp_path: Path, stop_when: dict, on_stop=None) -> core.Run:
    events = rec.Events()
    settings = exp_mod.Settings(scope="replica", stop_when=stop_when)
    run = core.Run(experiment_title="t", settings=settings, options=core.Options(), out_dir=tmp_path,
                   backend=None, events=events, writer=rec.RecordWriter(tmp_path / "records.ndjson"),
                   marker=Marker(events), on_stop=on_stop)
    run.load = FakeLoad()
    return run


def _request(i: int, ok: bool, phase: str = rec.MEASURE) -> rec.RequestRecord:
    return rec.RequestRecord(id=i, target="w", url="http://127.0.0.1:1", zone="zone-a", route="/v1/chat/completions",
                             phase=phase, planned_ns=0, sent_ns=0, sent_offset_s=0.0, ok=ok)


class FakeClock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _failing(run: core.Run, clock: FakeClock, first: int, n: int, phase: str = rec.MEASURE) -> int:
    """``n`` failed requests, one every 20 ms of the fake clock; returns the next id."""
    for i in range(first, first + n):
        run.events.emit(run.events.request_done, _request(i, ok=False, phase=phase))
        clock.t += 0.02
    return first + n


def test_guard_stops_the_run_through_the_drivers_interrupter(tmp_path):
    # The Guard's checks one by one on a fake clock: no thread, no timing.
    called = []
    run = _run(tmp_path, {"max_failed_ratio": 0.5, "for_s": 0.3}, on_stop=lambda reason: called.append(reason) or True)
    clock = FakeClock()
    guard = core.Guard(run, clock=clock)
    i = _failing(run, clock, 0, 10)
    assert guard.poll() is False  # above the limit since now
    i = _failing(run, clock, i, 5)  # 0.1 s later: not for 0.3 s yet
    assert guard.poll() is False and run.stop_reason is None
    _failing(run, clock, i, 15)  # 0.4 s above
    assert guard.poll() is True
    assert run.stop_reason == "failure ratio 1.00 above 0.5 for 0 s"
    assert called == [run.stop_reason]  # once
    assert run.take_stop() is None  # the driver took it: no wait of the core raises it again
    assert not run.stop("again")  # one stop per run
    assert guard.poll() is True  # nothing left to watch
    run.writer.close()


def test_the_guard_thread_stops_the_run(tmp_path):
    """The thread itself, on the real clock: requests keep failing until it stops the run (no
    window the thread must be scheduled in; a loaded machine only makes it later)."""
    called = []
    run = _run(tmp_path, {"max_failed_ratio": 0.5, "for_s": 0.3}, on_stop=lambda reason: called.append(reason) or True)
    guard = core.Guard(run, poll_s=0.02)
    guard.start()
    deadline = time.monotonic() + 60
    i = 0
    while run.stop_reason is None and time.monotonic() < deadline:
        run.events.emit(run.events.request_done, _request(i, ok=False))
        i += 1
        time.sleep(0.01)
    guard.join(timeout=30)
    assert not guard.is_alive()
    assert run.stop_reason == "failure ratio 1.00 above 0.5 for 0 s" and called == [run.stop_reason]
    run.writer.close()


def test_warmup_failures_do_not_count_and_a_stop_nobody_took_ends_the_next_wait(tmp_path):
    run = _run(tmp_path, {"max_failed_ratio": 0.5, "for_s": 0.2})  # no driver interrupter
    clock = FakeClock()
    guard = core.Guard(run, clock=clock)
    i = _failing(run, clock, 0, 20, phase=rec.WARMUP)
    for _ in range(5):
        assert guard.poll() is False
        clock.t += 0.1
    assert run.stop_reason is None  # 2.5 s of failed warm-up: nothing measured
    i = _failing(run, clock, i, 10)
    assert guard.poll() is False  # above the limit since now
    _failing(run, clock, i, 15)  # 0.3 s above
    assert guard.poll() is True
    assert run.stop_reason == "failure ratio 1.00 above 0.5 for 0 s"
    t0 = time.monotonic()
    with pytest.raises(core.Stopped, match="failure ratio"):
        core.wait(run, 30)
    assert time.monotonic() - t0 < 1
    core.wait(run, 0.1)  # raised once: the next wait is a plain wait
    run.writer.close()


def test_the_guard_keeps_watching_when_the_load_is_gone(tmp_path):
    """Regression: the Guard watched only while the harness' thread was alive, so a load that had
    ended (or died) took every stop condition with it, the wall-clock limit too, and nothing
    interrupted the method any more."""
    called = []
    run = _run(tmp_path, {}, on_stop=lambda reason: called.append(reason) or True)
    run.settings = dataclasses.replace(run.settings, max_wall_s=0.3)  # Settings are frozen: a new one
    run.started_mono = time.monotonic()
    run.load.running = False  # the harness ended
    guard = core.Guard(run, poll_s=0.02)
    guard.start()
    guard.join(timeout=60)
    assert not guard.is_alive()
    assert run.stop_reason == "wall-clock limit of 0 s exceeded" and called == [run.stop_reason]
    run.writer.close()


def test_the_guard_ends_with_the_run(tmp_path):
    run = _run(tmp_path, {"max_failed_ratio": 0.5, "for_s": 1})
    guard = core.Guard(run, poll_s=0.02)
    guard.start()
    core.close(run)
    guard.join(timeout=60)
    assert not guard.is_alive() and run.stop_reason is None


def test_a_failing_interrupter_leaves_the_stop_pending(tmp_path):
    """Regression: an exception of the driver's interrupter lost the stop (never pending, the
    Guard's thread dead): the method ran on. Now the driver's next hook or wait takes it."""
    def broken(reason):
        raise RuntimeError("boom")

    run = _run(tmp_path, {}, on_stop=broken)
    assert run.stop("failure ratio 1.00 above 0.5 for 1 s") is True
    assert run.take_stop() == "failure ratio 1.00 above 0.5 for 1 s"
    assert run.take_stop() is None
    run.writer.close()


def test_no_stop_once_the_run_finishes(tmp_path):
    called = []
    run = _run(tmp_path, {}, on_stop=lambda reason: called.append(reason) or True)
    core.close(run)
    assert not run.stop("late")
    assert run.stop_reason is None and called == []


# ---------------------------------------------------------------- through Chaos Toolkit


def slow_fault(started: str, seconds: float = 30.0, configuration: dict | None = None) -> dict:
    """The method's action: a fault mark, then an outage that blocks (as a node kill's does)."""
    from chaos.ctk.session import measuring_run

    Path(started).write_text(str(time.time()))
    with measuring_run(configuration).marker.inject("replica", "fake-replica", ["zone-a"]) as f:
        pass
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
    return f


def note_rollback(path: str) -> bool:
    Path(path).write_text("rolled back")
    return True


class RefusingBackend(OneProxyBackend):
    """A backend whose one Serve proxy is a closed loopback port: every request fails at once."""

    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]  # closed again: connections are refused
        self.healed: list[list[str]] = []  # the fault ids of each heal call

    def heal(self, faults: list[dict], timeout: float) -> dict:
        self.healed.append([f["fault_id"] for f in faults])
        return {}

    def observe(self, timeout: float):
        """A control-plane sample (chaos.system.sampler) from a dashboard that is not there either."""
        from chaos.system import sampler

        return sampler.observe_dashboard(f"http://127.0.0.1:{self.port}", {}, "availproof", timeout)


def _experiment(tmp_path: Path, baseline_s: float, method_s: float, recovery_window_s: float = 0.5) -> Path:
    exp = {
        "version": "1.0.0",
        "title": "stop condition test",
        "description": "every request fails; the stop condition must interrupt the method and roll back",
        "extensions": [{
            "name": "availproof", "scope": "replica",
            "load": {"mode": "open", "arrival": "constant", "rate": 40, "duration_s": 120, "warmup_s": 0.2,
                     "timeout_s": 2, "connect_timeout_s": 0.5},
            "baseline_s": baseline_s, "recovery_window_s": recovery_window_s,
            "stop_when": {"max_failed_ratio": 0.5, "for_s": 1},
            "bounds": {"max_failed_requests": 100000},
        }],
        "controls": [{"name": "availproof", "provider": {"type": "python", "module": "chaos.ctk.control"}}],
        "method": [{"type": "action", "name": "slow-fault", "provider": {
            "type": "python", "module": __name__, "func": "slow_fault",
            "arguments": {"started": str(tmp_path / "started"), "seconds": method_s}}}],
        "rollbacks": [{"type": "action", "name": "note-rollback", "provider": {
            "type": "python", "module": __name__, "func": "note_rollback",
            "arguments": {"path": str(tmp_path / "rolled-back")}}}],
    }
    path = tmp_path / "stop.json"
    path.write_text(json.dumps(exp))
    return path


@pytest.fixture
def fake_system(monkeypatch):
    """``provision.ensure_system`` gives a :class:`RefusingBackend` (the last one made: ``backends[-1]``)."""
    monkeypatch.setenv("AVAILPROOF_METRICS_PORT", "0")
    monkeypatch.setattr(provision, "redeploy_if_gone", lambda *a, **k: False)
    backends: list[RefusingBackend] = []

    def ensure(settings, options, log=None, run_id="", faults=None):
        backends.append(RefusingBackend())
        return backends[-1]

    monkeypatch.setattr(provision, "ensure_system", ensure)
    opened: list[core.Run] = []
    real_open = core.open_run

    def open_run(*args, **kwargs):  # every run opened, by the runner, the control or a test
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(core, "open_run", open_run)
    yield backends
    assert all(run.closed for run in opened)  # the control (or the runner) closed every run it opened


def test_stop_condition_interrupts_a_blocking_method_activity_and_the_rollbacks_run(tmp_path, fake_system):
    path = _experiment(tmp_path, baseline_s=0.5, method_s=60)
    t0 = time.monotonic()
    verdict, result = runner.run_experiment(path, tmp_path / "out")
    wall = time.monotonic() - t0
    journal = json.loads((tmp_path / "out" / "journal.json").read_text())
    assert (tmp_path / "started").exists()  # the method ran...
    assert wall < 30, wall  # ...and did not block for its 60 s
    assert journal["status"] == "interrupted"
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["note-rollback"]
    assert (tmp_path / "rolled-back").read_text() == "rolled back"
    summary = journal["availproof"]["summary"]
    assert summary["stop_reason"].startswith("failure ratio 1.00 above 0.5")
    assert summary["bounds"]["all_met"] is False
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["stop_reason"] == summary["stop_reason"]
    assert verdict == runner.VIOLATED and result["error"].startswith("stop condition: failure ratio")


def test_stop_condition_during_the_baseline_interrupts_before_the_method(tmp_path, fake_system):
    path = _experiment(tmp_path, baseline_s=60, method_s=1)
    t0 = time.monotonic()
    verdict, result = runner.run_experiment(path, tmp_path / "out")
    assert time.monotonic() - t0 < 30
    journal = json.loads((tmp_path / "out" / "journal.json").read_text())
    assert journal["status"] == "interrupted"
    assert not (tmp_path / "started").exists()  # the method never started
    assert (tmp_path / "rolled-back").exists()
    assert journal["availproof"]["summary"]["stop_reason"].startswith("failure ratio")
    assert verdict == runner.ERROR  # nothing was injected: no measurement


def test_stop_condition_during_the_recovery_window_ends_it(tmp_path, fake_system):
    path = _experiment(tmp_path, baseline_s=0, method_s=0, recovery_window_s=60)
    t0 = time.monotonic()
    verdict, result = runner.run_experiment(path, tmp_path / "out")
    assert time.monotonic() - t0 < 30
    journal = json.loads((tmp_path / "out" / "journal.json").read_text())
    assert journal["status"] == "interrupted"
    assert [r["status"] for r in journal["run"]] == ["succeeded"]  # the method ran to its end
    assert (tmp_path / "rolled-back").exists()
    assert journal["availproof"]["summary"]["stop_reason"].startswith("failure ratio")
    assert verdict == runner.VIOLATED


def test_the_control_never_sends_the_exit_signal_outside_chaos_toolkits_run():
    """Without Chaos Toolkit's SIGUSR1 handler (installed for a run only) exit_gracefully would
    kill the process: the interrupter declines and the stop stays pending for the control's hooks."""
    import signal

    from chaos.ctk import control
    from chaos.core.moments import Session

    s = Session(interrupt_activity=control._exit_activity)
    s.in_method = s.in_activity = True
    previous = signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    try:
        assert s.interrupt("test") is False
    finally:
        signal.signal(signal.SIGUSR1, previous)
    willing = Session(interrupt_activity=lambda: True)
    willing.in_method = True  # between activities: the next moment raises the interruption itself
    assert willing.interrupt("test") is False
    willing.in_activity = True
    assert willing.interrupt("test") is True


def test_options_from_chaos_toolkit_configuration_and_the_kuberay_target():
    from chaos.base.errors import UsageError

    o = core.Options.from_configuration({"availproof_app": "llm", "availproof_out": "", "availproof_cluster_dir": "/x",
                                         "availproof_replace_cluster": True, "availproof_deploy_timeout_s": "30"})
    assert (o.app, o.out_dir, o.cluster_dir, o.replace_cluster, o.deploy_timeout_s) == ("llm", None, Path("/x"), True, 30.0)
    assert core.Options.from_configuration(None).backend == "local"
    with pytest.raises(UsageError, match="backend must be local or kuberay"):
        core.Options.from_configuration({"availproof_backend": "k8s"})
    with pytest.raises(UsageError, match="needs context, namespace"):
        provision.kube_settings({}, {})
    k = provision.kube_settings({"namespace": "b", "max_pods": None},
                                {"context": "kind-x", "namespace": "a", "serve_url": "http://127.0.0.1:1",
                                 "dashboard_url": "http://127.0.0.1:2", "max_pods": 2})
    assert k["namespace"] == "b" and k["context"] == "kind-x" and k["max_pods"] == 2  # flags win unless None
