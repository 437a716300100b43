"""Gemma 3 270M's vocabulary read from its GGUF agrees with the real llama-server's."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest

from rolltap.errors import ConfigError
from rolltap.local import LocalModel
from rolltap.local.model import gguf_path, server_binary
from rolltap.tokens import Renderer, load_gguf_tokenizer
from rolltap.tokens.gguf import STAMP_NAME

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]

TEXTS = [
    "1, 2, 3, 4, 5,",
    "Monday, Tuesday, Wednesday,",
    " a b c d e f",
    "héllo wörld — 東京 😀\n\n\tindented  twice",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    '{"name": "add", "arguments": {"a": 1}}',
]


def _skip_or_fail(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)  # CI installs all of it: an absence is a failure, not a skip
    pytest.skip(reason)


def _require_gguf_stack() -> Path:
    try:
        server_binary()
        path = gguf_path()
    except ConfigError as exc:
        _skip_or_fail(f"the 'local' extra is not installed: {exc.message}")
    missing = [n for n in ("transformers", "torch", "gguf") if importlib.util.find_spec(n) is None]
    if missing:
        _skip_or_fail(
            f"reading the GGUF vocabulary needs {', '.join(missing)}"
            " (the 'tokens' extra, torch and gguf)"
        )
    return path


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load_gguf_tokenizer(_require_gguf_stack(), tmp_path_factory.mktemp("gemma") / "tok")


@pytest.fixture(scope="module")
def gemma(gemma_dir: Path) -> Renderer:
    return Renderer.from_pretrained(gemma_dir, eos_tokens=["<end_of_turn>"])


@pytest.fixture
async def server(gemma_dir: Path) -> AsyncIterator[tuple[LocalModel, aiohttp.ClientSession]]:
    async with LocalModel(parallel=1) as model, aiohttp.ClientSession() as session:
        yield model, session


async def _post(server: tuple[LocalModel, aiohttp.ClientSession], path: str, body: Any) -> Any:
    model, session = server
    async with session.post(model.url + path, json=body) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_token_ids_agree_with_llama_server(
    gemma: Renderer, server: tuple[LocalModel, aiohttp.ClientSession]
) -> None:
    for text in TEXTS:
        theirs = await _post(server, "/tokenize", {"content": text, "add_special": False})
        assert gemma.encode(text) == theirs["tokens"], text
        assert gemma.decode(theirs["tokens"]) == text


async def test_rendered_prompt_agrees_with_llama_servers_template(
    gemma: Renderer, server: tuple[LocalModel, aiohttp.ClientSession]
) -> None:
    messages = [
        {"role": "user", "content": "1, 2, 3,"},
        {"role": "assistant", "content": " 4, 5,"},
        {"role": "user", "content": " 6,"},
    ]
    rendered = await _post(server, "/apply-template", {"messages": messages})
    # llama-server leaves BOS out of the text and adds it when tokenizing
    theirs = await _post(server, "/tokenize", {"content": rendered["prompt"], "add_special": True})
    assert gemma.render_prompt(messages) == theirs["tokens"]
    assert gemma.eos_token_ids == tuple(gemma.encode("<eos><end_of_turn>"))


def test_the_tokenizer_directory_is_cached(gemma_dir: Path) -> None:
    stamp = (gemma_dir / STAMP_NAME).stat().st_mtime_ns
    assert load_gguf_tokenizer(gguf_path(), gemma_dir) == gemma_dir  # no rebuild
    assert (gemma_dir / STAMP_NAME).stat().st_mtime_ns == stamp
    assert {"tokenizer.json", "tokenizer_config.json"} <= {p.name for p in gemma_dir.iterdir()}
