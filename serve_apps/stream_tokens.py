"""The stream target's answer, a function of the prompt and of the token's index alone, so that a client
can check every token it received (:mod:`chaos.load.integrity`). Plain Python, no imports beyond zlib:
the rig's harness and the Serve app both use it."""

from __future__ import annotations

import zlib

VOCAB = ("the", "zone", "replica", "stays", "up", "while", "a", "node", "fails", "and", "traffic",
         "moves", "to", "healthy", "ones", "so", "requests", "keep", "flowing", "quickly")
FINGERPRINT = "availproof-stream-target"


def prompt_key(prompt: str) -> int:
    """The prompt as the target sees it: its words, one space apart, hashed (crc32)."""
    return zlib.crc32(" ".join(str(prompt or "").split()).encode())


def word(key: int, i: int) -> str:
    """The i-th token (0-based) of the answer to a prompt of ``key``."""
    return VOCAB[(key + 7 * i) % len(VOCAB)]


def text(prompt: str, n: int) -> str:
    """The whole answer of ``n`` tokens, as streamed: the first token bare, the others after a space."""
    key = prompt_key(prompt)
    return " ".join(word(key, i) for i in range(n))
