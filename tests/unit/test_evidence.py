"""The one evidence reader (chaos/core/evidence.py): the runs a directory holds, in its three layouts, and the one
version rule for summaries, as the report, the claim and analyse all apply it."""

import json

import pytest

from chaos import analysis
from chaos.core import evidence
from chaos.base.errors import UsageError
from tests.unit.test_claim import outage_run


def test_a_suite_an_experiments_trials_and_one_run_are_found_alike(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill" / "trial-2", failed=5)
    outage_run(suite / "replica-kill" / "trial-1", failed=5)
    outage_run(suite / "zone-loss", scope="zone", heal_t=30)
    (suite / "capacity-sweep").mkdir()
    (suite / "capacity-sweep" / "capacity.json").write_text("{}")  # a sweep is not a run
    found = [(n, t, d.relative_to(suite).as_posix()) for n, t, d in evidence.find_runs(suite)]
    assert found == [("replica-kill", 1, "replica-kill/trial-1"), ("replica-kill", 2, "replica-kill/trial-2"),
                     ("zone-loss", None, "zone-loss")]
    assert [t for _, t, _ in evidence.find_runs(suite / "replica-kill")] == [1, 2]
    assert evidence.find_runs(suite / "zone-loss") == [("zone-loss", None, suite / "zone-loss")]
    assert list(evidence.experiments(suite)) == ["replica-kill", "zone-loss"]
    assert len(evidence.run_dirs(suite)) == 3
    with pytest.raises(UsageError, match="no such suite directory"):
        evidence.find_runs(tmp_path / "nope", "suite directory")


def test_the_version_rule(tmp_path):
    d = tmp_path / "run"
    s = outage_run(d, failed=5)
    assert evidence.load_summary(d)["format_version"] == analysis.FORMAT_VERSION
    (d / "summary.json").write_text(json.dumps({**s, "format_version": analysis.FORMAT_VERSION + 1}))
    with pytest.raises(UsageError, match="written by a newer availproof"):
        evidence.load_summary(d)
    old = {k: v for k, v in s.items() if k != "format_version"}  # format 1
    (d / "summary.json").write_text(json.dumps(old))
    again = evidence.load_summary(d)
    assert again["rederived"]["from_format"] == 1 and "re-derived from records.ndjson" in again["note"]
    (d / "summary.json").unlink()
    partial = evidence.load_summary(d)
    assert partial["partial"] is True and "did not finish" in partial["note"]
    (d / "summary.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        evidence.load_summary(d)
