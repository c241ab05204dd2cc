"""The soak reads a run's summary through the one evidence reader (chaos.core.evidence; issue 43), not raw."""

import json

import pytest

from chaos.core import evidence
from chaos.base.errors import UsageError
from chaos.soak import report as soak_report, run as soak_run
from tests.unit.test_soak_check import soak_records, soak_schedule, write_soak


def test_a_damaged_summary_is_one_line_naming_it_for_the_soak_report(tmp_path):
    d = tmp_path / "soak"
    write_soak(d, soak_records([(50, 52)]), soak_schedule())
    (d / "summary.json").write_text("{not json")
    with pytest.raises(UsageError) as e:
        soak_report.write(d)
    assert str(e.value).startswith(f"{d / 'summary.json'}: not valid JSON") and "\n" not in str(e.value)


def test_the_recorded_summary_is_the_file_as_written_and_none_without_one(tmp_path):
    d = tmp_path / "soak"
    write_soak(d, soak_records([(50, 52)]), soak_schedule())
    written = json.loads((d / "summary.json").read_text())
    assert evidence.recorded_summary(d) == written
    (d / "summary.json").unlink()
    assert evidence.recorded_summary(d) is None


def test_reanalyse_keeps_the_machine_load_the_soak_recorded_and_none_from_a_damaged_summary(tmp_path):
    d = tmp_path / "soak"
    write_soak(d, soak_records([(50, 52)]), soak_schedule())
    recorded = json.loads((d / "summary.json").read_text())
    recorded["soak_context"] = {"machine_load": {"load1": [1.5, 2.5]}}
    (d / "summary.json").write_text(json.dumps(recorded))
    summary: dict = {}
    assert soak_run.reanalyse(d, summary) is True
    assert summary["soak_context"]["machine_load"] == {"load1": [1.5, 2.5]}
    (d / "summary.json").write_text("{not json")
    assert soak_run.reanalyse(d, summary) is True and summary["soak_context"]["machine_load"] is None
