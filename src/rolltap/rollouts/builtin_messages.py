"""The built-in ``messages-tool-agent``: the calculator tool loop on the Anthropic SDK.

It speaks Anthropic Messages, streaming, as Claude-Code-style agents do, whatever the
upstream speaks: the gateway translates. Tool calls arrive as ``tool_use`` blocks and
results go back as ``tool_result`` blocks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic

from rolltap.rollouts.builtin import CALCULATOR_TOOL, run_calculator
from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.rollouts.tasks import Task

__all__ = ["anthropic_client", "messages_tool_agent_harness"]

_TOOL = {
    "name": CALCULATOR_TOOL["function"]["name"],
    "description": CALCULATOR_TOOL["function"]["description"],
    "input_schema": CALCULATOR_TOOL["function"]["parameters"],
}
_DEFAULT_MAX_TOKENS = 1024
_DEFAULT_TOOL_TURNS = 8


@asynccontextmanager
async def anthropic_client(ctx: HarnessContext) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """An ``AsyncAnthropic`` for this rollout, on the HTTP client the runner gave it
    (never closed here, as with :func:`~rolltap.rollouts.builtin.openai_client`)."""
    options: dict[str, Any] = {
        "base_url": ctx.anthropic_base_url,
        "api_key": ctx.api_key,
        "max_retries": 0,
        "timeout": ctx.timeout_s,
    }
    if ctx.http_client is not None:
        yield anthropic.AsyncAnthropic(**options, http_client=ctx.http_client)
        return
    async with anthropic.AsyncAnthropic(**options) as client:
        yield client


def _system_and_turns(task: Task) -> tuple[str | None, list[dict[str, Any]]]:
    system = [m["content"] for m in task.chat_messages() if m.get("role") == "system"]
    turns = [m for m in task.chat_messages() if m.get("role") != "system"]
    return ("\n".join(system) if system else None), turns


async def messages_tool_agent_harness(task: Task, ctx: HarnessContext) -> HarnessResult:
    """A bounded, streaming tool loop with the calculator; answer = the final text.

    ``task.info["max_tool_turns"]`` bounds the model calls (default 8).
    """
    system, messages = _system_and_turns(task)
    options: dict[str, Any] = {
        "model": ctx.model,
        "max_tokens": int(ctx.sampling.get("max_tokens", _DEFAULT_MAX_TOKENS)),
        "tools": [_TOOL],
    }
    if system is not None:
        options["system"] = system
    tool_calls = 0
    async with anthropic_client(ctx) as client:
        for _ in range(int(task.info.get("max_tool_turns", _DEFAULT_TOOL_TURNS))):
            async with client.messages.stream(messages=messages, **options) as stream:  # type: ignore[arg-type]
                message = await stream.get_final_message()
            uses = [block for block in message.content if block.type == "tool_use"]
            if not uses:
                text = "".join(b.text for b in message.content if b.type == "text")
                return HarnessResult(text, {"tool_calls": tool_calls})
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in message.content]}
            )
            results = []
            for use in uses:
                tool_calls += 1
                results.append(
                    {"type": "tool_result", "tool_use_id": use.id,
                     "content": run_calculator(use.input)}
                )  # fmt: skip
            messages.append({"role": "user", "content": results})
    return HarnessResult("", {"tool_calls": tool_calls, "exhausted": True})
