"""The rig must not lose evidence or leave the cluster broken: SIGKILL and Ctrl-C mid-experiment."""

import json

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.recording import records as rec
from chaos.core import suite
from chaos.backends.local import procs

from .test_experiments import assert_healthy_after

AVAILPROOF = str(Path(sys.executable).parent / "availproof")
CHAOS = str(Path(sys.executable).parent / "chaos")


def quick_variant(test_root: Path, name: str, **ext) -> Path:
    """``name`` with a 1 s warm-up and a 2 s baseline (what these tests interrupt comes after the fault's
    mark: the shipped 15 s before it add nothing to them; CI time), ``ext`` over its extension."""
    doc = json.loads(suite.experiment_path(name).read_text())
    e = doc["extensions"][0]
    e["load"] = {**e["load"], "warmup_s": 1}
    e.update(baseline_s=2, **ext)
    path = test_root / f"{name}-quick{'-' + '-'.join(ext) if ext else ''}.json"
    path.write_text(json.dumps(doc))
    return path


def start_run(shared_cluster, out: Path, test_root: Path) -> subprocess.Popen:
    return subprocess.Popen([AVAILPROOF, "run", str(quick_variant(test_root, "replica-kill")), "--out", str(out),
                             "--cluster-dir", str(shared_cluster.cluster_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_mark(path: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and '"inject_end"' in path.read_text():
            return
        time.sleep(0.5)
    raise AssertionError("the fault was never marked")


def test_sigkill_mid_experiment_keeps_records_and_recover_cleans_up(shared_cluster, test_root):
    out = test_root / "runs" / "sigkill"
    proc = start_run(shared_cluster, out, test_root)
    records = out / "records.ndjson"
    try:
        wait_for_mark(records)
        time.sleep(4)
        before = len(rec.read(records).requests)
        time.sleep(1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = records.read_bytes().splitlines()
    parsed = [json.loads(line) for line in lines]  # every line parseable
    back = rec.read(records)
    assert back.torn_lines == 0 and back.partial
    assert len(back.requests) >= before > 0  # nothing lost up to the last second before the kill
    assert [m.event for m in back.marks][:2] == ["inject_start", "inject_end"]
    assert len(parsed) == len(back.requests) + len(back.marks) + len(back.samples) + 1
    assert back.samples  # the control-plane sampler's lines survive the kill too
    assert not (out / "summary.json").exists()
    report = subprocess.run([AVAILPROOF, "report", str(out)], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0 and "PARTIAL RUN" in report.stdout
    rc = subprocess.run([AVAILPROOF, "recover", "--cluster-dir", str(shared_cluster.cluster_dir)],
                        capture_output=True, text=True, timeout=600)
    assert rc.returncode == 0, rc.stdout[-1000:] + rc.stderr[-1000:]
    assert_healthy_after(shared_cluster.cluster_dir)


def test_ctrl_c_during_the_method_runs_rollbacks(shared_cluster, test_root):
    out = test_root / "runs" / "ctrl-c"
    proc = start_run(shared_cluster, out, test_root)
    try:
        wait_for_mark(out / "records.ndjson")
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stdout[-2000:]
    assert "interrupted" in stdout.lower()
    journal = json.loads((out / "journal.json").read_text())
    assert journal["status"] == "interrupted"
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["heal-all"]
    assert_healthy_after(shared_cluster.cluster_dir)



def _variant(test_root: Path, name: str, **ext) -> Path:
    doc = json.loads(suite.experiment_path(name).read_text())
    doc["extensions"][0].update(ext)
    path = test_root / f"{name}-{'-'.join(ext)}.json"
    path.write_text(json.dumps(doc))
    return path


def _cluster_pids(cluster) -> set[int]:
    from .conftest import all_pids

    return {p for p in all_pids(cluster) if procs.alive(p)}


@pytest.mark.parametrize("via", ["availproof", "chaos"])
def test_an_unset_token_variable_exits_2_and_the_victim_is_untouched(via, shared_cluster, test_root):
    """A set-up error (the front door's token variable unset) under `availproof run` and plain `chaos run`:
    exit 2 with the one line, and neither the method nor a rollback touches the cluster."""
    import os

    path = _variant(test_root, "worker-node-kill", front_door={"token_env": "AP_TEST_UNSET_TOKEN"})
    out = test_root / "runs" / f"unset-token-{via}"
    env = {k: v for k, v in os.environ.items() if k != "AP_TEST_UNSET_TOKEN"}
    before = _cluster_pids(shared_cluster)
    if via == "availproof":
        cmd = [AVAILPROOF, "run", str(path), "--out", str(out), "--cluster-dir", str(shared_cluster.cluster_dir)]
    else:
        env.update(AVAILPROOF_CLUSTER_DIR=str(shared_cluster.cluster_dir), AVAILPROOF_OUT=str(out))
        cmd = [CHAOS, "--no-version-check", "run", "--journal-path", str(out / "journal.json"), str(path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said[-2000:]
    assert "set $AP_TEST_UNSET_TOKEN" in said
    assert "inject_start" not in said and not (out / "records.ndjson").exists()
    assert _cluster_pids(shared_cluster) == before  # every process of the cluster as it was: nothing killed


def test_plain_chaos_run_stopped_by_a_stop_condition_leaves_nothing_broken(shared_cluster, test_root):
    """Chaos Toolkit's default strategy plays no rollback for a run a stop condition interrupted: the
    run's end heals the node it killed (in the middle of its outage) all the same."""
    import os

    # the wall-clock limit trips ~10 s into the node's 20 s outage (warm-up 1 s + baseline 2 s before it)
    path = quick_variant(test_root, "worker-node-kill", max_wall_s=13)
    out = test_root / "runs" / "chaos-run-stopped"
    env = dict(os.environ, AVAILPROOF_CLUSTER_DIR=str(shared_cluster.cluster_dir), AVAILPROOF_OUT=str(out))
    proc = subprocess.run([CHAOS, "--no-version-check", "run", "--journal-path", str(out / "journal.json"),
                           str(path)], env=env, capture_output=True, text=True, timeout=900)
    journal = json.loads((out / "journal.json").read_text())
    assert journal["status"] == "interrupted" and journal["rollbacks"] == [], proc.stdout[-2000:]
    summary = journal["availproof"]["summary"]
    assert summary["stop_reason"].startswith("wall-clock limit") and journal["availproof"]["verdict"]["word"] == "VIOLATED"
    marks = [m.event for m in rec.read(out / "records.ndjson").marks]
    assert marks == ["inject_start", "inject_end", "heal_start", "heal_end"], marks  # the run's own heal
    assert_healthy_after(shared_cluster.cluster_dir)
