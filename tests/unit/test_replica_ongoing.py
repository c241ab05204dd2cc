"""A replica kill that waits for its replica to be serving (kill_replica(min_ongoing=N), chaos.system.replica_ongoing):
the driver's answers, the local driver run for real against a stand-in ``ray`` module, the KubeRay exec through the
fake kubelet, and the fault: the wait before the mark, an idle replica never marked nor killed."""

from __future__ import annotations

import shlex
import textwrap

import pytest

from chaos.base.errors import ClusterError, UsageError
from chaos.scopes import faults
from chaos.scopes.replica import kill_replica
from chaos.system import replica_ongoing
from chaos.system.placement import Replica
from tests.unit.test_kuberay_backend import cluster, replica as kube_replica

ACTOR = "SERVE_REPLICA::a#S#r1"


def replica(actor_name=ACTOR):
    return Replica(app="a", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name=actor_name,
                   actor_id="x", pid=41, node_ip="127.0.0.1", node="worker-a", zone="zone-a", region=None)


# ------------------------------------------------------------------ the driver's answer
def test_busy_is_the_count_and_idle_error_or_silence_refuse_saying_why():
    assert replica_ongoing.verdict("r1", 1, 30, "busy 3\n") == 3
    assert replica_ongoing.verdict("r1", 2, 30, "some warning\nbusy 2\n") == 2  # the last line is the answer
    with pytest.raises(ClusterError, match=r"replica r1 never had 2 ongoing request\(s\) within 30 s \(at most 1\)"):
        replica_ongoing.verdict("r1", 2, 30, "idle 1\n")
    with pytest.raises(ClusterError, match="could not be read .error Failed to look up"):
        replica_ongoing.verdict("r1", 1, 30, "error Failed to look up actor\n")
    with pytest.raises(ClusterError, match="could not be read .no answer"):
        replica_ongoing.verdict("r1", 1, 30, "")
    with pytest.raises(ClusterError, match="could not be read"):  # a count below the least is no busy answer
        replica_ongoing.verdict("r1", 2, 30, "busy 1\n")


# ------------------------------------------------------------------ the local driver, run for real
FAKE_RAY = textwrap.dedent('''
    import os
    counts = [int(x) for x in os.environ["FAKE_ONGOING"].split(",")]
    reads = []
    def init(address, namespace, **kw):
        if address != "127.0.0.1:6379":
            raise ConnectionError("no GCS answers at " + address)
    class _Method:
        def remote(self):
            reads.append(1)
            return counts.pop(0) if len(counts) > 1 else counts[0]
    class _Handle:
        get_num_ongoing_requests = _Method()
    def get_actor(name, namespace):
        if name != "SERVE_REPLICA::a#S#r1" or namespace != "serve":
            raise ValueError("Failed to look up actor with name '" + name + "'")
        return _Handle()
    def get(ref, timeout=None):
        return ref
''')


