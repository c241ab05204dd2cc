"""restart-fails' fault (chaos.scopes.restart_fails) on the local backend's weights functions
(chaos.backends.local.weights): the app's weights file told from the deployed config (the stream target's, vLLM's
model.safetensors), swapped before the kill, proven, restored after outage_s, and healed by the rollback only
while it still reads as the fault left it."""

import types

import pytest

from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.backends import weights_source
from chaos.backends.local import weights
from chaos.base.errors import UsageError
from chaos.scopes.restart_fails import fail_restart
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


class Backend:
    """The local backend's restart-fails methods over a fake replica and kill."""

    dashboard_url, run_id = "http://dashboard", "run-1"

    def __init__(self):
        self.killed = []

    def pick_replica(self, zone=None, deployment=None):
        return types.SimpleNamespace(replica_id="r1", zone=zone, node="worker-a", pid=4242, deployment="StreamTarget")

    def replica_killer(self, r, method):
        return lambda: (self.killed.append(r.pid), [r.pid])[1]

    def engine_children(self, r):
        return []

    def weights_breaker(self, r):
        return weights.breaker(self, r)

    def restore_weights(self, fault):
        return weights.restore(self, fault)

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
    f = fail_restart(b, marker, zone="zone-a", outage_s=0.2)
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
    f = fail_restart(b, faults.Marker(), zone="zone-a", outage_s=0.1)
    assert f["weights_restored"]["restored"] and list(weights.registry_dir().iterdir()) == []
    f["weights_restored"] = b.restore_weights(f)  # what the backends' heal does for every restart-fails fault
    assert f["weights_restored"]["restored"] and f["weights_restored"]["unreadable_until_restore"]
