"""Golden answers on vLLM: each request constrained to stream whole-word tokens, each stream checked token by token
against the first complete answer to its prompt in the warm-up.

The stream target's token i is a function of the prompt and i (:mod:`chaos.load.continuity`); a vLLM answer is not,
and the tiny model's (random weights, :mod:`serve_apps.checkpoint`) samples byte pieces that its detokenizer holds
back until they make whole characters: its answer comes in one event or a few. With ``--app llm`` the rig sets the
load's ``constraint`` (:func:`for_app`) and each request carries (:func:`body_fields`):

- ``temperature`` 0 (greedy: the answer is a function of the prompt, the weights and ``max_tokens``);
- ``allowed_token_ids``: the tokenizer's tokens that decode alone to a space and a word of ASCII letters
  (:func:`vocabulary`: every id of the vocabulary decoded alone, those matching :data:`WORD` kept, distinct texts,
  at most :data:`MAX_ALLOWED`, lowest ids first), read from the checkpoint's ``tokenizer.json`` (the tiny one's
  trained again offline when the rig has no copy: same seed, same vocabulary). Each token decodes to its text
  whatever precedes it, so each event's text is whole tokens and a text splits into its tokens
  (:func:`chaos.load.continuity.split_tokens`) even when vLLM merges the deltas of a request its reader is behind on;
  and the text so far re-tokenizes to the same ids (a continuation's prompt, issue 47);
- ``repetition_penalty`` :data:`REPETITION_PENALTY`: a token already in the prompt or the answer has its logit
  divided by it (if positive) or multiplied (if negative), so greedy picks a token not used yet while one has a
  positive logit: the answer's tokens are distinct (the tiny model otherwise repeats one word), so each token's
  text tells its index. The penalty counts the prompt's tokens and the answer's alike: a continuation (prompt +
  text so far, max_tokens reduced) sees the same set and picks the same next token;
- ``ignore_eos``: the answer has ``max_tokens`` tokens (no end-of-sequence token is allowed anyway).

Requests cycle through ``load.prompt_set`` distinct (prompt, max_tokens) pairs (the rig sets it for ``--app llm`` so
that the warm-up sends each at least twice, :func:`prompt_set_for`). :class:`Goldens` keeps, per pair
(:func:`chaos.load.continuity.golden_key`), the tokens of the first answer of the warm-up that completed
successfully; every stream of the run is then checked against it (its continuity, and a complete answer that
differs is a failure: ``corrupted``, or ``truncated`` when it is a correct beginning cut short). A pair with no
golden answer (none completed in the warm-up) is not checked: its figures are null with the reason. The golden
answers are written in the footer of the run's records (``goldens``: one harness's, or each worker's line).

Assumed, not proven here: vLLM on CPU gives the same greedy answer to the same request whatever else is in its
batch. Where it does not, a stream batched otherwise is counted corrupted; a fault-free run's corrupted count says
whether it happens.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

from chaos.recording import records as rec
from chaos.load.continuity import NO_GOLDEN, golden_key, split_tokens

WORD = re.compile(r" [A-Za-z]+")  # what an allowed token decodes to, alone
MAX_ALLOWED = 256  # vLLM caps allowed_token_ids at 1024 ids
REPETITION_PENALTY = 1000.0
UNCONSTRAINED = "the run's requests are not constrained to whole-word tokens (load.constraint: set for --app llm)"
PROMPT_SET_MAX = 32


def vocabulary(tokenizer_json: str | Path, limit: int = MAX_ALLOWED) -> tuple[list[int], list[str]]:
    """(ids, texts) of the tokens of ``tokenizer_json`` that decode alone to :data:`WORD`, distinct texts, lowest
    ids first, at most ``limit``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    ids, texts, seen = [], [], set()
    for i in range(tok.get_vocab_size(with_added_tokens=True)):
        t = tok.decode([i], skip_special_tokens=True)
        if WORD.fullmatch(t) and t not in seen:
            ids.append(i)
            texts.append(t)
            seen.add(t)
            if len(ids) >= limit:
                break
    return ids, texts


