"""The scope registry (chaos/scopes/, one module per scope): the built-in entries say what the code used to list by name,
each is true to its fault function, action and experiment, and a new scope needs only the registry,
a fault function and the backend's methods to be validated, analysed, bounded and reported."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from chaos import analysis, schemas, scopes
from chaos.core import bounds, experiment, suite, summary as summary_mod
from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.backends.base import Backend
from chaos.reports import cells, report
from chaos.scopes import Scope

from tests.unit.test_analysis import NS, T0, mark, zones
from tests.unit.test_summary import DEFS, schema, write_run

ROOT = Path(__file__).resolve().parents[2]
GOOD = json.loads((ROOT / "experiments" / "replica-kill.json").read_text())
BUILTIN = ("replica", "engine", "engine-crash", "node", "head", "zone", "region", "partition", "redis", "upgrade", "drain",
           "engine-error", "engine-slow", "accelerator", "engine-wedge", "engine-garbage", "engine-stall",
           "engine-stutter", "restart-fails", "device-loss", "overload", "rank-hang", "rank-death")
# the protocol's queries: what a fault may read besides the methods that break and restore
QUERIES = {"zones", "regions", "zones_in_region", "nodes_in", "zone_of", "targets", "head_target", "own_hosts",
           "describe", "topology_doc", "head_alive", "upgrade_variants", "graceful_shutdown", "front_door",
           "front_targets", "replicas", "pick_replica", "healthy", "wait_healthy", "app_status", "observe",
           "effect_checks", "replica_ongoing"}  # effect_checks: every fault's proof (chaos.scopes.faults.prove);
# replica_ongoing: a replica kill's wait for its victim to serve (chaos.system.replica_ongoing)


# ---------------------------------------------------------------- the built-in scopes
def test_the_builtin_scopes_say_what_the_code_listed_by_name():
    # the lists the registry replaced: records.SCOPES, analysis.ROUTED_SCOPES (every target affected),
    # planes.REPLACING_SCOPES (completion measured), the report's ("upgrade", "drain") (replacement shown)
    assert scopes.names() == BUILTIN == rec.SCOPES
    assert scopes.where("every_target_affected") == {"replica", "engine", "engine-crash", "engine-error", "engine-slow",
                                                     "upgrade", "accelerator", "engine-wedge", "engine-garbage",
                                                     "engine-stall", "engine-stutter", "restart-fails",
                                                     "device-loss", "overload", "rank-hang", "rank-death"}
    assert scopes.where("replaces_every_replica") == {"upgrade"}
    assert scopes.where("replacing") == {"upgrade", "drain"}
    assert scopes.where("routed") == {"node", "zone", "region", "partition", "drain"}
    assert scopes.where("zoned") == {"replica", "engine", "engine-crash", "engine-error", "engine-slow", "node", "zone",
                                     "region", "partition", "drain", "accelerator", "engine-wedge",
                                     "engine-garbage", "engine-stall", "engine-stutter", "restart-fails",
                                     "device-loss", "rank-hang", "rank-death"}
    assert scopes.where("control_plane") == {"head", "redis"}
    assert all(s.label and s.label != s.name for s in scopes.all_scopes())


def test_the_shipped_extension_schema_names_no_scope_and_the_loader_puts_the_registered_ones_in():
    """The file (what editors read) lists no scope (adding one touches no schema); the loader's enum is the
    registry's."""
    shipped = json.loads(schemas.path(schemas.EXTENSION).read_text())
    assert "enum" not in shipped["properties"]["scope"]
    assert tuple(schemas.schema(schemas.EXTENSION)["properties"]["scope"]["enum"]) == scopes.names()


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _backend_uses(fn: ast.FunctionDef, defs: dict[str, ast.FunctionDef], seen: set[str] | None = None) -> set[str]:
    """``backend.X`` in the function and in the module's functions it calls (``_replica_ids(backend)``)."""
    seen = seen if seen is not None else {fn.name}
    used = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "backend"}
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defs and n.func.id not in seen:
            seen.add(n.func.id)
            used |= _backend_uses(defs[n.func.id], defs, seen)
    return used


