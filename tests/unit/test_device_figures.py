"""The device entry of a device-loss fault (chaos.analysis.device) from synthetic records with known answers: where
each replacement landed, the starts that failed on the bad node, the time to a healthy replica (null with its reason
when never), whether Serve moved off the bad node by itself, the crash loop and its bound (max_device_crashloop_s,
by default 120 s), the whole run's summary against its schema, and the report's rows."""

import json

from chaos.core import bounds, experiment
from chaos.recording import records as rec
from chaos.analysis import device as device_mod
from chaos.analysis.windows import Fault
from tests.unit.test_analysis import NS, T0, req

BAD = "worker-a"
BEFORE = [{"replica": "r1", "state": "RUNNING", "node": BAD, "zone": "zone-a"},
          {"replica": "r2", "state": "RUNNING", "node": "worker-b", "zone": "zone-b"},
          {"replica": "r3", "state": "RUNNING", "node": "worker-c", "zone": "zone-c"}]
INJECT_T = 10.0


def ev(t, replica, state, node=None, zone=None):
    return {"t_s": t, "replica": replica, "state": state, "node": node, "zone": zone}


# the crash loop: r1 fails; x1, x2, x3 start on the bad node and fail; after the device's return at 150 s, x4 runs there
LOOP = [ev(4, "r1", "STOPPING", BAD, "zone-a"), ev(5, "r1", "GONE"),
        ev(9, "x1", "STARTING", BAD, "zone-a"), ev(11, "x1", "GONE"),
        ev(20, "x2", "STARTING"), ev(21, "x2", "STARTING", BAD, "zone-a"), ev(23, "x2", "GONE"),
        ev(60, "x3", "STARTING", BAD, "zone-a"), ev(62, "x3", "GONE")]
# the remedy: the node cordoned at 2 s; the replacement placed on worker-b at 8 s, RUNNING at 28 s
REMEDY = [ev(4, "r1", "STOPPING", BAD, "zone-a"), ev(5, "r1", "GONE"),
          ev(8, "y1", "STARTING", "worker-b", "zone-b"), ev(28, "y1", "RUNNING", "worker-b", "zone-b")]


def detail(events, remedy=None, cordon_t=None, restored=True):
    d = {"node": BAD, "mode": "error", "xid": 79, "remedy": remedy, "deployment": "StreamTarget",
         "replicas_at_injection": BEFORE, "watch": {"poll_s": 1.0, "looks": 150, "unknown": 0, "events": events},
         "engine_failures": [{"kind": "failed", "at": "step", "pid": 7, "t_s": 0.2}],
         "device_restored": {"removed": True, "state": "ours", "why": None} if restored else
         {"removed": False, "state": "gone", "why": "no marker: someone else removed it"}}
    if cordon_t is not None:
        d["cordon"] = {"cordoned": True, "t_s": cordon_t, "method": "ray drain-node (PREEMPTION)"}
    return d


def fault(d, heal_t=INJECT_T + 150):
    return Fault("device-loss-1", "device-loss", BAD, ["zone-a"], T0 + int(INJECT_T * NS),
                 heal_end_ns=None if heal_t is None else T0 + int(heal_t * NS), detail=d)


def served(t, replica, ok=True, e2e=0.5):
    r = req(int(t * 1000), t, ok=ok, e2e=e2e)
    r.served_replica = replica
    return r


def analyse(d, requests, end_t=INJECT_T + 240, heal_t=INJECT_T + 150):
    why: dict[str, str] = {}
    return device_mod.device(fault(d, heal_t), requests, T0 + int(end_t * NS), why), why


def background(end_t=250.0):
    """The other two replicas answer every second throughout (they are not replacements: they never count)."""
    return [served(t, "r2" if int(t) % 2 else "r3") for t in range(1, int(end_t))]


