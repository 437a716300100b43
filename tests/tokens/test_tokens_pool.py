"""The elastic renderer pool: background warm-up, growth per multiplex, sharing, shutdown."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rolltap.errors import ConfigError, RendererPoolClosedError
from rolltap.tokens import (
    Renderer,
    RendererConfig,
    RendererHandle,
    RendererPool,
    RendererRegistry,
)
from tokens.tokkit import build_tokenizer_dir

USER = [{"role": "user", "content": "Hello world!"}]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def loaded(tok_dir: Path) -> Renderer:
    return Renderer.from_pretrained(tok_dir)


class Builder:
    """A build hook: counts builds; when gated, each build waits for ``gate``."""

    def __init__(self, renderer: Renderer, *, gated: bool = False) -> None:
        self.renderer = renderer
        self.calls = 0
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, config: RendererConfig) -> Renderer:
        self.calls += 1
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return copy.copy(self.renderer)  # one object per build, sharing the tokenizer


@asynccontextmanager
async def holding(pool: RendererPool, count: int) -> AsyncIterator[list[RendererHandle]]:
    """``count`` concurrent acquirers that hold on until the block ends."""
    all_in, release, handles = asyncio.Event(), asyncio.Event(), list[RendererHandle]()

    async def hold() -> None:
        async with pool.acquire() as handle:
            handles.append(handle)
            if len(handles) == count:
                all_in.set()
            await release.wait()

    async with asyncio.TaskGroup() as group:
        for _ in range(count):
            group.create_task(hold())
        await all_in.wait()
        try:
            yield handles
        finally:
            release.set()


def distinct(handles: list[RendererHandle]) -> int:
    return len({id(handle.renderer) for handle in handles})


async def test_shared_returns_before_the_first_renderer_is_built(
    loaded: Renderer, tok_dir: Path
) -> None:
    build = Builder(loaded, gated=True)
    async with RendererRegistry(build=build) as registry:
        pool = registry.shared(RendererConfig(tok_dir))
        assert pool.snapshot().renderers == 1 and pool.snapshot().ready == 0
        await build.started.wait()  # the build runs in the background, held at the gate
        assert pool.snapshot().building == 1
        build.gate.set()
        async with pool.acquire() as renderer:
            assert await renderer.render_prompt(USER) == loaded.render_prompt(USER)
            assert await renderer.decode(await renderer.encode("a b")) == "a b"
            first = await renderer.render_conversation(USER)
            completion = await renderer.encode("Hi.<|im_end|>")
            reply = [*USER, {"role": "assistant", "content": "Hi."}]
            nxt = await renderer.render_messages_delta(first, completion, reply)
            assert nxt.ids[: len(first.ids) + len(completion)] == (*first.ids, *completion)
        assert pool.snapshot().ready == 1 and build.calls == 1


async def test_ten_acquirers_at_multiplex_four_grow_three_renderers(
    loaded: Renderer, tok_dir: Path
) -> None:
    build = Builder(loaded)
    async with RendererRegistry(build=build) as registry:
        pool = registry.shared(RendererConfig(tok_dir, multiplex=4))
        async with holding(pool, 10) as handles:
            assert pool.loads() == [4, 4, 2]
            assert pool.snapshot().renderers == 3 and build.calls == 3
            assert distinct(handles) == 3
        assert pool.loads() == [0, 0, 0]
        async with holding(pool, 8) as handles:  # reuse, spread least-loaded first
            assert pool.loads() == [3, 3, 2]
            assert distinct(handles) == 3
        async with holding(pool, 12):
            assert pool.loads() == [4, 4, 4]
        assert build.calls == 3 and pool.loads() == [0, 0, 0]


async def test_an_acquired_renderer_renders_off_the_loop(tok_dir: Path) -> None:
    async with RendererRegistry() as registry:  # the real build: Renderer.from_config
        pool = registry.shared(RendererConfig(tok_dir, template_kwargs={"enable_thinking": False}))
        async with pool.acquire() as renderer:
            ids = await renderer.render_prompt(USER)
            assert renderer.renderer.decode(ids).endswith("<think>\n\n</think>\n\n")
            first = await renderer.render_conversation(USER)
            assert list(first.ids) == ids
            reply = [*USER, {"role": "assistant", "content": "Hi."}]
            completion = await renderer.encode("<think>\n\n</think>\n\nHi.<|im_end|>")
            nxt = await renderer.render_messages_delta(first, completion, reply)
            # as with Qwen3's non-thinking mode, the empty think block the generation
            # prompt holds is not in the history's rendering: not prefix-consistent
            assert nxt.reason == "history_rewritten"
            assert renderer.eos_token_ids == (completion[-1],)
            assert "assistant" in await renderer.render_text(USER)
        thread = await registry.run(threading.current_thread)
        assert thread.name.startswith("rolltap-render")


async def test_configs_differing_only_in_multiplex_share_a_pool(
    loaded: Renderer, tok_dir: Path
) -> None:
    build = Builder(loaded)
    async with RendererRegistry(build=build) as registry:
        config = RendererConfig(tok_dir, multiplex=4)
        pool = registry.shared(config)
        assert registry.shared(dataclasses.replace(config, multiplex=64)) is pool
        assert pool.multiplex == 4  # the first one's policy wins
        other = registry.shared(dataclasses.replace(config, template_kwargs={"x": 1}))
        assert other is not pool and registry.pools() == [pool, other]
        await _acquire_once(pool)
        await _acquire_once(other)
        assert build.calls == 2


async def test_aclose_cancels_warm_up_and_is_idempotent(loaded: Renderer, tok_dir: Path) -> None:
    build = Builder(loaded, gated=True)
    async with RendererRegistry(build=build) as registry:
        pool = registry.shared(RendererConfig(tok_dir))
        waiter = asyncio.create_task(_acquire_once(pool))
        await build.started.wait()
        await registry.aclose()
        assert build.cancelled.is_set() and registry.closed
        with pytest.raises(RendererPoolClosedError):
            await waiter  # an acquirer waiting on the cancelled build is told why
        await registry.aclose()  # idempotent
        with pytest.raises(RendererPoolClosedError):
            registry.shared(RendererConfig(tok_dir))
        with pytest.raises(RendererPoolClosedError):
            await _acquire_once(pool)
    await registry.aclose()


async def test_a_cancelled_acquirer_does_not_cancel_the_shared_build(
    loaded: Renderer, tok_dir: Path
) -> None:
    build = Builder(loaded, gated=True)
    async with RendererRegistry(build=build) as registry:
        pool = registry.shared(RendererConfig(tok_dir))
        waiter = asyncio.create_task(_acquire_once(pool))
        await build.started.wait()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert pool.loads() == [0] and not build.cancelled.is_set()
        build.gate.set()
        await _acquire_once(pool)
        assert build.calls == 1


async def test_a_failed_build_is_reported_and_not_cached(loaded: Renderer, tok_dir: Path) -> None:
    calls = 0

    async def flaky(config: RendererConfig) -> Renderer:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConfigError(f"cannot load {config.path}")
        return loaded

    async with RendererRegistry(build=flaky) as registry:
        pool = registry.shared(RendererConfig(tok_dir))
        with pytest.raises(ConfigError, match="cannot load"):
            await _acquire_once(pool)
        assert pool.snapshot().renderers == 0
        await _acquire_once(pool)
        assert calls == 2 and pool.loads() == [0]


async def test_a_missing_tokenizer_fails_the_acquire_with_a_config_error(tmp_path: Path) -> None:
    async with RendererRegistry() as registry:
        pool = registry.shared(RendererConfig(tmp_path / "none"))
        with pytest.raises(ConfigError, match=str(tmp_path / "none")):
            await _acquire_once(pool)


async def test_registry_must_be_entered_once(tok_dir: Path) -> None:
    registry = RendererRegistry()
    with pytest.raises(RendererPoolClosedError, match="not open"):
        registry.shared(RendererConfig(tok_dir))
    async with registry:
        with pytest.raises(ConfigError):
            await registry.__aenter__()
    with pytest.raises(ConfigError, match="max_threads"):
        RendererRegistry(max_threads=0)


async def test_a_handle_is_spent_after_its_block(loaded: Renderer, tok_dir: Path) -> None:
    async with RendererRegistry(build=Builder(loaded)) as registry:
        async with registry.shared(RendererConfig(tok_dir)).acquire() as handle:
            pass
        with pytest.raises(RendererPoolClosedError, match="after its acquire block"):
            await handle.render_prompt(USER)


async def test_default_is_one_per_process_until_closed() -> None:
    first = RendererRegistry.default()
    assert RendererRegistry.default() is first
    async with first:
        assert RendererRegistry.default() is first
    assert RendererRegistry.default() is not first


async def _acquire_once(pool: RendererPool) -> None:
    async with pool.acquire():
        pass


async def test_errors_in_the_body_are_not_wrapped(loaded: Renderer, tok_dir: Path) -> None:
    with pytest.raises(KeyError):
        async with RendererRegistry(build=Builder(loaded, gated=True)) as registry:
            registry.shared(RendererConfig(tok_dir))
            raise KeyError("mine")


async def test_ready_waits_for_the_first_build_and_reports_its_failure(
    tok_dir: Path, loaded: Renderer, tmp_path: Path
) -> None:
    builder = Builder(loaded, gated=True)
    async with RendererRegistry(build=builder) as registry:
        pool = registry.shared(RendererConfig(tok_dir))
        async with asyncio.TaskGroup() as group:
            waiting = group.create_task(pool.ready())
            await builder.started.wait()
            assert not waiting.done()  # the build has not finished
            builder.gate.set()
        assert pool.snapshot().ready == 1 and builder.calls == 1
        await pool.ready()  # built: at once, no second build
        assert builder.calls == 1
    async with RendererRegistry() as registry:
        missing = registry.shared(RendererConfig(tmp_path / "nowhere"))
        with pytest.raises(ConfigError, match="nowhere"):
            await missing.ready()
