"""Render conversations to prompt token ids with a model's own chat template.

A :class:`Renderer` wraps one local Hugging Face tokenizer directory. It renders the
chat template to *text* and tokenizes that text without adding special tokens (the
template writes BOS and turn markers itself), which is what ``apply_chat_template(...,
tokenize=True)`` does too, but keeps the text for the prefix-consistent delta below.

Prefix consistency (:meth:`Renderer.render_messages_delta`): for RL the sequence the
model is trained on must be exactly what it saw and sampled, so turn n+1's prompt is
turn n's prompt ids + the sampled completion ids + the ids of only the text the
template adds after the reply. That text is found by rendering three times:

* ``P`` = the previous conversation with the generation prompt (kept in
  :attr:`RenderedPrompt.text`),
* ``A`` = the previous conversation + the assistant reply, without it,
* ``F`` = the whole new conversation, with it;

and requiring ``P ⊑ A ⊑ F`` (``⊑``: is a prefix of). ``A[len(P):]`` is the template's
rendering of the reply, which the sampled ids stand in for; what the template writes
after the sampled text (a newline after ``<|im_end|>``, or the end-of-turn marker when
the ids stopped short of it) is its *tail*, and ``tail + F[len(A):]`` is tokenized on its
own and appended. When ``P`` is not a prefix of ``A`` the harness rewrote history: the
prompt is rendered in full and :attr:`RenderedPrompt.reason` says why, for the caller to
record. When ``A`` is not a prefix of ``F`` the template renders earlier turns anew once
more follows (Qwen3's drops the reasoning of turns before the last user message): the
sampled ids still stay in the sequence — the prompt extends what was sampled, as the
model saw it — and the new messages' text is rendered after a stand-in reply
(``S + new`` minus ``S``, ``S`` = a user turn and the reply without its reasoning).

>>> r = Renderer.from_pretrained("/models/qwen3")  # doctest: +SKIP
>>> first = r.render_conversation([{"role": "user", "content": "hi"}])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rolltap.errors import ConfigError
from rolltap.tokens._hf import HFTokenizer, load_tokenizer
from rolltap.tokens.config import RendererConfig, check_template_kwargs

__all__ = ["FullRenderReason", "RenderedPrompt", "Renderer"]

#: where a chat message carries its reasoning (left out of a stand-in reply)
_REASONING_KEYS = frozenset({"reasoning_content", "reasoning", "thinking"})

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None

FullRenderReason = Literal[
    "history_rewritten", "reply_missing", "template_not_incremental", "completion_mismatch"
]
"""Why a delta was asked for but the prompt was rendered in full:

* ``reply_missing``: the message after the previous conversation is not the assistant's;
* ``history_rewritten``: the previous prompt's text is not a prefix of the previous
  conversation + the reply;
* ``template_not_incremental``: what follows the reply could not be rendered on its own
  (see the module doc);
