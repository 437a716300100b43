"""Per-rollout token state: the last prompt and what was sampled from it.

The token client keeps one :class:`TokenTurns` per rollout so that each turn's prompt
extends the previous one with the exact sampled ids (see
:meth:`~rolltap.tokens.renderer.Renderer.render_messages_delta`); a rollout whose calls
overlap, or whose harness rewrote history, gets full renders, each recorded as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.renderer import RenderedPrompt

__all__ = ["TokenTurns"]


@dataclass(slots=True)
class TokenTurns:
    previous: RenderedPrompt | None = None
    completion_ids: tuple[int, ...] = ()

    async def render(
        self,
        renderer: RendererHandle,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> RenderedPrompt:
        """This turn's prompt: an extension of the last one when the conversation is."""
        if self.previous is None:
            return await renderer.render_conversation(messages, tools)
        return await renderer.render_messages_delta(
            self.previous, self.completion_ids, messages, tools
        )

    def sampled(self, prompt: RenderedPrompt, completion_ids: Sequence[int]) -> None:
        """Remember what was sampled from ``prompt``, for the next turn to extend."""
        self.previous, self.completion_ids = prompt, tuple(completion_ids)
