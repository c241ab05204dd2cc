"""Issue 47's pure parts: the continuation a migrating ingress sends (chat and completions), how the stream target
reads one (its answer goes on at the original answer's index k), and the requests refused migration."""

import pytest

from chaos.load.integrity import prompt_of
from serve_apps import continuation, stream_tokens
from serve_apps.migration_refusal import refusal

CHAT = {"model": "availproof-tiny", "messages": [{"role": "system", "content": "be brief"},
                                                 {"role": "user", "content": "the zone fails"}],
        "max_tokens": 10, "stream": True}
COMPLETION = {"model": "availproof-tiny", "prompt": "the zone fails", "max_tokens": 10, "stream": False}


def test_chat_continuation_appends_the_partial_answer_and_continues_it():
    body = continuation.body(CHAT, True, "stays up", 2, 16)
    assert body["messages"][:-1] == CHAT["messages"]  # the original conversation untouched
    assert body["messages"][-1] == {"role": "assistant", "content": "stays up"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["max_tokens"] == 8 and body["stream"] is True
    assert CHAT["messages"][-1]["role"] == "user" and len(CHAT["messages"]) == 2  # the original not modified


def test_chat_continuation_of_a_prefilled_answer_appends_to_it():
    prefilled = {**CHAT, "messages": CHAT["messages"] + [{"role": "assistant", "content": "so"}],
                 "continue_final_message": True, "add_generation_prompt": False}
    body = continuation.body(prefilled, True, " it goes", 2, 16)
    assert body["messages"][-1] == {"role": "assistant", "content": "so it goes"} and len(body["messages"]) == 3


def test_completion_continuation_is_the_prompt_plus_the_text_and_says_where_the_prompt_ends():
    body = continuation.body(COMPLETION, False, "stays up while", 3, 16)
    assert body["prompt"] == "the zone failsstays up while"
    assert body[continuation.PROMPT_CHARS] == len("the zone fails")
    assert body["max_tokens"] == 7 and body["stream"] is True


def test_the_budget_reduced_is_the_one_given_else_the_apps_default_else_none():
    assert continuation.body({**CHAT, "max_completion_tokens": 12}, True, "a", 1, 16)["max_completion_tokens"] == 11
    no_budget = {k: v for k, v in COMPLETION.items() if k != "max_tokens"}
    assert continuation.body(no_budget, False, "a b", 2, 16)["max_tokens"] == 14  # the stream target's 16
    assert "max_tokens" not in continuation.body(no_budget, False, "a b", 2, None)  # vLLM: the context's limit
    with pytest.raises(ValueError):
        continuation.body(CHAT, True, "x " * 10, 10, 16)  # nothing left to generate


@pytest.mark.parametrize("chat", [True, False])
def test_the_stream_target_reads_a_continuation_as_its_original_prompt_at_index_k(chat):
    original = CHAT if chat else COMPLETION
    k = 4
    key = stream_tokens.prompt_key(prompt_of(original))
    so_far = "".join(w if i == 0 else " " + w for i, w in enumerate(stream_tokens.word(key, i) for i in range(k)))
    body = continuation.body(original, chat, so_far, k, 16)
    prompt, given, start = continuation.target_prompt(body, chat)
    assert stream_tokens.prompt_key(prompt) == key  # the same answer's
    assert start == k  # ...going on at index k
    assert so_far in given  # and the text so far counts as prompt tokens, as in vLLM
    assert continuation.target_prompt(original, chat) == (prompt_of(original), prompt_of(original), 0)


def test_a_bad_continuation_is_refused_as_vllm_refuses_it():
    cont = continuation.body(CHAT, True, "a", 1, 16)
    with pytest.raises(continuation.BadContinuation, match="add_generation_prompt"):
        continuation.target_prompt({**cont, "add_generation_prompt": True}, True)
    with pytest.raises(continuation.BadContinuation, match="add_generation_prompt"):
        continuation.target_prompt({k: v for k, v in cont.items() if k != "add_generation_prompt"}, True)
    with pytest.raises(continuation.BadContinuation):
        continuation.target_prompt({**COMPLETION, continuation.PROMPT_CHARS: 99}, False)


@pytest.mark.parametrize("extra, why", [
    ({"response_format": {"type": "json_object"}}, "guided"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, "guided"),
    ({"guided_json": {"type": "object"}}, "guided"),
    ({"guided_regex": "[a-z]+"}, "guided"),
    ({"guided_choice": ["yes", "no"]}, "guided"),
    ({"guided_grammar": "root ::= 'a'"}, "guided"),
    ({"structured_outputs": {"json": {}}}, "guided"),
    ({"n": 2}, "n>1"),
    ({"best_of": 3}, "n>1"),
    ({"response_format": {"type": "text"}}, None),
    ({"n": 1, "temperature": 0.9}, None),  # the stream target's tokens do not depend on sampling
])
def test_refusals_of_the_stream_target(extra, why):
    assert refusal({**CHAT, **extra}, "stream") == why
    assert refusal({**COMPLETION, **extra}, "stream") == why


def test_refusals_of_completions_only():
    assert refusal({**COMPLETION, "prompt": ["a", "b"]}, "stream") == "prompt"
    assert refusal({**COMPLETION, "prompt": [1, 2, 3]}, "stream") == "prompt"
    assert refusal({**COMPLETION, "echo": True}, "stream") == "echo"
    assert refusal({**CHAT, "echo": True}, "stream") is None


def test_vllm_refuses_sampling_that_is_not_greedy():
    assert refusal({**CHAT, "temperature": 0}, "llm") is None
    assert refusal({**CHAT, "temperature": 0.7}, "llm") == "sampling"
    assert refusal(CHAT, "llm") == "sampling"  # not given: vLLM's default 1.0
    assert refusal({**CHAT, "temperature": 0, "guided_json": {}}, "llm") == "guided"
    with pytest.raises(ValueError):
        refusal(CHAT, "vllm")
