"""An acquired renderer: async wrappers that run each render on the registry's threads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, Protocol, TypeVar

from rolltap.errors import RendererPoolClosedError
from rolltap.tokens.renderer import Messages, RenderedPrompt, Renderer, Tools

__all__ = ["RendererHandle", "Runner"]

P = ParamSpec("P")
T = TypeVar("T")


class Runner(Protocol):
    """Runs a blocking call off the event loop (the registry's :meth:`run`)."""

    def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]:
        """Await ``fn(*args, **kwargs)`` run on a worker thread."""
        ...


class RendererHandle:
    """What ``async with pool.acquire() as renderer`` yields; valid inside that block only.

    Every method runs the blocking render on the registry's threads, so the event loop
    never waits on a tokenizer or a Jinja template.

    >>> async with pool.acquire() as renderer:  # doctest: +SKIP
    ...     first = await renderer.render_conversation(messages, tools)
    ...     nxt = await renderer.render_messages_delta(first, sampled_ids, messages_now, tools)
    """

    __slots__ = ("_released", "_renderer", "_run")

    def __init__(self, renderer: Renderer, run: Runner) -> None:
        self._renderer = renderer
        self._run = run
        self._released = False

    @property
    def renderer(self) -> Renderer:
        """The underlying (blocking) renderer, for callers already off the event loop."""
        self._check()
        return self._renderer

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._renderer.eos_token_ids

    def release(self) -> None:
        """Mark the handle spent (the pool calls this when the acquire block ends)."""
        self._released = True

    async def render_prompt(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> list[int]:  # fmt: skip
        """:meth:`Renderer.render_prompt`, off the loop."""
        self._check()
        return await self._run(
            self._renderer.render_prompt, messages, tools,
            add_generation_prompt=add_generation_prompt, **template_kwargs,
        )  # fmt: skip

    async def render_text(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:  # fmt: skip
        """:meth:`Renderer.render_text`, off the loop."""
        self._check()
        return await self._run(
            self._renderer.render_text, messages, tools,
            add_generation_prompt=add_generation_prompt, **template_kwargs,
        )  # fmt: skip

    async def render_conversation(
        self, messages: Messages, tools: Tools = None, *, add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> RenderedPrompt:  # fmt: skip
        """:meth:`Renderer.render_conversation`, off the loop."""
        self._check()
        return await self._run(
            self._renderer.render_conversation, messages, tools,
            add_generation_prompt=add_generation_prompt, **template_kwargs,
        )  # fmt: skip

    async def render_messages_delta(
        self,
        previous: RenderedPrompt,
        completion_ids: Sequence[int],
        messages: Messages,
        tools: Tools = None,
        **template_kwargs: Any,
    ) -> RenderedPrompt:
        """:meth:`Renderer.render_messages_delta`, off the loop."""
        self._check()
        return await self._run(
            self._renderer.render_messages_delta,
            previous, completion_ids, messages, tools, **template_kwargs,
        )  # fmt: skip

    async def encode(self, text: str) -> list[int]:
        """:meth:`Renderer.encode`, off the loop."""
        self._check()
        return await self._run(self._renderer.encode, text)

    async def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """:meth:`Renderer.decode`, off the loop."""
        self._check()
        return await self._run(self._renderer.decode, ids, skip_special_tokens=skip_special_tokens)

    def _check(self) -> None:
        if self._released:
            raise RendererPoolClosedError("renderer handle used after its acquire block ended")

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<RendererHandle {self._renderer.source} {state}>"
