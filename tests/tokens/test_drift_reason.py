"""Why a prompt drifted, as the token client tells it (:func:`rolltap.tokens.turns.drift_reason`)
with a real BPE tokenizer: the same text in other ids, dropped reasoning, edited history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from rolltap.tokens import RenderedPrompt, Renderer
from rolltap.tokens.drift import TurnHistory
from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.turns import TokenTurns, drift_reason
from tokens.tokkit import build_tokenizer_dir

USER = {"role": "user", "content": "What is the sum of these numbers?"}


@pytest.fixture(scope="module")
def renderer(tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    return Renderer.from_pretrained(build_tokenizer_dir(tmp_path_factory.mktemp("tok")))


async def _inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)  # the pool's threads are not what is tested here


def _handle(renderer: Renderer) -> RendererHandle:
    return RendererHandle(renderer, _inline)


def _spelled(renderer: Renderer, text: str) -> list[int]:
    """Ids of ``text`` one character at a time: what a model may sample, other ids than
    the tokenizer's merges make of the same text."""
    return [i for ch in text for i in renderer.encode(ch)]


async def _reason(renderer: Renderer, history: TurnHistory, prompt: RenderedPrompt) -> Any:
    drift = history.check(prompt.ids)
    assert drift is not None
    return drift, await drift_reason(_handle(renderer), history, drift, prompt)


async def test_the_same_text_in_other_ids_is_retokenized(renderer: Renderer) -> None:
    first = renderer.render_conversation([USER])
    sampled = [*_spelled(renderer, "The total is 55."), *renderer.encode("<|im_end|>")]
    assert renderer.encode("The total is 55.") != sampled[:-1]  # merges spell it shorter
    history = TurnHistory()
    history.sampled(first.ids, sampled)
    again = [USER, {"role": "assistant", "content": "The total is 55."}, USER]
    prompt = renderer.render_conversation(again)  # in full: the tokenizer's own ids
    drift, reason = await _reason(renderer, history, prompt)
    assert reason == "retokenized"
    assert drift.at == len(first.ids) + _common(sampled, list(prompt.ids[len(first.ids) :]))


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while a[n] == b[n]:
        n += 1
    return n


async def test_other_text_is_a_rewrite_only_when_the_renderer_saw_one(renderer: Renderer) -> None:
    first = renderer.render_conversation([USER])
    history = TurnHistory()
    history.sampled(first.ids, renderer.encode("Hello world!<|im_end|>"))
    edited = [{"role": "user", "content": "What is the sum?"},
              {"role": "assistant", "content": "Hello world!"}, USER]  # fmt: skip
    prompt = renderer.render_conversation(edited)
    _, reason = await _reason(renderer, history, prompt)
    assert reason is None  # a full render for no stated reason: unknown
    _, reason = await _reason(renderer, history, replace(prompt, reason="history_rewritten"))
    assert reason == "history_rewritten"


async def test_a_template_dropping_old_reasoning_keeps_the_sampled_reasoning(
    renderer: Renderer,
) -> None:
    # tokkit's template renders reasoning for the last assistant message only
    turns, handle = TokenTurns(), _handle(renderer)
    first, drift = await turns.render(handle, [USER], None)
    assert drift is None
    sampled = renderer.encode("<think>add them</think>\nThe total is 55.<|im_end|>")
    turns.sampled(first, sampled, reasoning=["add them"])
    reply = {"role": "assistant", "content": "The total is 55.", "reasoning_content": "add them"}
    prompt, drift = await turns.render(handle, [USER, reply, USER], None)
    # the template would drop it; the sequence keeps what was sampled, as the model saw it
    assert (prompt.extended, prompt.reason, drift) == (True, None, None)
    assert prompt.ids[: len(first.ids) + len(sampled)] == (*first.ids, *sampled)
    assert "add them" in renderer.decode(prompt.ids)
    # and after the reply, exactly the user turn's own text with the generation prompt
    tail = renderer.render_text([USER, reply, USER])[len(renderer.render_text([USER, reply])) :]
    assert renderer.decode(prompt.new_ids).endswith(tail)


async def test_a_full_render_dropping_old_reasoning_is_reasoning_dropped(
    renderer: Renderer,
) -> None:
    first = renderer.render_conversation([USER])
    history = TurnHistory()
    sampled = renderer.encode("<think>add them</think>\nThe total is 55.<|im_end|>")
    history.sampled(first.ids, sampled, reasoning=["add them"])
    reply = {"role": "assistant", "content": "The total is 55.", "reasoning_content": "add them"}
    full = replace(
        renderer.render_conversation([USER, reply, USER]), reason="template_not_incremental"
    )
    drift, reason = await _reason(renderer, history, full)
    assert reason == "reasoning_dropped"
    assert drift.at == len(first.ids)  # where <think> was sampled


async def test_a_sample_recorded_while_rendering_is_not_what_the_prompt_is_checked_against(
    renderer: Renderer,
) -> None:
    entered, go = asyncio.Event(), asyncio.Event()

    async def gated(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == "render_messages_delta":
            entered.set()
            await go.wait()
        return fn(*args, **kwargs)

    turns, handle = TokenTurns(), RendererHandle(renderer, gated)
    first, _ = await turns.render(handle, [USER], None)
    turns.sampled(first, renderer.encode("Hello world!<|im_end|>"))
    edited = [{"role": "user", "content": "What is the sum?"},
              {"role": "assistant", "content": "Hello world!"}, USER]  # fmt: skip
    async with asyncio.TaskGroup() as group:
        rendering = group.create_task(turns.render(handle, edited, None))
        await entered.wait()
        # an overlapping call of the rollout answers meanwhile, from another prompt
        turns.sampled(replace(first, ids=(7, 7, 7)), [7])
        go.set()
    prompt, drift = rendering.result()
    assert prompt.reason == "history_rewritten" and drift is not None
    # judged against the prompt + sample it was rendered from, not the one recorded since
    assert drift.at == _common(list(first.ids), list(prompt.ids)) > 0
    assert drift.expected[:2] == first.ids[drift.at - 4 : drift.at - 2]
