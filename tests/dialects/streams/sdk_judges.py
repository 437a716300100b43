"""The official SDKs as judges: feed them a rendered stream, read back what they folded.

Each judge serves ``body`` from an ``httpx2.MockTransport`` to the SDK's own streaming
helper (``chat.completions.stream``, ``responses.stream``, ``messages.stream``) and
reduces its accumulated result to an :class:`Outcome` the tests compare.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import openai

__all__ = ["JUDGES", "Outcome", "judge_chat", "judge_messages", "judge_responses"]

USER: Any = [{"role": "user", "content": "hi"}]


@dataclass(frozen=True)
class Outcome:
    text: str
    reasoning: str
    calls: list[tuple[str, str, str]]  # (id, name, exact argument JSON)
    stop: str  # in the target dialect's own words
    input_tokens: int  # the whole prompt, cache reads included
    output_tokens: int
    cache_read: int | None
    signature: str | None = None


def _http(body: bytes) -> httpx2.AsyncClient:
    """An HTTP client whose every request is answered with ``body`` as an SSE stream.

    Both SDKs are built on httpx2 (they refuse plain httpx objects)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


def openai_client(body: bytes) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="k", base_url="http://upstream.test/v1", http_client=_http(body), max_retries=0
    )


def anthropic_client(body: bytes) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="k", base_url="http://upstream.test", http_client=_http(body), max_retries=0
    )


async def judge_chat(body: bytes) -> Outcome:
    async with (
        openai_client(body) as client,
        client.chat.completions.stream(model="harness-model", messages=USER) as stream,
    ):
        async for _ in stream:
            pass
        try:
            final: Any = await stream.get_final_completion()
        except openai.LengthFinishReasonError as err:
            final = err.completion  # the SDK refuses to "parse" a cut answer, but folded it
    choice = final.choices[0]
    message = choice.message
    extra = message.model_extra or {}
    calls = [
        (call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or []
        if call.type == "function"
    ]
    usage = final.usage
    details = usage.prompt_tokens_details if usage else None
    return Outcome(
        text=message.content or "",
        reasoning=str(extra.get("reasoning_content") or ""),
        calls=calls,
        stop=str(choice.finish_reason),
        input_tokens=usage.prompt_tokens if usage else -1,
        output_tokens=usage.completion_tokens if usage else -1,
        cache_read=details.cached_tokens if details else None,
    )


async def responses_final(body: bytes) -> Any:
    """The response object the SDK ends with: ``get_final_response()`` when it
    completed, the ``response.incomplete`` event's response otherwise."""
    last: Any = None
    async with (
        openai_client(body) as client,
        client.responses.stream(model="harness-model", input="hi") as stream,
    ):
        async for event in stream:
            if event.type in ("response.incomplete", "response.completed"):
                last = event.response
        if last is not None and last.status == "completed":
            return await stream.get_final_response()
    return last


async def judge_responses(body: bytes) -> Outcome:
    final = await responses_final(body)
    reasoning, signature, calls = "", None, []
    for item in final.output:
        if item.type == "reasoning":
            reasoning += "".join(part.text for part in item.summary)
            signature = item.encrypted_content
        elif item.type == "function_call":
            calls.append((item.call_id, item.name, item.arguments))
    stop = final.status
    if final.incomplete_details is not None:
        stop = f"{stop}:{final.incomplete_details.reason}"
    usage = final.usage
    return Outcome(
        text=final.output_text,
        reasoning=reasoning,
        calls=calls,
        stop=stop,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read=usage.input_tokens_details.cached_tokens,
        signature=signature,
    )


async def judge_messages(body: bytes) -> Outcome:
    partial: dict[int, str] = {}
    async with (
        anthropic_client(body) as client,
        client.messages.stream(model="harness-model", max_tokens=64, messages=USER) as stream,
    ):
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partial[event.index] = partial.get(event.index, "") + event.delta.partial_json
        message = await stream.get_final_message()
    text, reasoning, signature, calls = "", "", None, []
    for index, block in enumerate(message.content):
        if block.type == "text":
            text += block.text
        elif block.type == "thinking":
            reasoning += block.thinking
            signature = block.signature or None
        elif block.type == "tool_use":
            calls.append((block.id, block.name, partial.get(index, "")))
            # the SDK parses the JSON itself; it must agree with the exact text
            assert block.input == json.loads(partial.get(index) or "{}")
    usage = message.usage
    cache_read = usage.cache_read_input_tokens
    return Outcome(
        text=text,
        reasoning=reasoning,
        calls=calls,
        stop=str(message.stop_reason),
        input_tokens=usage.input_tokens + (cache_read or 0),
        output_tokens=usage.output_tokens,
        cache_read=cache_read,
        signature=signature,
    )


JUDGES: dict[str, Callable[[bytes], Awaitable[Outcome]]] = {
    "chat": judge_chat,
    "messages": judge_messages,
    "responses": judge_responses,
}
