"""Harnesses the serve tests submit by ``module:function`` (workers import this module)."""

from __future__ import annotations

import openai

from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.rollouts.tasks import Task


async def gated(task: Task, ctx: HarnessContext) -> HarnessResult:
    """One chat call; with ``info.gate`` the simulator holds it at that gate."""
    gate = task.info.get("gate")
    headers = {"x-sim-gate": str(gate)} if gate else {}
    async with openai.AsyncOpenAI(
        base_url=ctx.openai_base_url, api_key=ctx.api_key, max_retries=0, default_headers=headers
    ) as client:
        completion = await client.chat.completions.create(
            model=ctx.model,
            messages=task.chat_messages(),  # type: ignore[arg-type]
        )
    return HarnessResult(completion.choices[0].message.content or "")


async def three_calls(task: Task, ctx: HarnessContext) -> HarnessResult:
    """Three chat calls, one turn each; with ``info.gate`` the second waits at that gate.

    ``info.pad`` characters are added to the second turn's message (big later commits)."""
    gate, pad = task.info.get("gate"), "x" * int(task.info.get("pad") or 0)
    messages: list[dict[str, str]] = []
    answer = ""
    async with openai.AsyncOpenAI(
        base_url=ctx.openai_base_url, api_key=ctx.api_key, max_retries=0
    ) as client:
        for turn in range(3):
            content = f"turn {turn}" + (pad if turn == 1 else "")
            messages.append({"role": "user", "content": content})
            headers = {"x-sim-gate": str(gate)} if gate and turn == 1 else {}
            completion = await client.chat.completions.create(
                model=ctx.model,
                messages=messages,  # type: ignore[arg-type]
                extra_headers=headers,
            )
            answer = completion.choices[0].message.content or ""
            messages.append({"role": "assistant", "content": answer})
    return HarnessResult(answer)
