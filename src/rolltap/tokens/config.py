"""What a renderer is built from, and the key that renderer pools are shared under."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

from rolltap.errors import ConfigError

__all__ = ["DEFAULT_MULTIPLEX", "RESERVED_TEMPLATE_KWARGS", "RendererConfig"]

DEFAULT_MULTIPLEX = 256

#: ``apply_chat_template`` parameters that change what it returns rather than what the
#: template sees; the renderer sets them itself, so template kwargs may not.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {
        "conversation", "tools", "chat_template", "add_generation_prompt", "tokenize",
        "padding", "truncation", "max_length", "return_tensors", "return_dict",
        "return_assistant_tokens_mask", "tokenizer_kwargs",
    }
)  # fmt: skip


def check_template_kwargs(kwargs: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for a kwarg the renderer must control itself."""
    reserved = sorted(RESERVED_TEMPLATE_KWARGS.intersection(kwargs))
    if reserved:
        raise ConfigError(f"template kwargs may not set {', '.join(reserved)}")


@dataclass(frozen=True, slots=True)
class RendererConfig:
    """The build inputs of a renderer plus the pool's growth policy.

    ``tokenizer_path`` is a local Hugging Face tokenizer directory; ``chat_template``
    overrides the one it ships; ``template_kwargs`` are passed to every render (e.g.
    ``{"enable_thinking": False}``; JSON values only, since they are part of the key);
    ``eos_tokens`` names extra tokens that end a turn besides the tokenizer's EOS (e.g.
    Gemma's ``"<end_of_turn>"``). ``multiplex`` is how many concurrent acquirers one
    renderer serves before the pool builds another; it is *not* a build input, so
    configs that differ only in it share one pool.

    >>> a = RendererConfig("/models/qwen3", multiplex=4)
    >>> a.pool_key() == RendererConfig("/models/qwen3").pool_key()
    True
    """

    tokenizer_path: Path | str
    chat_template: str | None = None
    template_kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    eos_tokens: tuple[str, ...] = ()
    multiplex: int = DEFAULT_MULTIPLEX

    def __post_init__(self) -> None:
        multiplex = self.multiplex
        if isinstance(multiplex, bool) or not isinstance(multiplex, int) or multiplex < 1:
            raise ConfigError(f"multiplex must be a positive integer, got {multiplex!r}")
        check_template_kwargs(self.template_kwargs)
        # frozen: normalise through object.__setattr__ so equal inputs compare equal
        object.__setattr__(self, "tokenizer_path", Path(self.tokenizer_path).expanduser())
        object.__setattr__(self, "template_kwargs", MappingProxyType(dict(self.template_kwargs)))
        object.__setattr__(self, "eos_tokens", tuple(self.eos_tokens))
        self.pool_key()  # fail now, not at first use, on kwargs that are not JSON

    @property
    def path(self) -> Path:
        """``tokenizer_path`` as a :class:`Path`."""
        return Path(self.tokenizer_path)

    def pool_key(self) -> str:
        """SHA-256 over the build inputs (resolved path, template, kwargs, EOS tokens).

        >>> len(RendererConfig("/models/qwen3").pool_key())
        64
        """
        inputs = {
            "path": str(self.path.resolve()),
            "chat_template": self.chat_template,
            "template_kwargs": dict(self.template_kwargs),
            "eos_tokens": list(self.eos_tokens),
        }
        try:
            blob = orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS)
        except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
            raise ConfigError(f"template kwargs must be JSON values: {exc}") from exc
        return hashlib.sha256(blob).hexdigest()
