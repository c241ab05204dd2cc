"""Token-level continuity of one stream: tokens lost, duplicated, out of order or corrupted, and its migrations.

Every stream's record says, besides whether it succeeded (:mod:`chaos.load.integrity`), how its tokens arrived
(:func:`fill`; the record's fields :data:`RECORD_FIELDS`, ``None`` where not measured, with the reason in
``continuity_why``):

- **stream target** (``system_fingerprint`` :data:`serve_apps.stream_tokens.FINGERPRINT`): its i-th token is
  ``stream_tokens.word(key, i)``, so each event's word tells its index (modulo the vocabulary's period, 20: the
  index nearest the one expected next is taken, :func:`indices`). Then ``tokens_duplicated``: tokens whose index
  had been received before; ``tokens_out_of_order``: tokens whose index is below the highest received before
  them and not received before; ``tokens_corrupted``: tokens that are no token of the answer (not a word of it,
  or an index past its end), or a word in place of the expected one when the stream goes on as expected right
  after it; ``tokens_lost``: the answer's indices never received, below its end: the length its usage says (else
  ``max_tokens``) for a stream that ended with a ``finish_reason``, else the highest index received + 1 (a broken
  stream's missing tail is its failure, counted there, not here).
- **vLLM** (any other server), with the run's answer constraint (:mod:`chaos.load.golden`: greedy, whole-word
  tokens only, each decoding to a space and a word): the stream's text splits into its tokens
  (:func:`split_tokens`, whatever events they came in), and its golden answer (the first complete answer to the
  same prompt and ``max_tokens`` in the warm-up) tells each token's index: a token's index is its position in
  the golden answer nearest the one expected next (:class:`GoldenAnswer`; the constraint's penalty makes the
  answer's tokens distinct, so it is exact unless the answer repeats a word), then the same four counts as the
  stream target's, the answer's end being the golden answer's length. No golden answer for the prompt (none
  in the warm-up, or an unconstrained run): all four ``None``, the reason says why (:data:`NO_GOLDEN`).

Migration markers (the contract a migrating ingress keeps, issue 47):

- the first event of each continuation (the request re-sent to another replica with the tokens so far) carries
  the top-level field :data:`MIGRATED` (``"migrated": k``, k the stream's migrations so far, 1 for the first);
  the events after it go on at the next token index, as if nothing happened. ``migrations`` counts the marked
  events; ``migration_gaps_ms``: per migration, the milliseconds from the last token received before the marked
  event to the first token received after it (none when there is no token on either side);
- a stream the ingress would not (or could no longer) migrate ends with an error event carrying the top-level
  field :data:`REFUSED` (``"migration_refused": "<why>"``, e.g. ``guided``, ``n>1``, ``sampling``, ``limit``);
  the record's ``migration_refused`` keeps the reason. The stream fails as before.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from chaos.load.integrity import prompt_of
from serve_apps import stream_tokens

FORMAT = 1  # the run header's "continuity": its streams' records carry these fields (older runs: no key)
MIGRATED = "migrated"  # event field: this event opens a continuation; its value, the migrations so far
REFUSED = "migration_refused"  # error-event field: migration was refused, and why
RECORD_FIELDS = ("tokens_lost", "tokens_duplicated", "tokens_out_of_order", "tokens_corrupted", "continuity_why",
                 "migrations", "migration_gaps_ms", "migration_refused")
NO_INDEX = "the server is not the stream target: its events carry no token index (several tokens each, at times)"
NO_GOLDEN = "no golden answer for this prompt in the run: corruption of a vLLM answer cannot be told"
_TOKEN = re.compile(r" [^ ]*|[^ ]+")  # a whole-word token: a space and a word (chaos.load.golden)
_PERIOD = len(stream_tokens.VOCAB)
_STEP_INVERSE = pow(7, -1, _PERIOD)  # stream_tokens.word steps 7 words per index
_RANK = {w: i for i, w in enumerate(stream_tokens.VOCAB)}


def golden_key(body: dict[str, Any]) -> str:
    """What a golden answer is looked up by: the request's prompt (or messages) and its ``max_tokens``."""
    return json.dumps([body.get("messages", body.get("prompt")), body.get("max_tokens")], sort_keys=True)


class Answer(Protocol):
    """What a stream is checked against: the answer's tokens by index."""

    def word(self, i: int) -> str | None:
        """The answer's token ``i`` (None: it has none there)."""

    def knows(self, w: str) -> bool:
        """``w`` is a token of the answer (at some index)."""

    def nearest(self, w: str, expect: int, end: int | None) -> int | None:
        """The index of ``w`` nearest ``expect`` (a tie: the earlier one) below ``end``; None when it has none."""


class TargetAnswer:
    """The stream target's answer to a prompt of ``key``: its token i is ``stream_tokens.word(key, i)``."""

    def __init__(self, key: int):
        self.key = key

    def word(self, i: int) -> str | None:
        return stream_tokens.word(self.key, i)

    def knows(self, w: str) -> bool:
        return w in _RANK

    def nearest(self, w: str, expect: int, end: int | None) -> int | None:
        if w not in _RANK:
            return None
        residue = ((_RANK[w] - self.key) * _STEP_INVERSE) % _PERIOD
        after = expect + (residue - expect) % _PERIOD
        before = after - _PERIOD
        options = [i for i in (before, after) if i >= 0 and (end is None or i < end)]
        return min(options, key=lambda i: (abs(i - expect), i)) if options else None


