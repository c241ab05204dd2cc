"""The rig must not lose evidence or leave the cluster broken: SIGKILL and Ctrl-C mid-experiment."""

import json

import signal
import subprocess
import sys
import time
from pathlib import Path

from chaos import records as rec
from chaos import suite

from .test_experiments import assert_healthy_after

AVAILPROOF = str(Path(sys.executable).parent / "availproof")


def start_run(shared_cluster, out: Path) -> subprocess.Popen:
    return subprocess.Popen([AVAILPROOF, "run", str(suite.experiment_path("replica-kill")), "--out", str(out),
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
    proc = start_run(shared_cluster, out)
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
    proc = start_run(shared_cluster, out)
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

