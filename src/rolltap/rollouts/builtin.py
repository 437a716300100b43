"""Built-in harnesses on the official OpenAI SDK: ``chat`` and ``tool-agent``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import orjson

from rolltap.rollouts.calculator import calculate
from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.rollouts.tasks import Task

__all__ = [
    "CALCULATOR_TOOL",
    "chat_harness",
    "openai_client",
    "run_calculator",
    "tool_agent_harness",
]

#: the tool-agent's one tool
CALCULATOR_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
_DEFAULT_TOOL_TURNS = 8
_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")


@asynccontextmanager
async def openai_client(ctx: HarnessContext) -> AsyncIterator[openai.AsyncOpenAI]:
    """An ``AsyncOpenAI`` for this rollout, on the HTTP client the runner gave it.

    The SDK closes the HTTP client it was given when it is closed, so a client built on
    ``ctx.http_client`` is never closed here (the runner closes it); without one, the
    SDK client owns and closes its own.

    >>> async def harness(task, ctx):  # doctest: +SKIP
    ...     async with openai_client(ctx) as client:
    ...         await client.chat.completions.create(model=ctx.model, messages=[...])
    """
    options: dict[str, Any] = {
        "base_url": ctx.openai_base_url,
        "api_key": ctx.api_key,
        "max_retries": 0,
        "timeout": ctx.timeout_s,
    }
    if ctx.http_client is not None:
        yield openai.AsyncOpenAI(**options, http_client=ctx.http_client)
        return
    async with openai.AsyncOpenAI(**options) as client:
        yield client


def _sampling(ctx: HarnessContext) -> dict[str, Any]:
    return {k: v for k, v in ctx.sampling.items() if k in _SAMPLING_KEYS}


def _needs_reply(messages: list[dict[str, Any]], index: int) -> bool:
    """A user message the task does not answer itself (no assistant message follows)."""
    if messages[index].get("role") != "user":
        return False
    nxt = messages[index + 1] if index + 1 < len(messages) else None
    return nxt is None or nxt.get("role") != "assistant"


async def chat_harness(task: Task, ctx: HarnessContext) -> HarnessResult:
    """Send the task's conversation: one model call per unanswered user message.

    Each call carries the conversation so far, earlier replies included, as a chat
    client would; the answer is the last reply.
    """
    messages = task.chat_messages()
    history: list[dict[str, Any]] = []
    replies: list[str] = []
    async with openai_client(ctx) as client:
        for index, message in enumerate(messages):
            history.append(message)
            if not _needs_reply(messages, index) and index + 1 < len(messages):
                continue
            completion = await client.chat.completions.create(
                model=ctx.model,
                messages=history,  # type: ignore[arg-type]
                **_sampling(ctx),
            )
            reply = completion.choices[0].message.content or ""
            history.append({"role": "assistant", "content": reply})
            replies.append(reply)
    return HarnessResult(replies[-1] if replies else "", {"turns": len(replies)})


def run_calculator(arguments: str | object) -> str:
    """The calculator tool's result for its arguments (JSON text or a parsed object);
    bad input is the model's mistake, so it gets an error string back, not a crash."""
    try:
        args = orjson.loads(arguments or "{}") if isinstance(arguments, str) else arguments
        expression = str(args.get("expression", "")) if isinstance(args, dict) else ""
        return str(calculate(expression))
    except (orjson.JSONDecodeError, ValueError) as exc:
        return f"error: {exc}"


async def tool_agent_harness(task: Task, ctx: HarnessContext) -> HarnessResult:
    """A bounded tool-calling loop with a safe calculator; answer = the final text reply.

    ``task.info["max_tool_turns"]`` bounds the model calls (default 8).
    """
    messages: list[dict[str, Any]] = task.chat_messages()
    max_turns = int(task.info.get("max_tool_turns", _DEFAULT_TOOL_TURNS))
    tool_calls = 0
    async with openai_client(ctx) as client:
        for _ in range(max_turns):
            completion = await client.chat.completions.create(
                model=ctx.model,
                messages=messages,  # type: ignore[arg-type]
                tools=[CALCULATOR_TOOL],  # type: ignore[list-item]
                **_sampling(ctx),
            )
            message = completion.choices[0].message
            calls = message.tool_calls or []
            if not calls:
                return HarnessResult(message.content or "", {"tool_calls": tool_calls})
            messages.append(message.model_dump(exclude_none=True))
            for call in calls:
                tool_calls += 1
                arguments = call.function.arguments if call.type == "function" else ""
                result = run_calculator(arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return HarnessResult("", {"tool_calls": tool_calls, "exhausted": True})