def test_a_crash_loop_on_the_bad_node_until_the_device_comes_back():
    out, why = analyse(detail(LOOP), background() + [served(INJECT_T + 175.0, "x4", e2e=1.0)])
    assert [(p["replica"], p["node"], p["t_s"], p["outcome"]) for p in out["placements"]] == [
        ("x1", BAD, 9, "failed"), ("x2", BAD, 21, "failed"), ("x3", BAD, 60, "failed")]
    assert out["failed_starts"] == 3 and out["moved_off_bad_node"] is False
    # x4 was never seen by the watch (it started after the restore): an answer after the restore is healthy
    assert out["time_to_healthy_replica_s"] == 176.0 and out["healthy_replica"] == "x4"
    assert out["crashloop_s"] == 176.0 and out["crashloop_ongoing"] is False
    assert out["device_restored_s"] == 150.0 and out["cordoned_s"] is None
    assert why["device.cordoned_s"] == "the remedy cordoned nothing: the fault ran without one"


def test_never_a_healthy_replica_is_null_with_its_reason_and_the_crash_loop_runs_to_the_windows_end():
    out, why = analyse(detail(LOOP), background(), heal_t=None)
    assert out["time_to_healthy_replica_s"] is None and out["healthy_replica"] is None
    assert why["device.time_to_healthy_replica_s"].startswith("no replacement off the bad node")
    assert out["crashloop_s"] == 240.0 and out["crashloop_ongoing"] is True
    assert out["device_restored_s"] is None and why["device.device_restored_s"].startswith("the heal did not remove")


def test_requests_that_do_not_say_who_served_them_leave_the_healthy_replica_and_the_loop_unmeasured():
    plain = [req(i, float(i)) for i in range(1, 200)]
    out, why = analyse(detail(LOOP), plain)
    assert out["time_to_healthy_replica_s"] is None and out["crashloop_s"] is None
    assert "served_replica" in why["device.time_to_healthy_replica_s"] and "served_replica" in why["device.crashloop_s"]
    assert out["failed_starts"] == 3  # the placements are the watch's: still measured


def test_the_remedy_moves_the_replacement_to_a_healthy_node_and_serve_did_not_by_itself():
    out, why = analyse(detail(REMEDY, remedy="cordon", cordon_t=2.0),
                       background() + [served(INJECT_T + 29.0, "y1", ok=False), served(INJECT_T + 30.0, "y1")])
    (p,) = out["placements"]
    assert (p["node"], p["zone"], p["on_bad_node"], p["outcome"]) == ("worker-b", "zone-b", False, "running")
    assert out["failed_starts"] == 0 and out["crashloop_s"] == 0.0 and out["crashloop_ongoing"] is False
    assert out["time_to_healthy_replica_s"] == 30.5 and out["cordoned_s"] == 2.0  # its first success, not its failure
    assert out["moved_off_bad_node"] is None  # nothing was placed before the cordon
    assert why["device.moved_off_bad_node"] == "no replacement was placed before the rig's cordon (2.0 s)"


def test_a_replacement_placed_off_the_bad_node_before_any_cordon_is_serve_moving_by_itself():
    out, _ = analyse(detail(REMEDY), background() + [served(INJECT_T + 30.0, "y1")])
    assert out["moved_off_bad_node"] is True and out["crashloop_s"] == 0.0
    moved = [ev(72, "y1", "STARTING", "worker-b", "zone-b"), ev(78, "y1", "RUNNING", "worker-b", "zone-b")]
    out, _ = analyse(detail(LOOP + moved, remedy="cordon", cordon_t=70.0), background()
                     + [served(INJECT_T + 80.0, "y1")])
    assert out["moved_off_bad_node"] is False  # before the cordon at 70 s only the bad node took its starts
    assert out["crashloop_s"] == 80.5 and out["failed_starts"] == 3


def test_a_start_hung_on_the_bad_node_is_a_crash_loop_too():
    hung = [ev(4, "r1", "GONE"), ev(9, "x1", "STARTING", BAD, "zone-a")]
    out, _ = analyse(detail(hung), background(), heal_t=None)
    assert out["placements"][0]["outcome"] == "starting" and out["failed_starts"] == 0
    assert out["crashloop_ongoing"] is True


