"""What the token client's parsers read: the sampled ids decoded with special tokens kept,
less the end-of-turn id the model stopped on (servers' text drops special tokens)."""

from __future__ import annotations

from pathlib import Path

from gateway.simtok import build_sim_tokenizer
from rolltap.clients.completions import Completion
from rolltap.clients.token_upstream import _sampled_text
from rolltap.dialects.canonical import Usage
from rolltap.tokens import Renderer


def _completion(ids: list[int], text: str) -> Completion:
    return Completion("c", "m", text, tuple(ids), None, "end_turn", Usage(0, 0))


def test_special_tokens_are_kept_and_the_final_eos_dropped(tmp_path: Path) -> None:
    renderer = Renderer.from_pretrained(build_sim_tokenizer(tmp_path / "tok"))
    ids = renderer.encode("a<|im_start|>b<|im_end|>c<|im_end|>")
    # the server's text (special tokens skipped) is what a decoder-less upstream reads
    server = _completion(ids, "abc")
    assert _sampled_text(renderer, server) == "a<|im_start|>b<|im_end|>c"
    assert _sampled_text(None, server) == "abc"
    cut = _completion(ids[:-1], "abc")  # cut short: no end-of-turn id to drop
    assert _sampled_text(renderer, cut) == "a<|im_start|>b<|im_end|>c"
    assert _sampled_text(renderer, _completion([], "")) == ""
