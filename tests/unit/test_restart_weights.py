"""The restart-fails hook (issue 48): the stream target's replica refuses to start while its weights are unreadable
(the fault's truncated copy swapped in) and starts once they are restored; the swap restores only what still reads
as the rig's (serve_apps.weights_swap)."""

import json
import os

import pytest

from serve_apps import stream_weights, weights_swap
from serve_apps.stream_target import StreamTarget

Target = StreamTarget.func_or_class.__mro__[1]  # the class as written, under Serve's ingress wrapper


@pytest.fixture
def weights(tmp_path):
    path = str(tmp_path / "w" / "weights.bin")
    assert stream_weights.provision(path)
    return path


def test_the_rigs_weights_load_and_are_provisioned_once(weights):
    assert stream_weights.load(weights) == stream_weights.load(weights)
    assert not stream_weights.provision(weights)  # already there: not rewritten


@pytest.mark.parametrize("cut", [0, 10, len(stream_weights.MAGIC) + 5, 40_000])
def test_truncated_weights_are_unreadable(weights, cut):
    data = open(weights, "rb").read()
    open(weights, "wb").write(data[:cut])
    with pytest.raises(stream_weights.WeightsUnreadable):
        stream_weights.load(weights)


def test_the_replica_refuses_to_start_while_unreadable_and_starts_once_restored(weights):
    mark = weights_swap.break_weights(weights, "run-1", "restart-fails-1")
    assert weights_swap.state(weights) == "truncated"
    with pytest.raises(stream_weights.WeightsUnreadable, match="truncated"):
        Target(prefill_s=0.01, token_s=0.02, jitter=0.0, weights_path=weights)
    assert weights_swap.state(weights) == "truncated"  # a failed start did not re-provision it
    done = weights_swap.restore(weights, "run-1")
    assert done["restored"] and done["state"] == "original"
    assert weights_swap.digest(weights) == mark["original"]
    t = Target(prefill_s=0.01, token_s=0.02, jitter=0.0, weights_path=weights)
    try:
        assert t.weights_sha256 == stream_weights.load(weights)
    finally:
        t.engine.close()


def test_the_heal_restores_only_what_still_reads_as_the_rigs(weights):
    weights_swap.break_weights(weights, "run-1", "f1")
    assert not weights_swap.restore(weights, "run-2")["restored"]  # another run's mark: left
    open(weights, "wb").write(b"someone else's weights")
    out = weights_swap.restore(weights, "run-1")
    assert not out["restored"] and out["state"] == "other" and "someone else" in out["why"]
    assert open(weights, "rb").read() == b"someone else's weights"
    assert weights_swap.read_mark(weights) is not None  # the mark and the aside kept: nothing lost


def test_the_heal_leaves_a_changed_aside(weights):
    mark = weights_swap.break_weights(weights, "run-1", "f1")
    open(mark["aside"], "ab").write(b"x")
    out = weights_swap.restore(weights, "run-1")
    assert not out["restored"] and "aside" in out["why"] and weights_swap.state(weights) == "truncated"


def test_a_second_break_is_refused_and_the_cli_says_json(weights, capsys):
    weights_swap.break_weights(weights, "run-1", "f1")
    with pytest.raises(RuntimeError, match="mark is already there"):
        weights_swap.break_weights(weights, "run-1", "f2")
    assert weights_swap.main(["restore", weights, "--run", "run-1"]) == 0
    assert json.loads(capsys.readouterr().out)["restored"] is True
    assert weights_swap.restore(weights, "run-1")["why"].startswith("no restart-fails mark")


def test_a_crash_between_the_mark_and_the_swap_does_not_lock_out_later_runs(weights):
    """The mark and the aside written, the file never swapped (the run killed there): restore clears them."""
    mark = weights_swap.break_weights(weights, "run-1", "f1")
    weights_swap.restore(weights, "run-1")
    import shutil

    shutil.copy2(weights, mark["aside"])  # the state a crash after the mark, before the swap, leaves
    open(weights_swap.mark_path(weights), "w").write(json.dumps(mark))
    assert weights_swap.state(weights) == "original"
    out = weights_swap.restore(weights, None)
    assert not out["restored"] and out["cleared"] and out["state"] == "original" and "nothing to undo" in out["why"]
    assert weights_swap.read_mark(weights) is None and not os.path.exists(mark["aside"])
    weights_swap.break_weights(weights, "run-2", "f2")  # a later run is not refused
    assert weights_swap.state(weights) == "truncated"


def test_a_break_that_fails_after_its_mark_cleans_its_own_attempt(weights, monkeypatch):
    real, calls = os.replace, []

    def failing(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the swap's rename, after the mark's
            raise OSError("disk full")
        real(src, dst)
    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError):
        weights_swap.break_weights(weights, "run-1", "f1")
    monkeypatch.setattr(os, "replace", real)
    assert weights_swap.read_mark(weights) is None
    assert not os.path.exists(f"{weights}.availproof-aside-f1")
