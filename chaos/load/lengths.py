"""Prompt and output lengths in tokens: distributions, prompts of a given length, clipping.

A length is one of (``load.prompt_len`` / ``load.output_len``)::

    {"dist": "fixed",   "value": 128}
    {"dist": "uniform", "min": 16, "max": 256}                      # integers, both ends included
    {"dist": "normal",  "mean": 200, "std": 60, "min": 1, "max": 480}  # rounded, clipped to [min, max]
    {"dist": "file",    "path": "lengths.txt"}                       # one integer a line, drawn uniformly
    {"dist": "file",    "path": "trace.jsonl", "field": "input_length"}  # a JSONL file's field

Prompts of ``n`` tokens are ``n`` words of :data:`TOKEN_WORDS`: the words the tiny checkpoint's
tokenizer was trained on (``serve_apps/checkpoint.py``), each one token there after a space, so a
prompt of ``n`` words is ``n`` tokens (the chat route's template adds ``template_tokens``, 8 on the
tiny model). Another tokenizer counts them differently: the server's count is recorded too
(``prompt_tokens``, from the stream's usage).

Clipping (``max_model_len``, ``clip``): a request whose prompt, template and output exceed the
model's context is cut so that they fit: ``clip: "prompt"`` cuts the prompt first (down to one
token), then the output; ``"output"`` the other way round. Every cut request says what was cut
(``clipped``) and the run's footer counts them.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

DISTS = ("fixed", "uniform", "normal", "file")
CLIP = ("prompt", "output")

# one token each (after a space) in the tiny checkpoint's tokenizer: serve_apps.checkpoint.corpus
TOKEN_WORDS = tuple(
    "the a zone region replica node head redis serve model token stream request answer fail recover health "
    "check steady state bound trial kill restart partition network cluster engine latency goodput time first "
    "success detect window proxy route deploy user assistant system what is how why when where which one two "
    "three four five yes no ok error retry wait".split())


def resolve(path: str) -> Path:
    """A file the load names: as given (absolute, or relative to the current directory), else
    relative to the repository (``experiments/traces/...`` from anywhere)."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    repo = Path(__file__).resolve().parents[2] / p
    return repo if repo.exists() else p


@lru_cache(maxsize=16)
def _file_values(path: str, field: str | None, mtime_ns: int) -> tuple[int, ...]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                v = json.loads(line)
                if field is not None:
                    v = v[field]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{path} line {n}: not " + (f"a JSON object with {field!r}" if field else "an integer"))
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{path} line {n}: a length must be an integer >= 1, got {v!r}")
            out.append(v)
    if not out:
        raise ValueError(f"{path}: no lengths in it")
    return tuple(out)


def file_values(spec: dict[str, Any]) -> tuple[int, ...]:
    p = resolve(spec["path"])
    try:
        return _file_values(str(p), spec.get("field"), p.stat().st_mtime_ns)
    except OSError as e:
        raise ValueError(f"{spec['path']}: cannot be read ({e.strerror or e})") from None


def check(spec: Any, name: str) -> list[str]:
    """A length spec's problems (``None`` is no spec), one line each, prefixed with ``name``."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [f"{name} must be an object {{dist, ...}}, got {spec!r}"]
    dist = spec.get("dist")
    if dist not in DISTS:
        return [f"{name}.dist must be one of {', '.join(DISTS)}, got {dist!r}"]
    need = {"fixed": {"value"}, "uniform": {"min", "max"}, "normal": {"mean", "std"}, "file": {"path"}}[dist]
    allowed = need | {"dist"} | ({"min", "max"} if dist == "normal" else set()) | ({"field"} if dist == "file" else set())
    out = [f"{name}: {dist} needs {k}" for k in sorted(need - set(spec))]
    out += [f"{name}: {k} is not a field of a {dist} length" for k in sorted(set(spec) - allowed)]
    if out:
        return out

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    for k in ("value", "min", "max"):
        if k in spec and not (is_int(spec[k]) and spec[k] >= 1):
            out.append(f"{name}.{k} must be an integer >= 1, got {spec[k]!r}")
    for k in ("mean", "std"):
        if k in spec and not (isinstance(spec[k], (int, float)) and not isinstance(spec[k], bool) and spec[k] >= 0):
            out.append(f"{name}.{k} must be a number >= 0, got {spec[k]!r}")
    if not out and spec.get("min", 1) > spec.get("max", spec.get("min", 1)):
        out.append(f"{name}: min must be <= max, got {spec['min']} > {spec['max']}")
    if not out and dist == "file":
        try:
            file_values(spec)
        except ValueError as e:
            out.append(f"{name}.path: {e}")
    return out


def sampler(spec: dict[str, Any], rng: random.Random) -> Callable[[], int]:
    """Draws of a (checked) length spec from ``rng``."""
    dist = spec["dist"]
    if dist == "fixed":
        v = int(spec["value"])
        return lambda: v
    if dist == "uniform":
        lo, hi = int(spec["min"]), int(spec["max"])
        return lambda: rng.randint(lo, hi)
    if dist == "normal":
        mean, std = float(spec["mean"]), float(spec["std"])
        lo, hi = int(spec.get("min", 1)), spec.get("max")
        return lambda: max(lo, min(hi if hi is not None else 1 << 30, round(rng.gauss(mean, std))))
    values = file_values(spec)
    return lambda: values[rng.randrange(len(values))]


def token_prompt(rng: random.Random, n: int) -> str:
    """``n`` tokens of the tiny model: ``n`` words of :data:`TOKEN_WORDS`."""
    return " ".join(rng.choices(TOKEN_WORDS, k=n))


def clip(prompt: int | None, output: int, budget: int, policy: str = "prompt") -> tuple[int | None, int, str | None]:
    """(prompt, output, what was cut) so that ``prompt + output <= budget`` (the model's context less
    the template); an unknown prompt length (``None``) counts as 0. ``budget >= 2``."""
    p = prompt or 0
    if p + output <= budget:
        return prompt, output, None
    if policy == "prompt":
        new_p = max(1, budget - output) if prompt is not None else None
        new_o = min(output, budget - (new_p or 0))
    else:
        new_o = max(1, budget - p)
        new_p = min(p, budget - new_o) if prompt is not None else None
    cut = [what for what, before, after in (("prompt", prompt, new_p), ("output", output, new_o)) if before != after]
    return new_p, new_o, "+".join(cut) or None
