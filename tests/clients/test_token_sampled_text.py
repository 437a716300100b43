"""What the token client's parsers read: the sampled ids decoded with special tokens kept,
less the end-of-turn id the model stopped on (servers' text drops special tokens)."""

from __future__ import annotations

from pathlib import Path

from gateway.simtok import build_sim_tokenizer
from rolltap.clients.completions import Completion
from rolltap.clients.token_upstream import sampled_text
from rolltap.dialects.canonical import Usage
from rolltap.tokens import RendererConfig, RendererRegistry


def _completion(ids: list[int], text: str | None) -> Completion:
    return Completion("c", "m", text, tuple(ids), None, "end_turn", Usage(0, 0))


async def test_special_tokens_are_kept_and_the_final_eos_dropped(tmp_path: Path) -> None:
    tok = build_sim_tokenizer(tmp_path / "tok")
    registry = RendererRegistry()
    async with registry, registry.shared(RendererConfig(str(tok))).acquire() as renderer:
        ids = list(await renderer.encode("a<|im_start|>b<|im_end|>c<|im_end|>"))
        server = _completion(ids, "abc")  # the server's text: special tokens skipped
        assert await sampled_text(renderer, server) == "a<|im_start|>b<|im_end|>c"
        no_text = _completion(ids, None)  # /generate sends no text at all
        assert await sampled_text(renderer, no_text) == "a<|im_start|>b<|im_end|>c"
        cut = _completion(ids[:-1], "abc")  # cut short: no end-of-turn id to drop
        assert await sampled_text(renderer, cut) == "a<|im_start|>b<|im_end|>c"
        assert await sampled_text(renderer, _completion([], "")) == ""
