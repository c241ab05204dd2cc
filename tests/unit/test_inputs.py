"""Bad input gets one clear line and exit code 2; parsers survive fuzzing without tracebacks."""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from chaos.commands import cli
from chaos.core import experiment
from chaos.system import topology
from chaos.base.errors import UsageError

GOOD = json.loads((experiment.Path(__file__).resolve().parents[2] / "experiments" / "replica-kill.json").read_text())


def ext(doc):
    return next(e for e in doc["extensions"] if e["name"] == "availproof")


def test_all_shipped_experiments_validate():
    from chaos.core import suite

    for name in suite.FULL:
        exp = experiment.load(suite.experiment_path(name))
        s = experiment.settings(exp)
        assert s.bounds and s.bounds_source and s.scope
        assert experiment.settings(exp, app="llm").load.rate <= s.load.rate
        # a partition needs per-zone namespaces; everything else runs on loopback addresses
        assert s.network == ("netns" if s.scope == "partition" else "loopback")


def test_with_vllm_a_bound_that_waits_for_a_replacement_gets_the_engine_start_and_says_so():
    """--app llm: the capacity bound and the recovery window longer by twice the measured engine start,
    the other bounds and the stream target's settings as written, the source saying where it comes from."""
    from chaos.core import suite

    exp = experiment.load(suite.experiment_path("head-kill-gcs-ft"))
    stream, llm = experiment.settings(exp), experiment.settings(exp, app="llm")
    assert stream.bounds["max_time_to_capacity_restored_s"] == 90 and stream.recovery_window_s == 40
    assert llm.bounds["max_time_to_capacity_restored_s"] == 90 + 2 * 102 and llm.recovery_window_s == 40 + 2 * 102
    assert {k: v for k, v in llm.bounds.items() if k != "max_time_to_capacity_restored_s"} == \
        {k: v for k, v in stream.bounds.items() if k != "max_time_to_capacity_restored_s"}
    assert llm.bounds_source.startswith(stream.bounds_source) and "102 s from scheduled to RUNNING" in llm.bounds_source


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: ext(d).update(scope="galaxy"), "scope"),
    (lambda d: ext(d).update(bounds={"max_failures": 1}), "bounds.max_failures"),
    (lambda d: ext(d).update(bounds={}), "bounds"),
    (lambda d: ext(d)["load"].update(rate=-3), "rate"),
    (lambda d: ext(d)["load"].update(ratee=3), "ratee"),
    (lambda d: ext(d).update(baseline_s="ten"), "baseline_s"),
    (lambda d: ext(d).update(stop_when={"max_failed_ratio": 2}), "stop_when.max_failed_ratio"),
    (lambda d: ext(d).update(targetz="workers"), "targetz"),
    (lambda d: ext(d).update(network="vpn"), "network"),
    (lambda d: ext(d).update(kubernetes={"context": "kind-x", "max_pods": 0}), "kubernetes.max_pods"),
    (lambda d: ext(d).update(kubernetes={"namespaces": "a"}), "kubernetes.namespaces"),
    (lambda d: ext(d).update(kubernetes={"context": ""}), "kubernetes.context"),
    (lambda d: d.update(extensions=[]), "extensions"),
    (lambda d: d.pop("method"), "method"),
])
def test_bad_experiment_one_line_exit_2(tmp_path, capsys, mutate, needle):
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    rc = cli.main(["run", str(p), "--out", str(tmp_path / "out"), "--cluster-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and needle in err[0] and "bad.json" in err[0], err


def test_not_json_and_missing_file(tmp_path, capsys):
    p = tmp_path / "x.json"
    p.write_text("{ nope")
    assert cli.main(["run", str(p)]) == 2
    assert cli.main(["run", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "not valid JSON" in err[0] and "cannot read" in err[1]


def test_unreachable_cluster_is_one_line(tmp_path, capsys):
    assert cli.main(["cluster", "status", "--cluster-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no local cluster" in err[0]


def test_missing_model_is_one_line(tmp_path):
    from chaos.base.errors import SetupError
    from serve_apps import checkpoint

    with pytest.raises(SetupError, match="config.json missing"):
        checkpoint.check(tmp_path)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_fuzz_topology_parser_only_usage_errors(doc):
    try:
        t = topology.parse(doc, "fuzz.yaml")
    except UsageError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.yaml: ")
        return
    # accepted: then it is a topology the cluster code can use (a validator that accepts everything fails here)
    assert isinstance(doc, dict) and t.nodes and isinstance(t.gcs_fault_tolerance, bool)
    assert all(isinstance(n.cpus, int) and n.cpus >= 1 and isinstance(n.name, str) for n in t.nodes)


def _assert_well_typed(s: experiment.Settings) -> None:
    """What the rig relies on from accepted Settings (the old validator let "false", "abc" and "5" through)."""
    import math
    from dataclasses import fields

    from chaos.recording.records import SCOPES
    from chaos.load.workload import LoadShape

    assert s.scope in SCOPES and s.network in experiment.NETWORKS and s.targets in experiment.TARGET_SETS
    assert isinstance(s.gcs_fault_tolerance, bool) and isinstance(s.topology, str) and s.topology
    assert isinstance(s.allow_hosts, tuple) and all(isinstance(h, str) and h for h in s.allow_hosts)
    for v in (s.baseline_s, s.recovery_window_s, s.max_wall_s, s.sample_period_s, s.steady_state.window_s,
              s.steady_state.min_success_ratio, *s.stop_when.values()):
        assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    for f in fields(LoadShape):
        v = getattr(s.load, f.name)
        assert not isinstance(v, bool) or f.name == "stream", (f.name, v)
    assert s.bounds and all(isinstance(v, bool) == (k == "must_recover") for k, v in s.bounds.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["scope", "load", "bounds", "baseline_s", "stop_when", "targets", "app",
                                        "steady_state", "slo", "llm", "recovery_window_s", "kubernetes", "network",
                                        "bogus"]),
                       json_values, max_size=6))
def test_fuzz_experiment_extension_only_usage_errors(fields):
    doc = {"title": "t", "method": [{}], "extensions": [{"name": "availproof", **fields}]}
    try:
        s = experiment.settings(doc, "fuzz.json")
    except UsageError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.json: ")
        return
    _assert_well_typed(s)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["gcs_fault_tolerance", "allow_hosts", "baseline_s", "max_wall_s", "network", "scope"]),
       json_values)
def test_fuzz_one_field_of_a_good_experiment_accepted_only_when_well_typed(field, value):
    doc = json.loads(json.dumps(GOOD))
    ext(doc)[field] = value
    try:
        s = experiment.settings(doc, "fuzz.json")
    except UsageError as e:
        assert str(e).startswith(f"fuzz.json: extensions[availproof].{field}"), str(e)
        return
    _assert_well_typed(s)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_fuzz_topology_yaml_text(text, tmp_path_factory):
    p = tmp_path_factory.mktemp("t") / "t.yaml"
    p.write_text(text)
    try:
        topology.load(p)
    except UsageError as e:
        assert "\n" not in str(e)

