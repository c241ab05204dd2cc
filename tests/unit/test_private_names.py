"""No chaos/ module imports or uses another chaos module's ``_name`` (issue 43): a name one module shares is
public in its owner, so that what a module offers is what it does not underscore. Read from the source
(AST): ``from chaos.x import _y``, ``from . import _y``, and ``m._y`` where ``m`` names a chaos module
(``import chaos.x as m``, ``from chaos import x as m``, ``chaos.x._y``)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for p in (root / "chaos").rglob("*.py"):
        name = ".".join(p.relative_to(root).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def offences(mods: dict[str, str]) -> list[str]:
    """``module:line what`` for every use of another chaos module's private name; ``mods``: module -> source."""
    found = []
    for m, source in sorted(mods.items()):
        is_package = any(other.startswith(m + ".") for other in mods)
        package = m if is_package else m.rsplit(".", 1)[0]
        tree = ast.parse(source)
        aliases: dict[str, str] = {}  # a local name -> the chaos module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base != "chaos" and not base.startswith("chaos."):
                    continue
                for a in node.names:
                    if f"{base}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif _private(a.name) and base != m:
                        found.append(f"{m}:{node.lineno} from {base} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, v = [], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if not isinstance(v, ast.Name):
                continue
            if v.id == "chaos":
                owner = ".".join(["chaos"] + chain[::-1])
            elif v.id in aliases:
                owner = ".".join([aliases[v.id]] + chain[::-1])
            else:
                continue
            if owner in mods and owner != m:
                found.append(f"{m}:{node.lineno} {owner}.{node.attr}")
    return found


def test_the_check_catches_each_way_of_reaching_a_private_name():
    mods = {"chaos": "", "chaos.a": "def _x(): pass\nY = 1\n", "chaos.pkg": "", "chaos.pkg.b": "_z = 1\n",
            "chaos.c": ("from chaos.a import _x, Y\nfrom chaos import a as aa\nimport chaos.pkg.b\n"
                        "from chaos.pkg import b\nimport chaos.a as ma\n"
                        "aa._x(); chaos.pkg.b._z; b._z; ma._x; aa.Y; aa.__name__\n"),
            "chaos.pkg.d": "from . import b\nfrom .b import _z\nb._z\n",
            "chaos.e": "import json\nfrom os import _exit\njson._default_decoder\nclass K:\n    def f(self): self._own\n"}
    assert sorted(offences(mods)) == ["chaos.c:1 from chaos.a import _x", "chaos.c:6 chaos.a._x", "chaos.c:6 chaos.a._x",
                                      "chaos.c:6 chaos.pkg.b._z", "chaos.c:6 chaos.pkg.b._z",
                                      "chaos.pkg.d:2 from chaos.pkg.b import _z", "chaos.pkg.d:3 chaos.pkg.b._z"]


def test_no_chaos_module_uses_another_ones_private_name():
    assert offences({m: p.read_text() for m, p in modules().items()}) == []
