"""Upstream servers' streams, written out field for field as each provider sends them.

Anthropic and Responses servers stream one block (output item) after another, so by
default their writers regroup a scenario's fragments block by block; pass
``interleave=True`` to keep the scenario's order (the parsers accept both).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from dialects.streams.streamkit import Scenario

__all__ = ["anthropic_wire", "chat_wire", "responses_wire"]

_CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _frame(payload: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _schedule(s: Scenario, interleave: bool) -> Iterator[tuple[int, str, bool, bool]]:
    """(block number, fragment, first of its block, last of its block)."""
    order = list(s.deltas) if interleave else sorted(s.deltas, key=lambda d: d[0])
    last = {number: i for i, (number, _) in enumerate(order)}
    seen: set[int] = set()
    for i, (number, text) in enumerate(order):
        yield number, text, number not in seen, last[number] == i
        seen.add(number)


def chat_wire(s: Scenario, *, include_usage: bool = True) -> bytes:
    """vLLM/OpenAI style: role chunk, one chunk per fragment (text chunks with
    logprobs and token ids), finish chunk, usage chunk, ``[DONE]``."""
    base = {
        "id": "chatcmpl-up1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "upstream-model",
        "system_fingerprint": "fp_1",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}
        return _frame({**base, "choices": [choice]})

    out = [chunk({"role": "assistant", "content": ""})]
    positions: dict[int, int] = {}
    for number, text, first, _ in _schedule(s, interleave=True):
        block = s.blocks[number]
        if block.kind == "text":
            entry = {"token": text, "logprob": -0.25, "bytes": None, "top_logprobs": []}
            extra: dict[str, Any] = {"logprobs": {"content": [entry]}, "token_ids": [len(text)]}
            out.append(chunk({"content": text}, **extra))
        elif block.kind == "reasoning":
            out.append(chunk({"reasoning_content": text}))
        else:
            index = positions.setdefault(number, len(positions))
            if first:
                fn = {"name": block.name, "arguments": ""}
                call = {"index": index, "id": block.id, "type": "function", "function": fn}
                out.append(chunk({"tool_calls": [call]}))
            call = {"index": index, "function": {"arguments": text}}
            out.append(chunk({"tool_calls": [call]}))
    out.append(chunk({}, _CHAT_FINISH.get(s.stop, "stop")))
    if include_usage:
        usage: dict[str, Any] = {
            "prompt_tokens": s.usage.input_tokens,
            "completion_tokens": s.usage.output_tokens,
            "total_tokens": s.usage.input_tokens + s.usage.output_tokens,
        }
        if s.usage.cache_read_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": s.usage.cache_read_tokens}
        out.append(_frame({**base, "choices": [], "usage": usage}))
    return b"".join([*out, b"data: [DONE]\n\n"])


def anthropic_wire(s: Scenario, *, interleave: bool = False) -> bytes:
    """Anthropic style: message_start, ping, indexed blocks, message_delta, message_stop."""
    cache = s.usage.cache_read_tokens or 0
    usage = {
        "input_tokens": s.usage.input_tokens - cache,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache,
        "output_tokens": 1,
    }
    message: dict[str, Any] = {
        "id": "msg_01up",
        "type": "message",
        "role": "assistant",
        "model": "claude-upstream",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    out = [
        _frame({"type": "message_start", "message": message}, "message_start"),
        _frame({"type": "ping"}, "ping"),
    ]
    delta_types = {"text": ("text_delta", "text"), "reasoning": ("thinking_delta", "thinking")}
    for number, text, first, last in _schedule(s, interleave):
        block = s.blocks[number]
        if first:
            if block.kind == "text":
                body: dict[str, Any] = {"type": "text", "text": ""}
            elif block.kind == "reasoning":
                body = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                body = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            start = {"type": "content_block_start", "index": number, "content_block": body}
            out.append(_frame(start, "content_block_start"))
        if block.kind == "tool_call":
            kinds = [{"type": "input_json_delta", "partial_json": text}]
            if first:
                kinds.insert(0, {"type": "input_json_delta", "partial_json": ""})
        else:
            kind, key = delta_types[block.kind]
            kinds = [{"type": kind, key: text}]
        if last and block.signature:
            kinds.append({"type": "signature_delta", "signature": block.signature})
        for delta in kinds:
            body = {"type": "content_block_delta", "index": number, "delta": delta}
            out.append(_frame(body, "content_block_delta"))
        if last:
            out.append(
                _frame({"type": "content_block_stop", "index": number}, "content_block_stop")
            )
    stop: dict[str, Any] = {"stop_reason": s.stop, "stop_sequence": None}
    end = {
        "type": "message_delta",
        "delta": stop,
        "usage": {"output_tokens": s.usage.output_tokens},
    }
    out.append(_frame(end, "message_delta"))
    out.append(_frame({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


def responses_wire(s: Scenario, *, interleave: bool = False) -> bytes:
    """OpenAI Responses style, every event the API sends for these items, numbered."""
    writer = _ResponsesWriter(s)
    for number, text, first, last in _schedule(s, interleave):
        writer.fragment(number, text, first, last)
    return writer.finish()


class _ResponsesWriter:
    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.seq = 0
        self.out: list[bytes] = []
        self.items: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, str] = {}
        response = self.response("in_progress", [])
        self.emit("response.created", response=response)
        self.emit("response.in_progress", response=response)

    def response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        u = self.s.usage
        usage = {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cache_read_tokens or 0},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.input_tokens + u.output_tokens,
        }
        return {
            "id": "resp_up1",
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "model": "gpt-upstream",
            "output": output,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete"
            else None,
            "usage": usage if status != "in_progress" else None,
        }

    def emit(self, kind: str, **fields: Any) -> None:
        self.out.append(_frame({"type": kind, **fields, "sequence_number": self.seq}, kind))
        self.seq += 1

    def fragment(self, number: int, text: str, first: bool, last: bool) -> None:
        block = self.s.blocks[number]
        where: dict[str, Any] = {"output_index": number}
        if first:
            self.texts[number] = ""
            item: dict[str, Any]
            if block.kind == "text":
                item = {
                    "id": f"msg_{number}",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                }
            elif block.kind == "reasoning":
                item = {"id": f"rs_{number}", "type": "reasoning", "summary": []}
            else:
                item = {
                    "id": f"fc_{number}",
                    "type": "function_call",
                    "status": "in_progress",
                    "arguments": "",
                    "call_id": block.id,
                    "name": block.name,
                }
            self.items[number] = item
            self.emit("response.output_item.added", item=item, **where)
        where["item_id"] = self.items[number]["id"]
        self.texts[number] += text
        full = self.texts[number]
        if block.kind == "text":
            part = {"type": "output_text", "annotations": [], "logprobs": []}
            if first:
                self.emit(
                    "response.content_part.added",
                    content_index=0,
                    part={**part, "text": ""},
                    **where,
                )
            self.emit(
                "response.output_text.delta", content_index=0, delta=text, logprobs=[], **where
            )
            if last:
                self.emit(
                    "response.output_text.done", content_index=0, text=full, logprobs=[], **where
                )
                self.emit(
                    "response.content_part.done",
                    content_index=0,
                    part={**part, "text": full},
                    **where,
                )
                self.items[number] = {
                    **self.items[number],
                    "status": "completed",
                    "content": [{**part, "text": full}],
                }
        elif block.kind == "reasoning":
            part = {"type": "summary_text"}
            if first:
                self.emit(
                    "response.reasoning_summary_part.added",
                    summary_index=0,
                    part={**part, "text": ""},
                    **where,
                )
            self.emit("response.reasoning_summary_text.delta", summary_index=0, delta=text, **where)
            if last:
                self.emit(
                    "response.reasoning_summary_text.done", summary_index=0, text=full, **where
                )
                self.emit(
                    "response.reasoning_summary_part.done",
                    summary_index=0,
                    part={**part, "text": full},
                    **where,
                )
                self.items[number] = {
                    **self.items[number],
                    "summary": [{**part, "text": full}],
                    "encrypted_content": block.signature,
                }
        else:
            self.emit("response.function_call_arguments.delta", delta=text, **where)
            if last:
                self.emit("response.function_call_arguments.done", arguments=full, **where)
                self.items[number] = {
                    **self.items[number],
                    "status": "completed",
                    "arguments": full,
                }
        if last:
            self.emit("response.output_item.done", output_index=number, item=self.items[number])

    def finish(self) -> bytes:
        status = "incomplete" if self.s.stop == "max_tokens" else "completed"
        output = [self.items[n] for n in sorted(self.items)]
        self.emit(f"response.{status}", response=self.response(status, output))
        return b"".join(self.out)
