"""`availproof soak` for real (issue 32): replica kills and worker-node kills on the shared three-zone cluster with
the stream target behind the rig's balancer, in well under a minute (CI time): the two experiments with a 10 s node
outage and 20 s recovery windows (what the soak does with them does not depend on the shipped 20 s and 30 s);
seed 6366 over 40 s draws a replica kill at 0.2 s and a node kill at 1.2 s (overlapping it), and a third fault that
the rules skip (2 faults, one overlap, one skipped). Every injected fault proven and healed, the summary's soak
object valid, `availproof analyse` deriving the same soak figures, the cluster healthy after."""

import json
from pathlib import Path

import jsonschema

from chaos.commands import cli
from chaos.recording import records as rec
from chaos.core import suite
from chaos.soak import check as soak_check, figures, run as soak_run
from chaos.soak.schedule import Schedule

from .test_experiments import assert_healthy_after

SCHEMAS = Path(cli.__file__).parent.parent / "schemas"


def shorter(name: str, tmp_path: Path) -> Path:
    """``name`` with a 10 s node outage (worker-node-kill) and a 20 s recovery window."""
    doc = json.loads(suite.experiment_path(name).read_text())
    if name == "worker-node-kill":
        doc["method"][0]["provider"]["arguments"]["outage_s"] = 10
    doc["extensions"][0]["recovery_window_s"] = 20
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_soak_of_replica_and_node_kills(shared_cluster, test_root, tmp_path):
    rates = tmp_path / "rates.yaml"  # node kills as often as replica kills: both scopes within a minute
    rates.write_text(json.dumps({"period_days": 30, "scopes": {"replica": {"events": 4}, "node": {"events": 4}}}))
    out = test_root / "runs" / "soak"
    code = cli.main(["soak", "--experiments", str(shorter("replica-kill", tmp_path)),
                     str(shorter("worker-node-kill", tmp_path)), "--faults", str(rates), "--speedup", "12000",
                     "--duration", "40", "--seed", "6366", "--out", str(out),
                     "--cluster-dir", str(shared_cluster.cluster_dir)])
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0, summary.get("verdict")
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "summary.schema.json").read_text())).validate(summary)
    soak = summary["soak"]
    assert len(soak["faults_injected"]) == 2 and len(soak["faults_skipped"]) == 1, soak
    assert {p["scope"] for p in soak["faults_injected"]} == {"replica", "node"}
    assert soak["overlaps"], soak  # the node kill arrived while the replica kill held
    # every injected fault proven, in the records and healed
    records = rec.read(out / "records.ndjson")
    assert len(summary["faults"]) == len(soak["faults_injected"])
    assert all(f["effect"]["verified"] for f in summary["faults"]), [f["effect"] for f in summary["faults"]]
    injected = {m.fault_id for m in records.marks if m.event == rec.INJECT_START}
    healed = {m.fault_id for m in records.marks if m.event == rec.HEAL_END}
    assert injected and injected <= healed
    # the soak object is soak_summary's, on the schedule from the header as run
    sched = soak_run.as_run(Schedule.from_dict(records.header["soak"]["schedule"]), records.soak)
    expect = soak_check.soak_summary(sched, records, {})
    assert soak["observed_lost_service_s"] == json.loads(json.dumps(expect["observed_lost_service_s"]))
    assert soak["observed_lost_service_s"]["total"] is not None
    assert (out / "soak.md").is_file() and (out / "soak-timeline.png").stat().st_size > 10_000
    # analyse derives the same soak figures from the records alone
    assert cli.main(["analyse", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["soak"] == soak
    assert_healthy_after(shared_cluster.cluster_dir)
