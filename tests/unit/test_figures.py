"""The figure catalogue (chaos/analysis/figures.py, issue 36): one definition per figure, which the summary's
schema, the bounds and the report agree with; and a figure added through its entry and its
derivation alone reaches the summary, the report's rows and the bound checks."""

import importlib
import json
from pathlib import Path

import pytest

from chaos import analysis, schemas
from chaos.core import bounds
from chaos.analysis import figures
from chaos.recording import records as rec
from chaos.core import summary as summary_mod
from chaos.reports import cells, report
from tests.unit.test_report import NS, STEADY, _page, _planes, _planes_table, _write_run

SCHEMA = json.loads((Path(schemas.__file__).parent / "summary.schema.json").read_text())
DEFS = SCHEMA["$defs"]
PLANES = {"affected": DEFS["affected"], "service": DEFS["population"], "retries": DEFS["retries"],
          **{p: DEFS["fault"]["properties"][p] for p in ("failed", "control_plane", "capacity", "continuity")}}


def _fragments(fig):
    if fig.plane == figures.RETRIES:  # an object inside each population
        return [DEFS["retries"]["properties"][fig.name]]
    if fig.plane == figures.POPULATION:
        return [DEFS["population"]["properties"][fig.name], DEFS["affected"]["properties"][fig.name]]
    if fig.plane == "locality":
        return [DEFS["locality_phase"]["properties"][fig.name]]
    return [DEFS["fault"]["properties"][fig.plane]["properties"][fig.name]]


@pytest.mark.parametrize("key", list(figures.CATALOGUE))
def test_every_figure_has_its_schema_fragment_in_the_summary_schema(key):
    fig = figures.CATALOGUE[key]
    for fragment in _fragments(fig):
        assert fragment == fig.schema, key


def test_every_number_of_a_plane_in_the_summary_schema_is_in_the_catalogue():
    missing = []
    for plane, obj in PLANES.items():
        for name, prop in obj["properties"].items():
            types = prop.get("type")
            types = types if isinstance(types, list) else [types]
            key = f"service.retries.{name}" if plane == "retries" else f"{plane}.{name}"
            if {"number", "integer", "boolean"} & set(types) and figures.get(key) is None:
                missing.append(f"{plane}.{name}")
    assert not missing, f"add these to chaos/analysis/figures.py: {missing}"


@pytest.mark.parametrize("key", list(figures.CATALOGUE))
def test_every_derivation_reference_names_a_function(key):
    module, _, name = figures.CATALOGUE[key].derived_by.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name)), key


def test_the_bounds_are_the_catalogue_s():
    with_bound = [f for f in figures.CATALOGUE.values() if f.bound]
    assert len({f.bound for f in with_bound}) == len(with_bound)  # one figure per bound
    assert bounds.BOUNDS == figures.bounded()
    assert all(f.comparison in ("<=", ">=", "==") for f in with_bound)
    assert bounds.BOUNDS["max_time_to_capacity_restored_s"] is figures.CAP_RESTORED


def test_keys_labels_and_columns():
    assert figures.CAP_RESTORED.key() == "capacity.time_to_restored_s"
    assert figures.STEADY_STATE.key("service") == "service.time_to_steady_state_s"
    assert figures.get("affected.time_to_steady_state_s") is figures.get("service.time_to_steady_state_s")
    assert figures.get("capacity.no_such_figure") is None
    assert report.LABELS["time_to_first_success_s"] == figures.FIRST_SUCCESS.label
    assert "capacity restored s" in cells.TABLE_COLUMNS and "control-plane outage s" in report.OVERVIEW_COLUMNS
    with pytest.raises(ValueError, match="already"):
        figures.register(figures.CAP_RESTORED)
    with pytest.raises(ValueError, match="only the sampled planes"):
        figures.register(figures.Figure(figures.POPULATION, "x_s", "s", "x s", "m.f", {}, derive=lambda *a: (0, None)))
    assert figures.get("affected.x_s") is None


