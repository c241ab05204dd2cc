"""The JSON Schemas are the single source of validation: they match the code's names, accept
every shipped file, and REJECT wrong values with exit 2 and a line naming the field's path."""

import copy
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from jsonschema import Draft202012Validator

from chaos.core import bounds, experiment, validate
from chaos.commands import cli
from chaos import schemas
from chaos.system import topology
from chaos.analysis import SLO, SteadyState
from chaos.base.errors import UsageError
from chaos.recording.records import SCOPES
from chaos.load.workload import LoadShape

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.json"))
TOPOLOGIES = sorted((ROOT / "chaos" / "topologies").glob("*.yaml"))
GOOD = json.loads((ROOT / "experiments" / "replica-kill.json").read_text())
EXT = schemas.schema(schemas.EXTENSION)
TOPO = schemas.schema(schemas.TOPOLOGY)
PREFIX = "extensions[availproof]"


def ext(doc):
    return next(e for e in doc["extensions"] if e["name"] == "availproof")


def props(name):
    return EXT["$defs"][name]["properties"]


# ---------------------------------------------------------------- the schemas themselves
@pytest.mark.parametrize("name", schemas.NAMES)
def test_schema_is_valid_2020_12_with_id_title_description(name):
    s = schemas.schema(name)
    Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["$id"] and s["title"] and s["description"]
    assert schemas.path(name).name == f"{name}.schema.json"


def test_bound_names_are_chaos_bounds_BOUNDS():
    # the lead adds bounds in chaos/core/bounds.py: when this fails, add the bound to the schema's $defs.bounds
    assert set(props("bounds")) == set(bounds.BOUNDS)


@pytest.mark.parametrize("defs, cls", [("load", LoadShape), ("steady_state", SteadyState), ("slo", SLO)])
def test_nested_objects_are_the_dataclass_fields(defs, cls):
    assert set(props(defs)) == {f.name for f in dataclasses.fields(cls)}


def test_extension_fields_are_the_settings_fields():
    assert set(EXT["properties"]) == {f.name for f in dataclasses.fields(experiment.Settings)} | {"name", "llm"}


def test_enums_match_the_code():
    assert tuple(EXT["properties"]["scope"]["enum"]) == SCOPES
    if hasattr(bounds, "POPULATIONS"):
        assert tuple(EXT["properties"]["population"]["enum"]) == bounds.POPULATIONS
    assert set(EXT["properties"]["llm"]["properties"]) == {"load", "steady_state", "slo", "bounds", "recovery_window_s",
                                                           "recovery_settle_s", "bounds_source"}
    from chaos.backends.kuberay.kube import partition as kube_partition

    assert tuple(EXT["properties"]["kubernetes"]["properties"]["partition_method"]["enum"]) == kube_partition.METHODS


def _defaults(properties):
    return {k: v["default"] for k, v in properties.items() if "default" in v}


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


@pytest.mark.parametrize("properties, obj", [
    (EXT["$defs"]["load"]["properties"], LoadShape()),
    (EXT["$defs"]["steady_state"]["properties"], SteadyState()),
    (EXT["$defs"]["slo"]["properties"], SLO()),
    (EXT["properties"], experiment.Settings(scope="replica")),
])
def test_schema_defaults_are_the_code_defaults(properties, obj):
    for key, default in _defaults(properties).items():
        if hasattr(obj, key):
            assert _norm(getattr(obj, key)) == default, key


def test_topology_schema_defaults_are_what_parse_fills_in():
    t = topology.parse({"name": "t", "regions": [{"name": "r", "zones": [{"name": "z", "nodes": [{"name": "n"}]}]}]})
    p = TOPO["properties"]
    assert t.gcs_fault_tolerance == p["gcs_fault_tolerance"]["default"]
    assert t.idle_workers_kept == p["idle_workers_kept"]["default"]
    assert dataclasses.asdict(t.head) == _defaults(p["head"]["properties"])
    assert dataclasses.asdict(t.health_check) == _defaults(p["health_check"]["properties"])
    node = dataclasses.asdict(t.nodes[0])
    for key, default in _defaults(TOPO["$defs"]["node"]["properties"]).items():
        assert node[key] == default, key


