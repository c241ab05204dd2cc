"""The engine-step heartbeat (serve_apps/heartbeat.py): written around each step in shared memory, read by the
replica; vLLM's step wrapper (serve_apps/engine_faults.py) beats on each step and stops beating in a wedge, a
step under way then showing; the replica finds its engine child by /proc."""

from pathlib import Path

import pytest

from serve_apps import engine_faults, heartbeat
from serve_apps.heartbeat import EDGES, Histogram, Reader, Writer


class Clock:
    t = 100.0

    def __call__(self):
        return self.t


def test_the_histogram_s_quantile_is_its_bucket_s_upper_edge():
    h = Histogram()
    assert h.quantile(0.99) is None
    for _ in range(99):
        h.add(0.003)  # bucket (2 ms, 4 ms]
    assert h.quantile(0.99) == EDGES[2] == 0.004
    h.add(0.9, n=2)  # two slow steps of 102: the 99th percentile is one of them
    assert h.quantile(0.99) == 1.024 and h.quantile(0.5) == 0.004
    h.add(10_000)
    assert h.quantile(1.0) == 2 * EDGES[-1]


def test_a_step_beats_and_the_replica_reads_it(tmp_path):
    clock = Clock()
    file = str(tmp_path / "beat")
    reader = Reader(7, file)
    assert reader.read() is None  # no file yet: no heartbeat
    w = Writer(file, clock)
    assert reader.read() == (0, 0.0, None, None)
    started = w.begin()
    assert reader.read().busy_since == 100.0  # a step under way
    clock.t += 0.003
    w.end(started)
    assert reader.read() == (1, 100.003, None, 0.004)
    for _ in range(5):
        started = w.begin()
        clock.t += 0.5
        w.end(started)
    beat = reader.read()
    assert beat.count == 6 and beat.last == pytest.approx(102.503) and beat.p99 == 0.512


def test_a_heartbeat_that_cannot_be_made_does_not_stop_the_step(tmp_path):
    w = Writer(str(tmp_path / "missing" / "beat"))
    w.end(w.begin())
    assert w.map is None and w.count == 1


def test_vllm_s_step_beats_and_a_wedged_step_shows_as_one_under_way(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_faults, "TOMBSTONE_DIR", str(tmp_path))
    monkeypatch.setattr(engine_faults.os, "getpid", lambda: 57)
    monkeypatch.setattr(engine_faults, "_BEATS", [])

    class Core:
        def step(self):
            return "stepped"

    trigger = engine_faults.Trigger()
    engine_faults.install(Core, [], trigger)
    reader = Reader(57, engine_faults.heartbeat_path(57))
    assert Path(engine_faults.heartbeat_path(57)).parent == tmp_path
    for _ in range(3):
        assert Core().step() == "stepped"
    beat = reader.read()
    assert beat.count == 3 and beat.busy_since is None and beat.p99 == EDGES[0]
    seen = []
    monkeypatch.setattr(engine_faults, "wedge", lambda request, **kw: seen.append(reader.read()))
    Path(engine_faults.request_path(57)).write_text('{"fault": "wedge", "run": "r"}')
    trigger.arm()
    Core().step()
    assert seen[0].count == 3 and seen[0].busy_since is not None  # wedged: no step ends, one is under way
    assert reader.read().count == 4  # released: the step ran
    trigger.arm()
    with pytest.raises(engine_faults.InjectedEngineError):
        Core().step()
    assert reader.read().count == 4  # a step that raised does not count


def test_the_replica_finds_its_engine_child_in_proc(tmp_path):
    def proc(pid, ppid, cmd):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} (py thon) S {ppid} 1 1 0")
        (d / "cmdline").write_bytes(cmd)
    proc(10, 1, b"ray::ServeReplica")
    proc(11, 10, b"VLLM::EngineCore\0")
    proc(12, 10, b"python\0-c\0other")
    proc(13, 99, b"VLLM::EngineCore\0")  # another replica's
    (tmp_path / "self").mkdir()
    assert heartbeat.engine_children(10, str(tmp_path)) == [11]
    assert heartbeat.engine_children(11, str(tmp_path)) == []


def test_a_reused_pid_s_stale_file_is_replaced_not_truncated_and_the_reader_maps_the_new_one(tmp_path):
    """The engine's file is made anew (a reader that mapped a reused pid's stale one keeps a valid mapping, and
    then maps the new one), with its blocks allocated (no SIGBUS on a full disk at the first write)."""
    name = str(tmp_path / "beat")
    stale = Writer(name)
    for _ in range(5):
        stale.end(stale.begin())
    reader = Reader(57, name)
    assert reader.read().count == 5
    fresh = Writer(name)
    fresh.end(fresh.begin())
    assert reader.read().count == 1  # the new file, mapped again
    st = Path(name).stat()
    assert st.st_blocks * 512 >= st.st_size  # allocated, not sparse
