"""A continuation: the request a migrating ingress sends to another replica once a stream broke (issue 47), built
from the original request and the text already streamed (:func:`body`), and how the stream target reads one
(:func:`target_prompt`).

What the ingress sends (vLLM's API):

- **chat**: the original messages with the partial answer appended as an assistant message, and
  ``continue_final_message: true, add_generation_prompt: false`` (vLLM then continues that message instead of
  opening a new one); when the original request already ended with such a message (a prefilled answer), the text
  so far is appended to it; no ``echo`` (vLLM's chat echo would send that message, the text so far, again);
- **completions**: the prompt followed by the text so far, and, for the stream target only (``mark_prompt``), the
  field :data:`PROMPT_CHARS` (``continuation_of_prompt_chars``: the length in characters of the original prompt,
  where the text so far begins);
- both: ``max_tokens`` (or ``max_completion_tokens``) reduced by the tokens already streamed, ``min_tokens`` too
  (not below 0); always streamed.

vLLM needs neither the field nor anything else: greedy decoding of the prompt + the text so far continues the
same answer (the ingress refuses to migrate sampling that is not greedy, :mod:`serve_apps.migration_refusal`),
as long as the text so far tokenizes back into the tokens that made it (``docs/migration.md`` says where it may
not). The stream target's answer is a function of the prompt and the token's index
(:mod:`serve_apps.stream_tokens`), so it must be told which part of its prompt is the original prompt and at which
index to go on: :func:`target_prompt`. A character offset, not a word count, because the stream target's answer
starts without a space: the original prompt's last word and the answer's first run together in prompt + text.
"""

from __future__ import annotations

import copy
from typing import Any

PROMPT_CHARS = "continuation_of_prompt_chars"
MAX_KEYS = ("max_completion_tokens", "max_tokens")  # the first present is the one reduced


def max_tokens(body: dict[str, Any]) -> int | None:
    """The request's token budget (``max_completion_tokens``, else ``max_tokens``), None when it gives none."""
    for key in MAX_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def remaining(body: dict[str, Any], tokens: int, default: int | None) -> int | None:
    """The tokens a continuation may still produce after ``tokens`` (``default``: the app's budget when the request
    gives none; None: no budget, the engine's own limit)."""
    budget = max_tokens(body)
    budget = default if budget is None else budget
    return None if budget is None else budget - tokens


def body(original: dict[str, Any], chat: bool, text: str, tokens: int, default_max_tokens: int | None,
         mark_prompt: bool = True) -> dict[str, Any]:
    """The continuation of ``original`` after ``text`` (``tokens`` tokens) was streamed; ``default_max_tokens``:
    the app's budget when the request gives none (16 for the stream target; None for vLLM, whose limit is the
    context); ``mark_prompt``: a completion says where its original prompt ends (:data:`PROMPT_CHARS`, the stream
    target's; vLLM's continuation goes without). Raises ValueError when nothing remains to generate (the caller
    finishes the stream instead)."""
    out = copy.deepcopy(original)
    left = remaining(original, tokens, default_max_tokens)
    if left is not None and left < 1:
        raise ValueError(f"nothing left to generate: {tokens} tokens streamed of a budget of {left + tokens}")
    if left is not None:
        key = next((k for k in MAX_KEYS if k in original), "max_tokens")
        out[key] = left
    least = original.get("min_tokens")
    if isinstance(least, int) and not isinstance(least, bool):
        out["min_tokens"] = max(0, least - tokens)
    out["stream"] = True
    if chat:
        messages = out.get("messages") or []
        last = messages[-1] if messages and isinstance(messages[-1], dict) else None
        if original.get("continue_final_message") and last is not None and last.get("role") == "assistant":
            last["content"] = str(last.get("content") or "") + text  # a prefilled answer, continued further
        else:
            messages.append({"role": "assistant", "content": text})
        out["messages"] = messages
        out["continue_final_message"] = True
        out["add_generation_prompt"] = False
        out.pop("echo", None)
    else:
        prompt = str(original.get("prompt") or "")
        out["prompt"] = prompt + text
        if mark_prompt:  # where the original prompt ends (a request that was itself a continuation: where it said)
            out[PROMPT_CHARS] = original.get(PROMPT_CHARS, len(prompt))
    return out


class BadContinuation(ValueError):
    """A request that says it continues an answer but cannot (vLLM answers such a request with a 400)."""


def target_prompt(request: dict[str, Any], chat: bool) -> tuple[str, str, int]:
    """How the stream target reads a request: (the prompt its answer is keyed by, the prompt it was given in full,
    the index of its first token). A plain request: its prompt (chat: the messages' contents, one space apart),
    twice, and 0. A continuation (chat: a trailing assistant message with ``continue_final_message``; completions:
    :data:`PROMPT_CHARS`): the original prompt, the whole one, and the count of words already answered. Raises
    :class:`BadContinuation` for ``continue_final_message`` with ``add_generation_prompt`` (vLLM's default, true),
    or an offset that is not within the prompt."""
    if chat:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        contents = [str(m.get("content", "")) for m in messages]
        whole = " ".join(contents)
        if not request.get("continue_final_message"):
            return whole, whole, 0
        if request.get("add_generation_prompt", True):
            raise BadContinuation("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        if not messages or messages[-1].get("role") != "assistant":
            raise BadContinuation("continue_final_message needs the last message to be the assistant's")
        return " ".join(contents[:-1]), whole, len(contents[-1].split())
    prompt = str(request.get("prompt") or "")
    if PROMPT_CHARS not in request:
        return prompt, prompt, 0
    m = request[PROMPT_CHARS]
    if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= len(prompt):
        raise BadContinuation(f"{PROMPT_CHARS} must be an integer within the prompt's length ({len(prompt)})")
    return prompt[:m], prompt, len(prompt[m:].split())
