"""What a fault's heal learns after the records closed (a rollback's heal marks come after them) reaches its entry
in the summary: keys it did not have are added, what the records said is kept."""

from types import SimpleNamespace

from chaos import faults
from chaos.run import learnt_at_heal


def test_the_heal_s_findings_reach_the_summary_and_the_records_win_where_both_speak():
    marker = faults.Marker()
    marker.attempted["f-1"] = {"fault_id": "f-1", "scope": "engine-wedge", "target": "r1", "zones": ["zone-a"],
                               "pids": [57], "wedge_at_end": [{"pid": 57, "released": True}], "node": "late"}
    summary = {"faults": [{"fault_id": "f-1", "detail": {"pids": [57], "node": "worker-a"}},
                          {"fault_id": "f-2", "detail": {"x": 1}}]}
    learnt_at_heal(SimpleNamespace(summary=summary, marker=marker))
    assert summary["faults"][0]["detail"] == {"pids": [57], "node": "worker-a",
                                              "wedge_at_end": [{"pid": 57, "released": True}]}
    assert summary["faults"][1]["detail"] == {"x": 1}  # not this run's attempt: untouched


def test_no_summary_is_no_error():
    learnt_at_heal(SimpleNamespace(summary=None, marker=faults.Marker()))
