"""OpenAI chat-completions streams, upstream side: ``data: {chunk}`` … ``[DONE]`` to canonical.

Chat chunks carry no block boundaries: a block is implied by the first delta of its
kind, and everything closes at ``finish_reason``. Usage may come in a final chunk
with ``choices: []`` after the finish (``stream_options.include_usage``), so the
parser only ends the stream at ``[DONE]``.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects import stops
from rolltap.dialects._stream_shared import (
    load_object,
    openai_usage,
    stream_error,
)
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    StopReason,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.dialects.sse import SSEEvent
from rolltap.errors import UpstreamProtocolError

__all__ = ["ChatStreamParser"]

_STOP_IN = stops.CHAT_IN


class ChatStreamParser:
    """Chat-completion chunks in, canonical stream events out (choice 0 only)."""

    __slots__ = (
        "_blocks",
        "_done",
        "_extras",
        "_finished",
        "_open",
        "_reasoning",
        "_started",
        "_stop",
        "_stop_sequence",
        "_text",
        "_tools",
        "_usage",
    )

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._finished = False
        self._blocks = 0  # canonical indexes handed out so far
        self._text: int | None = None  # the open text block
        self._reasoning: int | None = None  # the open reasoning block
        self._tools: dict[int, int] = {}  # open tool_calls[].index -> block index
        self._open: list[int] = []  # open blocks, in opening order
        self._stop: StopReason | None = None
        self._stop_sequence: str | None = None
        self._usage: Usage | None = None
        self._extras: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        """True once ``[DONE]`` has been seen."""
        return self._done

    @property
    def extras(self) -> dict[str, Any]:
        """What the recorder must keep that has no canonical event: ``logprobs`` (the
        ``choices[0].logprobs.content`` entries of every chunk, concatenated),
        ``token_ids``, ``prompt_token_ids``, ``refusal`` — only the keys seen."""
        return self._extras

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """One upstream SSE event in; the canonical events it completes out."""
        data = event.data
        if data is None:  # a comment (keepalive) or an empty event
            return []
        if self._done:
            raise UpstreamProtocolError("chat stream: data after [DONE]")
        if data == b"[DONE]":
            return self._finish()
        chunk = load_object(data, "chat")
        if chunk.get("error"):
            raise stream_error("chat", chunk["error"])
        out: list[StreamEvent] = []
        if not self._started:
            self._started = True
            ident, model = str(chunk.get("id") or ""), str(chunk.get("model") or "")
            out.append(StreamStart(ident, model))
            if isinstance(ids := chunk.get("prompt_token_ids"), list):
                self._extras["prompt_token_ids"] = ids
        choices = chunk.get("choices")
        if choices:
            if not isinstance(choices, list):
                raise UpstreamProtocolError("chat stream: 'choices' must be an array")
            for choice in choices:
                self._choice(choice, out)
        usage = chunk.get("usage")
        if usage:
            self._usage = openai_usage(usage, "prompt_tokens", "completion_tokens")
        return out

    def eof(self) -> list[StreamEvent]:
        """The upstream closed the stream: the closing events if it had finished
        (some servers omit ``[DONE]``), else :class:`UpstreamProtocolError`."""
        if self._done:
            return []
        if not self._finished:
            raise UpstreamProtocolError("chat stream ended before a finish_reason")
        return self._finish()

    def _finish(self) -> list[StreamEvent]:
        if not self._started:
            raise UpstreamProtocolError("chat stream: [DONE] before any chunk")
        out: list[StreamEvent] = []
        self._close_all(out)
        self._done = True
        out.append(StreamEnd(self._stop, self._usage or Usage(), self._stop_sequence))
        return out

    def _choice(self, choice: object, out: list[StreamEvent]) -> None:
        if not isinstance(choice, dict):
            raise UpstreamProtocolError("chat stream: a choice must be an object")
        if choice.get("index", 0) != 0:
            raise UpstreamProtocolError("chat stream: n > 1 streams cannot be translated")
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise UpstreamProtocolError("chat stream: 'delta' must be an object")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            self._kind_delta("reasoning", reasoning, out)
        content = delta.get("content")
        if content and isinstance(content, str):
            self._kind_delta("text", content, out)
        calls = delta.get("tool_calls")
        if calls:
            if not isinstance(calls, list):
                raise UpstreamProtocolError("chat stream: 'tool_calls' must be an array")
            for call in calls:
                self._tool_delta(call, out)
        if choice.get("logprobs") or choice.get("token_ids") or delta.get("refusal"):
            self._keep(choice, delta)
        finish = choice.get("finish_reason")
        if finish:
            self._finished = True
            self._stop = _STOP_IN.get(finish) if isinstance(finish, str) else None
            matched = choice.get("stop_reason")  # vLLM: the stop string that matched
            if finish == "stop" and isinstance(matched, str):
                self._stop, self._stop_sequence = "stop_sequence", matched
            self._close_all(out)

    def _kind_delta(self, kind: BlockKind, text: str, out: list[StreamEvent]) -> None:
        index = self._text if kind == "text" else self._reasoning
        if index is None:
            # Switching between reasoning and text closes the other one: the
            # block dialects expect one thought, then one answer, not interleaving.
            other = self._reasoning if kind == "text" else self._text
            if other is not None:
                self._close(other, out)
            index = self._new_block(kind, None, None, out)
            if kind == "text":
                self._text = index
            else:
                self._reasoning = index
        out.append(BlockDelta(index, text))

    def _tool_delta(self, call: object, out: list[StreamEvent]) -> None:
        if not isinstance(call, dict):
            raise UpstreamProtocolError("chat stream: a tool call delta must be an object")
        position = call.get("index", 0)
        fn = call.get("function") or {}
        if not isinstance(fn, dict) or not isinstance(position, int):
            raise UpstreamProtocolError("chat stream: malformed tool call delta")
        index = self._tools.get(position)
        if index is None:
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise UpstreamProtocolError("chat stream: a new tool call has no function name")
            for other in (self._text, self._reasoning):
                if other is not None:
                    self._close(other, out)
            call_id = call.get("id")
            ident = call_id if isinstance(call_id, str) and call_id else f"call_{self._blocks}"
            index = self._tools[position] = self._new_block("tool_call", ident, name, out)
        arguments = fn.get("arguments")
        if arguments and isinstance(arguments, str):
            out.append(BlockDelta(index, arguments))

    def _keep(self, choice: dict[str, Any], delta: dict[str, Any]) -> None:
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(content := logprobs.get("content"), list):
            self._extras.setdefault("logprobs", []).extend(content)
        if isinstance(ids := choice.get("token_ids"), list):
            self._extras.setdefault("token_ids", []).extend(ids)
        if isinstance(refusal := delta.get("refusal"), str):
            self._extras["refusal"] = self._extras.get("refusal", "") + refusal

    def _new_block(
        self, kind: BlockKind, ident: str | None, name: str | None, out: list[StreamEvent]
    ) -> int:
        index = self._blocks
        self._blocks += 1
        self._open.append(index)
        out.append(BlockStart(index, kind, ident, name))
        return index

    def _close(self, index: int, out: list[StreamEvent]) -> None:
        self._open.remove(index)
        if index == self._text:
            self._text = None
        elif index == self._reasoning:
            self._reasoning = None
        out.append(BlockStop(index))

    def _close_all(self, out: list[StreamEvent]) -> None:
        for index in tuple(self._open):
            self._close(index, out)
        self._tools.clear()
