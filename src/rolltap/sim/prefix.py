"""The simulator's prefix cache: an LRU of prompt blocks, as vLLM's automatic prefix caching.

The unit is a **block** of ``block_tokens`` ids of the prompt in the simulator's own
tokenization (:data:`~rolltap.sim.vocab.VOCAB`): the token routes' prompt ids as sent,
and for the conversation routes the ``(role, text)`` turns rendered ChatML-style
(``<|im_start|>ROLE\\nTEXT<|im_end|>\\n``, tools first as a system turn) and encoded. Each
full block is named by a hash chained over every block before it, so a block hits only
when the whole prefix up to its end was seen; a trailing partial block is never cached.
Prompts are held as :data:`TokenBytes` (two bytes per id), and each turn's encoding is
remembered (bounded), so an agent's growing history costs the encoding of its new turns.

A lookup counts the leading blocks that hit, then records every block of the prompt as
most recently used. Blocks are touched from the last to the first, so that among one
prompt's blocks the tail is evicted first and a cached prefix shrinks from its end
instead of losing its start (vLLM frees a sequence's blocks in that order too). Blocks are
cached when the request is admitted, not when its prefill would end: two concurrent
requests with one new prefix both count it as a hit after the first (a simplification).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rolltap.sim.content import Prompt
from rolltap.sim.vocab import VOCAB

__all__ = [
    "PrefixCache",
    "PromptBlocks",
    "TokenBytes",
    "conversation_ids",
    "prompt_blocks",
    "token_bytes",
]

#: token ids as unsigned 16-bit values in machine order (the vocabulary has < 65 536)
TokenBytes = bytes
_ID_BYTES = 2
# The turn encodings kept: at most this many bytes of ids (their texts are held too).
_TURNS_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A prompt as the cache sees it: its chained block hashes and its length in tokens."""

    hashes: tuple[int, ...]
    tokens: int


def token_bytes(ids: Sequence[int]) -> TokenBytes:
    """``ids`` (each in the vocabulary) as :data:`TokenBytes`."""
    return array("H", ids).tobytes()


def prompt_blocks(ids: TokenBytes, block_tokens: int) -> PromptBlocks:
    """Chain-hash the full blocks of ``ids`` (hashes are only compared within a process)."""
    hashes: list[int] = []
    previous = 0
    size = block_tokens * _ID_BYTES
    for start in range(0, len(ids) - size + 1, size):
        previous = hash((previous, ids[start : start + size]))
        hashes.append(previous)
    return PromptBlocks(tuple(hashes), len(ids) // _ID_BYTES)


class _TurnIds:
    """Remembered encodings of rendered turns, up to a byte budget (then forgotten whole)."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._held = 0
        self._ids: dict[str, TokenBytes] = {}

    def __call__(self, rendered: str) -> TokenBytes:
        ids = self._ids.get(rendered)
        if ids is None:
            ids = token_bytes(VOCAB.encode(rendered))
            size = len(ids) + len(rendered)
            if size <= self._budget // 64:  # a huge turn is not worth holding
                if self._held + size > self._budget:
                    self._ids.clear()
                    self._held = 0
                self._ids[rendered] = ids
                self._held += size
        return ids


_turn_ids = _TurnIds(_TURNS_BYTES)


def conversation_ids(prompt: Prompt) -> TokenBytes:
    """A conversation route's prompt in the simulator's tokens (turn by turn, so a longer
    history keeps the ids of the turns it repeats)."""
    parts: list[TokenBytes] = []
    if prompt.tools:
        listed = [{"name": tool.name, "parameters": tool.parameters} for tool in prompt.tools]
        tools = "<tools>" + orjson.dumps(listed).decode() + "</tools>"
        parts.append(_turn_ids(f"<|im_start|>system\n{tools}<|im_end|>\n"))
    for role, text in prompt.turns:
        parts.append(_turn_ids(f"<|im_start|>{role}\n{text}<|im_end|>\n"))
    return b"".join(parts)


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
