"""Per-rollout token state: the last prompt and what was sampled from it.

The token client keeps one :class:`TokenTurns` per rollout so that each turn's prompt
extends the previous one with the exact sampled ids (see
:meth:`~rolltap.tokens.renderer.Renderer.render_messages_delta`); a rollout whose calls
overlap, or whose harness rewrote history, gets full renders, each recorded as such.
A full render that does not start with the previous prompt + completion has drifted
(:mod:`rolltap.tokens.drift`): :meth:`TokenTurns.render` says where, and why when the
ids tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rolltap.tokens.drift import Drift, DriftReason, TurnHistory
from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.renderer import RenderedPrompt

__all__ = ["TokenTurns", "drift_reason"]


@dataclass(slots=True)
class TokenTurns:
    previous: RenderedPrompt | None = None
    #: the previous prompt's ids + the completion sampled from them, for the drift check
    history: TurnHistory = field(default_factory=TurnHistory)

    @property
    def completion_ids(self) -> Sequence[int]:
        """What was sampled from :attr:`previous`."""
        return self.history.completion

    async def render(
        self,
        renderer: RendererHandle,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> tuple[RenderedPrompt, Drift | None]:
        """This turn's prompt (an extension of the last one when the conversation is),
        and its drift from the last prompt + completion, if it has drifted."""
        if self.previous is None:
            return await renderer.render_conversation(messages, tools), None
        # what this prompt is rendered against, kept through the awaits: an overlapping
        # call of the rollout may record its own sample meanwhile
        history = self.history.snapshot()
        prompt = await renderer.render_messages_delta(
            self.previous, history.completion, messages, tools
        )
        if prompt.extended:
            return prompt, None  # previous ids + sampled ids + new ids, by construction
        drift = history.check(prompt.ids)
        if drift is None:
            return prompt, None
        return prompt, drift.with_reason(await drift_reason(renderer, history, drift, prompt))

    def sampled(
        self, prompt: RenderedPrompt, completion_ids: Sequence[int], *,
        reasoning: Sequence[str] = (),
    ) -> None:  # fmt: skip
        """Remember what was sampled from ``prompt`` (and the reasoning the parser read
        from it), for the next turn to extend."""
        self.previous = prompt
        self.history.sampled(prompt.ids, completion_ids, reasoning=reasoning)


async def drift_reason(
    renderer: RendererHandle, history: TurnHistory, drift: Drift, prompt: RenderedPrompt
) -> DriftReason | None:
    """Why ``prompt`` drifted from ``history``, decoding both (only a drift pays for it):
    a reasoning-bearing completion whose reasoning the new prompt lacks; the same text in
    other ids; the harness's messages changed; else unknown."""
    span = history.span_at(drift.at)
    if span is not None:
        after = await renderer.decode(prompt.ids[span.start :], skip_special_tokens=False)
        if span.missing_from(after):
            return "reasoning_dropped"
    expected_text = await renderer.decode(history.expected, skip_special_tokens=False)
    got_text = await renderer.decode(prompt.ids, skip_special_tokens=False)
    if got_text.startswith(expected_text):
        return "retokenized"
    if prompt.reason in ("history_rewritten", "reply_missing"):
        return "history_rewritten"
    return None
