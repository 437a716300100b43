"""The weight-update benchmark's harness, run by ``rolltap serve``'s workers.

A rollout of ``info.turns`` calls, each rerun until the harness gets a whole answer (today's
only way past an engine's abort), through the real OpenAI SDK on the rollout's gateway. It
times each call on the wall clock (the trainer, in another process, times its updates on
the same clock) and leaves what it saw in the rollout's event log as one ``bench_calls``
event, which the benchmark reads from the store.
"""

from __future__ import annotations

import time
from typing import Any

import openai

from rolltap.rollouts.builtin import openai_client
from rolltap.rollouts.harness import HarnessContext
from rolltap.rollouts.tasks import Task

__all__ = ["KIND", "loop"]

#: the event the harness leaves: ``{"calls": [[start, end, tokens kept], …], "errors":
#: [kind, …], "discarded": tokens thrown away}``
KIND = "bench_calls"


async def loop(task: Task, ctx: HarnessContext) -> str:
    """``info.turns`` calls of at most ``info.max_tokens`` tokens, back to back."""
    turns, max_tokens = int(task.info["turns"]), int(task.info["max_tokens"])
    seen: dict[str, Any] = {"calls": [], "errors": [], "discarded": 0}
    messages: list[Any] = task.chat_messages()
    text = ""
    async with openai_client(ctx) as client:
        try:
            for turn in range(turns):
                text = await _call(client, ctx.model, messages, max_tokens, seen)
                messages += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"question {turn + 1}"},
                ]
        finally:
            ctx.log.append(KIND, seen)
    return text


async def _call(
    client: openai.AsyncOpenAI, model: str, messages: list[Any], max_tokens: int,
    seen: dict[str, Any],
) -> str:  # fmt: skip
    t0 = time.time()
    for _ in range(32):
        try:
            reply = await client.chat.completions.create(
                model=model, messages=messages, max_tokens=max_tokens
            )
        except openai.APIError as exc:
            seen["errors"].append(type(exc).__name__)
            continue
        choice, usage = reply.choices[0], reply.usage
        tokens = usage.completion_tokens if usage is not None else 0
        if choice.finish_reason not in ("stop", "length"):  # the engine aborted it
            seen["errors"].append(f"finish_reason {choice.finish_reason}")
            seen["discarded"] += tokens
            continue
        seen["calls"].append((t0, time.time(), tokens))
        return choice.message.content or ""
    raise RuntimeError("a call failed 32 times in a row")
