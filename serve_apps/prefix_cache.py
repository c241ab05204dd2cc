"""The stream target's simulated prefix cache: an LRU of prefix block hashes, one per replica.

As vLLM's automatic prefix caching does, a prompt is cut into blocks of ``block_tokens`` tokens
(the stream target's tokens are words); each full block is named by a hash of its tokens and of
the hash of the block before it, so a block hash stands for the whole prefix up to its end. A
request is served from the cache for its leading blocks whose hashes the cache holds (at most all
tokens but the last block's, as vLLM always computes at least one token); then every full block
of its prompt is put in the cache, the least recently used ones leaving beyond ``capacity_blocks``.
The target charges TTFT per *uncached* prompt token (``uncached_token_s`` in its config), so a
replica that starts cold (a replacement) is slower for prompts that share a prefix until it has
seen them, and it reports the cached tokens in ``usage.prompt_tokens_details.cached_tokens`` as
vLLM does.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence


class PrefixCache:
    def __init__(self, capacity_blocks: int = 256, block_tokens: int = 16):
        if capacity_blocks < 0 or block_tokens < 1:
            raise ValueError("capacity_blocks must be >= 0 and block_tokens >= 1")
        self.capacity = capacity_blocks
        self.block = block_tokens
        self._lru: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def capacity_tokens(self) -> int:
        return self.capacity * self.block

    def _hashes(self, tokens: Sequence[str]) -> list[int]:
        out, parent = [], 0
        for i in range(len(tokens) // self.block):
            parent = hash((parent, tuple(tokens[i * self.block:(i + 1) * self.block])))
            out.append(parent)
        return out

    def serve(self, tokens: Sequence[str]) -> int:
        """The prompt's tokens served from the cache; then its full blocks cached (most recent)."""
        hashes = self._hashes(tokens)
        hit = 0
        for h in hashes:
            if h not in self._lru:
                break
            hit += 1
        if hit and hit * self.block >= len(tokens):
            hit -= 1  # at least one token is computed
        if self.capacity:
            for h in hashes:
                self._lru[h] = None
                self._lru.move_to_end(h)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)
        return hit * self.block
