"""The typed seam around Hugging Face tokenizers: the only module that imports transformers.

transformers is an optional extra, so it is imported lazily (``rolltap.tokens`` must
import without it) and its loosely typed objects are held as ``Any`` behind the narrow,
typed methods below. Library errors are translated here: loading failures become
:class:`ConfigError` naming the directory, template failures :class:`TokenizerError`.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rolltap.errors import ConfigError, MissingExtraError, TokenizerError

__all__ = ["INSTALL_HINT", "HFTokenizer", "load_gguf", "load_tokenizer"]

INSTALL_HINT = "install the 'tokens' extra: pip install 'rolltap[tokens]'"
# what transformers raises for a directory it cannot read (missing files, bad JSON,
# unknown tokenizer model in tokenizer.json, bad config values)
_LOAD_ERRORS = (OSError, ValueError, LookupError, TypeError)


class HFTokenizer:
    """A loaded tokenizer with a chat template; every call holds the instance's lock.

    A fast tokenizer's Rust backend refuses concurrent use from several threads
    ("Already borrowed") when settings change under it, so calls are serialized per
    instance; parallelism comes from more instances (the renderer pool grows them).
    """

    def __init__(self, tokenizer: Any, source: Path) -> None:
        self._tok = tokenizer
        self._lock = threading.RLock()
        self.source = source

    @property
    def has_chat_template(self) -> bool:
        """Whether there is a template: one string, or named ones (``default``, ``tool_use``)
        that ``apply_chat_template`` chooses between."""
        template = self._tok.chat_template
        return bool(template) and isinstance(template, str | dict)

    @property
    def eos_token_id(self) -> int | None:
        value = self._tok.eos_token_id
        return value if isinstance(value, int) else None

    def token_id(self, token: str) -> int | None:
        """The id of a vocabulary entry spelled exactly ``token``, else None."""
        with self._lock:
            vocab: Mapping[str, int] = self._tok.get_vocab()
            return vocab.get(token)

    def chat_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        *,
        add_generation_prompt: bool,
        kwargs: Mapping[str, Any],
    ) -> str:
        """The chat template's text for ``messages`` (not tokenized)."""
        import jinja2  # a dependency of transformers' chat templates

        with self._lock:
            try:
                text = self._tok.apply_chat_template(
                    list(messages),
                    tools=list(tools) if tools is not None else None,
                    add_generation_prompt=add_generation_prompt,
                    tokenize=False,
                    **kwargs,
                )
            except jinja2.TemplateError as exc:
                raise TokenizerError(f"the chat template refused the conversation: {exc}") from exc
        if not isinstance(text, str):
            raise TokenizerError(f"the chat template rendered {type(text).__name__}, not text")
        return text

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token spellings in it become their ids, and no
        BOS/EOS is added (the chat template writes those itself)."""
        with self._lock:
            ids: list[int] = self._tok.encode(text, add_special_tokens=False)
        return ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``. Space clean-up stays off: it would make decoding lossy
        (``" ."`` → ``"."``) and break the text comparisons prefix consistency relies on."""
        with self._lock:
            try:
                text: str = self._tok.decode(
                    list(ids),
                    skip_special_tokens=skip_special_tokens,
                    clean_up_tokenization_spaces=False,
                )
            except (OverflowError, TypeError, ValueError) as exc:
                raise TokenizerError(f"cannot decode token ids: {exc}") from exc
        return text

    def save(self, directory: Path) -> None:
        """Write tokenizer.json, tokenizer_config.json and the chat template to ``directory``."""
        with self._lock:
            self._tok.save_pretrained(str(directory))

    def set_chat_template(self, template: str) -> None:
        with self._lock:
            self._tok.chat_template = template


#: transformers' lazy module is not safe to import from several threads at once: all but
#: one fail with "cannot import name 'AutoTokenizer'" (seen with 5.24), so the first
#: import is serialised (renderers are built on the registry's threads)
_IMPORT_LOCK = threading.Lock()


def _auto_tokenizer() -> Any:
    try:
        with _IMPORT_LOCK:
            from transformers import AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(f"rendering token ids needs transformers; {INSTALL_HINT}") from exc
    return AutoTokenizer


def load_tokenizer(path: Path, *, chat_template: str | None = None) -> HFTokenizer:
    """Load the tokenizer directory ``path`` offline; ``chat_template`` overrides its own.

    >>> load_tokenizer(Path("/models/qwen3")).has_chat_template  # doctest: +SKIP
    True
    """
    if not path.is_dir():
        raise ConfigError(f"tokenizer directory {path} does not exist")
    auto = _auto_tokenizer()
    try:
        tokenizer = auto.from_pretrained(str(path), local_files_only=True)
    except _LOAD_ERRORS as exc:
        raise ConfigError(f"cannot load the tokenizer in {path}: {exc}") from exc
    loaded = HFTokenizer(tokenizer, path)
    if chat_template is not None:
        loaded.set_chat_template(chat_template)
    if not loaded.has_chat_template:
        raise ConfigError(f"the tokenizer in {path} has no chat template; pass chat_template")
    return loaded


def load_gguf(gguf: Path) -> HFTokenizer:
    """The vocabulary of the GGUF file ``gguf`` as a fast tokenizer (slow: reads the file).

    transformers reads GGUF metadata with the ``gguf`` package and needs torch to do so.
    """
    if not gguf.is_file():
        raise ConfigError(f"GGUF file {gguf} does not exist")
    missing = [name for name in ("torch", "gguf") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError.for_extra("gguf", ", ".join(missing))
    auto = _auto_tokenizer()
    try:
        tokenizer = auto.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, local_files_only=True
        )
    except (*_LOAD_ERRORS, ImportError) as exc:
        raise ConfigError(f"cannot read the vocabulary of {gguf}: {exc}") from exc
    return HFTokenizer(tokenizer, gguf)
