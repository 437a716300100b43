"""A session's transcript, built from its events, for every harness and upstream dialect.

Request events store only the messages past the conversation already recorded
(docs/events.md), so reading them in order yields each message once — except the
model's own reply, which the next request repeats: a request's leading assistant turn
that repeats the previous reply (or part of it) is dropped; one that differs is the
harness's own edit and is shown.

>>> from rolltap.store import Event
>>> t = build_transcript([
...     Event(0, "model_request", 0.0, {"intercept_id": "i1", "dialect": "chat",
...           "messages": [{"role": "user", "content": "2+2?"}], "params": {}}),
...     Event(1, "model_error", 0.0, {"intercept_id": "i1", "code": "upstream_timeout",
...           "status": 504, "message": "no answer"})])
>>> [e.kind for e in t.entries], t.calls[0].error_code
(['request', 'said', 'error'], 'upstream_timeout')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import orjson

from rolltap.events import Event
from rolltap.exports.transcript_model import (
    CallError,
    CallInfo,
    CallReply,
    CallStart,
    Entry,
    Marker,
    Said,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
)
from rolltap.exports.transcript_parts import body_entries, message_entries, system_entries

__all__ = ["build_transcript"]

_OUTPUT_ITEMS = ("function_call", "reasoning")
_MALFORMED = (AttributeError, TypeError, KeyError, IndexError, ValueError)


def build_transcript(events: Iterable[Event]) -> Transcript:
    """The transcript of a session's history (a fork's inherited prefix included)."""
    builder = _Builder()
    for event in events:
        builder.add(event)
    return Transcript(tuple(builder.entries), tuple(builder.calls))


def _key(entry: Entry) -> tuple[str, ...] | None:
    """What must match for a request's assistant turn to be the previous reply's echo."""
    if isinstance(entry, Said):
        return ("said", entry.role, entry.text.strip())
    if isinstance(entry, ToolCallEntry):
        try:
            args = orjson.dumps(orjson.loads(entry.arguments), option=orjson.OPT_SORT_KEYS)
        except orjson.JSONDecodeError:
            args = entry.arguments.encode()
        return ("tool_call", entry.name, args.decode())
    return None  # reasoning is often not sent back; it does not decide


def _keys(entries: Iterable[Entry]) -> list[tuple[str, ...]]:
    return [k for k in map(_key, entries) if k is not None]


def _within(echo: list[tuple[str, ...]], reply: list[tuple[str, ...]]) -> bool:
    """Whether ``echo`` is ``reply`` with some parts left out (harnesses often drop the
    text beside tool calls when they send a reply back), nothing changed or added."""
    rest = iter(reply)
    return bool(reply) and all(key in rest for key in echo)


def _is_output(message: Any) -> bool:
    return isinstance(message, Mapping) and (
        message.get("role") == "assistant" or message.get("type") in _OUTPUT_ITEMS
    )


class _Builder:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.calls: list[CallInfo] = []
        self._by_intercept: dict[str, int] = {}
        self._last_reply: list[tuple[str, ...]] = []
        self._tool_names: dict[str, str] = {}
        self._system: str | None = None

    def add(self, event: Event) -> None:
        p = event.payload
        try:
            if event.kind == "model_request":
                self._request(event.seq, p)
            elif event.kind == "model_response":
                self._response(event.seq, p)
            elif event.kind == "model_error":
                self._error(event.seq, p)
            else:
                self._put(_marker(event), event.seq, None)
        except _MALFORMED:  # a payload off its schema: shown as stored
            self._put(Marker(event.kind, orjson.dumps(dict(p)).decode()), event.seq, None)

    def _put(self, entry: Entry, seq: int, call: int | None) -> None:
        if isinstance(entry, ToolCallEntry) and entry.call_id:
            self._tool_names[entry.call_id] = entry.name
        if isinstance(entry, ToolResultEntry) and entry.name is None and entry.call_id:
            entry = replace(entry, name=self._tool_names.get(entry.call_id))
        self.entries.append(replace(entry, seq=seq, call=call))

    def _call(self, p: Mapping[str, Any]) -> int:
        """The call a response or error answers (a new one if its request is missing)."""
        found = self._by_intercept.get(str(p.get("intercept_id")))
        if found is not None:
            return found
        self.calls.append(CallInfo(intercept_id=p.get("intercept_id")))
        return len(self.calls) - 1

    def _request(self, seq: int, p: Mapping[str, Any]) -> None:
        params, messages, dialect = p.get("params") or {}, p.get("messages") or [], p.get("dialect")
        if not isinstance(params, Mapping) or not isinstance(messages, list):
            raise TypeError("a request payload off its schema")
        call = CallInfo(
            intercept_id=p.get("intercept_id"), dialect=dialect,
            upstream_dialect=p.get("upstream_dialect"), model=params.get("model"),
            stream=bool(p.get("stream")), new_messages=len(messages),
            prefix_messages=int(p.get("prefix_messages") or 0),
        )  # fmt: skip
        index = len(self.calls)
        self.calls.append(call)
        self._by_intercept[str(call.intercept_id)] = index
        self._put(CallStart(), seq, index)
        for entry in system_entries(dialect, params):
            if not isinstance(entry, Said):  # a system prompt that does not parse
                self._put(entry, seq, index)
            elif entry.text != self._system:
                self._system = entry.text
                self._put(entry, seq, index)
        lead = next((i for i, m in enumerate(messages) if not _is_output(m)), len(messages))
        echo = [e for m in messages[:lead] for e in message_entries(dialect, m)]
        rest = [e for m in messages[lead:] for e in message_entries(dialect, m)]
        if not echo or not _within(_keys(echo), self._last_reply):
            rest = echo + rest
        self._last_reply = []
        for entry in rest:
            self._put(entry, seq, index)

    def _response(self, seq: int, p: Mapping[str, Any]) -> None:
        index = self._call(p)
        call = self.calls[index]
        call.status, call.finish_reason = p.get("status"), p.get("finish_reason")
        usage = p.get("usage") or {}
        call.prompt_tokens = usage.get("prompt_tokens", usage.get("input_tokens"))
        call.completion_tokens = usage.get("completion_tokens", usage.get("output_tokens"))
        _timing(call, p)
        self._put(CallReply(), seq, index)
        parts = body_entries(p)
        self._last_reply = _keys(parts)
        for entry in parts:
            self._put(entry, seq, index)

    def _error(self, seq: int, p: Mapping[str, Any]) -> None:
        index = self._call(p)
        call = self.calls[index]
        call.status, call.error_code = p.get("status"), str(p.get("code", "error"))
        _timing(call, p)
        self._put(CallError(call.error_code, str(p.get("message", "")), call.status), seq, index)


def _timing(call: CallInfo, p: Mapping[str, Any]) -> None:
    timing = p.get("timing") or {}
    call.ttfc_ms, call.total_ms = timing.get("ttfc_ms"), timing.get("total_ms")


def _marker(event: Event) -> Marker:
    p = event.payload
    if event.kind == "harness_output":
        return Marker(str(p.get("stream", "output")), str(p.get("text", "")))
    if event.kind == "reward":
        return Marker("reward", str(p.get("reward")))
    if event.kind == "status":
        reason = p.get("limit") or p.get("error")
        return Marker("status", f"{p.get('status')}{f' ({reason})' if reason else ''}")
    if event.kind == "note":
        return Marker("note", str(p.get("text", "")))
    if event.kind == "token_count":
        return Marker("token_count", _token_count(p))
    return Marker(event.kind, orjson.dumps(dict(p)).decode())


def _token_count(p: Mapping[str, Any]) -> str:
    error = p.get("error")
    if isinstance(error, Mapping):
        return f"{p.get('status')} [{error.get('code')}] {error.get('message', '')}"
    source = " (estimate)" if p.get("source") == "estimate" else ""
    return f"{p.get('input_tokens')} input tokens{source}"
