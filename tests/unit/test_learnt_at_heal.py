"""What a fault's heal learns after the records closed (a rollback's heal marks come after them) reaches the
summary's ``learnt_at_heal``, apart from the faults' entries that the records alone re-derive."""

from types import SimpleNamespace

from chaos.scopes import faults
from chaos.core.run import learnt_at_heal


def test_the_heal_s_findings_reach_the_summary_and_the_records_win_where_both_speak():
    marker = faults.Marker()
    marker.attempted["f-1"] = {"fault_id": "f-1", "scope": "engine-wedge", "target": "r1", "zones": ["zone-a"],
                               "pids": [57], "wedge_at_end": [{"pid": 57, "released": True}], "node": "late"}
    summary = {"faults": [{"fault_id": "f-1", "detail": {"pids": [57], "node": "worker-a"}},
                          {"fault_id": "f-2", "detail": {"x": 1}}]}
    learnt_at_heal(SimpleNamespace(summary=summary, marker=marker))
    assert summary["learnt_at_heal"] == {"f-1": {"wedge_at_end": [{"pid": 57, "released": True}]}}
    assert summary["faults"][0]["detail"] == {"pids": [57], "node": "worker-a"}  # the records' own: re-derivable
    assert summary["faults"][1]["detail"] == {"x": 1}


def test_no_summary_is_no_error_and_nothing_learnt_adds_nothing():
    learnt_at_heal(SimpleNamespace(summary=None, marker=faults.Marker()))
    summary = {"faults": [{"fault_id": "f-1", "detail": {}}]}
    learnt_at_heal(SimpleNamespace(summary=summary, marker=faults.Marker()))
    assert "learnt_at_heal" not in summary
