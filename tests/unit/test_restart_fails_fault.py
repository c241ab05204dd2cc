"""restart-fails' fault (chaos.scopes.restart_fails) on the local backend's weights functions
(chaos.backends.local.weights): the app's weights file told from the deployed config (the stream target's, vLLM's
model.safetensors), swapped before the kill, proven, restored after outage_s, and healed by the rollback only
while it still reads as the fault left it."""

import time
import types

import pytest

from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.backends import weights_source
from chaos.backends.local import weights
from chaos.base.errors import UsageError
from chaos.scopes import restart_fails
from chaos.scopes.restart_fails import fail_restart
from chaos.system import start_watch
from serve_apps import stream_weights, weights_swap


def details(import_path, args):
    return {"applications": {"llm": {"deployed_app_config": {"import_path": import_path, "args": args}}}}


@pytest.fixture
def stream_file(tmp_path, monkeypatch):
    monkeypatch.setenv("AVAILPROOF_HOME", str(tmp_path / "rig-home"))  # the rig's registry of swapped files
    path = str(tmp_path / "weights.bin")
    stream_weights.provision(path)
    monkeypatch.setattr(weights.ray_dashboard, "serve_details",
                        lambda url, timeout=5.0: details("serve_apps.stream_target:app_builder", {"weights_path": path}))
    return path


def replica(rid, state, pid=7):
    return {"replica_id": rid, "state": state, "pid": pid, "node_id": "node-1" if pid else None}


BEFORE = [replica("r1", "RUNNING"), replica("r2", "RUNNING"), replica("r3", "RUNNING")]
OTHERS = BEFORE[1:]
# Serve's replicas of the deployment from the kill on, (from s after the kill, replicas): its replacement r4 STARTING,
# then gone without having run (its constructor raised on the truncated weights)
FAILS_AT_ONCE = [(0.0, OTHERS), (0.01, OTHERS + [replica("r4", "STARTING")]), (0.15, OTHERS)]
FAST = {"poll_s": 0.01, "max_outage_s": 5.0}  # a test's looks, and a cap that ends a test gone wrong


class Backend:
    """The local backend's restart-fails methods over a fake replica and kill; Serve's replicas of the deployment
    (``replica_states``, through :func:`chaos.system.start_watch.states_of`) as ``timeline`` says from the kill on,
    ``BEFORE`` before it; ``at_look(t)``: what a test does at each look (someone else's hand)."""

    dashboard_url, run_id = "http://dashboard", "run-1"

    def __init__(self, timeline=FAILS_AT_ONCE, at_look=None):
        self.killed, self.timeline, self.at_look, self.killed_at, self.looks = [], timeline, at_look, None, 0

    def pick_replica(self, zone=None, deployment=None):
        return types.SimpleNamespace(replica_id="r1", zone=zone, node="worker-a", pid=4242, deployment="StreamTarget")

    def replica_killer(self, r, method):
        def kill():
            self.killed.append(r.pid)
            self.killed_at = time.monotonic()
            return [r.pid]
        return kill

    def engine_children(self, r):
        return []

    def weights_breaker(self, r):
        return weights.breaker(self, r)

    def restore_weights(self, fault):
        return weights.restore(self, fault)

    def replica_states(self, deployment):
        self.looks += 1
        if self.killed_at is None:
            now = BEFORE
        else:
            t = time.monotonic() - self.killed_at
            now = [rows for since, rows in self.timeline if since <= t][-1]
            if self.at_look:
                self.at_look(t)
        return start_watch.states_of({"applications": {"llm": {"deployments": {
            "StreamTarget": {"replicas": now}, "Ingress": {"replicas": [replica("i1", "STARTING")]}}}}}, deployment)

    def effect_checks(self, fault):
        return weights.checks(self, fault)[:1] + [{"check": "killed", "ok": bool(self.killed), "seen": "-"}]


def test_the_weights_are_told_from_the_deployed_app():
    assert weights_source.of_app(details("serve_apps.stream_target:app_builder", {})["applications"]["llm"]) == \
        {"app": "stream", "path": weights_source.NODE_DEFAULT, "checkpoint": None}
    llm = details("ray.serve.llm:build_openai_app",
                  {"llm_configs": [{"model_loading_config": {"model_source": "/m/tiny"}}]})["applications"]["llm"]
    assert weights_source.of_app(llm)["path"] == "/m/tiny/model.safetensors"
    with pytest.raises(UsageError, match="not deployed"):
        weights_source.of_app({})


def test_a_sharded_checkpoint_is_refused(tmp_path):
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(UsageError, match="2 safetensors"):
        weights_source.check_single_file(str(tmp_path))


