"""An upgrade is complete when the new version serves, not only when the replica ids changed
(chaos.analysis.new_version; issue 43): on synthetic records of a run with one upgrade at 10 s."""

from chaos import analysis
from chaos.recording import records as rec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
INJECT_S = 10.0


def req(i, t, version, ok=True, e2e=0.5):
    sent = T0 + int(t * NS)
    return rec.RequestRecord(id=i, target="w-a", url="http://127.0.0.1:1", zone="a", route="/v1/chat/completions",
                             phase="measure", planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=ok,
                             failure=None if ok else rec.CONNECT_REFUSED, ttft_s=0.1 if ok else None, e2e_s=e2e,
                             itl_p95_s=0.02, served_replica="r", served_version=version)


def sample(t, ids):
    return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.01, controller_ok=True,
                      app_status="RUNNING", replicas={"D": {"a": len(ids)}}, nodes_alive={"a": 1},
                      replica_ids={"D": sorted(ids)})


def upgrade_run(version_at, detail=None, end_t=40.0, failed_new=()):
    """Requests every 0.5 s from 0 to ``end_t``, served by ``v2`` from ``version_at`` s on (None: never),
    ``initial`` before; the replicas replaced (new ids) at 20 s; ``failed_new``: send instants that fail."""
    requests = []
    for i in range(int(end_t * 2)):
        t = i * 0.5
        new = version_at is not None and t >= version_at
        requests.append(req(i, t, "v2" if new else "initial", ok=t not in failed_new))
    detail = {"version": "v2", "version_served": True} if detail is None else detail
    marks = [rec.FaultMark(event=e, fault_id="f1", scope="upgrade", target="code", t_ns=T0 + int(t * NS), zones=[],
                           detail=detail if e == rec.INJECT_START else {})
             for e, t in ((rec.INJECT_START, INJECT_S), (rec.INJECT_END, INJECT_S + 0.1),
                          (rec.HEAL_START, INJECT_S + 0.2), (rec.HEAL_END, 21.0))]
    samples = [sample(t, "abc") for t in (5.0, 9.0, 12.0)] + [sample(t, "abd") for t in (15.0,)] + \
              [sample(t, "def") for t in (20.0, 25.0, 30.0)]
    return rec.RunRecords(header={"run_id": "r"}, requests=requests, marks=marks, samples=samples,
                          footer={"stopped_ns": T0 + int(end_t * NS)})


def replacement(run):
    (f,) = analysis.analyse(run)["faults"]
    return f["replacement"], f["unmeasurable"]


def test_the_new_version_serving_after_the_ids_changed_completes_the_upgrade_then():
    rp, um = replacement(upgrade_run(version_at=26.0))
    assert rp["replicas_replaced_s"] == 10.0  # the sample at 20 s: no old id, three new
    # the first request the new version served: sent at 26.0 s, its outcome seen 0.5 s later
    assert rp["new_version"] == "v2"
    assert rp["new_version_first_served"] == {"request": 52, "sent_s": 16.0, "served_s": 16.5}
    assert rp["time_to_complete_s"] == 16.5  # the later of the two
    assert "replacement.time_to_complete_s" not in um and "replacement.new_version_first_served" not in um


def test_the_new_version_serving_before_the_last_old_id_left_leaves_the_ids_instant():
    rp, _ = replacement(upgrade_run(version_at=14.0, failed_new=(14.0,)))  # the first new one failed: not served
    assert rp["new_version_first_served"] == {"request": 29, "sent_s": 4.5, "served_s": 5.0}
    assert rp["time_to_complete_s"] == rp["replicas_replaced_s"] == 10.0


def test_new_ids_without_the_new_version_serving_are_no_completion():
    rp, um = replacement(upgrade_run(version_at=None))
    assert rp["replicas_replaced_s"] == 10.0 and rp["new_version_first_served"] is None
    assert rp["time_to_complete_s"] is None
    assert um["replacement.time_to_complete_s"] == ("the new version v2 served no request in the window "
                                                    "(the replicas were replaced at 10.0 s)")


def test_responses_without_a_version_leave_the_ids_completion_and_say_why():
    run = upgrade_run(version_at=26.0)
    for r in run.requests:
        r.served_version = None
    rp, um = replacement(run)
    assert rp["new_version_first_served"] is None and rp["time_to_complete_s"] == 10.0
    assert um["replacement.new_version_first_served"].startswith("no response named its version")


def test_an_upgrade_that_does_not_change_the_reported_version_says_so():
    rp, um = replacement(upgrade_run(version_at=None, detail={"version": "v2", "version_served": False}))
    assert rp["new_version_first_served"] is None and rp["time_to_complete_s"] == 10.0
    assert "does not change the version the app reports" in um["replacement.new_version_first_served"]
    rp, um = replacement(upgrade_run(version_at=26.0, detail={}))  # recorded before the marks named a version
    assert rp["new_version"] is None and rp["time_to_complete_s"] == 10.0
    assert um["replacement.new_version_first_served"].startswith("the upgrade's marks name no version")


def test_the_column_reader_gives_the_same_completion(tmp_path):
    from chaos.recording import record_columns

    run = upgrade_run(version_at=26.0)
    path = tmp_path / "records.ndjson"
    w = rec.RecordWriter(path, fsync_interval_s=60)
    w.write({"kind": "run", "run_id": "r"})
    for x in run.requests + run.marks + run.samples:
        w.write(x)
    w.write({"kind": "end", **run.footer})
    w.close()
    (f,) = analysis.analyse(record_columns.read(path))["faults"]
    assert f["replacement"]["new_version_first_served"] == {"request": 52, "sent_s": 16.0, "served_s": 16.5}


def test_the_report_shows_when_the_new_version_first_served():
    from chaos.reports.plane_rows import replacement_rows

    (f,) = analysis.analyse(upgrade_run(version_at=26.0))["faults"]
    rows = {r[1]: r[2] for r in replacement_rows(f)}
    assert rows["new version v2 first served s"] == "16.50"
    assert rows["complete (no old replica, as many new, the new version serving) s"] == "16.50"
