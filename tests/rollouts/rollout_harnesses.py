"""Harnesses and rewards the rollout tests load by ``module:function``."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence

from rolltap.events import Event
from rolltap.rollouts.builtin import chat_harness
from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.rollouts.tasks import Task

#: set while a test wants ``hang_on_marked`` to hang on tasks with ``info.hang``
HANG_ENV = "ROLLTAP_TEST_HANG"


async def raises(task: Task, ctx: HarnessContext) -> str:
    raise RuntimeError(f"harness bug on task {task.id}")


async def hangs(task: Task, ctx: HarnessContext) -> str:
    await asyncio.Event().wait()
    return "never"


async def wrong_type(task: Task, ctx: HarnessContext) -> str:
    return 42  # type: ignore[return-value]


async def hang_on_marked(task: Task, ctx: HarnessContext) -> HarnessResult:
    """``chat``, except tasks with ``info.hang`` hang while ``ROLLTAP_TEST_HANG`` is set."""
    if task.info.get("hang") and os.environ.get(HANG_ENV):
        await asyncio.Event().wait()
    return await chat_harness(task, ctx)


async def slow_to_stop(task: Task, ctx: HarnessContext) -> HarnessResult:
    """:func:`hang_on_marked`, whose hanging tasks, once cancelled, clean up for a long
    while (until cancelled again): a command stopping on a signal is still stopping."""
    if task.info.get("hang") and os.environ.get(HANG_ENV):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(3600)  # the clean-up; a second cancellation ends it
            raise
    return await chat_harness(task, ctx)


def turns_reward(task: Task, answer: str, events: Sequence[Event]) -> float:
    """1.0 when the rollout made as many model calls as the task has user messages."""
    calls = sum(1 for e in events if e.kind == "model_response")
    users = sum(1 for m in task.chat_messages() if m.get("role") == "user")
    return float(calls == users and bool(answer))


async def async_reward(task: Task, answer: str, events: Sequence[Event]) -> float:
    await asyncio.sleep(0)
    return 0.5


def events_reward(task: Task, answer: str, events: Sequence[Event]) -> float:
    """A reward that reads everything it is given: the task's id, the answer, the kinds
    of the events in order (a scoring handed other events than eval did scores otherwise)."""
    kinds = "".join(str(e.kind)[0] for e in events)
    return (hash_text(f"{task.id}|{answer}|{kinds}") % 1000) / 1000


def hash_text(text: str) -> int:
    """A stable hash (``hash`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


async def released_history(task: Task, ctx: HarnessContext) -> HarnessResult:
    """``chat``, then wait until the gateway has released the rollout's durable request
    events from memory (their messages are then only in the store)."""
    result = await chat_harness(task, ctx)
    for _ in range(2000):
        if ctx.log.released:
            return result
        await asyncio.sleep(0.005)  # a commit on the recorder's task releases them
    raise AssertionError("the rollout's events were never released")


def whole_history(task: Task, answer: str, events: Sequence[Event]) -> float:
    """1.0 when every request event holds its messages and together they are the task's
    user messages in order (a reward handed released events scores 0)."""
    requests = [e.payload for e in events if e.kind == "model_request"]
    if not requests or any("messages" not in p for p in requests):
        return 0.0
    sent = [m["content"] for p in requests for m in p["messages"] if m.get("role") == "user"]
    wanted = [m["content"] for m in task.chat_messages() if m.get("role") == "user"]
    return float(sent == wanted)
