"""The simulator's prefix cache: an LRU of prompt blocks, as vLLM's automatic prefix caching.

The unit is a **block** of ``block_tokens`` ids of the prompt in the simulator's own
tokenization (:data:`~rolltap.sim.vocab.VOCAB`): the token routes' prompt ids as sent,
and for the conversation routes the ``(role, text)`` turns rendered ChatML-style
(``<|im_start|>ROLE\\nTEXT<|im_end|>\\n``, tools first as a system turn) and encoded. Each
full block is named by a hash chained over every block before it, so a block hits only
when the whole prefix up to its end was seen; a trailing partial block is never cached.
As vLLM and SGLang do, the ids a request generates are cached after its prompt: for the
conversation routes the prompt ends with the generation prompt ``<|im_start|>assistant\\n``
and a text answer is ``TEXT<|im_end|>``, so the next turn, whose history renders that
answer, hits it too (a tool call renders differently and is not cached); the token routes
cache the sampled ids, which a token client sends back as they are. Prompts are held as
:data:`TokenBytes` (two bytes per id), and each turn's encoding is remembered (bounded),
so an agent's growing history costs the encoding of its new turns.

A lookup counts the prompt's leading blocks that hit, then records every block of the
prompt and of the answer as most recently used. Blocks are touched from the last to the
first, so that among one request's blocks the tail is evicted first and a cached prefix
shrinks from its end instead of losing its start (vLLM frees a sequence's blocks in that
order too). Blocks are cached when the request is admitted, not when its prefill or its
generation would end: two concurrent requests with one new prefix both count it as a hit
after the first (a simplification).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rolltap.sim.content import Answer, Prompt
from rolltap.sim.vocab import VOCAB

__all__ = [
    "PrefixCache",
    "PromptBlocks",
    "PromptTokens",
    "TokenBytes",
    "conversation_ids",
    "conversation_tokens",
    "prompt_blocks",
    "token_bytes",
]

#: token ids as unsigned 16-bit values in machine order (the vocabulary has < 65 536)
TokenBytes = bytes
_ID_BYTES = 2
# The turn encodings kept: at most this many bytes of ids (their texts are held too).
_TURNS_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """What one request puts through the cache: the prompt it prefills, then the ids it
    generates."""

    prompt: TokenBytes
    generated: TokenBytes = b""


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A request as the cache sees it: the chained hashes of the full blocks of its prompt
    and generated ids, how many of them the prompt fills, and the prompt's tokens."""

    hashes: tuple[int, ...]
    prompt_blocks: int
    tokens: int


def token_bytes(ids: Sequence[int]) -> TokenBytes:
    """``ids`` (each in the vocabulary) as :data:`TokenBytes`."""
    return array("H", ids).tobytes()


def prompt_blocks(ids: TokenBytes, block_tokens: int, generated: TokenBytes = b"") -> PromptBlocks:
    """Chain-hash the full blocks of ``ids`` then ``generated`` (hashes are only compared
    within a process)."""
    hashes: list[int] = []
    previous = 0
    size = block_tokens * _ID_BYTES
    sequence = ids + generated
    for start in range(0, len(sequence) - size + 1, size):
        previous = hash((previous, sequence[start : start + size]))
        hashes.append(previous)
    return PromptBlocks(tuple(hashes), len(ids) // size, len(ids) // _ID_BYTES)


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


_GENERATION_PROMPT = _ASSISTANT = token_bytes(VOCAB.encode("<|im_start|>assistant\n"))
_END = token_bytes(VOCAB.encode("<|im_end|>\n"))


def conversation_tokens(
    prompt: Prompt, answer: Answer, *, spell_assistant: bool = False
) -> PromptTokens:
    """A conversation request's tokens: its turns and the generation prompt, then the text
    answer as ``TEXT<|im_end|>`` (nothing for a tool call). ``spell_assistant``: see
    :func:`conversation_ids`."""
    generated = b""
    if answer.tool_name is None:
        generated = token_bytes(VOCAB.encode(answer.text + "<|im_end|>"))
    ids = conversation_ids(prompt, spell_assistant=spell_assistant)
    return PromptTokens(ids + _GENERATION_PROMPT, generated)


def conversation_ids(prompt: Prompt, *, spell_assistant: bool = False) -> TokenBytes:
    """A conversation route's prompt in the simulator's tokens (turn by turn, so a longer
    history keeps the ids of the turns it repeats). ``spell_assistant``: each assistant
    turn's text in byte tokens, not as it was sampled (:attr:`SimConfig.retokenize_history`)."""
    parts: list[TokenBytes] = []
    if prompt.tools:
        listed = [{"name": tool.name, "parameters": tool.parameters} for tool in prompt.tools]
        tools = "<tools>" + orjson.dumps(listed).decode() + "</tools>"
        parts.append(_turn_ids(f"<|im_start|>system\n{tools}<|im_end|>\n"))
    for role, text in prompt.turns:
        if spell_assistant and role == "assistant":
            parts += [_ASSISTANT, token_bytes(VOCAB.encode_bytes(text)), _END]
            continue
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
        """Prompt tokens of ``blocks`` already cached as a prefix; caches the rest, and the
        generated blocks (see the module)."""
        hits = 0
        for block in blocks.hashes[: blocks.prompt_blocks]:
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