# ---------------------------------------------------------------- acceptance of the shipped files
@pytest.mark.parametrize("path", EXPERIMENTS + TOPOLOGIES, ids=lambda p: p.name)
def test_every_shipped_file_is_accepted(path):
    assert validate.check_file(path) == []


def test_validate_cli_accepts_every_shipped_file(capsys):
    files = [str(p) for p in EXPERIMENTS + TOPOLOGIES]
    assert len(EXPERIMENTS) >= 10 and len(TOPOLOGIES) >= 2
    assert cli.main(["validate", *files]) == 0
    assert capsys.readouterr().out.splitlines() == [f"ok {f}" for f in files]


def test_make_writes_the_shipped_experiments(tmp_path):
    """experiments/_make.py (which validates what it writes) reproduces the committed files."""
    for name in ("_make.py", "_engines.py", "_ranks.py", "_restarts.py", "_devices.py", "_kv_pressure.py", "_overload.py"):
        shutil.copy(ROOT / "experiments" / name, tmp_path / name)
    subprocess.run([sys.executable, str(tmp_path / "_make.py")], check=True, cwd=ROOT, timeout=120)
    written = sorted(tmp_path.glob("*.json"))
    assert [p.name for p in written] == [p.name for p in EXPERIMENTS]
    for p in written:
        assert p.read_text() == (ROOT / "experiments" / p.name).read_text(), p.name
        assert "$schema" not in json.loads(p.read_text())


# ---------------------------------------------------------------- rejection, field by field
def _set(mapping, dotted, value):
    *parents, last = dotted.split(".")
    for p in parents:
        mapping = mapping.setdefault(p, {})
    if value is _DELETE:
        mapping.pop(last, None)
    else:
        mapping[last] = value


_DELETE = object()

