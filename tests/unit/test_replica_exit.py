"""``on_stall: exit`` (serve_apps/replica_exit.py): the watchdog v2 ends a stalled replica and its engine processes
at once instead of failing Serve's health check three times. The config (v2 only, refused otherwise, in the
user_config, the schema and the app's Serve config), the check calling the exit with its reason (and only with it
on and a stall found), and the exit itself on a real process tree: every descendant killed, the process's status
:data:`EXIT_CODE`."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from serve_apps import config, replica_exit
from serve_apps.watchdog_v2 import Stalled, WatchdogV2, config_of, on_stall_of

from .test_watchdog_v2 import Clock, dog_and_engine, run_for

EXIT = {"stall_s": 5, "watchdog": 2, "on_stall": "exit"}


# ---------------------------------------------------------------- the config


@pytest.mark.parametrize("user_config, expected", [
    (None, "fail"), ({"stall_s": 5}, "fail"), ({"stall_s": 5, "watchdog": 2}, "fail"),
    ({"stall_s": 5, "watchdog": 2, "on_stall": "fail"}, "fail"), (EXIT, "exit")])
def test_on_stall_from_the_user_config(user_config, expected):
    assert on_stall_of(user_config) == expected
    assert config_of(user_config)[0] == (2 if user_config and user_config.get("watchdog") == 2 else 1)


@pytest.mark.parametrize("user_config", [
    {"stall_s": 5, "on_stall": "exit"}, {"stall_s": 5, "watchdog": 1, "on_stall": "exit"},
    {"stall_s": 5, "watchdog": 2, "on_stall": "restart"}, {"stall_s": 5, "watchdog": 2, "on_stall": True}])
def test_on_stall_without_v2_or_not_a_mode_is_refused(user_config):
    with pytest.raises(ValueError, match="on_stall"):
        config_of(user_config)


def test_the_serve_config_carries_on_stall_exit_only_with_v2():
    spec = config.AppSpec(stall_s=5, watchdog=2, on_stall="exit")
    cfg = config.serve_config(spec)
    assert cfg["applications"][0]["deployments"][0]["user_config"] == EXIT
    config.validate(cfg)
    spec.on_stall = "fail"
    assert config.serve_config(spec)["applications"][0]["deployments"][0]["user_config"] == {"stall_s": 5,
                                                                                             "watchdog": 2}
    for bad in (config.AppSpec(stall_s=5, on_stall="exit"), config.AppSpec(watchdog=2, on_stall="exit"),
                config.AppSpec(stall_s=5, watchdog=2, on_stall="never")):
        with pytest.raises(ValueError, match="on_stall"):
            config.serve_config(bad)


def test_the_experiment_schema_takes_on_stall_fail_or_exit_only():
    schema = json.loads(Path("chaos/schemas/experiment-extension.schema.json").read_text())
    on_stall = schema["properties"]["app"]["properties"]["on_stall"]
    for ok in ("fail", "exit"):
        jsonschema.validate(ok, on_stall)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("restart", on_stall)


def test_the_stream_target_s_reconfigure_sets_it_in_place():
    from serve_apps.stream_target import StreamTarget
    from serve_apps.watchdog import Watchdog

    target = SimpleNamespace(watchdog=Watchdog(), watchdog_v2=WatchdogV2())
    StreamTarget.func_or_class.reconfigure(target, EXIT, rank=None)
    assert (target.watchdog_v2.stall_s, target.watchdog_v2.on_stall) == (5.0, "exit")
    StreamTarget.func_or_class.reconfigure(target, None, rank=None)
    assert (target.watchdog_v2.stall_s, target.watchdog_v2.on_stall) == (None, "fail")


# ---------------------------------------------------------------- the check


def _stalled_dog(on_stall):
    clock = Clock()
    dog, engine = dog_and_engine(clock)
    exits = []
    dog.exit_replica = exits.append
    dog.configure(5.0, on_stall)
    dog.begin(10)
    run_for(clock, engine, 1.0)
    return dog, clock, exits


def test_with_exit_a_check_that_finds_a_stall_ends_the_replica_with_the_reason():
    dog, clock, exits = _stalled_dog("exit")
    dog.check()  # healthy: no exit
    assert exits == []
    clock.t += 5.0
    with pytest.raises(Stalled, match="has not stepped"):  # a seam that returns: still a failed check
        dog.check()
    assert exits == ["the engine has not stepped for 5.0 s with 1 request waiting on it (threshold 5.0 s)"]


def test_without_exit_a_stall_fails_the_check_and_never_ends_the_replica():
    dog, clock, exits = _stalled_dog("fail")
    clock.t += 5.0
    for _ in range(3):
        with pytest.raises(Stalled):
            dog.check()
    assert exits == []


# ---------------------------------------------------------------- the exit, on a real process tree

TREE = textwrap.dedent("""
    import subprocess, sys, time
    from serve_apps import replica_exit
    sleeper = [sys.executable, "-c", "import subprocess, sys, time; "
               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]
    child = subprocess.Popen(sleeper)
    deadline = time.monotonic() + 20
    while len(replica_exit.descendants(child.pid)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    print(" ".join(map(str, [child.pid] + replica_exit.descendants(child.pid))), flush=True)
    replica_exit.exit_replica("a test's stall")
    print("still here", flush=True)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_exit_replica_kills_every_descendant_and_exits_with_its_status():
    proc = subprocess.run([sys.executable, "-c", TREE], capture_output=True, text=True, timeout=60, cwd=Path.cwd())
    assert proc.returncode == replica_exit.EXIT_CODE, proc.stderr
    assert "still here" not in proc.stdout
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2  # the child and its grandchild
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    assert "on_stall is exit" in proc.stderr


def test_descendants_reads_a_process_tree_parents_first(tmp_path):
    for pid, ppid in ((10, 1), (11, 10), (12, 11), (13, 10), (14, 10), (20, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (py thon) S {ppid} 0 0")
        (tmp_path / str(pid) / "cmdline").write_bytes(b"python\0-m\0vllm\0")
    (tmp_path / "14" / "cmdline").write_bytes(b"python\0-c\0from multiprocessing.resource_tracker import main;main(9)\0")
    (tmp_path / "self").mkdir()
    assert replica_exit.descendants(10, str(tmp_path)) == [11, 13, 14, 12]
    killed = []
    replica_exit.exit_replica("r", pid=10, kill=lambda p, s: killed.append(p), exit=lambda code: None,
                              proc=str(tmp_path))
    assert killed == [12, 13, 11]  # deepest first; the resource tracker left to clean up after the replica


@pytest.mark.parametrize("app_block, refused", [
    ({"stall_s": 5, "watchdog": 2, "on_stall": "exit"}, False), ({"stall_s": 5, "watchdog": 2, "on_stall": "fail"}, False),
    ({"stall_s": 5, "on_stall": "exit"}, True), ({"watchdog": 2, "on_stall": "exit"}, True),
    ({"stall_s": 5, "watchdog": 1, "on_stall": "exit"}, True)])
def test_an_experiment_with_on_stall_exit_and_no_v2_is_refused_in_one_line_before_anything_runs(app_block, refused):
    from chaos.base.errors import UsageError
    from chaos.core import experiment

    doc = json.loads((Path("experiments") / "engine-wedge.json").read_text())
    next(e for e in doc["extensions"] if e["name"] == "availproof")["app"] = app_block
    if not refused:
        assert experiment.settings(doc, "engine-wedge.json").app["on_stall"] == app_block["on_stall"]
        return
    with pytest.raises(UsageError, match="app.on_stall: exit needs the watchdog v2") as e:
        experiment.settings(doc, "engine-wedge.json")
    assert "\n" not in str(e.value)
