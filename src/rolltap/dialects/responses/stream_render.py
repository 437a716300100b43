"""OpenAI Responses streams, harness side: canonical events to ``response.*`` events.

Each canonical block becomes one output item (text: a ``message`` item with one
``output_text`` part; reasoning: a ``reasoning`` item with one summary part; tool
call: a ``function_call`` item), numbered by ``output_index`` in opening order. The
items are folded as they close so ``response.completed`` carries the whole output.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from rolltap.dialects._stream_shared import dumps, error_fields
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.dialects.chat.response import openai_usage_dict
from rolltap.errors import RolltapError

__all__ = ["ResponsesStreamRenderer"]

_DELTA_EVENTS: dict[BlockKind, bytes] = {
    "text": b"response.output_text.delta",
    "reasoning": b"response.reasoning_summary_text.delta",
    "tool_call": b"response.function_call_arguments.delta",
}
_DELTA_TAILS: dict[BlockKind, bytes] = {
    "text": b',"logprobs":[],"sequence_number":',
    "reasoning": b',"sequence_number":',
    "tool_call": b',"sequence_number":',
}
_ID_PREFIX: dict[BlockKind, str] = {"text": "msg", "reasoning": "rs", "tool_call": "fc"}
_INCOMPLETE = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}


@dataclass(slots=True)
class _Item:
    kind: BlockKind
    item_id: str
    position: int  # output_index
    where: bytes  # '"item_id":…,"output_index":n' plus the part index, for every event
    delta_head: bytes  # a delta frame up to its ``"delta":`` value
    texts: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


def _head(name: bytes) -> bytes:
    return b"event: " + name + b'\ndata: {"type":"' + name + b'",'


class ResponsesStreamRenderer:
    """Canonical stream events in, Responses stream events out."""

    __slots__ = ("_created", "_id", "_items", "_model", "_output", "_seq", "_token")

    def __init__(self, *, model: str, include_usage: bool = False) -> None:
        # include_usage is accepted for a uniform factory: Responses always sends usage
        self._model = model
        self._id = "resp_rolltap"
        self._created = int(time.time())
        self._token = secrets.token_hex(6)  # makes item ids unique across streams
        self._seq = 0
        self._items: dict[int, _Item] = {}  # open blocks by canonical index
        self._output: list[dict[str, Any]] = []  # items by output_index, folded on close

    def _frame(self, name: bytes, body: bytes) -> bytes:
        seq = self._seq
        self._seq = seq + 1
        return _head(name) + body + b',"sequence_number":' + str(seq).encode() + b"}\n\n"

    def render(self, event: StreamEvent) -> bytes:
        """The frames for one canonical event."""
        if isinstance(event, BlockDelta):
            item = self._items[event.index]
            item.texts.append(event.text)
            seq = self._seq
            self._seq = seq + 1
            tail = _DELTA_TAILS[item.kind] + str(seq).encode() + b"}\n\n"
            return item.delta_head + dumps(event.text) + tail
        if isinstance(event, BlockStart):
            return self._start(event)
        if isinstance(event, BlockStop):
            return self._stop(event)
        if isinstance(event, StreamStart):
            self._id = event.id or self._id
            response = dumps(self._response("in_progress", None))
            created = self._frame(b"response.created", b'"response":' + response)
            return created + self._frame(b"response.in_progress", b'"response":' + response)
        return self._end(event)

    def _response(
        self, status: str, usage: Usage | None, incomplete: str | None = None
    ) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": None,
            "model": self._model,
            "output": self._output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "temperature": None,
            "top_p": None,
            "metadata": {},
            "usage": None if usage is None else _usage(usage),
        }

    def _start(self, event: BlockStart) -> bytes:
        position = len(self._output)
        item_id = f"{_ID_PREFIX[event.kind]}_{self._token}_{position}"
        where = b'"item_id":' + dumps(item_id) + b',"output_index":' + str(position).encode()
        if event.kind == "text":
            where += b',"content_index":0'
        elif event.kind == "reasoning":
            where += b',"summary_index":0'
        head = _head(_DELTA_EVENTS[event.kind]) + where + b',"delta":'
        item = _Item(event.kind, item_id, position, where, head, call_id=event.id, name=event.name)
        self._items[event.index] = item
        opened = self._item(item, "in_progress")
        self._output.append(opened)
        body = b'"output_index":' + str(position).encode() + b',"item":' + dumps(opened)
        out = self._frame(b"response.output_item.added", body)
        if event.kind == "text":
            part = b',"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}'
            out += self._frame(b"response.content_part.added", where + part)
        elif event.kind == "reasoning":
            part = b',"part":{"type":"summary_text","text":""}'
            out += self._frame(b"response.reasoning_summary_part.added", where + part)
        return out

    def _item(self, item: _Item, status: str, signature: str | None = None) -> dict[str, Any]:
        """The output item as it stands (``status`` "in_progress" or "completed")."""
        text = "".join(item.texts)
        done = status == "completed"
        if item.kind == "text":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            content = [part] if done else []
            return {
                "id": item.item_id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        if item.kind == "reasoning":
            summary = [{"type": "summary_text", "text": text}] if done else []
            out: dict[str, Any] = {"id": item.item_id, "type": "reasoning", "summary": summary}
            if signature is not None:
                out["encrypted_content"] = signature
            return out
        return {
            "id": item.item_id,
            "type": "function_call",
            "status": status,
            "call_id": item.call_id,
            "name": item.name,
            "arguments": text,
        }

    def _stop(self, event: BlockStop) -> bytes:
        item = self._items.pop(event.index, None)
        if item is None:
            return b""
        text = dumps("".join(item.texts))
        if item.kind == "text":
            part = b'{"type":"output_text","text":' + text + b',"annotations":[],"logprobs":[]}'
            body = item.where + b',"text":' + text + b',"logprobs":[]'
            out = self._frame(b"response.output_text.done", body)
            out += self._frame(b"response.content_part.done", item.where + b',"part":' + part)
        elif item.kind == "reasoning":
            part = b'{"type":"summary_text","text":' + text + b"}"
            body = item.where + b',"text":' + text
            out = self._frame(b"response.reasoning_summary_text.done", body)
            body = item.where + b',"part":' + part
            out += self._frame(b"response.reasoning_summary_part.done", body)
        else:
            body = item.where + b',"name":' + dumps(item.name) + b',"arguments":' + text
            out = self._frame(b"response.function_call_arguments.done", body)
        done = self._item(item, "completed", event.signature)
        self._output[item.position] = done
        body = b'"output_index":' + str(item.position).encode() + b',"item":' + dumps(done)
        return out + self._frame(b"response.output_item.done", body)

    def _end(self, event: StreamEnd) -> bytes:
        out = b"".join(self._stop(BlockStop(index)) for index in tuple(self._items))
        incomplete = _INCOMPLETE.get(event.stop_reason or "")
        status = "incomplete" if incomplete else "completed"
        response = dumps(self._response(status, event.usage, incomplete))
        return out + self._frame(b"response." + status.encode(), b'"response":' + response)

    def keepalive(self) -> bytes:
        """An SSE comment: every Responses client skips it."""
        return b": keepalive\n\n"

    def error(self, err: RolltapError) -> bytes:
        """An in-band ``error`` event (``code``, ``message``, ``param``, as the API sends
        it, plus an ``error`` object, which is what makes the OpenAI SDK raise)."""
        fields = error_fields(err)
        top = {"code": err.code, "message": err.message, "param": None, "error": fields}
        return self._frame(b"error", dumps(top)[1:-1])


def _usage(usage: Usage) -> dict[str, Any]:
    out = openai_usage_dict(usage, "input_tokens", "output_tokens")
    # the SDK's types expect both detail objects to be present
    out.setdefault("input_tokens_details", {"cached_tokens": 0})
    out.setdefault("output_tokens_details", {"reasoning_tokens": 0})
    return out
