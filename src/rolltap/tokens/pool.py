"""Elastic renderer pools, shared per build inputs, owned by a registry.

A :class:`RendererRegistry` (one per process by default) holds one
:class:`RendererPool` per :meth:`RendererConfig.pool_key`. A pool grows by one renderer
per ``multiplex`` concurrent acquirers: every acquirer is placed on the least-loaded
renderer that has room (ties: the oldest), and only when none has room is another one
built. Renderers are never shrunk away: an idle tokenizer costs memory, not work.

Structured concurrency: every build runs as a task of the TaskGroup that the registry
enters in ``__aenter__``, and every render runs on the registry's own thread pool. An
acquirer only waits on an event, so cancelling it never cancels a build others share.
A build that fails with a :class:`RolltapError` is reported to the acquirers waiting
on it and not cached (the next acquirer builds anew); any other exception is a bug and,
as TaskGroup semantics have it, fails the registry's owner.

>>> async def main() -> None:  # doctest: +SKIP
...     async with RendererRegistry.default() as registry:
...         pool = registry.shared(RendererConfig("/models/qwen3"))  # returns at once
...         async with pool.acquire() as renderer:
...             ids = await renderer.render_prompt([{"role": "user", "content": "hi"}])
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, ParamSpec, Self, TypeVar

from rolltap.errors import ConfigError, RendererPoolClosedError, RolltapError
from rolltap.tokens.config import RendererConfig
from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.renderer import Renderer

__all__ = [
    "BuildRenderer",
    "RendererPool",
    "RendererPoolSnapshot",
    "RendererRegistry",
]

P = ParamSpec("P")
T = TypeVar("T")
BuildRenderer = Callable[[RendererConfig], Awaitable[Renderer]]
"""Builds one renderer; the default loads ``Renderer.from_config`` on the registry's threads."""


@dataclass(frozen=True, slots=True)
class RendererPoolSnapshot:
    """Counts describing one pool: renderers (built or building), their loads in order."""

    renderers: int
    ready: int
    building: int
    loads: tuple[int, ...]
    multiplex: int


class _Slot:
    """One renderer of a pool, built once; ``load`` counts acquirers placed on it."""

    __slots__ = ("done", "error", "load", "renderer")

    def __init__(self) -> None:
        self.load = 0
        self.done = asyncio.Event()
        self.renderer: Renderer | None = None
        self.error: RolltapError | None = None


class RendererPool:
    """Renderers built from one config, grown per ``multiplex`` concurrent acquirers.

    Get one from :meth:`RendererRegistry.shared`, never by hand.

    >>> async with pool.acquire() as renderer:  # doctest: +SKIP
    ...     prompt = await renderer.render_conversation(messages, tools)
    """

    def __init__(self, config: RendererConfig, registry: RendererRegistry) -> None:
        self._config = config
        self._registry = registry
        self._slots: list[_Slot] = []

    @property
    def config(self) -> RendererConfig:
        """The config the pool was created with (its ``multiplex`` is the pool's policy)."""
        return self._config

    @property
    def multiplex(self) -> int:
        return self._config.multiplex

    def loads(self) -> list[int]:
        """Acquirers per renderer, oldest renderer first."""
        return [slot.load for slot in self._slots]

    def snapshot(self) -> RendererPoolSnapshot:
        ready = sum(slot.renderer is not None for slot in self._slots)
        return RendererPoolSnapshot(
            renderers=len(self._slots),
            ready=ready,
            building=len(self._slots) - ready,
            loads=tuple(self.loads()),
            multiplex=self.multiplex,
        )

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[RendererHandle]:
        """Hold a renderer for one turn; waits for it to be built if need be.

        Raises the build's :class:`RolltapError` if it failed, and
        :class:`RendererPoolClosedError` when the registry closes first.
        """
        slot = self._place()
        slot.load += 1
        try:
            await slot.done.wait()
            if slot.renderer is None:
                raise slot.error or RendererPoolClosedError("renderer registry closed")
            handle = RendererHandle(slot.renderer, self._registry.run)
            try:
                yield handle
            finally:
                handle.release()
        finally:
            slot.load -= 1

    async def ready(self) -> None:
        """Return once a renderer is built (starting the first build if none is under way);
        raises that build's error. Lets an owner admit work only when it can render."""
        self.warm()
        slot = self._slots[0]
        await slot.done.wait()
        if slot.renderer is None:
            raise slot.error or RendererPoolClosedError("renderer registry closed")

    def warm(self) -> None:
        """Build the first renderer in the background if the pool has none."""
        if not self._slots:
            self._grow()

    def _place(self) -> _Slot:
        self._registry.check_open()
        roomy = [slot for slot in self._slots if slot.load < self.multiplex]
        if roomy:
            return min(roomy, key=lambda slot: slot.load)  # min keeps the oldest on ties
        return self._grow()

    def _grow(self) -> _Slot:
        slot = _Slot()
        self._slots.append(slot)
        self._registry.spawn(self._build(slot), name=f"rolltap.tokens.build#{len(self._slots)}")
        return slot

    async def _build(self, slot: _Slot) -> None:
        try:
            slot.renderer = await self._registry.build(self._config)
        except RolltapError as exc:
            slot.error = exc
            self._slots.remove(slot)  # not cached: the next acquirer builds anew
        finally:
            slot.done.set()  # on cancellation too: waiters wake and see the registry closed

    def __repr__(self) -> str:
        return f"<RendererPool {self._config.path} loads={self.loads()}>"