def constraint(model_path: str | Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """The load's ``constraint`` for the checkpoint at ``model_path`` (none: the tiny one, trained again in a temporary
    directory when the rig has no copy of it), and what it is (or why there is none) in a line."""
    from serve_apps import checkpoint

    where = Path(model_path) if model_path else checkpoint.DEFAULT_DIR
    source = where / "tokenizer.json"
    if source.exists():
        ids, texts = vocabulary(source)
    elif model_path:
        return None, f"{source} not found: the requests are not constrained, no golden answer is recorded"
    else:
        with tempfile.TemporaryDirectory(prefix="availproof-tokenizer-") as tmp:
            checkpoint.build_tokenizer(tmp)
            ids, texts = vocabulary(Path(tmp) / "tokenizer.json")
        source = Path("the tiny checkpoint's tokenizer, trained again (seed 0)")
    if not ids:
        return None, (f"{source}: no token decodes alone to a space and a word: the requests are not constrained, "
                      "no golden answer is recorded")
    c = {"allowed_token_ids": ids, "tokens": texts, "repetition_penalty": REPETITION_PENALTY, "source": str(source)}
    return c, f"{len(ids)} whole-word tokens of {source}, greedy, repetition penalty {REPETITION_PENALTY:g}"


def problems(c: Any) -> list[str]:
    """What is wrong with a load's ``constraint`` (empty: nothing)."""
    if c is None:
        return []
    if not isinstance(c, dict):
        return [f"constraint must be an object, got {type(c).__name__}"]
    ids, texts, pen = c.get("allowed_token_ids"), c.get("tokens"), c.get("repetition_penalty", 1.0)
    out = []
    if not isinstance(ids, list) or not 1 <= len(ids) <= 1024 or not all(type(i) is int and i >= 0 for i in ids):
        out.append("constraint.allowed_token_ids must be 1..1024 token ids")
    if (not isinstance(texts, list) or len(texts) != len(ids or []) or len(set(texts)) != len(texts)
            or not all(isinstance(t, str) and WORD.fullmatch(t) for t in texts)):
        out.append("constraint.tokens must be the allowed tokens' texts, distinct, each a space and a word")
    if isinstance(pen, bool) or not isinstance(pen, (int, float)) or not math.isfinite(pen) or pen <= 0:
        out.append(f"constraint.repetition_penalty must be a positive number, got {pen!r}")
    return out


def body_fields(c: dict[str, Any]) -> dict[str, Any]:
    """What a constrained request's body carries (vLLM's extra sampling parameters, see the module doc)."""
    return {"temperature": 0.0, "allowed_token_ids": list(c["allowed_token_ids"]),
            "repetition_penalty": c.get("repetition_penalty", REPETITION_PENALTY), "ignore_eos": True}


def prompt_set_for(shape: Any) -> int:
    """Distinct prompts a run cycles through so that its warm-up sends each at least twice (open loop: the warm-up's
    requests at its rate; closed: one a second per worker), at most :data:`PROMPT_SET_MAX`, at least 1."""
    if shape.mode == "open":
        rate = shape.stages[0]["rate"] if shape.stages else shape.rate
    else:
        rate = shape.concurrency
    return max(1, min(PROMPT_SET_MAX, int(rate * shape.warmup_s / 2)))


def for_app(shape: Any, app: str, model_path: str | None, log: Callable[[str], None] = print) -> Any:
    """``shape`` with the answer constraint and a prompt set for ``app`` ``llm`` (unless it has them already, or
    sends sessions or a trace: their prompts do not repeat), else ``shape`` itself."""
    import dataclasses

    if app != "llm" or shape.sessions is not None or shape.trace is not None or not shape.stream:
        return shape
    c, said = (shape.constraint, "the experiment's") if shape.constraint else constraint(model_path)
    log(f"answers: {said}")
    if c is None:
        return shape
    n = shape.prompt_set or prompt_set_for(shape)
    log(f"answers: {n} distinct prompts, each request one of them in turn; golden answers from the warm-up")
    return dataclasses.replace(shape, constraint=c, prompt_set=n)


class Goldens:
    """A run's golden answers (the tokens of each prompt's first complete warm-up answer) and the checks against
    them; ``constraint``: the load's (None: nothing is recorded or checked)."""

    def __init__(self, constraint: dict[str, Any] | None):
        self.constraint = constraint
        self.answers: dict[str, list[str]] = {}

    def reference(self, body: dict[str, Any]) -> tuple[list[str] | None, str | None]:
        """(the golden answer's tokens, None), or (None, why there is none) for a request ``body``."""
        if self.constraint is None:
            return None, UNCONSTRAINED
        got = self.answers.get(golden_key(body))
        return (got, None) if got is not None else (None, NO_GOLDEN)

    def learn(self, body: dict[str, Any], texts: list[str], phase: str) -> bool:
        """Keep ``texts`` (a complete, successful answer's events) as the golden answer to ``body``'s prompt when it
        came in the warm-up and the prompt has none yet; True when kept."""
        key = golden_key(body)
        if self.constraint is None or phase != rec.WARMUP or key in self.answers:
            return False
        self.answers[key] = split_tokens(texts)
        return True

    def verdict(self, body: dict[str, Any], texts: list[str]) -> tuple[str, str] | None:
        """(failure class, detail) when a complete answer is not its golden answer; None when it is, or has none."""
        golden, _ = self.reference(body)
        if golden is None:
            return None
        got = split_tokens(texts)
        if got == golden:
            return None
        for i, (a, b) in enumerate(zip(got, golden)):
            if a != b:
                return rec.CORRUPTED, f"token {i} is {a[:20]!r}, the golden answer has {b!r} there"
        if len(got) > len(golden):
            return rec.CORRUPTED, f"{len(got)} tokens where the golden answer has {len(golden)}"
        return rec.TRUNCATED, f"{len(got)} of the golden answer's {len(golden)} tokens, then it ended"

    def to_dict(self) -> dict[str, Any]:
        """The footer's ``goldens``: each prompt's key (its prompt or messages and max_tokens, JSON) and tokens."""
        return {"answers": dict(self.answers),
                "distinct_tokens": {k: len(set(v)) for k, v in self.answers.items()}}
