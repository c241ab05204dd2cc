"""The layout (issue 43): chaos/ holds only packages (and data directories) beside its ``__init__.py``; every
package says in its docstring what it owns, and each top-level package's docstring ends with what of chaos it
may import ("May import: chaos.x, chaos.y.z ..."), which its modules' imports (every one, a function's too,
read with ``ast``) keep to."""

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAOS = ROOT / "chaos"
DATA_DIRS = {"dashboards", "topologies", "__pycache__"}
TOP = sorted(p.name for p in CHAOS.iterdir() if (p / "__init__.py").exists())


def _docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text())) or ""


def allowed(package: str) -> set[str]:
    """The dotted names a top-level package's docstring says it may import (after "May import:")."""
    doc = _docstring(CHAOS / package / "__init__.py")
    _, found, rule = doc.partition("May import:")
    assert found, f"chaos.{package}: its docstring does not say what it may import"
    if "any other package" in rule:
        return {f"chaos.{p}" for p in TOP}
    return set(re.findall(r"chaos(?:\.\w+)+", rule))


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every chaos name a module imports (``from chaos.x import y`` gives chaos.x.y)."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = ".".join(rel[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "chaos"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] == "chaos":
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def breaches(package: str) -> list[str]:
    rules = allowed(package) | {f"chaos.{package}"}
    found = []
    for path in sorted((CHAOS / package).rglob("*.py")):
        for line, name in imports(path):
            if name == "chaos" or name.startswith("chaos.__"):  # the root: __version__
                continue
            if not any(name == r or name.startswith(r + ".") for r in rules):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return found


def test_chaos_top_level_holds_only_packages():
    stray = sorted(p.name for p in CHAOS.iterdir()
                   if p.name != "__init__.py" and p.name not in DATA_DIRS and not (p / "__init__.py").exists())
    assert stray == [], "a module at chaos/'s top level: put it in the package it belongs to"


@pytest.mark.parametrize("init", sorted(CHAOS.rglob("__init__.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_package_has_a_docstring(init):
    assert len(_docstring(init).split()) >= 8, f"{init.relative_to(ROOT)}: say what the package owns"


@pytest.mark.parametrize("package", TOP)
def test_each_package_imports_only_what_its_docstring_allows(package):
    assert breaches(package) == []


@pytest.mark.parametrize("package", TOP)
def test_each_rule_names_only_what_exists(package):
    for name in allowed(package):
        parts = name.split(".")
        path = ROOT.joinpath(*parts)
        assert path.is_dir() or path.with_suffix(".py").exists(), f"chaos.{package}'s rule names {name}: gone"


def test_the_check_finds_a_breach(tmp_path, monkeypatch):
    pkg = tmp_path / "chaos" / "leaf"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A leaf. May import: chaos.base.errors."""\n')
    (pkg / "a.py").write_text("from chaos.base.errors import UsageError\nfrom chaos import commands\n"
                              "def f():\n    from chaos.core import run\n    from . import b\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "CHAOS", tmp_path / "chaos")
    assert breaches("leaf") == ["chaos/leaf/a.py:2 imports chaos.commands", "chaos/leaf/a.py:4 imports chaos.core.run"]


def test_nothing_imports_the_command_line():
    for package in TOP:
        if package != "commands":
            assert "chaos.commands" not in allowed(package)


def test_the_run_core_and_the_analysis_stay_below_the_commands_and_the_backends():
    assert not {"chaos.commands", "chaos.reports", "chaos.claim", "chaos.soak"} & allowed("core")
    assert not {"chaos.backends", "chaos.commands", "chaos.core", "chaos.load"} & allowed("analysis")
    assert allowed("recording") == {"chaos.base"}
    assert allowed("base") == set()
