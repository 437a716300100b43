"""Renderer: loading a real tokenizer directory, rendering, encoding, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rolltap.errors import ConfigError, TokenizerError
from rolltap.tokens import Renderer, RendererConfig, load_gguf_tokenizer
from tokens.tokkit import build_tokenizer_dir, write_generation_config

USER = [{"role": "user", "content": "Hello world!"}]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def renderer(tok_dir: Path) -> Renderer:
    return Renderer.from_pretrained(tok_dir)


def test_render_prompt_is_the_template_text_tokenized(renderer: Renderer) -> None:
    text = renderer.render_text(USER)
    assert text == "<|im_start|>user\nHello world!<|im_end|>\n<|im_start|>assistant\n"
    ids = renderer.render_prompt(USER)
    assert ids == renderer.encode(text)
    assert renderer.decode(ids) == text
    start, end = renderer.encode("<|im_start|>")[0], renderer.encode("<|im_end|>")[0]
    assert ids.count(start) == 2 and ids.count(end) == 1  # special tokens kept whole


def test_without_generation_prompt(renderer: Renderer) -> None:
    assert not renderer.render_text(USER, add_generation_prompt=False).endswith("assistant\n")


def test_tools_reach_the_template(renderer: Renderer) -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    assert '"name": "add"' in renderer.render_text(USER, tools)


def test_eos_token_ids(renderer: Renderer) -> None:
    assert renderer.eos_token_ids == tuple(renderer.encode("<|im_end|>"))


def test_eos_tokens_and_generation_config(tmp_path: Path) -> None:
    build_tokenizer_dir(tmp_path)
    write_generation_config(tmp_path, [2, 0])
    renderer = Renderer.from_pretrained(tmp_path, eos_tokens=["<|im_start|>"])
    im_end, endoftext, im_start = (
        renderer.encode(t)[0] for t in ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
    )
    assert renderer.eos_token_ids == (im_end, endoftext, im_start)
    with pytest.raises(ConfigError, match="not in the vocabulary"):
        Renderer.from_pretrained(tmp_path, eos_tokens=["<nope>"])


def test_template_kwargs_from_config_and_call(tok_dir: Path) -> None:
    config = RendererConfig(tok_dir, template_kwargs={"enable_thinking": False})
    renderer = Renderer.from_config(config)
    assert renderer.render_text(USER).endswith("<think>\n\n</think>\n\n")
    assert renderer.render_text(USER, enable_thinking=True).endswith("assistant\n")


def test_chat_template_override(tok_dir: Path) -> None:
    renderer = Renderer.from_pretrained(tok_dir, chat_template="{{ messages[0].content }}")
    assert renderer.render_text(USER) == "Hello world!"


@pytest.mark.parametrize("key", ["tokenize", "padding", "return_dict"])
def test_reserved_template_kwargs_are_refused(renderer: Renderer, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        renderer.render_text(USER, None, **{key: True})
    with pytest.raises(ConfigError, match=key):
        RendererConfig("/x", template_kwargs={key: True})


def test_template_exception_is_a_tokenizer_error(renderer: Renderer) -> None:
    with pytest.raises(TokenizerError, match="unknown role narrator") as info:
        renderer.render_text([{"role": "narrator", "content": "x"}])
    assert (info.value.code, info.value.status) == ("tokenizer_error", 400)


def test_missing_directory_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match=str(missing)):
        Renderer.from_pretrained(missing)


def test_invalid_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("garbage")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ConfigError, match=str(tmp_path)):
        Renderer.from_pretrained(tmp_path)


def test_no_chat_template_is_a_config_error(tmp_path: Path) -> None:
    build_tokenizer_dir(tmp_path, template=None)
    with pytest.raises(ConfigError, match="no chat template"):
        Renderer.from_pretrained(tmp_path)


def test_config_validation_and_key(tok_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multiplex"):
        RendererConfig(tok_dir, multiplex=0)
    with pytest.raises(ConfigError, match="JSON"):
        RendererConfig(tok_dir, template_kwargs={"x": object()})
    base = RendererConfig(tok_dir)
    assert base.pool_key() == RendererConfig(str(tok_dir), multiplex=3).pool_key()
    assert base.pool_key() != RendererConfig(tok_dir, template_kwargs={"a": 1}).pool_key()
    assert base.pool_key() != RendererConfig(tok_dir, chat_template="x").pool_key()
    shutil.copytree(tok_dir, tmp_path / "copy")
    assert base.pool_key() != RendererConfig(tmp_path / "copy").pool_key()


def test_a_missing_gguf_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=str(tmp_path / "none.gguf")):
        load_gguf_tokenizer(tmp_path / "none.gguf", tmp_path / "out")
