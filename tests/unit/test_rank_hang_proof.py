"""rank-hang's proof of the engine, held to the heal: the stream target's engine child writes the engine-step heartbeat
(a step under way while a hung rank blocks its collective); the proof asks for a step under way whose count does not
move (an engine stepping on, or idle, is no proof); just before the run's end releases the rank, one more look (the
mark still this run's, no step since the proof) or the effect becomes ``verified: false`` with ``came_back``; a look
that fails proves nothing and never stops the release; the lost effect reaches the summary's fault, its verdict ERROR,
at the run's end and at a re-analysis."""

import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.backends import rank_hang
from chaos.backends.local import procs, ranks as local_ranks
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.scopes import Restore
from chaos.core import learnt, summary as summary_mod, verdict
from chaos.core.run import learnt_at_heal
from chaos.recording import records as rec
from chaos.scopes import faults
from serve_apps import engine_faults as app, heartbeat
from serve_apps.heartbeat import Beat
from serve_apps.stream_engine import EngineProcess

from .stream_engine_helpers import until

RUN = "run-1"


def mark_text(run=RUN):
    return json.dumps({"run": run, "t": 1.0}) + "\n"


@pytest.fixture
def group():
    """The stream target's real engine child with a rank group of two, the fault hook on; its files removed after."""
    e = EngineProcess(faults=True, ranks=2)
    assert e.wait_started(10)
    (rank,) = local_ranks.ranks_of([e.pid], 1)
    yield SimpleNamespace(engine=e, rank=rank)
    if procs.alive(rank):
        procs.signal_pids([rank], signal.SIGCONT)
    for pid in (e.pid, rank):
        for path in (app.wedge_path(pid), app.request_path(pid)):
            Path(path).unlink(missing_ok=True)
    e.close()
    procs.wait_gone([rank], 5)


# ---------------------------------------------------------------- the engine child's heartbeat
def test_the_stream_engine_child_beats_and_a_blocked_collective_is_a_step_under_way(group):
    reader = heartbeat.Reader(group.engine.pid, app.heartbeat_path(group.engine.pid))
    assert until(lambda: (reader.read() or Beat(0, 0, None, None)).count > 20)
    first = reader.read().count
    assert until(lambda: reader.read().count > first + 20)  # it steps on, each step counted
    procs.signal_pids([group.rank], signal.SIGSTOP)  # rank 1 answers no more: rank 0 blocks in its collective
    time.sleep(0.3)
    held = reader.read()
    time.sleep(0.5)
    now = reader.read()
    assert held.busy_since is not None and now == held  # a step under way, never ended
    assert time.monotonic() - now.busy_since >= 0.5
    procs.signal_pids([group.rank], signal.SIGCONT)
    assert until(lambda: reader.read().count > now.count + 10)
    group.engine.close()
    assert not os.path.exists(heartbeat.path(group.engine.pid))  # its file goes with it


@pytest.mark.parametrize("broken", ["no module", "a write raises"])
def test_a_heartbeat_that_cannot_be_written_never_breaks_the_step(broken, tmp_path):
    ns = {"os": os}
    exec(heartbeat.child_code().replace(os.path.abspath(heartbeat.__file__), str(tmp_path / "gone.py"))
         if broken == "no module" else heartbeat.child_code(), ns)
    beat = ns["beat"]
    try:
        if broken == "a write raises":
            beat.writer.map.close()  # a write into a closed map raises ValueError
        began = beat.begin()
        beat.end(began)
        beat.end(1.0)
        assert broken == "a write raises" or began is None
    finally:
        Path(heartbeat.path(os.getpid())).unlink(missing_ok=True)


# ---------------------------------------------------------------- the proof's check (pure)
def looks(fault, beats_and_times):
    return [rank_hang.stopped_check(fault, [57], {57: b}, t) for b, t in beats_and_times]


def test_the_proof_fails_while_the_engine_steps_on():
    fault = {}
    out = looks(fault, [(Beat(10, 0.0, 0.9, 0.002), 1.0), (Beat(30, 1.2, 1.25, 0.002), 1.3),
                        (Beat(60, 1.5, 1.55, 0.002), 1.6), (Beat(90, 1.9, 1.95, 0.002), 2.0)])
    assert [c["ok"] for c in out] == [False] * 4
    assert "it stepped: count 60 -> 90" in out[-1]["seen"] and "counts" not in fault[rank_hang.KEY]


def test_an_idle_engine_is_no_proof():
    fault = {}
    out = looks(fault, [(Beat(10, 0.5, None, 0.002), 1.0), (Beat(10, 0.5, None, 0.002), 5.0)])
    assert [c["ok"] for c in out] == [False, False]
    assert out[-1]["seen"].startswith("not verified: engine 57 idle")