@pytest.fixture
def fake_ray(tmp_path, monkeypatch):
    (tmp_path / "ray.py").write_text(FAKE_RAY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return lambda counts: monkeypatch.setenv("FAKE_ONGOING", ",".join(map(str, counts)))


def test_the_local_driver_polls_until_the_replica_serves(fake_ray):
    fake_ray([0, 0, 0, 2])
    assert replica_ongoing.wait_local("127.0.0.1:6379", ACTOR, "r1", 1, 10) == 2


def test_the_local_driver_says_idle_with_the_most_seen_after_its_wait(fake_ray):
    fake_ray([0, 1, 0])
    with pytest.raises(ClusterError, match=r"never had 2 ongoing request\(s\) within 0.3 s \(at most 1\)"):
        replica_ongoing.wait_local("127.0.0.1:6379", ACTOR, "r1", 2, 0.3)


def test_the_local_driver_says_why_it_could_not_attach(fake_ray):
    fake_ray([1])
    with pytest.raises(ClusterError, match="could not be read .error no GCS answers at 127.0.0.1:1"):
        replica_ongoing.wait_local("127.0.0.1:1", ACTOR, "r1", 1, 5)
    with pytest.raises(ClusterError, match="Failed to look up actor with name 'SERVE_REPLICA::other'"):
        replica_ongoing.wait_local("127.0.0.1:6379", "SERVE_REPLICA::other", "r1", 1, 5)
    with pytest.raises(ClusterError, match="has no actor name"):
        replica_ongoing.wait_local("127.0.0.1:6379", None, "r1", 1, 5)


# ------------------------------------------------------------------ the fault
class Backend:
    name = "fake"

    def __init__(self, counts=(2,)):
        self.calls: list[str] = []
        self.counts = list(counts)

    def pick_replica(self, zone=None, deployment=None):
        return replica()

    def replica_killer(self, r, method):
        self.calls.append("prepared")

        def kill():
            self.calls.append("killed")
            return [r.pid]
        kill.disarm = lambda: self.calls.append("disarmed")
        return kill

    def engine_children(self, r):
        return []

    def replica_ongoing(self, r, at_least, wait_s):
        self.calls.append(f"waited {at_least} {wait_s:g}")
        seen = max(self.counts)
        if seen < at_least:
            raise ClusterError(f"replica {r.replica_id} never had {at_least} ongoing request(s)")
        return seen

    def effect_checks(self, fault):
        return [{"check": "gone", "ok": True, "seen": "gone"}]


def test_the_kill_waits_for_its_replica_to_serve_then_marks_and_kills():
    b, marker = Backend(counts=(3,)), faults.Marker()
    f = kill_replica(b, marker, zone="zone-a", min_ongoing=1, ongoing_wait_s=20)
    assert b.calls == ["prepared", "waited 1 20", "killed"]  # the wait is the last step before the mark
    assert f["ongoing_at_kill"] == 3 and marker.marks[0].detail["ongoing_at_kill"] == 3


def test_an_idle_replica_is_neither_marked_nor_killed_and_its_prepared_kill_is_disarmed():
    b, marker = Backend(counts=(0,)), faults.Marker()
    with pytest.raises(ClusterError, match="never had 1 ongoing"):
        kill_replica(b, marker, zone="zone-a", min_ongoing=1)
    assert "killed" not in b.calls and marker.marks == []
    assert b.calls[-1] == "disarmed"  # the killer prepared before the wait left nothing armed


def test_a_disarm_that_fails_leaves_the_refusal_as_it_was():
    b, marker = Backend(counts=(0,)), faults.Marker()
    prepare = b.replica_killer

    def killer(r, method):
        kill = prepare(r, method)
        kill.disarm = lambda: 1 / 0
        return kill
    b.replica_killer = killer
    with pytest.raises(ClusterError, match="never had 1 ongoing"):
        kill_replica(b, marker, zone="zone-a", min_ongoing=1)


def test_a_killer_without_disarm_and_a_fired_kill_are_not_disarmed():
    b, marker = Backend(counts=(0,)), faults.Marker()
    b.replica_killer = lambda r, method: b.calls.append("prepared") or (lambda: [r.pid])
    with pytest.raises(ClusterError, match="never had 1 ongoing"):
        kill_replica(b, marker, zone="zone-a", min_ongoing=1)
    b = Backend(counts=(2,))
    prepare = b.replica_killer

    def failing(r, method):  # the kill itself fails: it was fired, there is nothing left to disarm
        kill = prepare(r, method)
        failed = lambda: 1 / 0  # noqa: E731
        failed.disarm = kill.disarm
        return failed
    b.replica_killer = failing
    with pytest.raises(ZeroDivisionError):
        kill_replica(b, faults.Marker(), zone="zone-a", min_ongoing=1)
    assert b.calls == ["prepared", "waited 1 30"]


def test_without_min_ongoing_nothing_waits_and_nothing_is_said_of_it():
    b, marker = Backend(), faults.Marker()
    f = kill_replica(b, marker, zone="zone-a")
    assert b.calls == ["prepared", "killed"] and "ongoing_at_kill" not in f
    assert "ongoing_at_kill" not in marker.marks[0].detail


@pytest.mark.parametrize("args", [{"min_ongoing": -1}, {"min_ongoing": 1.5}, {"min_ongoing": True},
                                  {"min_ongoing": 1, "ongoing_wait_s": 0}, {"min_ongoing": 1, "ongoing_wait_s": "30"}])
def test_bad_arguments_are_refused_before_anything(args):
    b, marker = Backend(), faults.Marker()
    with pytest.raises(UsageError, match="min_ongoing must be a whole number"):
        kill_replica(b, marker, zone="zone-a", **args)
    assert b.calls == [] and marker.marks == []


def test_a_backend_that_cannot_read_ongoing_requests_refuses_min_ongoing():
    b = Backend()
    b.replica_ongoing = None
    with pytest.raises(UsageError, match="this backend cannot read a replica's ongoing requests"):
        kill_replica(b, faults.Marker(), zone="zone-a", min_ongoing=1)
    assert b.calls == []


# ------------------------------------------------------------------ KubeRay: one exec in the head
def test_kuberay_reads_the_count_in_the_head_container_then_kills():
    s, b, stream = cluster()
    s.kubelet.ongoing[ACTOR] = [0, 0, 2]
    marker = faults.Marker()
    timeouts, exec_in = [], b.kills.pods.exec_in
    b.kills.pods.exec_in = lambda pod, script, **kw: timeouts.append((script[:30], kw.get("timeout"))) or exec_in(
        pod, script, **kw)
    f = kill_replica(b, marker, replica=kube_replica(), min_ongoing=2, ongoing_wait_s=15)
    # the exec is bounded beyond the script's own bound (exec's default, 60 s, would cut a longer wait)
    assert [t for w, t in timeouts if w.startswith(": availproof-replica-ongoing")] == [15 + replica_ongoing.CONNECT_S + 10]
    (read,) = [c for c in stream.calls if c[2].startswith(": availproof-replica-ongoing;")]
    assert read[:2] == ("head", "ray-head")
    args = shlex.split(read[2].split(";", 1)[1])
    assert args[:2] == ["timeout", str(int(15 + replica_ongoing.CONNECT_S))] and args[5:8] == ["auto", ACTOR, "2"]
    assert f["ongoing_at_kill"] == 2 and s.kubelet.fates["wa-1"] == [("ray::ServeRepli", "SIGKILL")]
    assert stream.calls.index(read) < stream.calls.index(("wa-1", "ray-worker", "kill -9 41"))


def test_kuberay_never_kills_a_replica_that_stays_idle():
    s, b, _ = cluster()
    s.kubelet.ongoing[ACTOR] = [0, 1]
    marker = faults.Marker()
    with pytest.raises(ClusterError, match=r"never had 2 ongoing request\(s\) within 5 s \(at most 1\)"):
        kill_replica(b, marker, replica=kube_replica(), min_ongoing=2, ongoing_wait_s=5)
    assert marker.marks == [] and s.kubelet.fates.get("wa-1") is None


def test_kuberay_disarms_the_actor_kill_armed_for_a_replica_that_stays_idle():
    """The ``actor`` method's driver is armed in the head before the wait; the wait refused, it is ended (one exec)
    and nothing is left armed for its 300 s of life."""
    s, b, stream = cluster()
    s.kubelet.actors[ACTOR] = ("wa-1", 41)
    s.kubelet.ongoing[ACTOR] = [0]
    marker = faults.Marker()
    with pytest.raises(ClusterError, match="never had 1 ongoing"):
        kill_replica(b, marker, replica=kube_replica(), method="actor", min_ongoing=1, ongoing_wait_s=5)
    assert [phase for phase, _ in s.kubelet.actor_kill_log] == ["arm", "disarm"]
    assert s.kubelet.armed == {} and marker.marks == [] and s.kubelet.fates.get("wa-1") is None
    (disarm,) = [c for c in stream.calls if c[2].startswith(": availproof-actor-kill disarm")]
    assert disarm[:2] == ("head", "ray-head")


def test_the_disarm_script_ends_an_armed_driver_through_a_real_shell_and_leaves_nothing():
    """Armed with the stand-in driver (:data:`tests.unit.test_kuberay_preflight.STAND_IN_DRIVER`: the same files, no
    Ray), then disarmed: the driver gone without acting, its files removed; a second disarm finds nothing, says the
    same; a fire after it finds the driver gone."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from chaos.backends.local import procs
    from chaos.system import ray_actor
    from tests.unit.test_kuberay_preflight import STAND_IN_DRIVER

    kill_id = f"availproof-actor-kill-disarm-test-{os.getpid()}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = lambda script: subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, env=env)  # noqa: E731
    try:
        armed = run(ray_actor.arm_script(kill_id, "SERVE_REPLICA::x", life_s=60, driver=STAND_IN_DRIVER))
        ok, line = ray_actor.parse_word(armed.stdout, "ready")
        assert ok, (armed.stdout, armed.stderr)
        driver = int(line.split()[1])
        assert procs.alive(driver)
        out = run(ray_actor.disarm_script(kill_id, driver))
        assert out.returncode == 0 and out.stdout.split() == ["disarmed"], (out.stdout, out.stderr)
        assert procs.wait_gone([driver], 5)
        assert not any(Path(f"/tmp/{kill_id}{x}").exists() for x in (".ready", ".done", ".fifo", ".victim"))
        assert run(ray_actor.disarm_script(kill_id, driver)).stdout.split() == ["disarmed"]
        assert run(ray_actor.fire_script(kill_id, driver)).returncode == 3
    finally:
        for suffix in (".ready", ".done", ".fifo", ".victim"):
            Path(f"/tmp/{kill_id}{suffix}").unlink(missing_ok=True)
