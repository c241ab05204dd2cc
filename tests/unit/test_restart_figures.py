"""The restart entry of a restart-fails fault (chaos.analysis.restart) on synthetic replica-state timelines with
known answers: one failed start, two with a back-off, the weights never restored (null with the reason), a
replacement that ran before the restore, the application gone unhealthy, and the whole run's summary."""

from chaos.recording import records as rec
from chaos.analysis import restart as restart_mod
from chaos.analysis.windows import Fault

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
DEP = "StreamTarget"
OLD = ["r1", "r2", "r3"]  # r1 is killed at 10 s


def sample(t, running, starting=(), status="RUNNING"):
    return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.002, controller_ok=True,
                      app_status=status, replicas={DEP: {"zone-a": 1}}, nodes_alive=None,
                      replica_ids={DEP: sorted(running)}, starting_ids={DEP: sorted(starting)})


def timeline(events: dict[float, tuple], end=60.0, period=0.5, status_at=None):
    """Samples every ``period`` from 0 to ``end``: before 10 s the three old replicas; from 10 s r2 and r3 plus, at
    each instant named in ``events`` (until the next one), (running new, starting new)."""
    out, t, current = [], 0.0, ((), ())
    keys = sorted(events)
    while t < end - 1e-9:
        for k in keys:
            if abs(k - t) < 1e-9:
                current = events[k]
        running = OLD if t < 10 else ["r2", "r3", *current[0]]
        status = (status_at or {}).get(t, "RUNNING")
        out.append(sample(t, running, current[1] if t >= 10 else (), status))
        t = round(t + period, 4)
    return out


RESTORED = {"restored": True, "state": "original", "why": None, "unreadable_until_restore": True}


def fault(heal_t=40.0, restored=RESTORED):
    return Fault("restart-fails-1", "restart-fails", "r1", ["zone-a"], T0 + 10 * NS,
                 heal_end_ns=None if heal_t is None else T0 + int(heal_t * NS),
                 detail={"deployment": DEP, "weights_restored": restored})


def analyse(samples, heal_t=40.0, end=60.0, restored=RESTORED):
    why: dict[str, str] = {}
    return restart_mod.restart(fault(heal_t, restored), samples, T0 + int(end * NS), why), why


def test_a_heal_that_did_not_restore_the_weights_nulls_their_instant_and_the_time_to_success():
    events = {12.0: ((), ("x1",)), 15.0: ((), ()), 41.0: ((), ("x2",)), 44.0: (("x2",), ())}
    left = {"restored": False, "state": "other", "why": "the weights read as other, not the fault's truncated copy"}
    for restored in (left, None):
        out, why = analyse(timeline(events), restored=restored)
        assert out["weights_restored_s"] is None and out["time_to_first_success_s"] is None
        assert out["first_success_s"] == 34.0  # what was seen is still said
        for name in ("weights_restored_s", "time_to_first_success_s"):
            assert why[f"restart.{name}"].startswith("the heal did not restore the weights (")
        assert (restored is None) or "read as other" in why["restart.weights_restored_s"]


def test_one_failed_start_then_success_after_the_restore():
    # x1 starts at 12 s and fails (gone at 15 s); after the restore at 40 s, x2 starts at 41 s and runs at 44 s
    out, why = analyse(timeline({12.0: ((), ("x1",)), 15.0: ((), ()), 41.0: ((), ("x2",)), 44.0: (("x2",), ())}))
    assert out["failed_starts"] == 1
    assert [s["outcome"] for s in out["starts"]] == ["failed", "succeeded"]
    assert out["backoff_s"] == [29.0]
    assert out["others_kept_serving"] is True and out["went_unhealthy"] is False
    assert out["weights_restored_s"] == 30.0 and out["first_success_s"] == 34.0
    assert out["time_to_first_success_s"] == 4.0
    assert not why


def test_two_failed_starts_with_a_back_off_between_them():
    out, why = analyse(timeline({11.0: ((), ("x1",)), 12.0: ((), ()), 14.5: ((), ("x2",)), 15.5: ((), ()),
                                 40.5: ((), ("x3",)), 42.0: (("x3",), ())}))
    assert out["failed_starts"] == 2
    assert out["backoff_s"] == [3.5, 26.0]
    assert out["time_to_first_success_s"] == 2.0
    assert out["starts"][0] == {"replica": "x1", "first_seen_s": 1.0, "last_seen_s": 1.5, "outcome": "failed"}