class GoldenAnswer:
    """A recorded answer's tokens (vLLM's golden answer, :mod:`chaos.load.golden`)."""

    def __init__(self, tokens: list[str]):
        self.tokens = list(tokens)
        self.at: dict[str, list[int]] = {}
        for i, t in enumerate(self.tokens):
            self.at.setdefault(t, []).append(i)

    def word(self, i: int) -> str | None:
        return self.tokens[i] if 0 <= i < len(self.tokens) else None

    def knows(self, w: str) -> bool:
        return w in self.at

    def nearest(self, w: str, expect: int, end: int | None) -> int | None:
        options = [i for i in self.at.get(w, ()) if end is None or i < end]
        return min(options, key=lambda i: (abs(i - expect), i)) if options else None


def split_tokens(texts: list[str]) -> list[str]:
    """The whole-word tokens of a constrained vLLM stream's events (a space and a word each), however many an event
    held (vLLM merges the deltas of a request its reader is behind on); a piece without its space is one too."""
    return _TOKEN.findall("".join(texts))


def indices(words: list[str], answer: Answer, end: int | None) -> tuple[list[int | None], set[int]]:
    """Each word's index in ``answer`` (None: corrupted, no token of it), and the indices a corrupted word stood
    in for (it came where they were expected: they are not lost). ``end``: the answer's length, when known (no
    index at or past it)."""
    out: list[int | None] = []
    stand_ins: set[int] = set()
    expect = 0  # the highest index received + 1
    for j, w in enumerate(words):
        nxt = words[j + 1] if j + 1 < len(words) else None
        within = end is None or expect < end
        if within and w == answer.word(expect):
            out.append(expect)
            expect += 1
            continue
        if within and nxt is not None and nxt == answer.word(expect + 1):
            out.append(None)  # a wrong word in place of the expected one: the stream goes on after it
            stand_ins.add(expect)
            expect += 1
            continue
        if nxt is not None and not answer.knows(w) and nxt == answer.word(expect):
            out.append(None)  # a word put in: the stream goes on where it was
            continue
        i = answer.nearest(w, expect, end)
        out.append(i)
        if i is None and within:
            stand_ins.add(expect)  # in place of the expected token
            expect += 1
        elif i is not None and i >= expect:
            expect = i + 1
    return out, stand_ins


def target_counts(words: list[str], key: int, end: int | None, complete: bool) -> dict[str, int]:
    """Lost, duplicated, out of order and corrupted tokens of a stream target's answer (see the module doc)."""
    return counts(words, TargetAnswer(key), end, complete)


def counts(words: list[str], answer: Answer, end: int | None, complete: bool) -> dict[str, int]:
    """Lost, duplicated, out of order and corrupted tokens of a stream's ``words`` against ``answer``."""
    got, stand_ins = indices(words, answer, end)
    seen: set[int] = set()
    duplicated = out_of_order = 0
    highest = -1
    for i in got:
        if i is None:
            continue
        if i in seen:
            duplicated += 1
        elif i < highest:
            out_of_order += 1
        seen.add(i)
        highest = max(highest, i)
    limit = end if (complete and end is not None) else max(highest, max(stand_ins, default=-1)) + 1
    lost = sum(1 for i in range(limit) if i not in seen and i not in stand_ins)
    return {"tokens_lost": lost, "tokens_duplicated": duplicated, "tokens_out_of_order": out_of_order,
            "tokens_corrupted": got.count(None)}


def gaps_ms(marks: list[int], times: list[float]) -> list[float]:
    """Per marked event (the count of tokens received before it), the ms from the token before to the one after."""
    return [round((times[m] - times[m - 1]) * 1000, 3) for m in marks if 0 < m < len(times)]


def fill(r: Any, check: Any, times: list[float], done: bool, golden: list[str] | None = None,
         golden_why: str | None = None) -> None:
    """Put one stream's continuity on its record ``r`` (:data:`RECORD_FIELDS`), from its check
    (:class:`chaos.load.integrity.StreamCheck`: the events' texts, the markers, a refusal; the usage's count is
    ``r.output_tokens``) and its tokens' instants (``times``, one per event with a token); ``check`` None: no
    stream came (an HTTP error). ``done``: it ended with ``[DONE]`` (complete with a ``finish_reason`` too);
    ``golden``: the run's golden answer to its prompt (vLLM: its tokens, :mod:`chaos.load.golden`), when it has
    one, else ``golden_why`` says why not (:data:`NO_GOLDEN` when it does not say)."""
    if check is None:
        r.migrations, r.migration_gaps_ms = 0, []
        r.continuity_why = "no stream: the answer was an HTTP error"
        return
    complete = done and check.finish is not None
    r.migrations = len(check.marks)
    r.migration_gaps_ms = gaps_ms(check.marks, times)
    r.migration_refused = check.refused
    r.tokens_lost = r.tokens_duplicated = r.tokens_out_of_order = r.tokens_corrupted = None
    if check.fingerprint == stream_tokens.FINGERPRINT:
        end = r.output_tokens if r.output_tokens is not None else check.body.get("max_tokens")  # the usage's
        key = stream_tokens.prompt_key(prompt_of(check.body))
        words = [t.strip() if len(t.split()) == 1 else "\0" + t for t in check.texts]  # two words: no token
        for name, v in target_counts(words, key, end if isinstance(end, int) else None, complete).items():
            setattr(r, name, v)
        r.continuity_why = None
    elif check.fingerprint is None and not check.texts:
        r.continuity_why = "no event with a token arrived: nothing to check"
    elif golden is not None:
        for name, v in counts(split_tokens(check.texts), GoldenAnswer(golden), len(golden), complete).items():
            setattr(r, name, v)
        r.continuity_why = None
    else:
        r.continuity_why = f"{NO_INDEX}; {golden_why or NO_GOLDEN}"