def test_a_step_held_past_the_time_asked_is_the_proof():
    fault = {}
    out = looks(fault, [(Beat(10, 0.5, 0.9, 0.002), 1.0), (Beat(10, 0.5, 0.9, 0.002), 1.3),
                        (Beat(10, 0.5, 0.9, 0.002), 1.6)])
    assert [c["ok"] for c in out] == [False, False, True]  # 0.6 s >= the 0.5 s floor, count 10 all along
    assert fault[rank_hang.KEY]["counts"] == {"57": 10} and fault[rank_hang.KEY]["proved"] == 1.6
    assert looks({}, [(None, 1.0)])[0]["seen"].startswith("engine 57: no step heartbeat")


def test_the_time_asked_scales_with_the_engine_s_steps_within_the_bound():
    assert rank_hang.needed_s(None) == rank_hang.needed_s(0.004) == 0.5
    assert rank_hang.needed_s(0.512) == pytest.approx(1.536)
    assert rank_hang.needed_s(8.192) == 10.0  # within rank-hang's 15 s bound


def test_the_local_proof_of_a_real_group_fails_while_it_steps_and_holds_once_its_rank_blocks(group):
    fault = {"scope": "rank-hang", "pids": [group.rank], "pid": os.getpid()}
    checks = [local_ranks.stopped_check(fault)]
    for _ in range(3):
        time.sleep(0.3)
        checks.append(local_ranks.stopped_check(fault))
    assert not any(c["ok"] for c in checks), checks  # the group steps: no proof
    procs.signal_pids([group.rank], signal.SIGSTOP)  # the engine's step waits for it
    assert until(lambda: local_ranks.stopped_check(fault)["ok"], timeout=12), fault  # 0.5 s; more when loaded
    assert fault["engine_pids"] == [group.engine.pid]


# ---------------------------------------------------------------- held to the heal
def proven(counts=None):
    """A rank-hang fault proven at monotonic 100.0, 1.5 s after its injection."""
    return {"fault_id": "rank-hang-1", "scope": "rank-hang", "target": "r1", "zones": [], "pids": [58],
            "engine_pids": [57],
            "effect": {"verified": True, "time_to_effect_s": 1.5, "bound_s": 15.0, "checks": []},
            rank_hang.KEY: {"engines": [], "need_s": 0.5, "proved": 100.0, "counts": counts or {"57": 40}}}


def heal_look(monkeypatch, fault, mark, beat, now=130.0):
    monkeypatch.setattr(local_ranks, "read", lambda path: mark if path.name.endswith("-58") else None)
    monkeypatch.setattr(local_ranks, "beats", lambda pids: {57: beat})
    monkeypatch.setattr(local_ranks.time, "monotonic", lambda: now)
    return local_ranks.hold_to_heal(SimpleNamespace(run_id=RUN), fault)


def test_the_mark_still_ours_and_no_step_keeps_it_verified(monkeypatch):
    f = proven()
    c = heal_look(monkeypatch, f, mark_text(), Beat(40, 1.0, 90.0, 0.002))
    assert c["ok"] and c["t_s"] == 31.5 and f["effect"]["verified"] is True and "came_back" not in f["effect"]
    assert heal_look(monkeypatch, f, None, Beat(40, 1.0, 90.0, 0.002)) is None  # a heal again: its own release


@pytest.mark.parametrize("mark, how", [(None, "rank 58's hang mark gone (someone released it)"),
                                       (mark_text("another-run"), "rank 58's hang mark another run's ('another-run')")])
def test_a_mark_gone_or_another_run_s_loses_the_proof(monkeypatch, mark, how):
    f = proven()
    c = heal_look(monkeypatch, f, mark, Beat(40, 1.0, 90.0, 0.002))
    assert not c["ok"] and f["effect"]["verified"] is False
    assert f["effect"]["came_back"] == {"t_s": 31.5, "how": how} and f["effect"]["lost_until_s"] == 31.5


def test_an_engine_that_stepped_again_loses_the_proof(monkeypatch):
    f = proven()
    heal_look(monkeypatch, f, mark_text(), Beat(47, 125.0, None, 0.002))
    assert f["effect"]["verified"] is False
    assert f["effect"]["came_back"]["how"] == "engine 57 stepped again (count 40 -> 47)"


@pytest.mark.parametrize("beat", [None, Beat(3, 1.0, None, 0.002)], ids=["no heartbeat", "a reused pid's"])
def test_no_heartbeat_left_or_a_new_one_proves_nothing_either_way(monkeypatch, beat):
    f = proven()
    c = heal_look(monkeypatch, f, mark_text(), beat)
    assert c["ok"] and "nothing found either way" in c["seen"] and f["effect"]["verified"] is True