class RendererRegistry:
    """Renderer pools by build inputs, the tasks that build them, the threads that render.

    Enter it (``async with``) before use: its TaskGroup lives in the entering task.
    ``aclose()`` is idempotent: it cancels builds in progress, and renders already
    running finish on their threads; later ``shared()`` and acquires raise
    :class:`RendererPoolClosedError`.

    >>> async with RendererRegistry() as registry:  # doctest: +SKIP
    ...     pool = registry.shared(RendererConfig("/models/qwen3", multiplex=64))
    """

    _default: ClassVar[RendererRegistry | None] = None

    def __init__(self, *, build: BuildRenderer | None = None, max_threads: int | None = None):
        if max_threads is not None and max_threads < 1:
            raise ConfigError(f"max_threads must be positive, got {max_threads!r}")
        self._build = build
        self._max_threads = max_threads
        self._pools: dict[str, RendererPool] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._group: asyncio.TaskGroup | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    @classmethod
    def default(cls) -> RendererRegistry:
        """The process's registry; a fresh one once the last was closed."""
        if cls._default is None or cls._default._closed:
            cls._default = cls()
        return cls._default

    @property
    def closed(self) -> bool:
        return self._closed

    def shared(self, config: RendererConfig) -> RendererPool:
        """The pool for ``config``'s build inputs; returns at once, warming in the background.

        Configs that differ only in ``multiplex`` get the same pool (the first one's
        ``multiplex`` wins).

        >>> pool = registry.shared(RendererConfig("/models/qwen3", multiplex=32))  # doctest: +SKIP
        >>> registry.shared(RendererConfig("/models/qwen3")) is pool  # doctest: +SKIP
        True
        """
        self.check_open()
        key = config.pool_key()
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = RendererPool(config, self)
        pool.warm()
        return pool

    def pools(self) -> list[RendererPool]:
        return list(self._pools.values())

    async def __aenter__(self) -> Self:
        if self._group is not None or self._closed:
            raise ConfigError("a renderer registry is entered once")
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self._executor = ThreadPoolExecutor(self._max_threads, thread_name_prefix="rolltap-render")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        if self._group is not None:
            # Every build task is finished now. The body's own exception is not handed to
            # the group, which would wrap it in an ExceptionGroup; a build that failed
            # with a bug still surfaces here, as the group's ExceptionGroup.
            await self._group.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Cancel builds in progress and stop admitting work (idempotent)."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        if self._executor is not None:
            # wait=False: running renders finish on their own; nothing on the loop blocks
            self._executor.shutdown(wait=False)

    # -- used by pools and handles -------------------------------------------------------

    def check_open(self) -> None:
        if self._closed:
            raise RendererPoolClosedError("renderer registry is closed")
        if self._group is None:
            raise RendererPoolClosedError("renderer registry is not open: enter it with async with")

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> None:
        assert self._group is not None  # check_open() ran first
        task = self._group.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def build(self, config: RendererConfig) -> Renderer:
        if self._build is not None:
            return await self._build(config)
        return await self.run(Renderer.from_config, config)

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on the registry's threads (renders block: tokenizers, Jinja)."""
        self.check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
