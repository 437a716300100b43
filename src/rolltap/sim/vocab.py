"""The simulator's toy vocabulary: token ids to token strings and back, deterministically.

The token routes (``POST /v1/completions``, ``POST /completion``) take prompts as token
ids and answer with token ids, so they need a tokenizer. This one is tiny, lossless and
fixed, so a test can encode a prompt, send it, and decode the answer exactly:

====================================  =================================================
ids ``0 … W-1``                       ``WORDS[i]`` (the simulator's completion words)
ids ``W … 2W-1``                      ``" " + WORDS[i]`` (the same word after a space)
ids ``2W … 2W+S-1``                   :data:`SPECIAL_TOKENS`, in order
ids ``2W+S … 2W+S+255``               one byte each (printable ASCII, ``\\n`` and
                                      ``\\t`` read as themselves, others ``<0xNN>``)
====================================  =================================================

``W = len(WORDS)`` (150) and ``S = len(SPECIAL_TOKENS)``. :meth:`Vocab.encode` is greedy:
a special token where one is spelled out, else a (space-prefixed) word when the whole
run of letters is one, else the UTF-8 bytes; ``decode(encode(s)) == s`` for every string.
:data:`CONTROL_TOKENS` are left out of decoded text (like a real server's
``skip_special_tokens``); the tag tokens (``<tool_call>``, ``<think>`` …) are kept.

>>> VOCAB.decode(VOCAB.encode("the river <tool_call>{}</tool_call>"))
'the river <tool_call>{}</tool_call>'
>>> VOCAB.token(VOCAB.eos)
'<|im_end|>'
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from rolltap.sim.words import WORDS

__all__ = ["CONTROL_TOKENS", "SPECIAL_TOKENS", "VOCAB", "Vocab"]

#: tokens spelled out in text that always encode to one id each
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
)
#: special tokens that decoded text leaves out
CONTROL_TOKENS = frozenset({"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
_READABLE = {9, 10, *range(32, 127)}


def _byte_token(value: int) -> str:
    return chr(value) if value in _READABLE else f"<0x{value:02X}>"


class Vocab:
    """A fixed vocabulary over :data:`~rolltap.sim.content.WORDS`, specials and bytes."""

    def __init__(self) -> None:
        words = list(WORDS) + [" " + w for w in WORDS]
        self._byte_base = len(words) + len(SPECIAL_TOKENS)
        self._tokens = (*words, *SPECIAL_TOKENS, *(_byte_token(b) for b in range(256)))
        self._bytes = tuple(
            bytes([i - self._byte_base]) if i >= self._byte_base else t.encode()
            for i, t in enumerate(self._tokens)
        )
        # Bytes come last, so a readable byte ("a") never shadows a word of the same text.
        self._ids = {t: i for i, t in reversed(list(enumerate(self._tokens)))}
        self._control = frozenset(self._ids[t] for t in CONTROL_TOKENS)
        specials = "|".join(re.escape(t) for t in SPECIAL_TOKENS)
        self._pieces = re.compile(f"{specials}| ?[A-Za-z]+|.", re.DOTALL)
        #: the end-of-sequence id a natural end of a completion adds
        self.eos = self._ids["<|im_end|>"]

    def __len__(self) -> int:
        return len(self._tokens)

    def token(self, token_id: int) -> str:
        """The token string of ``token_id`` (``IndexError`` when out of range)."""
        if not 0 <= token_id < len(self._tokens):
            raise IndexError(f"token id {token_id} is out of the vocabulary")
        return self._tokens[token_id]

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes ``token_id`` stands for in text (a byte token's single byte)."""
        return self._bytes[token_id]

    def id_of(self, token: str) -> int | None:
        """The id whose token string is ``token``, if there is one."""
        return self._ids.get(token)

    def is_control(self, token_id: int) -> bool:
        """Whether decoded text leaves ``token_id`` out (see :data:`CONTROL_TOKENS`)."""
        return token_id in self._control

    def encode(self, text: str) -> list[int]:
        """``text`` as token ids (see the module docstring for the greedy rule)."""
        out: list[int] = []
        for match in self._pieces.finditer(text):
            piece = match.group()
            token_id = self._ids.get(piece)
            if token_id is not None:
                out.append(token_id)
            else:
                out.extend(self._byte_base + b for b in piece.encode())
        return out

    def encode_bytes(self, text: str) -> list[int]:
        """``text`` as byte tokens only: the same text as :meth:`encode`'s, other ids."""
        return [self._byte_base + b for b in text.encode()]

    def decode(self, ids: Iterable[int], *, skip_control: bool = True) -> str:
        """The text of ``ids``; invalid UTF-8 from byte tokens reads as U+FFFD."""
        return self.decoder(skip_control=skip_control).decode(ids, final=True)

    def decoder(self, *, skip_control: bool = True) -> Decoder:
        """An incremental decoder, for streaming text token by token."""
        return Decoder(self, skip_control)


class Decoder:
    """Decodes ids a few at a time; a character split over byte tokens waits for its end."""

    def __init__(self, vocab: Vocab, skip_control: bool) -> None:
        self._vocab = vocab
        self._skip = skip_control
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, ids: Iterable[int], *, final: bool = False) -> str:
        """The text ``ids`` add; ``final`` flushes an unfinished character."""
        vocab = self._vocab
        data = b"".join(
            vocab.token_bytes(i) for i in ids if not (self._skip and vocab.is_control(i))
        )
        return self._utf8.decode(data, final)


#: the simulator's vocabulary
VOCAB = Vocab()