# ---------------------------------------------------------------- a figure added by its entry and derivation
def _nodes_back(t0, window, baseline):
    """Seconds from the injection to the first sample with as many nodes alive as before it, after the
    first with fewer (0 when never fewer); samples that did not know the nodes are skipped."""
    before = next((sum(s.nodes_alive.values()) for s in reversed(baseline) if s.nodes_alive), None)
    if before is None:
        return None, "no sample before the injection knew the nodes alive"
    known = [s for s in window if s.nodes_alive is not None]
    lost = next((i for i, s in enumerate(known) if sum(s.nodes_alive.values()) < before), None)
    if lost is None:
        return 0.0, None
    back = next((s for s in known[lost:] if sum(s.nodes_alive.values()) >= before), None)
    return (None, None) if back is None else (round((back.t_ns - t0) / NS, 4), None)


NODES_BACK = figures.Figure("capacity", "time_to_nodes_back_s", "s", "time to nodes back s",
                            f"{__name__}._nodes_back", {"type": ["number", "null"]}, row=True,
                            bound="max_time_to_nodes_back_s", comparison="<=", bound_recovery=True,
                            derive=_nodes_back)


@pytest.fixture
def nodes_back():
    figures.register(NODES_BACK)
    try:
        yield NODES_BACK
    finally:
        figures.unregister(NODES_BACK)


def test_a_figure_added_by_its_catalogue_entry_and_derivation_alone(tmp_path, nodes_back):
    # zone-a's node down from 10.0 s to 12.0 s of the run, unseen while the GCS is down (10.5 .. 13.0 s):
    # back in the first sample that knew the nodes, 13.0 s, 3.0 s after the kill at 10 s
    d = _write_run(tmp_path / "head-kill", outage_s=0.0, zones=("zone-a", "zone-b"), down=(), fault_zones=(),
                   scope="head", samples=_planes(), bounds_extra={"max_time_to_nodes_back_s": 2.0})
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    assert f["capacity"]["time_to_nodes_back_s"] == 3.0  # the summary
    (result,) = [r for r in summary["bounds"]["results"] if r["bound"] == "max_time_to_nodes_back_s"]
    assert (result["value"], result["status"], result["met"]) == (3.0, bounds.VIOLATED, False)  # the bound check
    assert "max_time_to_nodes_back_s=3.0 (limit 2.0, affected)" in bounds.describe_failures([result])
    # the report: a row of the capacity plane, and the bound's row
    assert _planes_table(_page(report.write(d)["html"]))[("capacity", "time to nodes back s")] == "3.00"
    doc = report.build(d)
    (row,) = [r for r in report.bound_rows(doc["experiments"][0]) if r[2] == "max_time_to_nodes_back_s"]
    assert row[4:7] == ["3.00", "2.0", "VIOLATED"]
    # re-derived from the records alone (availproof analyse): the same figure, a looser bound met
    again = summary_mod.derive(rec.read(d / "records.ndjson"), analysis.Definitions(analysis.SteadyState(**STEADY)),
                               {"max_time_to_nodes_back_s": 5.0})
    assert again["faults"][0]["capacity"]["time_to_nodes_back_s"] == 3.0
    assert [r["status"] for r in again["bounds"]["results"]] == [bounds.MET]


def test_an_added_figure_that_cannot_be_measured_is_null_with_its_reason(tmp_path, nodes_back):
    d = _write_run(tmp_path / "no-samples", outage_s=0.0, zones=("zone-a",), down=(), fault_zones=(), scope="head",
                   samples=None, bounds_extra={"max_time_to_nodes_back_s": 2.0})
    f = json.loads((d / "summary.json").read_text())["faults"][0]
    assert f["capacity"]["time_to_nodes_back_s"] is None
    assert f["unmeasurable"]["capacity.time_to_nodes_back_s"] == "no sample before the injection knew the nodes alive"
    (result,) = bounds.check({"faults": [f]}, {"max_time_to_nodes_back_s": 2.0})
    assert result["status"] == bounds.UNMEASURABLE
    rows = {(r[0], r[1]): r[2] for r in report.plane_rows(f)}
    assert rows[("capacity", "time to nodes back s")].startswith("unmeasurable: no sample before")


def test_the_added_figure_is_gone_once_unregistered():
    assert figures.get("capacity.time_to_nodes_back_s") is None
    assert "max_time_to_nodes_back_s" not in figures.bounded()