def test_the_fault_swaps_kills_proves_and_restores_after_its_outage(stream_file):
    b, marker = Backend(), faults.Marker()
    f = fail_restart(b, marker, zone="zone-a", outage_s=0.2, **FAST)
    assert b.killed == [4242] and f["effect"]["verified"]
    assert f["weights"]["path"] == stream_file and f["weights"]["run_id"] == "run-1"
    assert f["weights_restored"]["restored"] and f["weights_restored"]["unreadable_until_restore"]
    assert stream_weights.load(stream_file)  # readable again
    assert [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
    assert weights.plan_rows(b, "restart-fails", {"zone": "zone-a"})[0]["name"] == stream_file


def test_without_an_outage_the_rollback_restores_only_what_is_still_the_faults(stream_file):
    b, marker = Backend(), faults.Marker()
    f = fail_restart(b, marker, zone="zone-a", outage_s=None)
    with pytest.raises(stream_weights.WeightsUnreadable):
        stream_weights.load(stream_file)
    open(stream_file, "wb").write(stream_weights.content())  # someone else put weights back meanwhile
    out = weights.restore(b, f)
    assert not out["restored"] and out["state"] == "original"  # it reads as the original: nothing undone
    assert out["cleared"] and weights_swap.read_mark(stream_file) is None  # nothing to undo: the mark and aside gone
    assert open(stream_file, "rb").read() == stream_weights.content()  # theirs kept


def test_weights_that_cannot_be_read_before_the_fault_refuse_it(stream_file):
    """A weights path that cannot be read (a directory where the file should be: unreadable for root too, where a
    mode-0 file is not) is refused before anything is killed."""
    import os

    os.remove(stream_file)
    os.mkdir(stream_file)
    try:
        with pytest.raises(Exception, match="cannot be read"):
            fail_restart(Backend(), faults.Marker(), zone="zone-a", outage_s=None)
    finally:
        os.rmdir(stream_file)


def test_recover_puts_back_a_killed_runs_weights(stream_file):
    f = fail_restart(Backend(), faults.Marker(), zone="zone-a", outage_s=None)  # the run killed before its restore
    assert weights_swap.state(stream_file) == "truncated"
    out = weights.recover(Backend())
    assert out["restored"] and stream_weights.load(stream_file) and f["weights"]["run_id"] == "run-1"
    assert weights.recover(Backend()) is None  # nothing left
    assert list(weights.registry_dir().iterdir()) == []  # the registry's entry gone with it


def test_recover_finds_a_killed_runs_weights_though_another_app_is_deployed_now(stream_file, tmp_path, monkeypatch):
    fail_restart(Backend(), faults.Marker(), zone="zone-a", outage_s=None)  # the run killed before its restore
    other = str(tmp_path / "other.bin")
    stream_weights.provision(other)
    monkeypatch.setattr(weights.ray_dashboard, "serve_details",  # another app (another weights file) deployed since
                        lambda url, timeout=5.0: details("serve_apps.stream_target:app_builder", {"weights_path": other}))
    out = weights.recover(Backend())
    assert out["restored"] and stream_weights.load(stream_file) and list(out["files"]) == [stream_file]
    assert list(weights.registry_dir().iterdir()) == []


def test_a_restore_at_the_outage_is_not_overwritten_by_the_rollbacks(stream_file):
    b = Backend()
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.1, **FAST)
    assert f["weights_restored"]["restored"] and list(weights.registry_dir().iterdir()) == []
    f["weights_restored"] = b.restore_weights(f)  # what the backends' heal does for every restart-fails fault
    assert f["weights_restored"]["restored"] and f["weights_restored"]["unreadable_until_restore"]


# The hold: the weights unreadable until the replacement's start failed, outage_s the least, max_outage_s the most.

def held_check(f):
    return next(c for c in f["effect"]["checks"] if c["check"] == restart_fails.HELD_CHECK)


def test_the_hold_ends_at_the_first_failed_start_past_a_shorter_outage(stream_file):
    starts_late = [(0.0, OTHERS), (0.3, OTHERS + [replica("r4", "STARTING")]), (0.6, OTHERS)]
    b, marker = Backend(starts_late), faults.Marker()
    truncated_at = []
    b.at_look = lambda t: truncated_at.append((t, weights_swap.state(stream_file)))
    f = fail_restart(b, marker, zone="zone-a", outage_s=0.1, **FAST)
    assert f["held_until"] == "failed_starts"
    seen = f["failed_starts_seen"]
    assert [s["replica"] for s in seen] == ["r4"] and 0.2 <= seen[0]["starting_s"] < seen[0]["failed_s"], seen
    assert f["hold"]["ended_s"] >= seen[0]["failed_s"] > 0.5, f["hold"]  # not before it: past outage_s 0.1
    assert all(state == "truncated" for t, state in truncated_at), truncated_at  # unreadable at every look
    assert f["weights_restored"]["restored"] and stream_weights.load(stream_file)
    assert f["effect"]["verified"] and held_check(f)["ok"] and held_check(f)["t_s"] == seen[0]["failed_s"]
    assert [m.event for m in marker.marks] == list(rec.MARK_EVENTS)
    assert marker.marks[-1].detail["held_until"] == "failed_starts"  # the heal's mark carries it to the summary