BAD_EXTENSION = [
    # the three holes of the hand-written validator
    ("gcs_fault_tolerance", "false", "gcs_fault_tolerance"),
    ("allow_hosts", "example.com", "allow_hosts"),
    ("steady_state.window_s", "5", "steady_state.window_s"),
    # booleans as booleans
    ("gcs_fault_tolerance", 0, "gcs_fault_tolerance"),
    ("load.stream", "yes", "load.stream"),
    ("bounds.must_recover", "true", "bounds.must_recover"),
    # lists as lists
    ("allow_hosts", {"host": "x"}, "allow_hosts"),
    ("allow_hosts", [1], "allow_hosts[0]"),
    ("allow_hosts", [""], "allow_hosts[0]"),
    ("load.max_tokens", "16", "load.max_tokens"),
    ("load.max_tokens", [16], "load.max_tokens"),
    ("load.max_tokens", [16, 32, 48], "load.max_tokens"),
    ("load.max_tokens", [16, "48"], "load.max_tokens[1]"),
    ("load.prompt_words", [0, 5], "load.prompt_words[0]"),
    # numbers as numbers, with ranges
    ("baseline_s", "ten", "baseline_s"),
    ("baseline_s", -1, "baseline_s"),
    ("baseline_s", True, "baseline_s"),
    ("recovery_window_s", None, "recovery_window_s"),
    ("max_wall_s", 0, "max_wall_s"),
    ("sample_period_s", 0, "sample_period_s"),
    ("sample_period_s", "0.5", "sample_period_s"),
    ("steady_state.window_s", 0, "steady_state.window_s"),
    ("steady_state.min_success_ratio", 1.5, "steady_state.min_success_ratio"),
    ("steady_state.min_requests", 0, "steady_state.min_requests"),
    ("steady_state.min_requests", 2.5, "steady_state.min_requests"),
    ("steady_state.max_p95_ttft_s", -2, "steady_state.max_p95_ttft_s"),
    ("slo.ttft_s", "2", "slo.ttft_s"),
    ("slo.e2e_s", True, "slo.e2e_s"),
    ("load.rate", -3, "load.rate"),
    ("load.rate", "8", "load.rate"),
    ("load.rate", 6000, "load.rate"),
    ("load.concurrency", 0, "load.concurrency"),
    ("load.seed", 1.5, "load.seed"),
    ("load.warmup_s", -1, "load.warmup_s"),
    ("load.drain_s", "later", "load.drain_s"),
    ("bounds.max_failed_requests", -1, "bounds.max_failed_requests"),
    ("bounds.max_failed_requests", "5", "bounds.max_failed_requests"),
    ("bounds.max_failed_ratio", 2, "bounds.max_failed_ratio"),
    ("bounds.max_time_to_steady_state_s", None, "bounds.max_time_to_steady_state_s"),
    ("stop_when.max_failed_ratio", 2, "stop_when.max_failed_ratio"),
    ("stop_when.for_s", 0, "stop_when.for_s"),
    ("kubernetes.max_pods", 0, "kubernetes.max_pods"),
    ("kubernetes.max_pods", True, "kubernetes.max_pods"),
    ("kubernetes.context", "", "kubernetes.context"),
    ("app.replicas_per_zone", 0, "app.replicas_per_zone"),
    ("app.replicas_per_zone", "2", "app.replicas_per_zone"),
    # enums
    ("scope", "galaxy", "scope"),
    ("targets", "nodes", "targets"),
    ("routing", "random", "routing"),
    ("network", "vpn", "network"),
    ("front", "cdn", "front"),
    ("population", "everyone", "population"),
    ("load.mode", "half-open", "load.mode"),
    ("load.arrival", "bursty", "load.arrival"),
    ("load.route", "embeddings", "load.route"),
    ("kubernetes.partition_method", "iptables", "kubernetes.partition_method"),
    # strings as strings
    ("topology", 5, "topology"),
    ("topology", "", "topology"),
    ("bounds_source", ["a"], "bounds_source"),
    ("load.model", "", "load.model"),
    # mappings as mappings
    ("load", "fast", "load"),
    ("steady_state", [], "steady_state"),
    ("app", "big", "app"),
    ("kubernetes", "kind", "kubernetes"),
    ("llm", [], "llm"),
    ("bounds", {}, "bounds"),
    ("bounds", 5, "bounds"),
    # unknown keys, everywhere the code knows every key
    ("targetz", "workers", "targetz"),
    ("load.ratee", 3, "load.ratee"),
    ("steady_state.window", 5, "steady_state.window"),
    ("slo.ttft", 1, "slo.ttft"),
    ("bounds.max_failures", 1, "bounds.max_failures"),
    ("stop_when.after_s", 1, "stop_when.after_s"),
    ("kubernetes.namespaces", "a", "kubernetes.namespaces"),
    ("app.replicas", 2, "app.replicas"),
    ("llm.bounds", {}, "llm.bounds"),  # an empty override says nothing
    ("llm.bounds", {"max_failed_requests": "3"}, "llm.bounds.max_failed_requests"),
    ("llm.recovery_window_s", -1, "llm.recovery_window_s"),
    # the llm block is checked as written, whatever --app says
    ("llm.load.rate", "2", "llm.load.rate"),
    ("llm.load.timeout_s", -1, "llm.load.timeout_s"),
    ("llm.steady_state.min_requests", "3", "llm.steady_state.min_requests"),
    ("llm.slo.itl_s", 0, "llm.slo.itl_s"),
    # required keys
    ("scope", _DELETE, "scope"),
    ("bounds", _DELETE, "bounds"),
]


@pytest.mark.parametrize("field, value, where", BAD_EXTENSION,
                         ids=[f"{f}={v!r}" if v is not _DELETE else f"{f}-missing" for f, v, _ in BAD_EXTENSION])
