"""A Hugging Face tokenizer directory built from a GGUF file's vocabulary, cached on disk.

The built-in local model (Gemma 3 270M) ships only as a GGUF file. transformers can read
a GGUF's vocabulary (``AutoTokenizer.from_pretrained(dir, gguf_file=name)``, which needs
the ``gguf`` package and torch) but that takes about 20 s, so the result is saved once as
an ordinary tokenizer directory, with the chat template the local server is started
with, and later loads (a :class:`Renderer` on it) take the normal path.

>>> from rolltap.local.model import gguf_path
>>> directory = load_gguf_tokenizer(gguf_path(), Path("/tmp/gemma-tok"))  # doctest: +SKIP
>>> renderer = Renderer.from_pretrained(directory)  # doctest: +SKIP
>>> renderer.render_prompt([{"role": "user", "content": "1, 2,"}])  # doctest: +SKIP
[2, 236770, 236764, 236743, 236778, 236764]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path

from rolltap.errors import ConfigError
from rolltap.tokens._hf import load_gguf

__all__ = ["STAMP_NAME", "default_cache_dir", "load_gguf_tokenizer", "local_chat_template"]

#: written last into a built directory: what it was built from, to tell when it is stale
STAMP_NAME = "rolltap-gguf.json"


def local_chat_template() -> str:
    """The chat template rolltap starts ``llama-server`` with (message contents concatenated)."""
    return files("rolltap.local").joinpath("templates/plain.jinja").read_text(encoding="utf-8")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rolltap/tokenizers`` (``~/.cache/...`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rolltap" / "tokenizers"


def load_gguf_tokenizer(
    gguf_path: Path, out_dir: Path | None = None, *, chat_template: str | None = None
) -> Path:
    """Build (once) a tokenizer directory for ``gguf_path`` at ``out_dir`` and return it.

    ``out_dir`` defaults to a folder named after the file under :func:`default_cache_dir`;
    ``chat_template`` to :func:`local_chat_template`. A directory whose stamp matches the
    file (path, size, modification time) and the template is reused as it is; otherwise
    it is rebuilt in a temporary sibling and moved into place, so a reader never sees a
    half-written one. Raises :class:`ConfigError` when the file is missing or torch/gguf
    are not installed.
    """
    gguf_path = Path(gguf_path).expanduser().resolve()
    template = local_chat_template() if chat_template is None else chat_template
    target = Path(out_dir) if out_dir is not None else default_cache_dir() / gguf_path.stem
    stamp = _stamp(gguf_path, template)
    if _read_stamp(target) == stamp:
        return target
    tokenizer = load_gguf(gguf_path)
    tokenizer.set_chat_template(template)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tokenizer.save(staging)
        (staging / STAMP_NAME).write_text(json.dumps(stamp, sort_keys=True), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already unless something failed
    return target


def _stamp(gguf_path: Path, template: str) -> dict[str, object]:
    try:
        info = gguf_path.stat()
    except OSError as exc:
        raise ConfigError(f"GGUF file {gguf_path} is not readable: {exc}") from exc
    return {
        "source": str(gguf_path),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
    }


def _read_stamp(directory: Path) -> object:
    try:
        return json.loads((directory / STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no directory yet, or a stale/corrupt one: rebuild it