def test_a_look_that_raises_changes_nothing_and_the_release_still_runs(monkeypatch):
    f = proven()

    def broken(pids):
        raise OSError("unreadable")
    monkeypatch.setattr(local_ranks, "beats", broken)
    c = local_ranks.hold_to_heal(SimpleNamespace(run_id=RUN), f)
    assert c["ok"] and "the look failed (OSError: unreadable)" in c["seen"] and f["effect"]["verified"] is True
    g = proven()
    monkeypatch.setattr(rank_hang, "hold", lambda *a: 1 / 0)  # the look itself raises: swallowed
    released = []
    b = SimpleNamespace(run_id=RUN, stop_supervisors=lambda: [], restores=lambda fs: [Restore(release=fs)],
                        cluster=SimpleNamespace(partitioned_zones=lambda: []),
                        resume_engine=lambda pids: [], _restore=lambda done, **kw: done,
                        release_engine=lambda pids, kind: released.append((pids, kind)) or [{"pid": 58}])
    done = LocalBackend.heal(b, [g])
    assert released == [([58], "wedge")] and g["wedge_at_end"] == [{"pid": 58}] and done["released"] == [{"pid": 58}]
    assert g["effect"] == proven()["effect"]


def test_an_unproven_fault_or_another_backend_s_has_nothing_to_hold(monkeypatch):
    f = proven()
    f["effect"]["verified"] = False
    assert heal_look(monkeypatch, f, None, None) is None and "came_back" not in f["effect"]
    g = proven()
    del g[rank_hang.KEY]  # KubeRay's proof: no heartbeat read, nothing held
    assert heal_look(monkeypatch, g, None, None) is None and g["effect"]["verified"] is True


# ---------------------------------------------------------------- into the summary, the verdict, a re-analysis
def lost_effect():
    f = proven()
    rank_hang.hold(f, {"marks": {58: None}, "beats": {57: Beat(40, 1, 2, None)}}, RUN, 31.5)
    return f["effect"]


def test_apply_learnt_replaces_a_lost_effect_only_and_the_verdict_is_error():
    told = proven()["effect"]
    summary = {"faults": [{"fault_id": "rank-hang-1", "scope": "rank-hang", "target": "r1", "effect": told},
                          {"fault_id": "other-1", "scope": "engine-wedge", "target": "r2", "effect": told}],
               "learnt_at_heal": {"rank-hang-1": {"effect": lost_effect()},
                                  "other-1": {"effect": {**told, "verified": False}}},  # no came_back: not applied
               "bounds": {"results": [], "all_met": True}, "stop_reason": None}
    summary["by_scope"] = {"rank-hang": [dict(summary["faults"][0])]}
    assert verdict.decide(summary, {"status": "completed"})["word"] != verdict.ERROR
    assert learnt.apply_learnt(summary) == ["rank-hang-1"]
    assert summary["faults"][0]["effect"]["came_back"]["t_s"] == 31.5
    assert summary["by_scope"]["rank-hang"][0]["effect"]["verified"] is False
    assert summary["faults"][1]["effect"] is told
    v = verdict.decide(summary, {"status": "completed"})
    assert v["word"] == verdict.ERROR and v["reasons"] == ["fault not in effect: rank-hang r1"]


def test_the_run_s_end_takes_the_lost_effect_into_the_summary():
    marker = faults.Marker()
    source = proven()
    marker.attempted[source["fault_id"]] = source
    summary = {"faults": [{"fault_id": "rank-hang-1", "scope": "rank-hang", "target": "r1",
                           "effect": source["effect"], "detail": faults.detail_of(json.loads(json.dumps(source)))}]}
    source["effect"] = lost_effect()  # the heal's look, after the records closed
    source["wedge_at_end"] = [{"pid": 58, "released": False}]
    learnt_at_heal(SimpleNamespace(summary=summary, marker=marker))
    assert summary["learnt_at_heal"]["rank-hang-1"] == {"effect": source["effect"], "wedge_at_end": source["wedge_at_end"]}
    assert summary["faults"][0]["effect"]["verified"] is False
    assert summary["faults"][0]["detail"]["effect"]["verified"] is True  # the records' own


def test_a_re_analysis_keeps_the_lost_effect(tmp_path):
    from tests.unit.test_analysis import NS, T0, zones
    from tests.unit.test_summary import BOUNDS, DEFS, write_run

    told = proven()["effect"]
    marks = [rec.FaultMark(event=e, fault_id="rank-hang-1", scope="rank-hang", target="r1", t_ns=T0 + int(t * NS),
                           zones=["a"], detail={"effect": told} if e == rec.INJECT_END else {})
             for e, t in ((rec.INJECT_START, 10), (rec.INJECT_END, 11.5))]
    d = write_run(tmp_path / "run", summary_mod.header_block("rank-hang", "rank-hang", DEFS, BOUNDS, "src", "stream"),
                  zones(0, 40), marks, 40)
    at_end = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, BOUNDS, "src")
    at_end["learnt_at_heal"] = {"rank-hang-1": {"effect": lost_effect()}}
    learnt.apply_learnt(at_end)
    (d / "summary.json").write_text(json.dumps(at_end))
    again, _ = summary_mod.reanalyse(d)
    assert again["faults"][0]["effect"]["verified"] is False and again["faults"][0]["effect"]["came_back"]
    assert again["learnt_at_heal"] == at_end["learnt_at_heal"]
    assert again["verdict"]["word"] == verdict.ERROR
    assert "fault not in effect: rank-hang r1" in again["verdict"]["reasons"]

