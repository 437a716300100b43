"""One tool-loop turn in each harness dialect, through that dialect's official SDK.

Each driver sends a conversation (kept in its own dialect's shape) and reads the
answer from the SDK's own parsed objects, streaming through the SDK's stream helpers
when asked, so a malformed body or event fails inside the SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anthropic
import openai

PARAMETERS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


@dataclass
class Turn:
    text: str
    calls: list[tuple[str, str, str]]  # (id, name, arguments JSON)
    stop: str  # "end" | "tool" | "length"
    output_tokens: int


@dataclass
class Conversation:
    items: list[Any] = field(default_factory=list)


class Driver(Protocol):
    name: str

    async def aclose(self) -> None: ...
    def start(self, prompt: str) -> Conversation: ...
    async def turn(self, convo: Conversation, *, tools: bool, stream: bool) -> Turn: ...
    def add_results(self, convo: Conversation, turn: Turn, result: str) -> None: ...


class ChatDriver:
    async def aclose(self) -> None:
        await self.client.close()

    name = "chat"

    def __init__(self, base_url: str, api_key: str) -> None:
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    def start(self, prompt: str) -> Conversation:
        return Conversation([{"role": "user", "content": prompt}])

    async def turn(self, convo: Conversation, *, tools: bool, stream: bool) -> Turn:
        kwargs: dict[str, Any] = {"model": "harness-model", "messages": convo.items}
        if tools:
            fn = {"name": "add", "description": "add", "parameters": PARAMETERS}
            kwargs["tools"] = [{"type": "function", "function": fn}]
        if stream:
            kwargs["stream_options"] = {"include_usage": True}
            async with self.client.chat.completions.stream(**kwargs) as s:
                done = await s.get_final_completion()
        else:
            done = await self.client.chat.completions.create(**kwargs)
        choice = done.choices[0]
        calls = [
            (c.id, c.function.name, c.function.arguments)
            for c in choice.message.tool_calls or []
            if c.type == "function"
        ]
        stop = {"stop": "end", "tool_calls": "tool", "length": "length"}[choice.finish_reason]
        out = done.usage.completion_tokens if done.usage else -1
        return Turn(choice.message.content or "", calls, stop, out)

    def add_results(self, convo: Conversation, turn: Turn, result: str) -> None:
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in turn.calls
        ]
        convo.items.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for call_id, _, _ in turn.calls:
            convo.items.append({"role": "tool", "tool_call_id": call_id, "content": result})


class MessagesDriver:
    async def aclose(self) -> None:
        await self.client.close()

    name = "messages"

    def __init__(self, base_url: str, api_key: str) -> None:
        self.client = anthropic.AsyncAnthropic(base_url=base_url, api_key=api_key, max_retries=0)

    def start(self, prompt: str) -> Conversation:
        return Conversation([{"role": "user", "content": prompt}])

    async def turn(self, convo: Conversation, *, tools: bool, stream: bool) -> Turn:
        kwargs: dict[str, Any] = {
            "model": "harness-model", "max_tokens": 256, "messages": convo.items,
        }  # fmt: skip
        if tools:
            kwargs["tools"] = [{"name": "add", "description": "add", "input_schema": PARAMETERS}]
        if stream:
            async with self.client.messages.stream(**kwargs) as s:
                msg = await s.get_final_message()
        else:
            msg = await self.client.messages.create(**kwargs)
        text = "".join(b.text for b in msg.content if b.type == "text")
        calls = [
            (b.id, b.name, json.dumps(b.input, separators=(",", ":")))
            for b in msg.content
            if b.type == "tool_use"
        ]
        stop = {"end_turn": "end", "tool_use": "tool", "max_tokens": "length"}[
            msg.stop_reason or ""
        ]
        return Turn(text, calls, stop, msg.usage.output_tokens)

    def add_results(self, convo: Conversation, turn: Turn, result: str) -> None:
        blocks = [
            {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)}
            for i, n, a in turn.calls
        ]
        convo.items.append({"role": "assistant", "content": blocks})
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": result} for i, _, _ in turn.calls
        ]
        convo.items.append({"role": "user", "content": results})


class ResponsesDriver:
    async def aclose(self) -> None:
        await self.client.close()

    name = "responses"

    def __init__(self, base_url: str, api_key: str) -> None:
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    def start(self, prompt: str) -> Conversation:
        return Conversation([{"role": "user", "content": prompt}])

    async def turn(self, convo: Conversation, *, tools: bool, stream: bool) -> Turn:
        kwargs: dict[str, Any] = {"model": "harness-model", "input": convo.items}
        if tools:
            kwargs["tools"] = [
                {"type": "function", "name": "add", "description": "add",
                 "parameters": PARAMETERS, "strict": False}
            ]  # fmt: skip
        if stream:
            async with self.client.responses.stream(**kwargs) as s:
                resp = await s.get_final_response()
        else:
            resp = await self.client.responses.create(**kwargs)
        calls = [(o.call_id, o.name, o.arguments) for o in resp.output if o.type == "function_call"]
        stop = "length" if resp.status == "incomplete" else "tool" if calls else "end"
        out = resp.usage.output_tokens if resp.usage else -1
        return Turn(resp.output_text, calls, stop, out)

    def add_results(self, convo: Conversation, turn: Turn, result: str) -> None:
        for call_id, name, arguments in turn.calls:
            convo.items.append(
                {"type": "function_call", "call_id": call_id, "name": name,
                 "arguments": arguments}
            )  # fmt: skip
            convo.items.append({"type": "function_call_output", "call_id": call_id,
                                "output": result})  # fmt: skip


@asynccontextmanager
async def driver(
    name: str, *, openai_base_url: str, anthropic_base_url: str, api_key: str
) -> AsyncIterator[Driver]:
    """The driver for harness dialect ``name``, closed when the block ends."""
    client: Driver
    if name == "messages":
        client = MessagesDriver(anthropic_base_url, api_key)
    elif name == "chat":
        client = ChatDriver(openai_base_url, api_key)
    else:
        client = ResponsesDriver(openai_base_url, api_key)
    try:
        yield client
    finally:
        await client.aclose()
