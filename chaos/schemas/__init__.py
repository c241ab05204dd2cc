"""The JSON Schemas (draft 2020-12) of availproof's input files, and the one way they are checked.

- ``experiment-extension.schema.json``: the ``availproof`` entry of an experiment's ``extensions``;
- ``topology.schema.json``: a topology file (YAML);
- ``capacity.schema.json``: a ``capacity.json`` written by `availproof capacity` (read back by
  ``load.utilization``: :mod:`chaos.load.utilization`).

They are the single source of validation of types, enums, ranges and known keys; what a schema
cannot say (names unique across a topology, ``warmup_s < duration_s``) is checked by the code
that reads the file, after the schema. Editors can use the files directly (``$schema`` /
``yaml.schemas`` settings).

The extension's ``scope`` is the one thing a schema takes from the code: the file says only what a scope's
name looks like (no list of names: adding a scope touches no schema), and :func:`schema` puts the registry's
names in as its enum when it loads the file (:mod:`chaos.scopes`), so a scope registered at run time validates
and any other name is refused.

Every problem is one line: ``PATH: message``, the path in the document's own terms
(``extensions[availproof].steady_state.window_s``, ``regions[0].zones[1].nodes[0].cpus``).

May import: chaos.scopes (the registry's names).
"""

from __future__ import annotations

import copy
import json
import math
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from chaos import scopes

EXTENSION = "experiment-extension"
TOPOLOGY = "topology"
CAPACITY = "capacity"
NAMES = (EXTENSION, TOPOLOGY, CAPACITY)

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_MAX_MESSAGE = 240


def path(name: str) -> Path:
    """The shipped schema file, e.g. ``path("topology")``."""
    if name not in NAMES:
        raise ValueError(f"no schema named {name!r} (known: {', '.join(NAMES)})")
    return Path(str(resources.files("chaos.schemas") / f"{name}.schema.json"))


@lru_cache(maxsize=None)
def _shipped(name: str) -> dict[str, Any]:
    return json.loads(path(name).read_text())


def schema(name: str) -> dict[str, Any]:
    """The schema as shipped, the extension's ``scope`` enum being the registered scopes' names."""
    return _with_scopes(name, scopes.names())


@lru_cache(maxsize=None)
def _with_scopes(name: str, scope_names: tuple[str, ...]) -> dict[str, Any]:
    """One dict per (schema, registered names): the same object while the names stay the same."""
    s = _shipped(name)
    if name != EXTENSION:
        return s
    s = copy.deepcopy(s)
    s["properties"]["scope"]["enum"] = list(scope_names)
    return s


def _is_integer(checker, instance) -> bool:
    # strict: 4.0 is not an integer here (JSON Schema says it is), so a count stays a Python int
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    # finite: Python's json and YAML read NaN and Infinity, which every range comparison lets through
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)


Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number}),
)


def _validator(name: str) -> Draft202012Validator:
    return _validator_for(name, scopes.names())


@lru_cache(maxsize=None)
def _validator_for(name: str, scope_names: tuple[str, ...]) -> Draft202012Validator:
    return Validator(_with_scopes(name, scope_names))


def errors(instance: Any, name: str, prefix: str = "") -> list[str]:
    """Every violation of schema ``name`` by ``instance``: one line each, ``PATH: message``,
    sorted by path (so the first is stable), without repeats."""
    found = [pm for e in _validator(name).iter_errors(instance) for pm in explain(e)]
    lines: list[str] = []
    for parts, message in sorted(found, key=lambda pm: _sort_key(pm[0])):
        line = f"{format_path(prefix, parts)}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


def format_path(prefix: str, parts: Iterable[Any]) -> str:
    """``prefix`` followed by ``.key`` for keys and ``[i]`` for list indices; ``<document>`` for none."""
    out = prefix
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            out += f"[{p}]"
        elif isinstance(p, str) and _KEY.match(p):
            out += f".{p}" if out else p
        else:
            out += f"[{p!r}]"
    return out or "<document>"


def _sort_key(parts) -> list[tuple[int, Any]]:
    return [(0, p) if isinstance(p, int) and not isinstance(p, bool) else (1, str(p)) for p in parts]


def explain(e: ValidationError) -> list[tuple[list[Any], str]]:
    """(path parts, message) for one error: unknown and missing keys are named in the path."""
    parts = list(e.absolute_path)
    if e.validator == "additionalProperties" and isinstance(e.instance, dict) and e.validator_value is False:
        known = list(e.schema.get("properties", {}))
        extra = [k for k in e.instance if k not in known]
        return [(parts + [k], f"unknown field (known: {', '.join(known)})") for k in extra]  # not cut short
    if e.validator == "required" and isinstance(e.instance, dict):
        return [(parts + [k], "is required") for k in e.validator_value if k not in e.instance]
    if "propertyNames" in e.relative_schema_path:
        # the error is about a key of the object at ``parts``: the key is the instance
        return [(parts + [e.instance], _described(e) or f"key {one_line(e.message)}")]
    return [(parts, _described(e) or one_line(e.message))]


def _described(e: ValidationError) -> str | None:
    """A pattern or ``not`` whose schema says in words what it wants: that, not the regex."""
    desc = e.schema.get("description") if isinstance(e.schema, dict) else None
    if e.validator in ("pattern", "not") and desc:
        return one_line(f"{desc}, got {e.instance!r}")
    return None


def one_line(message: str) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."
