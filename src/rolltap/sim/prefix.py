"""The simulator's prefix cache: an LRU of prompt blocks, as vLLM's automatic prefix caching.

The unit is a **block** of ``block_tokens`` ids of the prompt in the simulator's own
tokenization (:data:`~rolltap.sim.vocab.VOCAB`): the token routes' prompt ids as sent,
and for the conversation routes the ``(role, text)`` turns rendered ChatML-style
(``<|im_start|>ROLE\\nTEXT<|im_end|>\\n``, tools first as a system turn) and encoded. Each
full block is named by a hash chained over every block before it, so a block hits only
when the whole prefix up to its end was seen; a trailing partial block is never cached.

A lookup counts the leading blocks that hit, then records every block of the prompt as
most recently used. Blocks are touched from the last to the first, so that among one
prompt's blocks the tail is evicted first and a cached prefix shrinks from its end
instead of losing its start (vLLM frees a sequence's blocks in that order too). Blocks are
cached when the request is admitted, not when its prefill would end: two concurrent
requests with one new prefix both count it as a hit after the first (a simplification).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rolltap.sim.content import Prompt
from rolltap.sim.vocab import VOCAB

__all__ = ["PrefixCache", "PromptBlocks", "conversation_ids", "prompt_blocks"]


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A prompt as the cache sees it: its chained block hashes and its length in tokens."""

    hashes: tuple[int, ...]
    tokens: int


def prompt_blocks(ids: Sequence[int], block_tokens: int) -> PromptBlocks:
    """Chain-hash the full blocks of ``ids`` (``hash`` of ints is stable across processes)."""
    hashes: list[int] = []
    previous = 0
    for start in range(0, len(ids) - block_tokens + 1, block_tokens):
        previous = hash((previous, tuple(ids[start : start + block_tokens])))
        hashes.append(previous)
    return PromptBlocks(tuple(hashes), len(ids))


def conversation_ids(prompt: Prompt) -> tuple[int, ...]:
    """A conversation route's prompt in the simulator's tokens (turn by turn, so a longer
    history keeps the ids of the turns it repeats)."""
    ids: list[int] = []
    if prompt.tools:
        listed = [{"name": tool.name, "parameters": tool.parameters} for tool in prompt.tools]
        tools = "<tools>" + orjson.dumps(listed).decode() + "</tools>"
        ids.extend(VOCAB.encode(f"<|im_start|>system\n{tools}<|im_end|>\n"))
    for role, text in prompt.turns:
        ids.extend(VOCAB.encode(f"<|im_start|>{role}\n{text}<|im_end|>\n"))
    return tuple(ids)


class PrefixCache:
    """An LRU of at most ``capacity`` blocks of ``block_tokens`` tokens (0: nothing is
    cached; every token misses)."""

    def __init__(self, capacity: int, block_tokens: int) -> None:
        self.capacity = capacity
        self.block_tokens = block_tokens
        self.evicted = 0
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, blocks: PromptBlocks) -> int:
        """Tokens of ``blocks`` already cached as a prefix; caches the rest (see module)."""
        hits = 0
        for block in blocks.hashes:
            if block not in self._blocks:
                break
            hits += 1
        if self.capacity > 0:
            self._touch(blocks.hashes)
        return hits * self.block_tokens

    def _touch(self, hashes: tuple[int, ...]) -> None:
        cached = self._blocks
        for block in reversed(hashes[: self.capacity]):
            if block in cached:
                cached.move_to_end(block)
            else:
                cached[block] = None
        while len(cached) > self.capacity:
            cached.popitem(last=False)
            self.evicted += 1
