"""Multi-turn sessions with shared prefixes (``load.sessions``): what chat users send.

A **session** is one user's conversation: up to ``turns`` requests to one target, each carrying
the conversation so far (its group's system prompt, every earlier user message and the answer
received to it) and one new user message, with ``think_time_s`` between the end of one turn and
the send of the next. Sessions fall in ``prefix_groups`` groups (session ``i`` in group
``i % prefix_groups``); the sessions of a group share one system prompt of
``system_prompt_tokens`` tokens. Every request of a session therefore shares a prefix with earlier
requests: its group's system prompt and, from its second turn, its own conversation. They are the
**prefix-sharing requests** of the warm-up figure (:mod:`chaos.analysis`).

- **Arrivals**: in the open loop sessions *start* on the load's arrival process at
  ``rate / turns`` per second, so the request rate is at most ``rate`` (less when sessions end
  early); in the closed loop each of ``concurrency`` workers runs one session after another.
  Nothing is sent after ``duration_s`` or beyond ``max_requests``.
- **Content**, all seeded (``seed``): words of :data:`WORDS`, common words that count one token
  each for the rig's tiny checkpoint (its tokenizer was trained on them) and for the stream
  target (which counts words); real tokenizers count about as many. A user message has
  ``prompt_words`` words and asks for ``max_tokens`` tokens, as single-turn requests do. The
  answer carried into the next turn is the text the server streamed.
- **A failed turn** is sent again after the think time, the conversation unchanged (as a user
  retries); it counts towards ``turns``.
- **Length**: a session ends before a turn whose prompt plus ``max_tokens`` could pass the
  load's ``max_model_len`` (the model's context: 512 for the rig's apps, ``serve_apps.config``),
  so no turn is ever refused as too long (a 400 would be counted as a fault's cost). The next
  prompt is estimated from above (:meth:`Lengths.next_prompt_tokens`): the server's own count of
  the previous prompt (``usage.prompt_tokens``), plus the answer received at three tokens per
  token generated (``usage.completion_tokens``: a random-weight model's answer re-encodes into more
  tokens than it generated, an invalid UTF-8 byte coming back as U+FFFD, three bytes) and never more
  than one per byte (a byte-level tokenizer never needs more), plus the new message's words at the most tokens per
  word seen in this run's answered prompts (x 1.1; 2 before any answer), plus the load's
  ``template_tokens`` of chat template per message; with no count from the server, the whole
  conversation is estimated that way.

Recorded per request: ``session``, ``turn`` (the user messages in the conversation, this one
included), ``prefix_group``, ``prompt_tokens`` and ``cached_tokens`` (the server's
``usage.prompt_tokens_details.cached_tokens``, when it reports it).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from chaos.base.errors import UsageError

# common words: the tiny checkpoint's tokenizer was trained on them (serve_apps/checkpoint.py), one token each
WORDS = ("the a zone region replica node head redis serve model token stream request answer fail recover health "
         "check steady state bound trial kill restart partition network cluster engine latency goodput time first "
         "success detect window proxy route deploy user assistant system what is how why when where which one two "
         "three four five yes no ok error retry wait").split()
FIRST_TOKENS_PER_WORD = 2.0  # before the server has counted any prompt
MARGIN = 1.1  # over the most tokens per word seen
ANSWER_TOKENS_PER_TOKEN = 3  # an answer re-encoded, per token generated (U+FFFD: three bytes)


@dataclass
class SessionSpec:
    """``load.sessions``: the shape of the conversations (see the module doc)."""

    turns: int = 4
    prefix_groups: int = 4
    system_prompt_tokens: int = 128
    think_time_s: float = 2.0

    def __post_init__(self):
        problems = []
        for name, lo, hi in (("turns", 1, 1000), ("prefix_groups", 1, 100_000), ("system_prompt_tokens", 0, 1_000_000)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                problems.append(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
        t = self.think_time_s
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 <= t <= 3600:
            problems.append(f"think_time_s must be in [0, 3600], got {t!r}")
        if problems:
            raise UsageError("sessions: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "SessionSpec":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise UsageError(f"sessions: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def first_turn_tokens(self, prompt_words_max: int, template_tokens: int) -> int:
        """The upper estimate of a first turn's prompt (system prompt and the longest message)."""
        messages = 2 if self.system_prompt_tokens else 1
        return math.ceil((self.system_prompt_tokens + prompt_words_max) * FIRST_TOKENS_PER_WORD) \
            + template_tokens * (messages + 1)

    def check_fits(self, prompt_words_max: int, max_tokens_max: int, max_model_len: int, template_tokens: int) -> None:
        """Refuse a shape whose first turn could not fit ``max_model_len``: every session would end unsent."""
        need = self.first_turn_tokens(prompt_words_max, template_tokens) + max_tokens_max
        if need > max_model_len:
            raise UsageError(
                f"sessions: a first turn may need {need} tokens (system_prompt_tokens {self.system_prompt_tokens} and "
                f"prompt_words up to {prompt_words_max}, at {FIRST_TOKENS_PER_WORD:g} tokens per word before the "
                f"server has counted any, + template_tokens {template_tokens} per message, + max_tokens up to "
                f"{max_tokens_max}), more than max_model_len {max_model_len}: shorten the system prompt")