def test_never_restored_is_null_with_the_reason():
    out, why = analyse(timeline({12.0: ((), ("x1",)), 13.0: ((), ())}), heal_t=None)
    assert out["failed_starts"] == 1
    assert out["time_to_first_success_s"] is None and out["weights_restored_s"] is None
    assert "not restored" in why["restart.time_to_first_success_s"]
    assert "no new replica RUNNING" in why["restart.first_success_s"]
    assert "1 start(s)" in why["restart.backoff_s"]


def test_a_replacement_running_before_the_restore_was_not_held_back():
    out, why = analyse(timeline({12.0: ((), ("x1",)), 14.0: (("x1",), ())}))
    assert out["failed_starts"] == 0 and out["first_success_s"] == 4.0
    assert out["time_to_first_success_s"] is None
    assert "before the weights were restored" in why["restart.time_to_first_success_s"]


def test_a_start_still_under_way_at_the_end_is_not_a_failure_and_unhealthy_is_seen():
    samples = timeline({12.0: ((), ("x1",)), 13.0: ((), ()), 45.0: ((), ("x2",))},
                       status_at={20.0: "UNHEALTHY", 20.5: "UNHEALTHY"})
    out, why = analyse(samples)
    assert out["failed_starts"] == 1 and out["starts"][-1]["outcome"] == "still starting"
    assert out["went_unhealthy"] is True and out["statuses"] == ["RUNNING", "UNHEALTHY"]
    assert "after the weights' restore" in why["restart.time_to_first_success_s"]


def test_another_replica_lost_during_the_outage_is_said():
    samples = timeline({12.0: ((), ("x1",)), 13.0: ((), ())})
    samples = [s if not (20 <= (s.t_ns - T0) / NS < 22) else
               sample((s.t_ns - T0) / NS, ["r3"]) for s in samples]
    out, _ = analyse(samples)
    assert out["others_kept_serving"] is False


def test_no_sample_knew_the_ids_every_figure_null_with_the_reason():
    out, why = analyse([])
    assert out["failed_starts"] is None and out["others_kept_serving"] is None
    assert why["restart.failed_starts"] == "no sample before the injection knew the replicas' ids"
    assert why["restart.went_unhealthy"].startswith("no sample in the window")


def test_only_the_failing_restart_scope_is_measured():
    assert restart_mod.applies("restart-fails") and not restart_mod.applies("replica")


def test_the_whole_runs_summary_has_the_restart_entry_and_validates(tmp_path):
    import json

    from chaos.core import summary as summary_mod
    from tests.unit.test_analysis import every
    from tests.unit.test_summary import DEFS, schema, write_run

    def m(event, t, detail=None):
        return rec.FaultMark(event=event, fault_id="restart-fails-1", scope="restart-fails", target="r1",
                             t_ns=T0 + int(t * NS), zones=["zone-a"],
                             detail=detail or {"deployment": DEP, "weights_restored": RESTORED})

    marks = [m(rec.INJECT_START, 10.0), m(rec.INJECT_END, 10.2), m(rec.HEAL_START, 39.9), m(rec.HEAL_END, 40.0)]
    samples = timeline({12.0: ((), ("x1",)), 15.0: ((), ()), 41.0: ((), ("x2",)), 44.0: (("x2",), ())})
    stated = {"max_failed_requests": 5, "must_recover": True}
    header = summary_mod.header_block("restart fails", "restart-fails", DEFS, stated, "test", "stream")
    d = write_run(tmp_path / "restart-fails", header, every(0, 60) + samples, marks, 60)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, stated, "test")
    (f,) = s["faults"]
    assert f["restart"]["failed_starts"] == 1 and f["restart"]["time_to_first_success_s"] == 4.0
    s.update(experiment="restart fails", scope="restart-fails", app="stream",
             cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True, "network": "loopback"},
             environment={"ray": "2.60.0", "availproof": "0.test", "load": {"rate": 30}})
    schema("summary").validate(json.loads(json.dumps(s)))


def test_the_report_shows_the_restart_rows():
    from chaos.reports.plane_rows import restart_rows

    out, why = analyse(timeline({12.0: ((), ("x1",)), 15.0: ((), ()), 41.0: ((), ("x2",)), 44.0: (("x2",), ())}))
    rows = {r[1]: r[2] for r in restart_rows({"restart": out, "unmeasurable": why})}
    assert rows["starts failed (seen STARTING, never RUNNING)"] == "1"
    assert rows["the other replicas kept RUNNING until the restore"] == "yes"
    assert rows["gaps between starts s"].startswith("29")
    never, why = analyse([], heal_t=None)
    rows = {r[1]: r[2] for r in restart_rows({"restart": never, "unmeasurable": why})}
    assert rows["time to first success after the restore s"].startswith("unmeasurable: no sample before")
    assert restart_rows({}) == []