def test_wrong_extension_value_is_rejected_naming_the_field(tmp_path, capsys, field, value, where):
    doc = copy.deepcopy(GOOD)
    _set(ext(doc), field, value)
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    want = f"{PREFIX}.{where}: "
    # availproof validate: exit 2, every line one problem of this file, one of them on this field
    assert cli.main(["validate", str(p)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith(f"{p}: ") for line in out), out
    assert any(line.startswith(f"{p}: {want}") for line in out), out
    # loading for a run: one line naming the file and the field (the only problem here)
    with pytest.raises(UsageError) as e:
        experiment.load(p)
    assert str(e.value).startswith(f"x.json: {want}") and "\n" not in str(e.value)
    # and the run command: exit 2, one line on stderr
    assert cli.main(["run", str(p), "--out", str(tmp_path / "o"), "--cluster-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"x.json: {want}" in err[0], err


@pytest.mark.parametrize("mutate, needle", [
    (lambda l: l.update(warmup_s=700, duration_s=600), "load: warmup_s must be in [0, duration_s)"),
    (lambda l: l.update(max_tokens=[48, 16]), "load: max_tokens must be [min, max]"),
    (lambda l: l.update(connect_timeout_s=20, timeout_s=10), "load: timeout_s and connect_timeout_s"),
])
def test_cross_field_load_rules_are_checked_after_the_schema(tmp_path, capsys, mutate, needle):
    doc = copy.deepcopy(GOOD)
    mutate(ext(doc)["load"])
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    assert cli.main(["validate", str(p)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert any(f"{PREFIX}.{needle}" in line for line in out), out


def test_cross_field_rule_broken_by_the_llm_overrides_only():
    doc = copy.deepcopy(GOOD)
    ext(doc)["llm"]["load"]["warmup_s"] = 900  # > the base duration_s of 600
    experiment.settings(doc, "x.json")  # the stream app is fine
    with pytest.raises(UsageError, match=r"x\.json: extensions\[availproof\] \(with its llm overrides\)\.load: warmup_s"):
        experiment.settings(doc, "x.json", app="llm")
    assert any("with its llm overrides" in line for line in experiment.problems(doc, "x.json"))


def test_validate_reports_every_error_not_just_the_first(tmp_path, capsys):
    doc = copy.deepcopy(GOOD)
    e = ext(doc)
    e.update(gcs_fault_tolerance="false", allow_hosts="abc", bogus=1)
    e["steady_state"]["window_s"] = "5"
    e["llm"]["load"]["rate"] = -1
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    good = ROOT / "experiments" / "zone-loss.json"
    assert cli.main(["validate", str(p), str(good)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{p}: {PREFIX}.allow_hosts: 'abc' is not of type 'array'",
        f"{p}: {PREFIX}.bogus: unknown field (known: {', '.join(EXT['properties'])})",
        f"{p}: {PREFIX}.gcs_fault_tolerance: 'false' is not of type 'boolean'",
        f"{p}: {PREFIX}.llm.load.rate: -1 is less than or equal to the minimum of 0",
        f"{p}: {PREFIX}.steady_state.window_s: '5' is not of type 'number'",
        f"ok {good}",
    ]


def test_the_holes_no_longer_change_meaning():
    """What the old validator did with them: FT on for "false", a tuple of characters, a late failure."""
    for field, value in (("gcs_fault_tolerance", "false"), ("allow_hosts", "10.0.0.1"), ("steady_state.window_s", "5")):
        doc = copy.deepcopy(GOOD)
        _set(ext(doc), field, value)
        with pytest.raises(UsageError, match=rf"{field}: '"):
            experiment.settings(doc, "x.json")
    s = experiment.settings(GOOD, "x.json")
    assert s.gcs_fault_tolerance is True and s.allow_hosts == () and isinstance(s.steady_state.window_s, (int, float))


@pytest.mark.parametrize("doc, needle", [
    ({"title": "t", "method": [{}]}, "x.json: extensions: needs an entry named 'availproof'"),
    ({"title": "t", "method": [{}], "extensions": {"name": "availproof"}}, "x.json: extensions: must be a list"),
    ({"title": "t", "method": [], "extensions": [GOOD["extensions"][0]]}, "x.json: method: must be a non-empty list"),
    ({"method": [{}], "extensions": [GOOD["extensions"][0]]}, "x.json: title: is required"),
    ({"title": "t", "method": [{}], "extensions": [GOOD["extensions"][0]] * 2}, "more than one entry named"),
    ([1, 2], "x.json: an experiment is a JSON object"),
])
def test_experiment_document_problems(doc, needle):
    assert any(needle in line for line in experiment.problems(doc, "x.json"))


BAD_TOPOLOGY = [
    (lambda d: d.update(gcs_fault_tolerance="false"), "gcs_fault_tolerance"),
    (lambda d: d.update(idle_workers_kept="2"), "idle_workers_kept"),
    (lambda d: d.update(idle_workers_kept=-1), "idle_workers_kept"),
    (lambda d: d.update(head={"cpus": -1}), "head.cpus"),
    (lambda d: d.update(head={"gpus": 1}), "head.gpus"),
    (lambda d: d.update(head=[]), "head"),
    (lambda d: d.update(health_check={"failure_threshold": 0}), "health_check.failure_threshold"),
    (lambda d: d.update(health_check={"period_ms": "1000"}), "health_check.period_ms"),
    (lambda d: d.update(name="a\n"), "name"),
    (lambda d: d.update(name="x" * 33), "name"),
    (lambda d: d.update(regions="region-1"), "regions"),
    (lambda d: d.update(regions=[]), "regions"),
    (lambda d: d.update(zones=[]), "zones"),
    (lambda d: d.pop("regions"), "regions"),
    (lambda d: d["regions"][0]["zones"][0].update(nodes={"name": "n"}), "regions[0].zones[0].nodes"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(memory_mb=100), "regions[0].zones[0].nodes[0].memory_mb"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(cpus=2.5), "regions[0].zones[0].nodes[0].cpus"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(cpus=True), "regions[0].zones[0].nodes[0].cpus"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels=["tier"]), "nodes[0].labels"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels={"tier": True}), "nodes[0].labels.tier"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels={"tier": None}), "nodes[0].labels.tier"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels={"bad key": "x"}), "nodes[0].labels['bad key']"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels={1: "x"}), "nodes[0].labels[1]"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(labels={"region": "x"}), "nodes[0].labels.region"),
    (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(name="za"), "regions[0].zones[0].nodes[0].name"),
]


@pytest.mark.parametrize("mutate, where", BAD_TOPOLOGY)
def test_wrong_topology_value_is_rejected_naming_the_field(tmp_path, capsys, mutate, where):
    d = {"name": "t", "regions": [{"name": "r1", "zones": [{"name": "za", "nodes": [{"name": "a1"}]}]}]}
    mutate(d)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(d))
    assert cli.main(["validate", str(p)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{p}: ") and f"{where}: " in line for line in out), out
    with pytest.raises(UsageError) as e:
        topology.load(p)
    assert str(e.value).startswith("t.yaml: ") and f"{where}: " in str(e.value)
    assert cli.main(["cluster", "up", "--topology", str(p), "--cluster-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and where in err[0], err


def test_validate_tells_files_apart_and_reports_unreadable_ones(tmp_path, capsys):
    neither = tmp_path / "n.txt"
    neither.write_text("just: a mapping\n")
    yaml_mapping = tmp_path / "m.yaml"  # a YAML file that is no experiment is checked as a topology
    yaml_mapping.write_text("just: a mapping\n")
    broken = tmp_path / "b.json"
    broken.write_text("{ nope")
    yaml_experiment = tmp_path / "e.yaml"
    yaml_experiment.write_text(yaml.safe_dump(GOOD))
    topo_json = tmp_path / "t.json"  # JSON is YAML: a topology may be written in it
    topo_json.write_text(json.dumps(topology.load().to_doc()))
    rc = cli.main(["validate", str(neither), str(broken), str(yaml_experiment), str(topo_json),
                   str(tmp_path / "missing.json"), str(yaml_mapping)])
    assert rc == 2
    out = capsys.readouterr().out.splitlines()
    assert out[5:] == [f"{yaml_mapping}: just: unknown field (known: name, gcs_fault_tolerance, health_check, "
                       "idle_workers_kept, head, regions)",
                       f"{yaml_mapping}: name: is required", f"{yaml_mapping}: regions: is required"]
    assert out[0].startswith(f"{neither}: neither an experiment")
    assert out[1].startswith(f"{broken}: not valid JSON")
    assert out[2].startswith(f"{yaml_experiment}: not valid JSON")  # availproof reads experiments as JSON
    assert out[3] == f"ok {topo_json}"
    assert out[4].startswith(f"{tmp_path / 'missing.json'}: cannot read")


def test_validate_needs_a_file(capsys):
    assert cli.main(["validate"]) == 2


# ---------------------------------------------------------------- property: any wrong type, any field
# What each field holds, written out by hand (not read from the schema), so a schema that says
# "string" for a number fails here. Every leaf of the schema must be listed (checked below).
KINDS = {
    "scope": "enum", "topology": "string", "gcs_fault_tolerance": "boolean", "network": "enum",
    "app.replicas_per_zone": "integer", "app.health_check_period_s": "number",
    "app.health_check_timeout_s": "number", "app.max_ongoing_requests": "integer",
    "app.max_replicas_per_node": "integer", "app.graceful_shutdown_timeout_s": "number",
    "app.graceful_shutdown_wait_loop_s": "number", "app.stall_s": "number", "app.watchdog": "integer", "app.on_stall": "enum",
    "app.migration.limit": "integer",
    "app.kv_cache.blocks": "integer", "app.ranks": "integer",
    "app.admission.max_ongoing_requests": "integer", "app.admission.max_queued_requests": "integer",
    "app.admission.status_code": "enum", "app.admission.retry_after_s": "number|null",
    "targets": "enum", "routing": "enum", "front": "enum",
    "front_door.check_interval_s": "number", "front_door.fall": "integer", "front_door.rise": "integer",
    "front_door.check_timeout_s": "number", "front_door.passive": "boolean",
    "front_door.passive_error_limit": "integer", "front_door.retries": "integer",
    "front_door.redispatch": "boolean", "front_door.tls": "boolean", "front_door.token_env": "string|null",
    "front_door.timeout_s": "number", "ca_bundle": "string|null", "auth_token_env": "string|null", "population": "enum", "sample_period_s": "number",
    "baseline_s": "number", "recovery_window_s": "number", "recovery_settle_s": "number", "bounds_source": "string", "allow_hosts": "list",
    "max_wall_s": "number", "stop_when.max_failed_ratio": "number", "stop_when.for_s": "number",
    "kubernetes.context": "string", "kubernetes.namespace": "string", "kubernetes.ray_cluster": "string",
    "kubernetes.serve_url": "string", "kubernetes.dashboard_url": "string", "kubernetes.max_pods": "integer", "kubernetes.max_nodes": "integer", "kubernetes.helper_image": "string",
    "kubernetes.partition_method": "enum", "kubernetes.allow_autoscaled_zone_loss": "boolean",
    "kubernetes.load.in_cluster": "boolean", "kubernetes.load.image": "string", "kubernetes.load.node_selector": "object",
    "kubernetes.load.tolerations": "list", "kubernetes.load.serve_url": "string",
    "kubernetes.load.start_timeout_s": "number", "kubernetes.load.resources": "object",
    "kubernetes.load.image_pull_policy": "enum",
    "load.mode": "enum", "load.arrival": "enum", "load.rate": "number", "load.concurrency": "integer",
    "load.duration_s": "number", "load.max_requests": "integer", "load.warmup_s": "number",
    "load.timeout_s": "number", "load.connect_timeout_s": "number", "load.stream": "boolean",
    "load.route": "enum", "load.model": "string", "load.prompt_words": "list", "load.max_tokens": "list",
    "load.seed": "integer", "load.drain_s": "number|null",
    "load.burstiness": "number", "load.stages": "list", "load.max_model_len": "integer",
    "load.template_tokens": "integer", "load.clip": "enum", "load.trace": "string|null", "load.trace_speed": "number",
    "load.trace_end": "enum", "load.trace_block_tokens": "integer", "load.workers": "integer",
    "load.utilization": "number|null", "load.capacity": "string|null", "load.prompt_set": "integer|null",
    "load.constraint": "object|null",
    **{f"load.retry.{k}": kind for k, kind in (
        ("attempts", "integer"), ("per_attempt_timeout_s", "number|null"), ("backoff_base_s", "number"),
        ("backoff_cap_s", "number"), ("jitter", "enum"), ("retry_on", "list"), ("after_first_token", "boolean"),
        ("honour_retry_after", "boolean"), ("retry_after_cap_s", "number"), ("budget.ratio", "number"),
        ("budget.window_s", "number"), ("budget.min_retries", "integer"))},
    **{f"load.{n}.{k}": kind for n in ("prompt_len", "output_len") for k, kind in (
        ("dist", "enum"), ("value", "integer"), ("min", "integer"), ("max", "integer"), ("mean", "number"),
        ("std", "number"), ("path", "string"), ("field", "string"))},
    "steady_state.window_s": "number", "steady_state.min_success_ratio": "number",
    "steady_state.max_p95_ttft_s": "number|null", "steady_state.min_requests": "integer",
    "steady_state.warm_factor": "number", "bounds.max_cross_region_share": "number",
    **{f"load.sessions.{k}": "integer" for k in ("turns", "prefix_groups", "system_prompt_tokens")},
    "load.sessions.think_time_s": "number",
    "slo.ttft_s": "number|null", "slo.itl_s": "number|null", "slo.e2e_s": "number|null",
    **{f"bounds.{b}": "number" for b in ("max_time_to_first_success_s", "max_time_to_steady_state_s",
                                          "max_control_plane_outage_s", "max_time_to_capacity_restored_s",
                                          "max_time_to_capacity_lost_s", "max_orphan_s",
                                          "max_device_crashloop_s", "min_capacity_ratio")},
    **{f"bounds.{b}": "integer" for b in ("max_failed_requests", "max_failed_mid_stream",
                                           "max_failed_unaffected_zones", "max_relapses")},
    "bounds.max_failed_ratio": "number", "bounds.must_recover": "boolean", "bounds.max_amplification": "number",
}
KINDS.update({f"llm.{k}": v for k, v in KINDS.items()
              if k.split(".")[0] in ("load", "steady_state", "slo", "bounds") or k in ("recovery_window_s", "recovery_settle_s", "bounds_source")})


def _leaves(node, root, prefix=""):
    if "$ref" in node:
        node = {**root["$defs"][node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if "properties" in node:
        out = []
        for k, sub in node["properties"].items():
            out += _leaves(sub, root, f"{prefix}{k}.")
        return out
    return [prefix[:-1]]


def test_the_kinds_table_covers_every_field_of_the_schema():
    leaves = set(_leaves(EXT, EXT)) - {"name"}
    assert leaves == set(KINDS), (leaves ^ set(KINDS))


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
anything = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                        max_leaves=6)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# the values a hand-written check gets wrong come first (Hypothesis draws them early), then anything
NOT_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])
TRICKY = st.sampled_from(["5", "false", "true", "", "0.5", [], {}, [1, 2], True, False, 0, 1, 2.5, None])
WRONG = {
    "number": NOT_FINITE | TRICKY.filter(lambda v: not _is_number(v)) | anything.filter(lambda v: not _is_number(v)),
    "number|null": NOT_FINITE | TRICKY.filter(lambda v: v is not None and not _is_number(v))
                   | anything.filter(lambda v: v is not None and not _is_number(v)),
    "integer": TRICKY.filter(lambda v: not _is_int(v)) | st.sampled_from([4.0, 1.5, float("inf")])
               | anything.filter(lambda v: not _is_int(v)),
    "integer|null": TRICKY.filter(lambda v: v is not None and not _is_int(v))
                    | anything.filter(lambda v: v is not None and not _is_int(v)),
    "boolean": TRICKY.filter(lambda v: not isinstance(v, bool)) | anything.filter(lambda v: not isinstance(v, bool)),
    "string": TRICKY.filter(lambda v: not isinstance(v, str)) | anything.filter(lambda v: not isinstance(v, str)),
    "string|null": TRICKY.filter(lambda v: v is not None and not isinstance(v, str))
                   | anything.filter(lambda v: v is not None and not isinstance(v, str)),
    "list": TRICKY.filter(lambda v: not isinstance(v, list)) | anything.filter(lambda v: not isinstance(v, list)),
    "enum": TRICKY | anything.filter(lambda v: not isinstance(v, str)) | st.text(max_size=12).filter(str.isupper),
    "object": TRICKY.filter(lambda v: not isinstance(v, dict)) | anything.filter(lambda v: not isinstance(v, dict)),
    "object|null": TRICKY.filter(lambda v: v is not None and not isinstance(v, dict))
                   | anything.filter(lambda v: v is not None and not isinstance(v, dict)),
}


@pytest.mark.parametrize("field", sorted(KINDS))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_property_any_wrong_typed_value_in_any_field_is_rejected_naming_it(field, data):
    value = data.draw(WRONG[KINDS[field]], label="value")
    doc = copy.deepcopy(GOOD)
    _set(ext(doc), field, value)
    lines = experiment.problems(doc, "fuzz.json")  # what `validate` prints and `run` loads (its first line)
    assert lines and all(line.startswith(f"fuzz.json: {PREFIX}.{field}") and "\n" not in line for line in lines), \
        (field, value, lines)


TOPO_KINDS = {
    "gcs_fault_tolerance": "boolean", "idle_workers_kept": "integer|null", "head.cpus": "integer",
    "head.memory_mb": "integer", "head.object_store_mb": "integer", "health_check.period_ms": "integer",
    "health_check.failure_threshold": "integer", "name": "string", "regions": "list",
}


@pytest.mark.parametrize("field", sorted(TOPO_KINDS))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_property_any_wrong_typed_topology_value_is_rejected_naming_it(field, data):
    value = data.draw(WRONG[TOPO_KINDS[field]], label="value")
    d = topology.load().to_doc()
    _set(d, field, value)
    with pytest.raises(UsageError) as e:
        topology.parse(d, "fuzz.yaml")
    assert str(e.value).startswith(f"fuzz.yaml: {field}") and "\n" not in str(e.value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.sampled_from(["cpus", "memory_mb", "object_store_mb", "labels", "name"]), anything)
def test_property_node_fields_accept_only_what_the_code_can_use(field, value):
    d = topology.load().to_doc()
    d["regions"][0]["zones"][1]["nodes"][0][field] = value
    try:
        t = topology.parse(d, "fuzz.yaml")
    except UsageError as e:
        assert str(e).startswith(f"fuzz.yaml: regions[0].zones[1].nodes[0].{field}"), str(e)
        return
    n = t.node(value) if field == "name" else t.nodes[1]
    for key in ("cpus", "memory_mb", "object_store_mb"):
        assert isinstance(getattr(n, key), int) and not isinstance(getattr(n, key), bool)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in n.labels.items())
