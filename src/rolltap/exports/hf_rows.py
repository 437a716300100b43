"""One row of the Hugging Face ``datasets`` export per rollout, built from its events.

Pure Python, no ``datasets`` needed: the messages come from the session's transcript
(:func:`rolltap.exports.transcript.build_transcript`, which reads every harness and upstream
dialect), the token columns from its token records through the training export's own
sequence assembly (:func:`rolltap.exports.tokens.assemble`). The columns and their
types are documented in ``docs/datasets-export.md`` and declared in
:mod:`rolltap.exports.hf`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from rolltap.events import Event, EventKind
from rolltap.exports.token_drift import drifts
from rolltap.exports.tokens import Segment, TokenRecordError, TokenTurn, assemble, token_turn
from rolltap.exports.transcript import build_transcript
from rolltap.exports.transcript_model import (
    CallInfo,
    Entry,
    ReasoningEntry,
    Said,
    ToolCallEntry,
    ToolResultEntry,
)
from rolltap.store import RunInfo, SessionInfo

__all__ = ["chat_messages", "drifted", "rollout_row"]

_ASSISTANT_SIDE = (ReasoningEntry, ToolCallEntry)


def _blank_assistant() -> dict[str, Any]:
    return {"role": "assistant", "content": None, "reasoning_content": None, "tool_calls": None}


def _join(before: str | None, text: str) -> str:
    return text if not before else f"{before}\n{text}"


def chat_messages(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The conversation in OpenAI chat shape, whatever dialect it was recorded in.

    One assistant message holds the reasoning, text and tool calls of one reply (the
    contiguous assistant-side entries of one event); tool results are ``role: tool``
    messages with the ``tool_call_id`` (and tool ``name``) they answer.
    """
    messages: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None  # the assistant message being filled
    current_seq = -1
    for entry in entries:
        assistant = isinstance(entry, _ASSISTANT_SIDE) or (
            isinstance(entry, Said) and entry.role == "assistant"
        )
        if not assistant:
            current = None
            if isinstance(entry, Said):
                messages.append({"role": str(entry.role), "content": entry.text})
            elif isinstance(entry, ToolResultEntry):
                messages.append(_tool_message(entry))
            continue  # request/reply boundaries, errors and markers are not messages
        if current is None or entry.seq != current_seq:
            current, current_seq = _blank_assistant(), entry.seq
            messages.append(current)
        _fill(current, entry)
    return messages


def _tool_message(entry: ToolResultEntry) -> dict[str, Any]:
    return {"role": "tool", "content": entry.text, "tool_call_id": _str(entry.call_id),
            "name": _str(entry.name)}  # fmt: skip


def _fill(message: dict[str, Any], entry: Entry) -> None:
    if isinstance(entry, Said):
        message["content"] = _join(message["content"], entry.text)
    elif isinstance(entry, ReasoningEntry) and entry.text:
        message["reasoning_content"] = _join(message["reasoning_content"], entry.text)
    elif isinstance(entry, ToolCallEntry):
        call = {"id": _str(entry.call_id), "type": "function",
                "function": {"name": entry.name, "arguments": entry.arguments}}  # fmt: skip
        message["tool_calls"] = [*(message["tool_calls"] or []), call]


def _last_payload(events: Sequence[Event], kind: str) -> Mapping[str, Any]:
    for event in reversed(events):
        if event.kind == kind:
            return event.payload
    return {}