def _inject_call(fn: ast.FunctionDef) -> ast.Call:
    (call,) = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "inject"]
    return call


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_scope_is_true_to_its_fault_action_and_experiment(name):
    import inspect

    from chaos.ctk import actions

    s = scopes.get(name)
    source = Path(inspect.getsourcefile(s.fault))
    defs = _functions(ast.parse(source.read_text()))
    fn = defs[s.fault.__name__]
    # the fault lives in the scope's own module (the accelerator's beside it: chaos/scopes/faults_accelerator.py)
    assert source.stem in (name.replace("-", "_"), "faults_accelerator")
    # the fault marks this scope, and names zones exactly when the entry says it does (an engine fault sent through
    # the app's hook marks it through chaos.scopes.engine_signal.signal_one_engine, given its SCOPE.name)
    shared = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id == "signal_one_engine"]
    if shared:
        from chaos.scopes import engine_signal

        (via,) = shared
        assert ast.unparse(via.args[2]) == "SCOPE.name", ast.unparse(via)
        call = _inject_call(_functions(ast.parse(Path(engine_signal.__file__).read_text()))["signal_one_engine"])
        assert ast.unparse(call.args[0]) == "scope"
    else:
        call = _inject_call(fn)
        first = call.args[0]
        assert (first.value if isinstance(first, ast.Constant) else ast.unparse(first)) in (name, "SCOPE.name")
    names_no_zone = isinstance(call.args[2], ast.List) and not call.args[2].elts
    assert names_no_zone is not s.zoned
    # the backend methods it declares are the protocol's, and the ones its fault breaks and restores with
    members = {m for m in dir(Backend) if not m.startswith("_")}
    assert set(s.backend_methods) <= members
    used = _backend_uses(fn, defs)
    assert set(s.backend_methods) <= used and used - set(s.backend_methods) <= QUERIES
    # each of its faults is a Chaos Toolkit action of its name, and an experiment measures the scope
    for f in s.faults():
        assert callable(getattr(actions, f.__name__)) and scopes.actions()[f.__name__] == (s, f)
    measured = {e["scope"] for p in (ROOT / "experiments").glob("*.json")
                for e in json.loads(p.read_text())["extensions"] if e.get("name") == "availproof"}
    assert name in measured


# ---------------------------------------------------------------- the registry's own rules
@pytest.mark.parametrize("entry, why", [
    (Scope("zone", "again"), "already registered"),
    (Scope("Disk Full", "x"), "name must be"),
    (Scope("x", ""), "label must not be empty"),
    (Scope("x", "x", zoned=True, routed=True, every_target_affected=True), "exclude each other"),
    (Scope("x", "x", routed=True), "routed needs zoned"),
    (Scope("x", "x", replaces_every_replica=True), "needs replacing"),
    (Scope("x", "x", backend_methods="kill_node"), "tuple of method names"),
    (Scope("x", "x", fault="kill_node"), "must be functions"),
    (Scope("x", "x", heal_args="outage_s"), "tuples of argument names"),
    (Scope("x", "x", fault=scopes.get("node").fault), "already scope 'node''s action"),
])
def test_register_refuses_a_taken_name_and_an_entry_that_contradicts_itself(entry, why):
    with pytest.raises(ValueError, match=why):
        scopes.register(entry)
    assert scopes.names() == BUILTIN


def test_a_scope_the_registry_does_not_know_has_no_property_and_its_name_as_label():
    s = scopes.get("galaxy")
    assert s.name == s.label == "galaxy" and not any(getattr(s, f) for f in scopes.FLAGS)
    assert scopes.label("galaxy") is None and scopes.label(None) is None and not scopes.known(None)
    assert report.scope_text("galaxy") == "galaxy" and report.scope_text("zone") == "zone: zone loss"
    with pytest.raises(ValueError, match="no yes/no scope property"):
        scopes.where("label")


# ---------------------------------------------------------------- a scope added at run time
DISK_FULL = Scope("disk-full", "disk full", backend_methods=("fill_disk", "free_disk"), zoned=True, routed=True)


class DiskBackend:
    """The backend side of the new scope: two methods, and the zone of a node."""

    def __init__(self):
        self.calls = []

    def zone_of(self, node):
        return "b"

    def fill_disk(self, node):
        self.calls.append(("fill", node))
        return [1234]

    def free_disk(self, node):
        self.calls.append(("free", node))


def fill_disk(backend, marker: faults.Marker, node: str, duration_s: float | None = None) -> dict:
    """The new scope's fault function, written as a module of chaos/scopes/ writes one."""
    z = backend.zone_of(node)
    with marker.inject("disk-full", node, [z] if z else []) as f:
        f["pids"] = backend.fill_disk(node)
    if duration_s is not None:
        with marker.heal(f):
            backend.free_disk(node)
    return f


@pytest.fixture
def disk_full():
    yield scopes.register(DISK_FULL)
    scopes.unregister(DISK_FULL.name)


def _on_the_timeline(marks: list[rec.FaultMark], inject_t: float, heal_t: float) -> list[rec.FaultMark]:
    """The fault's own marks moved onto the synthetic run's clock."""
    at = {rec.INJECT_START: inject_t, rec.INJECT_END: inject_t + 0.01, rec.HEAL_START: heal_t,
          rec.HEAL_END: heal_t + 0.2}
    return [dataclasses.replace(m, t_ns=T0 + int(at[m.event] * NS)) for m in marks]


