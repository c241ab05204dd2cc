"""Both backends implement the one Backend protocol: every method, with a compatible signature."""

import ast
import inspect
from pathlib import Path

import pytest

from chaos.backends.base import Backend
from chaos.backends.kuberay import KubeRayBackend
from chaos.backends.local.backend import LocalBackend

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = [n for n in dir(Backend) if not n.startswith("_") and n not in ("name",)]


def test_the_protocol_lists_what_the_faults_probes_and_control_call():
    """Every ``backend.X`` / ``b.X`` used by the faults, the Chaos Toolkit modules and the CLI commands is in the protocol."""
    used = set()
    files = [ROOT / "chaos" / "scopes" / "faults.py", *(ROOT / "chaos" / "commands").glob("*.py"),
             *(ROOT / "chaos" / "ctk").glob("*.py")]
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in ("backend", "b") and not node.attr.startswith("_")):
                used.add(node.attr)
    assert used, "no backend call found: the check looks at the wrong files"
    assert used - set(MEMBERS) - {"name", "cluster", "namespace", "context", "max_pods"} == set()


@pytest.mark.parametrize("cls", [LocalBackend, KubeRayBackend])
def test_backend_has_every_method_with_a_compatible_signature(cls):
    assert isinstance(getattr(cls, "name"), str)
    for member in MEMBERS:
        want = getattr(Backend, member)
        have = getattr(cls, member, None)
        assert have is not None, f"{cls.__name__} lacks {member}"
        if isinstance(want, property):
            assert isinstance(have, property), f"{cls.__name__}.{member} must be a property"
            continue
        w, h = inspect.signature(want).parameters, inspect.signature(have).parameters
        for pname, p in w.items():
            assert pname in h, f"{cls.__name__}.{member} lacks parameter {pname}"
            q = h[pname]
            assert q.kind == p.kind, f"{cls.__name__}.{member}({pname}): {q.kind} instead of {p.kind}"
            if p.default is not inspect.Parameter.empty:
                assert q.default == p.default, f"{cls.__name__}.{member}({pname}) defaults to {q.default!r}"
        extra = [n for n, q in h.items() if n not in w and q.default is inspect.Parameter.empty
                 and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
        assert extra == [], f"{cls.__name__}.{member} requires {extra}, which callers never pass"


def test_the_check_catches_a_backend_that_strays():
    class Stray(LocalBackend):
        def kill_head(self, how="node"):  # renamed parameter
            return []

    with pytest.raises(AssertionError, match="kill_head lacks parameter method"):
        test_backend_has_every_method_with_a_compatible_signature(Stray)


def test_no_private_name_is_used_across_backend_modules():
    """``module._name`` / ``obj._name`` of another module is not used anywhere in chaos/ (own ``self._x`` is
    fine, and so is ``cluster._x`` inside LocalCluster's own module, where ``up`` builds one)."""
    offenders = []
    for f in (ROOT / "chaos").rglob("*.py"):
        own = "cluster" if f.name == "cluster.py" and f.parent.name == "local" else None
        for node in ast.walk(ast.parse(f.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in ("procs", "cluster", "backend", "b",
                                                                                 "kb", "kp", "kube_exec")
                    and node.value.id != own):
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
    assert offenders == []