def _components(reward: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reward event's components (every numeric field but ``reward``), by name."""
    return [
        {"name": str(name), "value": float(value)}
        for name, value in reward.items()
        if name != "reward" and isinstance(value, int | float) and not isinstance(value, bool)
    ]


def _answer(status: Mapping[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """The harness's answer as the runner recorded it; else the last assistant text."""
    if isinstance(status.get("answer"), str):
        return str(status["answer"])
    for message in reversed(messages):
        if message["role"] == "assistant" and message["content"] is not None:
            return str(message["content"])
    return None


def _sum(values: list[Any]) -> int | None:
    present = [v for v in map(_int, values) if v is not None]
    return sum(present) if present else None


def _usage(calls: Sequence[CallInfo]) -> dict[str, Any]:
    prompt = _sum([c.prompt_tokens for c in calls])
    completion = _sum([c.completion_tokens for c in calls])
    total = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _call(c: CallInfo) -> dict[str, Any]:
    return {"model": _str(c.model), "dialect": _str(c.dialect),
            "upstream_dialect": _str(c.upstream_dialect), "stream": c.stream,
            "status": _int(c.status), "finish_reason": _str(c.finish_reason),
            "error_code": c.error_code, "prompt_tokens": _int(c.prompt_tokens),
            "completion_tokens": _int(c.completion_tokens), "ttfc_ms": _float(c.ttfc_ms),
            "total_ms": _float(c.total_ms)}  # fmt: skip


# Payload values are as recorded: anything off its type becomes null, never a failed row.
def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number else None


def _timing(info: SessionInfo, calls: Sequence[CallInfo]) -> dict[str, Any]:
    spent = [t for t in (_float(c.total_ms) for c in calls) if t is not None]
    return {"created_at": info.created_at, "updated_at": info.updated_at,
            "duration_s": info.updated_at - info.created_at,
            "model_ms": sum(spent) if spent else None}  # fmt: skip


def _token_turns(events: Sequence[Event]) -> list[TokenTurn]:
    turns = []
    for event in events:
        if event.kind == EventKind.MODEL_RESPONSE:
            try:
                turn = token_turn(event.seq, event.payload)
            except TokenRecordError as exc:
                raise TokenRecordError(f"event {event.seq}: {exc}") from None
            if turn is not None:
                turns.append(turn)
    return turns


def drifted(events: Sequence[Event]) -> bool:
    """Whether a turn of the rollout drifted (``--on-drift drop`` leaves it out); a
    malformed record is not drift (its row says so in ``metadata.warnings``)."""
    try:
        turns = _token_turns(events)
    except TokenRecordError:
        return False
    return any(mark is not None for mark in drifts(turns))


def _split(segment: Segment, prompt_len: int) -> dict[str, Any]:
    """A sequence as prompt + completion, mask, logprobs and version spans aligned with
    the completion (every sampled id is past the first turn's prompt)."""
    spans = [{**s, "start": s["start"] - prompt_len, "end": s["end"] - prompt_len}
             for s in segment.policy_versions]  # fmt: skip
    return {"prompt_ids": segment.tokens[:prompt_len],
            "completion_ids": segment.tokens[prompt_len:],
            "logprobs": segment.logprobs[prompt_len:],
            "loss_mask": segment.loss_mask[prompt_len:],
            "policy_versions": spans}  # fmt: skip


_NO_TOKENS: dict[str, Any] = dict.fromkeys(
    ("prompt_ids", "completion_ids", "logprobs", "loss_mask", "policy_versions", "segments",
     "continued")
)  # fmt: skip


def token_columns(events: Sequence[Event], warnings: list[str]) -> dict[str, Any]:
    """The token columns: null without token records (or with a malformed one, warned)."""
    try:
        turns = _token_turns(events)
    except TokenRecordError as exc:
        warnings.append(f"token records not exported: {exc}")
        return dict(_NO_TOKENS)
    if not turns:
        return dict(_NO_TOKENS)
    segments, placed, assembly_warnings = assemble(turns)
    warnings.extend(assembly_warnings)
    first: dict[int, TokenTurn] = {}  # a segment's prompt is its first turn's
    for turn, segment in zip(turns, placed, strict=True):
        first.setdefault(segment, turn)
    split = [_split(s, len(first[n].prompt_ids)) for n, s in enumerate(segments)]
    flat = split[0] if len(split) == 1 else dict.fromkeys(split[0])
    return {**flat, "segments": split, "continued": sum(t.continued for t in turns)}


def _metadata(info: SessionInfo, warnings: list[str]) -> dict[str, Any]:
    return {"user": info.user, "forked_from": info.parent_id, "fork_at": info.fork_at,
            "n_events": info.n_events, "warnings": warnings}  # fmt: skip


def rollout_row(info: SessionInfo, run: RunInfo, events: Sequence[Event]) -> dict[str, Any]:
    """The export row of one rollout (session) from its whole history, forks resolved."""
    transcript = build_transcript(events)
    messages = chat_messages(transcript.entries)
    status, reward = _last_payload(events, "status"), _last_payload(events, "reward")
    failed = [c.error_code for c in transcript.calls if c.error_code is not None]
    warnings: list[str] = []
    tokens = token_columns(events, warnings)
    task_id, sample = info.task.get("task_id"), info.task.get("sample")
    return {
        "run_id": info.run_id,
        "run_name": run.name,
        "session_id": info.id,
        "task_id": None if task_id is None else str(task_id),
        "sample": _int(sample),
        "task": orjson.dumps(dict(info.task)).decode(),
        "messages": messages,
        "answer": _answer(status, messages),
        "reward": info.reward,
        "reward_components": _components(reward),
        "status": info.status,
        "error": _str(status.get("error")),
        "error_code": failed[-1] if failed else None,
        "limit": _str(status.get("limit")),
        "usage": _usage(transcript.calls),
        "calls": [_call(c) for c in transcript.calls],
        "timing": _timing(info, transcript.calls),
        "metadata": _metadata(info, warnings),
        **tokens,
    }
