"""What the serve tests share: specs, a token, and reading a subprocess's output."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from rolltap.serve import RolloutSpec, Service

TOKEN = "serve-test-token"
#: the ``start_service`` fixture: keyword config overrides in, a started service out
ServiceFactory = Callable[..., Awaitable[Service]]


def chat_spec(task_id: str, **fields: Any) -> RolloutSpec:
    """A one-turn ``chat`` rollout that the simulator answers at once."""
    return RolloutSpec(task={"id": task_id, "prompt": f"say {task_id}"}, harness="chat", **fields)


def gated_spec(task_id: str, gate: str) -> RolloutSpec:
    """A one-call rollout the simulator holds at ``gate`` until the test opens it."""
    task = {"id": task_id, "prompt": f"say {task_id}", "info": {"gate": gate}}
    return RolloutSpec(task=task, harness="serve.serve_harnesses:gated")


async def read_until(stream: asyncio.StreamReader, text: str) -> str:
    """Lines of a subprocess's output up to the first containing ``text``; that line."""
    seen: list[str] = []
    while line := (await stream.readline()).decode():
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"{text!r} never came: {''.join(seen)}")
