"""A scope is its module (issue 43): no module of chaos/ outside chaos/scopes/ (the scopes) and chaos/backends/ (their
implementations) names a registered scope. Every string literal equal to a registered scope's name is found (docstrings
and comments are prose, not names); a literal that is a data field's name (a dict key, a subscript, ``.get``'s key,
a keyword's value is not one) is not a scope's name. What is left must be in :data:`ALLOWED`, with why; and no
module of chaos/ has more than 500 lines."""

import ast
from pathlib import Path

import pytest

from chaos import scopes

ROOT = Path(__file__).resolve().parents[2]
OWNERS = ("chaos/scopes/", "chaos/backends/")  # where a scope's name belongs

# (module, literal) -> why the literal is not a scope's name, or why it stays
ALLOWED = {
    ("chaos/analysis/kv_pressure.py", "engine"): "the sample's field Sample.engine (the engines' counters), not the scope",
    ("chaos/core/suite.py", "engine-crash"): "experiment names (experiments/engine-crash.json), the suite's --full list",
    ("chaos/core/suite.py", "engine-error"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "engine-slow"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "engine-stutter"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "engine-wedge"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "engine-garbage"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "engine-stall"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "restart-fails"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "upgrade"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "drain"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "device-loss"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "rank-death"): "an experiment's name, the suite's --full list",
    ("chaos/core/suite.py", "rank-hang"): "experiment names (rank-hang, rank-hang-watchdog), the suite's --full list",
    ("chaos/scopes/faults_accelerator.py", "accelerator"): "the accelerator's fault function, not yet moved into its "
                                                    "module (another piece of work was changing it)",
    ("chaos/scopes/faults_accelerator.py", "replica"): "a detail's field (the replica the node hosts)",
    ("chaos/analysis/who_served.py", "zone"): "the failure domains whose locality is measured (topology words)",
    ("chaos/analysis/who_served.py", "region"): "the failure domains whose locality is measured (topology words)",
    ("chaos/reports/plane_rows.py", "zone"): "the failure domains whose locality is shown (topology words)",
    ("chaos/reports/plane_rows.py", "region"): "the failure domains whose locality is shown (topology words)",
    ("chaos/recording/record_columns.py", "zone"): "a request record's column",
    ("chaos/recording/record_columns.py", "region"): "a request record's column",
    ("chaos/recording/request_columns.py", "zone"): "a request record's column",
    ("chaos/recording/request_columns.py", "region"): "a request record's column",
    ("chaos/system/metrics.py", "zone"): "a Prometheus label",
    ("chaos/ctk/probes.py", "head"): "a probe's target: the head's proxy, not the head scope",
    ("chaos/core/run.py", "head"): "the experiment's targets setting (the head's proxy), not the head scope",
    ("chaos/claim/calibrate_worlds.py", "replica"): "a synthetic world's scope name for the claim's calibration "
                                                    "(any name serves; it is data, not a branch)",
}


def _field_names(tree: ast.AST) -> set[int]:
    """The ids of the literals that name a data field: dict keys, subscripts, ``x.get(key)``'s key, keyword values."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):
            out |= {id(k) for k in n.keys if k is not None}
        elif isinstance(n, ast.Subscript):
            out.add(id(n.slice))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "pop") and n.args:
            out.add(id(n.args[0]))
        elif isinstance(n, ast.Call):
            out |= {id(k.value) for k in n.keywords if k.arg != "name"}
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


def named(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every string literal in ``source`` equal to one of ``names`` and not a field's name."""
    tree = ast.parse(source)
    skip = _field_names(tree) | _docstrings(tree)
    return sorted((n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and n.value in names and id(n) not in skip)


def modules() -> list[Path]:
    return sorted(p for p in (ROOT / "chaos").rglob("*.py")
                  if not str(p.relative_to(ROOT)).startswith(OWNERS))


def test_the_detector_finds_a_scope_named_and_passes_a_field_named_alike():
    source = '''"""zone: a docstring."""
SLOW = ("engine-slow",)
if f.scope == "zone":
    pass
x = {"zone": 1}["zone"] or d.get("zone") or f(kind="zone")
'''
    assert named(source, {"zone", "engine-slow"}) == [(2, "engine-slow"), (3, "zone")]


def test_no_module_outside_the_scopes_and_backends_names_a_scope():
    names = set(scopes.names())
    found = {(str(p.relative_to(ROOT)), name, line) for p in modules() for line, name in named(p.read_text(), names)}
    unexplained = sorted(f"{path}:{line}: {name!r}" for path, name, line in found if (path, name) not in ALLOWED)
    assert unexplained == [], "a scope's name outside its module: make it a Scope field, or say why in ALLOWED"


@pytest.mark.parametrize("key", sorted(k for k in ALLOWED if k[0] != "chaos/scopes/faults_accelerator.py"))
def test_each_allowed_literal_is_still_there(key):
    """An entry whose literal went is stale: remove it (the accelerator's fault module may go at any time)."""
    path, name = key
    assert any(n == name for _, n in named((ROOT / path).read_text(), {name})), f"{key}: stale entry"


def test_no_module_of_chaos_has_more_than_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "chaos").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}