def test_a_new_scope_is_validated_analysed_bounded_and_reported_from_the_registry_alone(disk_full, tmp_path):
    from tests.unit.test_planes import samples

    # the backend: one that has the methods can inject it, one without cannot
    backend = DiskBackend()
    assert disk_full.missing_on(backend) == [] and disk_full.missing_on(object()) == ["fill_disk", "free_disk"]
    marker = faults.Marker()
    fill_disk(backend, marker, "worker-b", duration_s=0)
    assert backend.calls == [("fill", "worker-b"), ("free", "worker-b")]
    assert [(m.event, m.scope, m.zones) for m in marker.marks] == [(e, "disk-full", ["b"]) for e in rec.MARK_EVENTS]

    # an experiment of the scope validates (the schema's enum is the registry's); an unknown one does not
    doc = json.loads(json.dumps(GOOD))
    ext = next(e for e in doc["extensions"] if e["name"] == "availproof")
    ext["scope"] = "disk-full"
    assert experiment.problems(doc, "disk-full.json") == []
    assert experiment.settings(doc).scope == "disk-full" and "disk-full" in rec.SCOPES
    ext["scope"] = "disk-empty"
    assert any("scope" in p for p in experiment.problems(doc, "disk-empty.json"))

    # its records are analysed: zone b's users are the affected ones (routed), a and c the unaffected
    stated = {"max_failed_requests": 500, "max_failed_unaffected_zones": 0, "must_recover": True}
    header = summary_mod.header_block("disk full", "disk-full", DEFS, stated, "test", "stream")
    rs = zones(0, 40, down="b", down_from=10.05, down_to=20.0)
    d = write_run(tmp_path / "suite" / "disk-full", header, rs + samples(0, 40, period=2.0),
                  _on_the_timeline(marker.marks, 10, 20), 40)
    for _, obj in rec.iter_lines(d / "records.ndjson"):
        schema("records-line").validate(obj)
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, stated, "test")
    (f,) = s["faults"]
    assert f["scope"] == "disk-full" and f["zones"] == ["b"] and list(s["by_scope"]) == ["disk-full"]
    assert f["affected"]["basis"] == "fault_domain" and f["affected"]["zones"] == ["b"]
    assert f["failed"]["total"] > 0 and f["failed"]["unaffected_zones"] == 0
    assert f["affected"]["time_to_first_success_s"] == pytest.approx(10.0, abs=0.2)
    (unaffected,) = [r for r in s["bounds"]["results"] if r["bound"] == "max_failed_unaffected_zones"]
    assert unaffected["status"] == bounds.MET
    s.update(experiment="disk full", scope="disk-full", app="stream",
             cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True,
                      "network": "loopback"},
             environment={"ray": "2.60.0", "availproof": "0.test", "load": {"rate": 30}})
    schema("summary").validate(json.loads(json.dumps(s)))
    (d / "summary.json").write_text(json.dumps(s))

    # the suite's table and the report take it: its label in the headings, its figures in the rows
    table = cells.table([{"experiment": "experiments/disk-full.json", "verdict": 0, "summary": s}])
    assert "| disk-full | disk-full | b |" in table and cells.unaffected_zones(f) == "0"
    suite.write_order(tmp_path / "suite", ["disk-full"])
    doc = report.build(tmp_path / "suite")
    assert [(r["experiment"], r["scope"]) for r in doc["overview"]] == [("disk-full", "disk-full")]
    assert "## disk full (disk-full, scope disk-full: disk full)" in report.markdown(doc)
    assert "scope disk-full: disk full" in report.html(doc)
    assert report.replacement_rows(f) == []  # not a replacing scope, and nothing was replaced


def test_the_analysis_reads_the_flags_of_a_registered_scope(tmp_path):
    """The same records, the same zone named: a scope whose effect Serve spreads over every proxy has
    the service as its affected population and no unaffected zone to bound."""
    spread = scopes.register(Scope("proxy-stall", "proxy stall", zoned=True, every_target_affected=True))
    try:
        rs = zones(0, 20)
        f = analysis.analyse(rec.RunRecords(header={"run_id": "r"}, requests=rs,
                                            marks=[mark(rec.INJECT_START, 10, scope=spread.name, zones=("a",))],
                                            footer={"stopped_ns": T0 + 20 * NS}),
                             analysis.SteadyState(window_s=2.0, min_success_ratio=1.0))["faults"][0]
        assert f["affected"]["basis"] == "service" and "every target" in f["affected"]["why"]
        assert f["failed"]["unaffected_zones"] is None and cells.unaffected_zones(f) == "n/a"
        (r,) = bounds.check({"faults": [f]}, {"max_failed_unaffected_zones": 0})
        assert r["status"] == bounds.NOT_APPLICABLE
    finally:
        scopes.unregister(spread.name)
    assert scopes.names() == BUILTIN