def system_prompt(seed: int, group: int, words: int) -> str:
    """The system prompt shared by the sessions of ``group`` (the same for the same seed)."""
    rng = random.Random(f"{seed}:system:{group}")
    return " ".join(rng.choice(WORDS) for _ in range(words))


def render(messages: list[dict[str, str]]) -> str:
    """A conversation as one prompt text (for ``route: completions``)."""
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


def _words(text: str) -> int:
    return len(text.split())


class Lengths:
    """What the run has learned of the server's token counts: the most tokens per word seen."""

    def __init__(self):
        self.tokens_per_word: float | None = None

    def observe(self, prompt_tokens: int | None, messages: list[dict[str, str]]) -> None:
        words = sum(_words(m["content"]) for m in messages)
        if prompt_tokens and words:
            ratio = prompt_tokens / words
            self.tokens_per_word = max(self.tokens_per_word or 0.0, ratio)

    def per_word(self) -> float:
        if self.tokens_per_word is None:
            return FIRST_TOKENS_PER_WORD
        return max(1.0, self.tokens_per_word * MARGIN)

    def next_prompt_tokens(self, conv: "Conversation", message: str) -> int:
        """The upper estimate of the prompt of ``conv`` with ``message`` appended (see the module doc)."""
        per_word = self.per_word()
        if conv.last_prompt_tokens is not None and conv.last_answered is not None:
            # the previous prompt as the server counted it, then what was added since: the answer and the message
            return (conv.last_prompt_tokens + answer_tokens(conv.last_answered, conv.last_completion_tokens)
                    + math.ceil(_words(message) * per_word) + 2 * conv.template_tokens)
        total = 0
        for m in conv.messages:
            if m["role"] == "assistant":
                total += answer_tokens(m["content"], None)
            else:
                total += math.ceil(_words(m["content"]) * per_word)
        return total + math.ceil(_words(message) * per_word) + conv.template_tokens * (len(conv.messages) + 2)


def answer_tokens(text: str, generated: int | None) -> int:
    """At most how many tokens an answer takes in the next prompt (see the module doc)."""
    most = len(text.encode())
    return most if generated is None else min(most, ANSWER_TOKENS_PER_TOKEN * generated)


@dataclass
class Turn:
    """The next request of a session."""

    messages: list[dict[str, str]]
    max_tokens: int
    turn: int  # user messages in the conversation, this one included


@dataclass
class Conversation:
    """One session's state: the conversation so far and what the server said of its last prompt."""

    session: int
    group: int
    target: Any  # chaos.load.workload.Target
    seed: int
    spec: SessionSpec
    prompt_words: tuple[int, int]
    max_tokens: tuple[int, int]
    max_model_len: int
    template_tokens: int
    messages: list[dict[str, str]] = field(default_factory=list)
    sent: int = 0  # requests sent, retries included
    last_prompt_tokens: int | None = None  # the server's count of the last answered prompt
    last_answered: str | None = None  # the answer to it (None: the last turn was not answered)
    last_completion_tokens: int | None = None  # the server's count of that answer
    ended: str | None = None  # why the session ended
    _pending: tuple[str, int] | None = None  # the message (and max_tokens) to send, until answered
    _rng: random.Random | None = None

    def __post_init__(self):
        self._rng = random.Random(f"{self.seed}:session:{self.session}")
        if not self.messages and self.spec.system_prompt_tokens:
            self.messages = [{"role": "system",
                              "content": system_prompt(self.seed, self.group, self.spec.system_prompt_tokens)}]

    @property
    def turn(self) -> int:
        return sum(1 for m in self.messages if m["role"] == "user") + 1

    def next(self, lengths: Lengths) -> Turn | None:
        """The next request, or None when the session has ended (turns sent, or the next would not fit)."""
        if self.ended:
            return None
        if self.sent >= self.spec.turns:
            self.ended = "turns"
            return None
        if self._pending is None:
            rng = self._rng
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(*self.prompt_words)))
            self._pending = (text, rng.randint(*self.max_tokens))
        text, max_tokens = self._pending
        if lengths.next_prompt_tokens(self, text) + max_tokens > self.max_model_len:
            self.ended = "max_model_len"
            return None
        return Turn(messages=self.messages + [{"role": "user", "content": text}], max_tokens=max_tokens,
                    turn=self.turn)

    def answered(self, turn: Turn, ok: bool, answer: str, prompt_tokens: int | None, lengths: Lengths,
                 completion_tokens: int | None = None) -> None:
        """The outcome of ``turn``: answered (the conversation grows) or failed (the message is sent again)."""
        self.sent += 1
        if not ok:
            return
        lengths.observe(prompt_tokens, turn.messages)
        self.messages = turn.messages + [{"role": "assistant", "content": answer}]
        self.last_prompt_tokens, self.last_answered = prompt_tokens, answer
        self.last_completion_tokens = completion_tokens
        self._pending = None


def start_offsets(shape) -> Iterator[float]:
    """Open loop: the sessions' start offsets (s from the run's start), on the load's arrival process
    (:mod:`chaos.load.arrivals`) at ``rate / turns`` (each stage's rate too): at most ``rate`` requests
    per second once sessions overlap."""
    from chaos.load import arrivals

    turns = shape.sessions.turns
    stages = [{"rate": st["rate"] / turns, "duration_s": st["duration_s"]} for st in shape.stages or ()]
    return arrivals.offsets(shape.arrival, shape.rate / turns, shape.duration_s, shape.seed, shape.burstiness,
                            stages or None)