def test_a_longer_outage_restores_at_outage_s(stream_file):
    b, marker = Backend(), faults.Marker()  # r4's start fails 0.15 s after the kill
    f = fail_restart(b, marker, zone="zone-a", outage_s=0.5, **FAST)
    assert f["held_until"] == "outage_s" and f["failed_starts_seen"][0]["failed_s"] < 0.5
    assert 0.5 <= f["hold"]["ended_s"] < 1.5, f["hold"]
    assert f["effect"]["verified"] and held_check(f)["ok"] and f["weights_restored"]["restored"]


def test_never_a_failed_start_restores_at_the_cap_and_the_proof_does_not_hold(stream_file):
    stuck = [(0.0, OTHERS + [replica("r4", "STARTING")])]  # a start that never ends (vLLM's set-up, ~165 s)
    b, marker = Backend(stuck), faults.Marker()
    f = fail_restart(b, marker, zone="zone-a", outage_s=0.1, poll_s=0.01, max_outage_s=0.4)
    assert f["held_until"] == "cap" and f["failed_starts_seen"] == []
    assert 0.4 <= f["hold"]["ended_s"] < 1.5 and f["hold"]["still_starting"][0]["replica"] == "r4", f["hold"]
    assert f["weights_restored"]["restored"] and stream_weights.load(stream_file)  # restored anyway
    c = held_check(f)
    assert not c["ok"] and "0 of 1 failed start(s) seen by the cap" in c["seen"], c
    assert f["effect"]["verified"] is False and f["effect"]["time_to_effect_s"] is None
    assert marker.marks[-1].detail["effect"]["verified"] is False  # the summary's effect: the run's verdict ERROR


def test_a_replacement_that_runs_ends_the_hold_unproven(stream_file):
    runs = [(0.0, OTHERS), (0.05, OTHERS + [replica("r4", "STARTING")]), (0.15, OTHERS + [replica("r4", "RUNNING")])]
    f = fail_restart(Backend(runs), faults.Marker(), zone="zone-a", outage_s=0.1, **FAST)
    assert f["held_until"] == "replacement_ran" and f["hold"]["ended_s"] < 1.0
    assert not held_check(f)["ok"] and f["effect"]["verified"] is False


def test_a_file_that_no_longer_reads_as_the_faults_is_not_restored(stream_file):
    def someone_else(t):
        if t > 0.05 and open(stream_file, "rb").read() != b"theirs":
            open(stream_file, "wb").write(b"theirs")
    b = Backend(at_look=someone_else)
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.3, **FAST)
    assert f["held_until"] == "outage_s" and not f["weights_restored"]["restored"], f["weights_restored"]
    assert "someone else" in f["weights_restored"]["why"]
    assert open(stream_file, "rb").read() == b"theirs"  # theirs kept


def test_no_hold_asked_is_a_plain_outage(stream_file):
    b = Backend(timeline=[(0.0, OTHERS)])
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.1, hold_until_failed_starts=0, **FAST)
    assert f["held_until"] == "outage_s" and b.looks == 0 and "failed_starts_seen" not in f
    assert f["effect"]["verified"] and f["weights_restored"]["restored"]


@pytest.mark.parametrize("arguments, why", [
    ({"outage_s": 30, "max_outage_s": 10}, "below outage_s"),
    ({"hold_until_failed_starts": True}, "whole number"),
    ({"hold_until_failed_starts": -1}, "whole number"),
    ({"poll_s": 0}, "poll_s must be above 0"),
    ({"max_outage_s": None}, "max_outage_s must be a number"),
])
def test_hold_arguments_are_checked_before_anything(stream_file, arguments, why):
    b = Backend()
    with pytest.raises(UsageError, match=why):
        fail_restart(b, faults.Marker(), zone="zone-a", **arguments)
    assert not b.killed and weights_swap.read_mark(stream_file) is None and stream_weights.load(stream_file)


def test_replicas_that_cannot_be_read_before_the_kill_refuse_the_hold(stream_file):
    b = Backend()
    b.replica_states = lambda deployment: None  # the dashboard did not answer
    with pytest.raises(Exception, match="could not be read before the fault"):
        fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.1, **FAST)
    assert not b.killed and weights_swap.read_mark(stream_file) is None and stream_weights.load(stream_file)