def test_no_watch_no_figures_each_with_its_reason():
    d = detail(LOOP)
    d["watch"] = {}
    out, why = analyse(d, background())
    for name in ("failed_starts", "time_to_healthy_replica_s", "moved_off_bad_node", "crashloop_s"):
        assert out[name] is None and why[f"device.{name}"].startswith("the fault recorded no look")


def entry(crashloop_s, with_device=True):
    f = {"fault_id": "f", "scope": "device-loss", "zones": ["zone-a"], "unmeasurable": {},
         "affected": {"failed_total": 0, "requests": 10}, "service": {"failed_total": 0, "requests": 10}}
    if with_device:
        f["device"] = {"crashloop_s": crashloop_s}
    return {"faults": [f]}


def test_the_bound_is_violated_past_its_limit_met_within_it_and_not_applicable_without_a_bad_device():
    (r,) = bounds.check(entry(176.0), {"max_device_crashloop_s": 120})
    assert r["status"] == bounds.VIOLATED and r["value"] == 176.0
    (r,) = bounds.check(entry(30.5), {"max_device_crashloop_s": 120})
    assert r["status"] == bounds.MET
    (r,) = bounds.check(entry(None, with_device=False), {"max_device_crashloop_s": 120})
    assert r["status"] == bounds.NOT_APPLICABLE
    # applied by default (120 s) to the scope, and said
    assert experiment.default_bounds("device-loss", {}) == {"max_device_crashloop_s": 120.0, "max_orphan_s": 30.0}
    assert "max_device_crashloop_s" not in experiment.default_bounds("replica", {})


def test_the_whole_runs_summary_has_the_device_entry_and_validates(tmp_path):
    from chaos.core import summary as summary_mod
    from tests.unit.test_summary import DEFS, schema, write_run

    def m(event, t, d):
        return rec.FaultMark(event=event, fault_id="device-loss-1", scope="device-loss", target=BAD,
                             t_ns=T0 + int(t * NS), zones=["zone-a"], detail=d)

    at_inject = {k: v for k, v in detail(LOOP).items() if k not in ("watch", "device_restored")}
    marks = [m(rec.INJECT_START, INJECT_T, at_inject), m(rec.INJECT_END, INJECT_T + 0.3, at_inject),
             m(rec.HEAL_START, INJECT_T + 149.9, {}), m(rec.HEAL_END, INJECT_T + 150, detail(LOOP))]
    requests = background() + [served(INJECT_T + 175.0, "x4", e2e=1.0)]
    stated = {"max_failed_requests": 60}
    header = summary_mod.header_block("device loss", "device-loss", DEFS, stated, "test", "stream")
    d = write_run(tmp_path / "device-loss", header, requests, marks, 250)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, experiment.default_bounds("device-loss", stated),
                           "test")
    (f,) = s["faults"]
    assert f["device"]["failed_starts"] == 3 and f["device"]["time_to_healthy_replica_s"] == 176.0
    (r,) = [r for r in s["bounds"]["results"] if r["bound"] == "max_device_crashloop_s"]
    assert r["status"] == bounds.VIOLATED
    s.update(experiment="device loss", scope="device-loss", app="stream",
             cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True, "network": "loopback"},
             environment={"ray": "2.60.0", "availproof": "0.test", "load": {"rate": 30}})
    schema("summary").validate(json.loads(json.dumps(s)))


def test_the_report_shows_the_device_rows():
    from chaos.reports.plane_rows import device_rows

    out, why = analyse(detail(LOOP), background() + [served(INJECT_T + 175.0, "x4", e2e=1.0)])
    rows = {r[1]: r[2] for r in device_rows({"device": out, "unmeasurable": why})}
    assert rows["starts failed on the bad node"] == "3"
    assert rows["Serve placed a replacement off the bad node by itself"] == "no"
    assert rows["bad node cordoned by the remedy s"].endswith("the remedy cordoned nothing: the fault ran without one")
    (where,) = [v for k, v in rows.items() if k.startswith("bad node worker-a (error, XID 79, remedy none)")]
    assert "x1@worker-a/zone-a" in where and "(failed)" in where


def test_only_the_bad_device_scope_is_measured():
    assert device_mod.applies("device-loss") and not device_mod.applies("engine-error")
