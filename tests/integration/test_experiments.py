"""Every experiment file for real on the local backend with the streaming target.

Each run goes through Chaos Toolkit's own API (and one through the `chaos` CLI itself). The
tests check what the rig claims: the fault was injected and marked, the summary's failure
count is the count of failed records in the fault's window, a violated bound gives verdict 1,
and after the rollback every node is ALIVE and every zone serves again.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import records as rec
from chaos import bounds, runner, suite
from chaos.backends.local import LocalCluster
from chaos.backends.local.backend import LocalBackend
from chaos import placement

NS = 1_000_000_000


def failed_in_window(records_path: Path, fault: dict, window_end_ns: int | None) -> int:
    rr = rec.read(records_path)
    t0 = fault["inject_ns"]
    end = window_end_ns or 1 << 62
    n = 0
    for r in rr.requests:
        if r.phase != "measure" or r.ok:
            continue
        in_flight = r.sent_ns < t0 <= r.sent_ns + int((r.e2e_s or 0) * NS)
        if t0 <= r.sent_ns < end or in_flight:
            n += 1
    return n


def assert_healthy_after(cluster_dir: Path):
    cluster = LocalCluster.attach(cluster_dir)
    statuses = cluster.status()
    assert all(s.healthy for s in statuses), [(s.name, s.gcs_state, s.processes) for s in statuses]
    per_zone = placement.zones_of(LocalBackend(cluster).replicas())
    assert all(per_zone.get(z, 0) >= 1 for z in cluster.topology.zones), per_zone


def check_result(verdict: int, result: dict, out: Path, scope: str):
    assert verdict in (runner.PASS, runner.VIOLATED), result.get("error")
    summary = result["summary"]
    assert (out / "journal.json").exists() and (out / "summary.json").exists()
    assert json.loads((out / "summary.json").read_text())["faults"] == summary["faults"]
    faults = summary["faults"]
    assert faults and faults[0]["scope"] == scope
    for i, f in enumerate(faults):
        end = faults[i + 1]["inject_ns"] if i + 1 < len(faults) else None
        assert f["failed"]["total"] == failed_in_window(out / "records.ndjson", f, end)
        assert f["window_cut_by"] == (faults[i + 1]["fault_id"] if end else None)
    # a window cut by a later fault is not judged on recovery; the last fault is
    cut = {f["fault_id"] for f in faults if f["window_cut_by"]}
    for r in summary["bounds"]["results"]:
        if r["bound"] in bounds.RECOVERY_BOUNDS:
            assert (r["met"] is None) == (r["fault_id"] in cut), r
    # the verdict follows the bound results
    assert (verdict == runner.PASS) == summary["bounds"]["all_met"]
    print(f"\n{Path(result['experiment']).stem}: " + json.dumps(
        {k: faults[0][k] for k in ("time_to_detect_s", "time_to_first_success_s", "time_to_steady_state_s")}
        | {"failed": faults[0]["failed"]["total"], "verdict": verdict}))


SHARED = [name for name in suite.FULL if name not in ("head-kill-no-ft", "region-loss", "zone-partition")]


@pytest.mark.parametrize("name", SHARED)
def test_experiment_on_shared_cluster(name, shared_cluster, test_root):
    out = test_root / "runs" / name
    verdict, result = runner.run_experiment(suite.experiment_path(name), out, app="stream",
                                            cluster_dir=shared_cluster.cluster_dir)
    scope = json.loads(suite.experiment_path(name).read_text())["extensions"][0]["scope"]
    check_result(verdict, result, out, scope)
    assert_healthy_after(shared_cluster.cluster_dir)


def test_chaos_cli_runs_an_experiment(shared_cluster, test_root):
    """`chaos run` (Chaos Toolkit's own CLI) with the extension: journal, records and summary."""
    out = test_root / "runs" / "chaos-cli-replica-kill"
    env = dict(os.environ, AVAILPROOF_CLUSTER_DIR=str(shared_cluster.cluster_dir), AVAILPROOF_OUT=str(out))
    chaos = Path(sys.executable).parent / "chaos"
    proc = subprocess.run([str(chaos), "--no-version-check", "run", "--journal-path", str(out / "journal.json"),
                           str(suite.experiment_path("replica-kill"))], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    journal = json.loads((out / "journal.json").read_text())
    assert journal["availproof"]["summary"]["faults"][0]["scope"] == "replica"
    assert (out / "records.ndjson").exists()
    assert_healthy_after(shared_cluster.cluster_dir)


@pytest.mark.parametrize("name", ["head-kill-no-ft", "region-loss", "zone-partition"])
def test_experiment_on_its_own_cluster(name, test_root):
    """Experiments that need another cluster (no GCS FT; two regions; per-zone network namespaces)
    bring it up themselves."""
    cluster_dir = test_root / f"cluster-{name}"
    out = test_root / "runs" / name
    try:
        verdict, result = runner.run_experiment(suite.experiment_path(name), out, app="stream",
                                                cluster_dir=cluster_dir)
        scope = json.loads(suite.experiment_path(name).read_text())["extensions"][0]["scope"]
        check_result(verdict, result, out, scope)
        assert_healthy_after(cluster_dir)
    finally:
        c = LocalCluster.find(cluster_dir)
        if c:
            c.down()


def test_report_on_the_runs_of_this_suite(shared_cluster, test_root):
    """`availproof report` on the experiments run above (a suite layout): md, html and json,
    each experiment's numbers equal to its summary.json, one embedded timeline per experiment."""
    runs = test_root / "runs"
    if not any((d / "summary.json").exists() for d in runs.glob("*")):  # run alone: make one run
        runner.run_experiment(suite.experiment_path("replica-kill"), runs / "replica-kill", app="stream",
                              cluster_dir=shared_cluster.cluster_dir)
    cli = Path(sys.executable).parent / "availproof"
    proc = subprocess.run([str(cli), "report", str(runs), "--format", "all"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((runs / "report.json").read_text())
    done = [d for d in sorted(runs.iterdir()) if (d / "summary.json").exists()]
    assert [e["name"] for e in doc["experiments"]] == [d.name for d in done]
    md = (runs / "report.md").read_text()
    page = (runs / "report.html").read_text()
    for exp in doc["experiments"]:
        summary = json.loads((Path(exp["trials"][0]["dir"]) / "summary.json").read_text())
        assert exp["trials"][0]["summary"]["faults"] == summary["faults"]
        assert exp["environment"]["ray"] and exp["environment"]["load"]["rate"] > 0
        for f in summary["faults"]:
            assert f"| 1 | {f['scope']} | {f['target']} | {f['failed']['total']} | {f['failed']['mid_stream']} |" in md
    assert page.count("data:image/png;base64,") == len(doc["experiments"])
