"""Which requests a migrating ingress must not migrate (issue 47), and why: :func:`refusal`.

A migration re-sends the request with the tokens already streamed, to another replica, and splices the answers.
That is faithful only when the continuation produces what the broken stream would have produced next:

- ``guided``: guided or structured output (``response_format``, ``guided_json``, ``guided_regex``,
  ``guided_choice``, ``guided_grammar``, ``structured_outputs``): the grammar's state at the seam is not carried
  over (vLLM starts its grammar again at the continuation's first token, so a JSON answer could be spliced into
  invalid JSON); a ``response_format`` of type ``text`` is not guided and migrates;
- ``n>1``: several choices (``n`` or ``best_of`` above 1) interleave in one stream; the ingress follows one;
- ``prompt``: a completion whose ``prompt`` is not one text (a list of prompts or of token ids is a batch);
- ``echo``: a completion that echoes its prompt would echo the continuation's prompt (prompt + text so far);
- ``sampling`` (the vLLM app only): sampling that is not greedy (``temperature`` above 0, or not given: vLLM's
  default is 1.0) continues with a different random state, so the answer after the seam is another answer
  than the one the broken stream would have given. The stream target's tokens do not depend on sampling (token
  i is a function of the prompt and i, :mod:`serve_apps.stream_tokens`): it continues any temperature exactly,
  and this reason is never given for it.

Plain Python, no imports beyond the standard library: the ingress and the unit tests use it.
"""

from __future__ import annotations

from typing import Any

GUIDED_KEYS = ("response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
               "structured_outputs")
APPS = ("stream", "llm")


def _guided(body: dict[str, Any]) -> bool:
    for key in GUIDED_KEYS:
        value = body.get(key)
        if value is None or value is False:
            continue
        if key == "response_format" and isinstance(value, dict) and value.get("type", "text") == "text":
            continue  # plain text: not guided
        return True
    return False


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def refusal(body: dict[str, Any], app: str) -> str | None:
    """Why a request of ``app`` (``stream``: the stream target; ``llm``: vLLM) must not be migrated, or None when
    it may be: ``guided``, ``n>1``, ``prompt``, ``echo`` or ``sampling`` (the module's doc says each)."""
    if app not in APPS:
        raise ValueError(f"app must be one of {APPS}, got {app!r}")
    if _guided(body):
        return "guided"
    if _count(body.get("n")) > 1 or _count(body.get("best_of")) > 1:
        return "n>1"
    if "messages" not in body:
        if not isinstance(body.get("prompt"), str):
            return "prompt"
        if body.get("echo"):
            return "echo"
    if app == "llm":
        temperature = body.get("temperature", 1.0)  # vLLM's default when not given
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature > 0:
            return "sampling"
    return None
