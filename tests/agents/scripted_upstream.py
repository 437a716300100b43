"""A small upstream that drives a real CLI agent through one tool loop, in its dialect.

Until ``rolltap sim --script`` exists this is what the agent tests talk to: it answers
Anthropic Messages (``/v1/messages``), OpenAI Responses (``/v1/responses``) and OpenAI
chat (``/v1/chat/completions``, what a translating gateway sends), streamed as asked (the
SSE shapes of ``capture.py``, which both CLIs accept), and decides each answer from the
request alone, so every rollout gets the same script:

1. a request with no tool result in it gets a call of the agent's own shell tool
   (``Bash`` for Claude Code, ``exec_command`` for Codex) running ``command``;
2. a request that carries a tool result gets the text ``final``.

``command`` is one shell line for every rollout, or a mapping from a word of the task's
prompt to the line for that task (a prompt with none of the words gets ``final`` at
once); with ``command=None`` every request gets ``final`` (a one-turn agent). Every
request is kept (``requests``) so a test can see what the agent sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

__all__ = ["ScriptedUpstream", "scripted_upstream"]


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _message_start() -> tuple[str, dict[str, Any]]:
    msg: dict[str, Any] = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 0},
    }  # fmt: skip
    return "message_start", {"type": "message_start", "message": msg}


def _messages_end(stop_reason: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def messages_text(text: str) -> bytes:
    """An Anthropic Messages stream answering ``text``."""
    return _sse([
        _message_start(),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        *_messages_end("end_turn"),
    ])  # fmt: skip


def messages_bash(command: str) -> bytes:
    """An Anthropic Messages stream calling Claude Code's ``Bash`` tool."""
    arguments = json.dumps({"command": command, "description": "run the step"})
    return _sse([
        _message_start(),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "tool_use", "id": "toolu_1",
                                                   "name": "Bash", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta",
                                           "partial_json": arguments}}),
        *_messages_end("tool_use"),
    ])  # fmt: skip


def _response(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    return {"id": "resp_1", "object": "response", "created_at": 0, "status": status,
            "model": "m", "output": output, "usage": usage}  # fmt: skip


def responses_text(text: str) -> bytes:
    """An OpenAI Responses stream answering ``text``."""
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    started = {**_response([]), "status": "in_progress", "usage": None}
    part = {"type": "output_text", "text": "", "annotations": []}
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return _sse([
        ("response.created", {"type": "response.created", "response": started}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {"type": "response.content_part.added", **where,
                                         "part": part}),
        ("response.output_text.delta", {"type": "response.output_text.delta", **where,
                                        "delta": text}),
        ("response.output_text.done", {"type": "response.output_text.done", **where,
                                       "text": text}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                       "item": item}),
        ("response.completed", {"type": "response.completed", "response": _response([item])}),
    ])  # fmt: skip


def responses_exec(command: str) -> bytes:
    """An OpenAI Responses stream calling Codex's ``exec_command`` tool."""
    arguments = json.dumps({"cmd": command})
    item = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "exec_command",
        "arguments": arguments,
    }
    started = {**_response([]), "status": "in_progress", "usage": None}
    where = {"item_id": "fc_1", "output_index": 0}
    return _sse([
        ("response.created", {"type": "response.created", "response": started}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**item, "status": "in_progress",
                                                 "arguments": ""}}),
        ("response.function_call_arguments.delta",
         {"type": "response.function_call_arguments.delta", **where, "delta": arguments}),
        ("response.function_call_arguments.done",
         {"type": "response.function_call_arguments.done", **where, "arguments": arguments}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                       "item": item}),
        ("response.completed", {"type": "response.completed", "response": _response([item])}),
    ])  # fmt: skip


def _chat_chunks(deltas: list[dict[str, Any]], finish: str) -> bytes:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]  # fmt: skip
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    chunks.append({**head, "choices": [], "usage": usage})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def chat_reply(body: dict[str, Any], command: str | None, final: str) -> web.Response:
    """A chat answer: ``final``, or a call of whichever shell tool the request offers
    (``Bash`` or ``exec_command``, the agents' own, translated to chat functions)."""
    names = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if command is None or not names & {"Bash", "exec_command"}:
        message: dict[str, Any] = {"role": "assistant", "content": final}
        delta, finish = message, "stop"
    else:
        name = "Bash" if "Bash" in names else "exec_command"
        args = {"command": command, "description": "run"} if name == "Bash" else {"cmd": command}
        call = {"id": "call_1", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        delta = {**message, "tool_calls": [{**call, "index": 0}]}
        finish = "tool_calls"
    if body.get("stream"):
        return web.Response(body=_chat_chunks([delta], finish), content_type="text/event-stream")
    return web.json_response({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })  # fmt: skip


def _user_text(body: dict[str, Any]) -> str:
    """The text of the user's turns (Messages ``messages``, Responses ``input``)."""
    texts: list[str] = []
    for entry in [*(body.get("messages") or []), *(body.get("input") or [])]:
        if not isinstance(entry, dict) or entry.get("role") != "user":
            continue
        content = entry.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(b.get("text", "")) for b in content if isinstance(b, dict)]
    return "\n".join(texts)


def _has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "tool":
            return True  # chat
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        ):
            return True
    items = body.get("input")
    return isinstance(items, list) and any(
        isinstance(item, dict) and item.get("type") == "function_call_output" for item in items
    )


class ScriptedUpstream:
    """The aiohttp handler and what it saw (see the module docstring)."""

    def __init__(self, command: str | Mapping[str, str] | None, final: str) -> None:
        self.command, self.final = command, final
        self.requests: list[dict[str, Any]] = []

    def _command_for(self, body: dict[str, Any]) -> str | None:
        if self.command is None or isinstance(self.command, str):
            return self.command
        prompt = _user_text(body)
        return next((line for word, line in self.command.items() if word in prompt), None)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(
            {"method": request.method, "path": request.path, "body": body, "headers": headers}
        )
        if request.method != "POST" or not isinstance(body, dict):
            return web.json_response({})
        if request.path.endswith("/messages/count_tokens"):
            return web.json_response({"input_tokens": 10})
        command = None if _has_tool_result(body) else self._command_for(body)
        if request.path.endswith("/messages"):
            data = messages_text(self.final) if command is None else messages_bash(command)
        elif request.path.endswith("/responses"):
            data = responses_text(self.final) if command is None else responses_exec(command)
        elif request.path.endswith("/chat/completions"):
            return chat_reply(body, command, self.final)
        else:
            return web.json_response({"error": {"message": "not scripted"}}, status=404)
        return web.Response(body=data, content_type="text/event-stream")

    def model_calls(self) -> list[dict[str, Any]]:
        """The model calls it answered (not the agents' start-up probes)."""
        return [r for r in self.requests if r["method"] == "POST"]


@asynccontextmanager
async def scripted_upstream(
    command: str | Mapping[str, str] | None = None, final: str = "done"
) -> AsyncIterator[tuple[str, ScriptedUpstream]]:
    """A started :class:`ScriptedUpstream` on loopback: ``(base URL, upstream)``; the base
    URL has no ``/v1`` (add it for an OpenAI-style client)."""
    upstream = ScriptedUpstream(command, final)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", upstream.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", upstream
    finally:
        await runner.cleanup()