* ``completion_mismatch``: the sampled text differs from the template's rendering of
  the reply and the ids end in no EOS token to line the two up by."""


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """A prompt ready to send: ``ids``, and what :meth:`Renderer.render_messages_delta`
    needs next turn. ``text`` is the template's text for the conversation (``ids``
    stands for it; with sampled ids spliced in the two can differ in tokenization).
    ``new_ids`` are the ids this render added (all of ``ids`` for a full render);
    ``extended`` is True when ``ids`` = previous ids + completion ids + ``new_ids``."""

    ids: tuple[int, ...]
    text: str
    message_count: int
    new_ids: tuple[int, ...]
    extended: bool = False
    reason: FullRenderReason | None = None


class Renderer:
    """Chat template + tokenizer of one model. Thread-safe; blocking (run it off the loop).

    >>> renderer = Renderer.from_pretrained("/models/qwen3")  # doctest: +SKIP
    >>> renderer.render_prompt([{"role": "user", "content": "hi"}])  # doctest: +SKIP
    [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
    """

    def __init__(
        self,
        tokenizer: HFTokenizer,
        *,
        template_kwargs: Mapping[str, Any] | None = None,
        eos_token_ids: Sequence[int] = (),
    ) -> None:
        self._tok = tokenizer
        self._kwargs = dict(template_kwargs or {})
        check_template_kwargs(self._kwargs)
        own = () if tokenizer.eos_token_id is None else (tokenizer.eos_token_id,)
        self._eos = tuple(dict.fromkeys((*own, *eos_token_ids)))

    @classmethod
    def from_pretrained(
        cls,
        path: Path | str,
        *,
        chat_template: str | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        eos_tokens: Sequence[str] = (),
    ) -> Renderer:
        """Load the tokenizer directory ``path`` (offline) and its chat template.

        EOS ids are the tokenizer's, those in ``generation_config.json`` when the
        directory has one, and the ids of ``eos_tokens``.

        >>> Renderer.from_pretrained("/gemma", eos_tokens=["<end_of_turn>"])  # doctest: +SKIP
        """
        directory = Path(path).expanduser()
        tokenizer = load_tokenizer(directory, chat_template=chat_template)
        extra = list(_generation_eos(directory))
        for token in eos_tokens:
            token_id = tokenizer.token_id(token)
            if token_id is None:
                raise ConfigError(f"EOS token {token!r} is not in the vocabulary of {directory}")
            extra.append(token_id)
        return cls(tokenizer, template_kwargs=template_kwargs, eos_token_ids=extra)

    @classmethod
    def from_config(cls, config: RendererConfig) -> Renderer:
        """Build from a :class:`RendererConfig` (what the renderer pool calls, in a thread)."""
        return cls.from_pretrained(
            config.path,
            chat_template=config.chat_template,
            template_kwargs=config.template_kwargs,
            eos_tokens=config.eos_tokens,
        )

    @property
    def source(self) -> Path:
        """The tokenizer directory (or GGUF file) this renderer was loaded from."""
        return self._tok.source

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Ids that end a turn: the tokenizer's EOS first, then any configured extras."""
        return self._eos

    def render_text(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:  # fmt: skip
        """The chat template's text for the conversation (call kwargs override config's).

        >>> renderer.render_text([{"role": "user", "content": "hi"}])  # doctest: +SKIP
        '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
        """
        check_template_kwargs(template_kwargs)
        kwargs = {**self._kwargs, **template_kwargs}
        return self._tok.chat_text(
            messages, tools, add_generation_prompt=add_generation_prompt, kwargs=kwargs
        )

    def render_prompt(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> list[int]:  # fmt: skip
        """Prompt token ids for the conversation, rendered in full."""
        text = self.render_text(
            messages, tools, add_generation_prompt=add_generation_prompt, **template_kwargs
        )
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, special-token spellings included, no BOS/EOS added."""
        return self._tok.encode(text)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (lossless for byte-level vocabularies: no space clean-up).

        >>> renderer.decode(renderer.encode("a b"))  # doctest: +SKIP
        'a b'
        """
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def render_conversation(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> RenderedPrompt:  # fmt: skip
        """A first turn's prompt, rendered in full, to extend with :meth:`render_messages_delta`."""
        text = self.render_text(
            messages, tools, add_generation_prompt=add_generation_prompt, **template_kwargs
        )
        return self._full(text, len(messages), None)

    def render_messages_delta(
        self,
        previous: RenderedPrompt,
        completion_ids: Sequence[int],
        messages: Messages,
        tools: Tools = None,
        **template_kwargs: Any,
    ) -> RenderedPrompt:
        """The next prompt: ``previous.ids + completion_ids + ids of the new text``.

        ``previous`` is the prompt the completion was sampled from (rendered with the
        generation prompt); ``messages`` is the whole conversation now, normally the
        previous one + the assistant's reply + what the harness added since (tool
        results, a user turn). Falls back to a full render, with ``reason`` set, when the
        harness rewrote history or the reply cannot be lined up (see the module doc).

        >>> nxt = r.render_messages_delta(first, sampled, messages)  # doctest: +SKIP
        >>> nxt.ids[: len(first.ids) + len(sampled)] == first.ids + tuple(sampled)  # doctest: +SKIP
        True
        """
        full = self.render_text(messages, tools, **template_kwargs)
        count = previous.message_count
        if len(messages) <= count or messages[count].get("role") != "assistant":
            return self._full(full, len(messages), "reply_missing")
        with_reply = self.render_text(
            messages[: count + 1], tools, add_generation_prompt=False, **template_kwargs
        )
        if not with_reply.startswith(previous.text):
            return self._full(full, len(messages), "history_rewritten")
        tail = self._reply_tail(with_reply[len(previous.text) :], completion_ids)
        if tail is None:
            return self._full(full, len(messages), "completion_mismatch")
        if full.startswith(with_reply):
            after = full[len(with_reply) :]
        else:
            # the template renders earlier turns differently once more follows (Qwen3
            # drops reasoning before the last user turn): the sampled ids stay in the
            # sequence, and only the new messages' own text is rendered after them
            alone = self._text_after(messages[count], messages[count + 1 :], tools, template_kwargs)
            if alone is None:
                return self._full(full, len(messages), "template_not_incremental")
            after = alone
        new_ids = tuple(self.encode(tail + after))
        ids = (*previous.ids, *completion_ids, *new_ids)
        return RenderedPrompt(ids, full, len(messages), new_ids, extended=True)

    def _text_after(
        self, reply: Mapping[str, Any], new: Messages, tools: Tools, kwargs: dict[str, Any]
    ) -> str | None:
        """What the template writes for ``new`` after an assistant ``reply`` (its
        reasoning left out, so no template drops anything): the difference of two
        renders of a stand-in conversation; None if the second does not extend the first."""
        plain = {k: v for k, v in reply.items() if k not in _REASONING_KEYS}
        base = [{"role": "user", "content": "."}, plain]
        before = self.render_text(base, tools, add_generation_prompt=False, **kwargs)
        whole = self.render_text([*base, *new], tools, **kwargs)
        return whole[len(before) :] if whole.startswith(before) else None

    def _reply_tail(self, reply: str, completion_ids: Sequence[int]) -> str | None:
        """What the template writes after the sampled text of ``reply``; None if unknown."""
        sampled = self.decode(completion_ids)
        if reply.startswith(sampled):
            return reply[len(sampled) :]
        if not completion_ids or completion_ids[-1] not in self._eos:
            return None
        end = self.decode(completion_ids[-1:])
        body = self.decode(completion_ids[:-1])
        if reply.startswith(body):  # the template writes no (or another) end marker
            rest = reply[len(body) :]
            return rest[len(end) :] if rest.startswith(end) else rest
        # The reply was re-rendered differently (e.g. tool-call JSON re-serialized): line
        # the two up at the end-of-turn marker, the last one the reply's rendering holds.
        cut = reply.rfind(end) if end else -1
        return None if cut < 0 else reply[cut + len(end) :]

    def _full(self, text: str, count: int, reason: FullRenderReason | None) -> RenderedPrompt:
        ids = tuple(self.encode(text))
        return RenderedPrompt(ids, text, count, ids, extended=False, reason=reason)

    def __repr__(self) -> str:
        return f"<Renderer {self.source}>"


def _generation_eos(directory: Path) -> tuple[int, ...]:
    """EOS ids from ``generation_config.json`` (an int or a list), if the directory has one."""
    try:
        raw = json.loads((directory / "generation_config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {directory / 'generation_config.json'}: {exc}") from exc
    value = raw.get("eos_token_id") if isinstance(raw, dict) else None
    values = value if isinstance(value, list) else [value]
    return tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))
