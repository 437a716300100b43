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
