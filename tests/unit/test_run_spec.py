"""The run's spec (chaos.core.run_spec): parsed once per run, frozen, the one object validate builds and the run runs;
and the measure of issue 43: how often the path from `availproof run`'s arguments to the records file goes
back to a chaos/ module it had left."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import CodeType

import pytest

import chaos
from chaos.core import experiment as exp_mod, provision, run as core, run_spec, validate
from chaos.recording import records as rec
from chaos import schemas
from chaos.commands.parser import build_parser
from chaos.core.options import Options

from .test_run import RefusingBackend, _experiment

CHAOS_DIR = str(Path(chaos.__file__).resolve().parent) + "/"


class Reached(Exception):
    """The records file is about to be opened: the path measured ends here."""


def _module(code: CodeType) -> str | None:
    """The chaos/ module a code object belongs to (``chaos.load.workload``), None outside chaos/."""
    name = code.co_filename
    if not name.startswith(CHAOS_DIR):
        return None
    return "chaos." + name[len(CHAOS_DIR):-3].replace("/", ".").removesuffix(".__init__")


def entries_to_the_records(argv: list[str]) -> list[tuple[str, str, str]]:
    """The module entries on the path from ``cmd_run`` (its argument handling) to the records file being
    opened (``RecordWriter(out/records.ndjson)``, where the path ends), on the fake backend: ``(caller module,
    entered module, function)`` in order, as :func:`test_the_path_from_the_run_command_to_the_records_returns_to_few_modules`
    defines them."""
    args = build_parser().parse_args(argv)
    entries: list[tuple[str, str, str]] = []
    importing = [0]
    done = [False]

    def profile(frame, event, arg):
        code = frame.f_code
        if code.co_name == "<module>":  # a module body run by an import: not the path's structure
            importing[0] += {"call": 1, "return": -1}.get(event, 0)
            return
        if event != "call" or importing[0] or done[0]:
            return
        entered = _module(code)
        if entered is None:
            return
        caller = frame.f_back
        while caller is not None and _module(caller.f_code) is None:  # a library calling back: its caller's doing
            caller = caller.f_back
        by = _module(caller.f_code) if caller is not None else None
        if by is not None and by != entered and (not entries or entries[-1][:2] != (by, entered)):
            entries.append((by, entered, code.co_name))

    sys.setprofile(profile)
    try:
        args.func(args)
    except Reached:
        pass
    finally:
        sys.setprofile(None)
    return entries


def returns(entries: list[tuple[str, str, str]]) -> int:
    """How many entries go to a module entered before on the path."""
    seen: set[str] = set()
    n = 0
    for _, entered, _ in entries:
        n += entered in seen
        seen.add(entered)
    return n


@pytest.fixture
def to_the_records(monkeypatch):
    """The run's path up to the records file on the fake backend (:class:`tests.unit.test_run.RefusingBackend`):
    ``RecordWriter`` raises :class:`Reached` instead of opening it, so nothing runs past it."""
    monkeypatch.setenv("AVAILPROOF_METRICS_PORT", "0")
    monkeypatch.setattr(provision, "ensure_system", lambda *a, **k: RefusingBackend())

    def writer(path, *a, **k):
        raise Reached(str(path))

    monkeypatch.setattr(rec, "RecordWriter", writer)


def _argv(tmp_path: Path, **ext) -> list[str]:
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    if ext:
        doc = json.loads(path.read_text())
        doc["extensions"][0].update(ext)
        path.write_text(json.dumps(doc))
    return ["run", str(path), "--out", str(tmp_path / "out")]


def test_the_path_from_the_run_command_to_the_records_returns_to_few_modules(tmp_path, to_the_records):
    """Issue 43's measure. Traced with ``sys.setprofile`` from ``chaos.commands.runs.cmd_run`` (called with the
    parsed arguments of ``availproof run FILE``) until the records file is opened, on the fake backend:

    - a *module entry* is a ``call`` event of a function whose code is in a chaos/ module (M), called from a
      different chaos/ module (C): C is the nearest chaos/ frame up the stack (a library calling back, such
      as jsonschema's type checkers or a dataclass' ``__init__`` calling ``__post_init__``, is its caller's
      doing); module bodies run by imports are left out; consecutive entries with the same (C, M) are one
      (a loop over the registry's scopes is one visit);
    - a *return to a module it had left* is an entry into a module M entered before on the path (M is not the
      current module, C, by the definition of an entry).

    Before the run spec (commit dbdd1ab): 81 entries, 58 returns (the file parsed five times: validate's load,
    its settings, the runner's load, open_run's settings, both apps each time). The issue's target: at most 15.
    The path is traced a second time, after a first untraced pass has filled the process' caches."""
    argv = _argv(tmp_path)
    entries_to_the_records(argv)  # caches warm (a schema read, a module imported late)
    entries = entries_to_the_records(argv)
    assert entries[0] == ("chaos.commands.runs", "chaos.commands.common", "run_options")
    assert entries[-1][1] == "chaos.recording.events"  # the records' events, made just before the writer
    n = returns(entries)
    assert n <= 15, "\n".join(f"{by} -> {m}.{fn}" for by, m, fn in entries)


@pytest.mark.parametrize("app", ["stream", "llm"])
def test_an_llm_block_holds_the_path_to_the_target_too(tmp_path, to_the_records, app):
    """Every shipped experiment has an ``llm`` block: a run builds the Settings of the app it runs only (`availproof
    validate` checks both apps'), so the block costs no second pass through the load's modules (it cost 17
    returns when both apps' were built)."""
    argv = _argv(tmp_path, llm={"recovery_window_s": 1, "load": {"rate": 5}}) + ["--app", app]
    entries_to_the_records(argv)
    assert returns(entries_to_the_records(argv)) <= 16  # 16: the scope's min_ranks looked up (rank faults)


def test_a_run_parses_its_file_once(tmp_path, to_the_records, monkeypatch):
    """From `availproof run`'s arguments to the records: the extension is checked against its schema once
    (once more for the llm app only with an llm block), the document parsed once, the file read once."""
    calls = {"schema": 0, "parse": 0, "spec": []}
    real_errors, real_parse, real_of_document = schemas.errors, exp_mod.parse, run_spec.of_document

    def errors(doc, kind, *a, **k):
        calls["schema"] += kind == schemas.EXTENSION
        return real_errors(doc, kind, *a, **k)

    def parse(*a, **k):
        calls["parse"] += 1
        return real_parse(*a, **k)

    def of_document(*a, **k):
        calls["spec"].append(real_of_document(*a, **k))
        return calls["spec"][-1]

    opened = []
    monkeypatch.setattr(schemas, "errors", errors)
    monkeypatch.setattr(exp_mod, "parse", parse)
    monkeypatch.setattr(run_spec, "of_document", of_document)
    real_open = core.open_run
    monkeypatch.setattr(core, "open_run", lambda spec, options: opened.append(spec) or real_open(spec, options))
    entries_to_the_records(_argv(tmp_path))
    assert calls["schema"] == 1 and calls["parse"] == 1 and len(calls["spec"]) == 1
    assert opened == calls["spec"]  # validate's spec is the very one the run opens (no second build)


def test_the_spec_is_frozen_and_derived_values_are_new_specs(tmp_path):
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    spec = run_spec.build(path, Options(front="lb", model="other-model"))
    assert spec.settings.front == "lb" and spec.settings.load.model == "other-model"  # derived at build time
    assert json.loads(path.read_text())["extensions"][0].get("front") is None  # the file's stays as it was
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.app = "llm"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.settings.front = "direct"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.front.retries = 3
    with pytest.raises(TypeError):
        spec.experiment["title"] = "changed"
    with pytest.raises(TypeError):
        spec.experiment["extensions"][0]["scope"] = "zone"
    assert isinstance(spec.experiment["method"], tuple)
    doc = spec.document()  # Chaos Toolkit's copy: its own, mutable
    doc["title"] = "changed"
    doc["method"].clear()
    assert spec.title == spec.experiment["title"] == "stop condition test" and spec.experiment["method"]
    faster = spec.with_load(rate=80)
    assert faster.settings.load.rate == 80 and spec.settings.load.rate == 40
    bare = spec.with_document(method=[], rollbacks=[]).with_settings(bounds={})
    assert bare.experiment["method"] == () and bare.settings.bounds == {}
    assert spec.experiment["method"] and spec.settings.bounds


def test_open_run_writes_nothing_back_into_the_spec(tmp_path, monkeypatch):
    """What open_run used to change in place (the front, the load's rate and model) is the spec's already."""
    monkeypatch.setenv("AVAILPROOF_METRICS_PORT", "0")
    monkeypatch.setattr(provision, "ensure_system", lambda *a, **k: RefusingBackend())
    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    options = Options(out_dir=tmp_path / "out", front="lb")
    spec = run_spec.build(path, options)
    before = dataclasses.asdict(spec.settings)
    run = core.open_run(spec, options)
    try:
        assert run.spec is spec and run.settings is spec.settings and run.front is spec.front
        assert dataclasses.asdict(spec.settings) == before
    finally:
        core.close(run)


def test_validate_and_run_agree(tmp_path, capsys):
    """The same file: validate's problems are the run's refusal (its first line), and a good file's spec is the
    one `validate` checks (no problem, the same Settings for the run's app)."""
    from chaos.commands import cli

    good = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    assert validate.check_file(good) == []
    assert validate.run_spec(good, Options()).settings == exp_mod.settings(json.loads(good.read_text()))
    doc = json.loads(good.read_text())
    doc["extensions"][0]["load"]["warmup_s"] = 500  # past its duration_s
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    found = validate.check_file(bad)
    assert found
    with pytest.raises(Exception) as refused:
        validate.run_spec(bad, Options())
    assert str(refused.value) == found[0]
    assert cli.main(["run", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert found[0] in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_suite_parses_each_file_once(tmp_path, monkeypatch):
    """`availproof suite` parses each experiment once, before the first runs (its utilization checked there),
    and each run runs that spec: the runner parses nothing again, also with several front doors."""
    from chaos.commands import cli
    from chaos.core import suite
    from chaos.base.errors import SetupError

    paths = {}
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        paths[name] = _experiment(tmp_path / name, baseline_s=0.3, method_s=0.1)
    monkeypatch.setattr(suite, "experiment_path", lambda name: paths[name])
    parsed, opened = [], []
    real_parse = exp_mod.parse
    monkeypatch.setattr(exp_mod, "parse", lambda *a, **k: parsed.append(a[1]) or real_parse(*a, **k))

    def open_run(spec, options):  # the runner got this far: stop the run here (a set-up error, its result)
        opened.append((spec, options.front))
        raise SetupError("stopped by the test")

    monkeypatch.setattr(core, "open_run", open_run)
    code = cli.main(["suite", "--only", "one", "two", "--front", "lb,direct", "--keep-cluster",
                     "--out", str(tmp_path / "s")])
    assert code == 2
    assert sorted(parsed) == sorted(str(p) for p in paths.values())  # one parse per file
    assert [(s.source, s.settings.front, front) for s, front in opened] == [
        (str(paths["one"]), "lb", "lb"), (str(paths["one"]), "direct", "direct"),
        (str(paths["two"]), "lb", "lb"), (str(paths["two"]), "direct", "direct")]
    assert opened[0][0].experiment is opened[1][0].experiment  # the same parse, the front derived from it


def test_the_settings_objects_are_read_only_and_still_json(tmp_path):
    """The Settings' objects (app, bounds, stop_when, kubernetes, front_door) refuse writes at any depth, as the
    document does; they still serialise, copy and compare as dicts, and their consumers get copies of their own."""
    import copy
    from types import SimpleNamespace

    from chaos.core.options import kube_settings

    path = _experiment(tmp_path, baseline_s=0.3, method_s=0.1)
    doc = json.loads(path.read_text())
    doc["extensions"][0].update(app={"migration": {"limit": 2}}, front_door={"retries": 1},
                                kubernetes={"namespace": "ns", "load": {"tolerations": [{"key": "k"}]}})
    path.write_text(json.dumps(doc))
    s = run_spec.build(path, Options()).settings
    writes = [lambda: s.bounds.__setitem__("max_failed_requests", 0), lambda: s.bounds.update(x=1),
              lambda: s.stop_when.pop("for_s"), lambda: s.front_door.setdefault("tls", True),
              lambda: s.app["migration"].__setitem__("limit", 9), lambda: s.kubernetes["load"].clear(),
              lambda: s.kubernetes["load"]["tolerations"].append({}), lambda: s.app.__delitem__("migration")]
    for write in writes:
        with pytest.raises((TypeError, AttributeError)):
            write()
    assert s.app == {"migration": {"limit": 2}} and s.bounds["max_failed_requests"] == 100000
    assert s.kubernetes["load"]["tolerations"] == ({"key": "k"},)
    assert json.loads(json.dumps(dataclasses.asdict(s)))["kubernetes"]["load"]["tolerations"] == [{"key": "k"}]
    assert copy.deepcopy(s) == s and dataclasses.replace(s, bounds={"max_failed_requests": 1}).bounds == {
        "max_failed_requests": 1}
    with pytest.raises(TypeError):  # a new Settings' objects are read-only too
        dataclasses.replace(s, bounds={"max_failed_requests": 1}).bounds["x"] = 1
    target = kube_settings({"context": "c", "ray_cluster": "r", "serve_url": "u", "dashboard_url": "d"}, s.kubernetes)
    target["load"]["tolerations"].append({"key": "more"})  # the backend's copy: its own, as before
    assert s.kubernetes["load"]["tolerations"] == ({"key": "k"},)
    cluster = SimpleNamespace(topology=SimpleNamespace(zones=["a"]))  # what app_spec reads of a LocalCluster
    assert provision.app_spec("stream", cluster, s.app).migration_limit == 2
