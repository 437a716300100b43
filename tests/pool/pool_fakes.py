"""Fakes for the pool tests: gateable clients and builders, identity keys, loop helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from rolltap.config import EndpointConfig

T = TypeVar("T")

ENDPOINT = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="gemma", api_key_env="K")


def identity(user: str = "alice", credential: str = "sk-alice", model: str = "gemma") -> str:
    """A real pool key: the SHA-256 identity of an endpoint config, user and credential."""
    cfg = ENDPOINT if model == ENDPOINT.model else ENDPOINT.model_copy(update={"model": model})
    return cfg.identity(credential=credential, user=user)


class FakeClient:
    """A model client whose ``aclose()`` can be held on a gate or made to fail."""

    def __init__(
        self,
        name: str,
        *,
        close_gate: asyncio.Event | None = None,
        close_error: Exception | None = None,
        on_close: Callable[[FakeClient], None] | None = None,
        close_yields: int = 0,
    ) -> None:
        self.name = name
        self.close_gate = close_gate
        self.close_error = close_error
        self.on_close = on_close
        self.close_yields = close_yields
        self.close_started = asyncio.Event()
        self.close_calls = 0
        self.closed = False

    async def aclose(self) -> None:
        self.close_calls += 1
        self.close_started.set()
        if self.on_close is not None:
            self.on_close(self)
        if self.close_gate is not None:
            await self.close_gate.wait()
        for _ in range(self.close_yields):
            await asyncio.sleep(0)  # a close that takes a few loop iterations
        if self.close_error is not None:
            raise self.close_error
        self.closed = True

    def __repr__(self) -> str:
        return f"<FakeClient {self.name}>"


class Builder:
    """A ``build`` callable that counts its calls; it can wait on ``gate`` or fail."""

    def __init__(
        self,
        name: str = "client",
        *,
        gate: asyncio.Event | None = None,
        error: Exception | None = None,
        close_gate: asyncio.Event | None = None,
        close_error: Exception | None = None,
        on_close: Callable[[FakeClient], None] | None = None,
        close_yields: int = 0,
    ) -> None:
        self.name = name
        self.gate = gate
        self.error = error
        self.close_gate = close_gate
        self.close_error = close_error
        self.on_close = on_close
        self.close_yields = close_yields
        self.calls = 0
        self.cancelled = 0
        self.started = asyncio.Event()
        self.built: list[FakeClient] = []

    async def __call__(self) -> FakeClient:
        self.calls += 1
        self.started.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
            else:
                await asyncio.sleep(0)  # a real suspension, so concurrent borrowers overlap
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.error is not None:
            raise self.error
        client = FakeClient(
            f"{self.name}#{self.calls}",
            close_gate=self.close_gate,
            close_error=self.close_error,
            on_close=self.on_close,
            close_yields=self.close_yields,
        )
        self.built.append(client)
        return client


async def until(predicate: Callable[[], bool], what: str, *, max_yields: int = 10_000) -> None:
    """Yield to the loop until ``predicate()`` holds (state-based, never time-based)."""
    for _ in range(max_yields):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never reached: {what}")


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end without letting it suspend; fail if it would wait."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return cast(T, stop.value)
    coro.close()
    raise AssertionError("the coroutine suspended instead of finishing at once")


async def spin(yields: int = 50) -> None:
    """Yield to the loop ``yields`` times, to show that something does *not* happen."""
    for _ in range(yields):
        await asyncio.sleep(0)
