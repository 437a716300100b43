"""``POST /v1/chat/completions``: the OpenAI chat-completions wire format, with vLLM's
``return_token_ids`` and ``reasoning_content`` (:mod:`rolltap.sim.chat_ids`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from rolltap.sim.chat_ids import ChatIds, chat_ids, reasoning_of
from rolltap.sim.config import SimConfig
from rolltap.sim.content import (
    Answer,
    BadRequest,
    Prompt,
    Tool,
    Turn,
    answer_for,
    call_turn,
    text_of,
)
from rolltap.sim.plan import CREATED, Dialect, Plan, fragments, hole, sse
from rolltap.sim.prefix import PromptTokens, conversation_tokens
from rolltap.sim.script import ScriptTurn, ToolCall
from rolltap.sim.wire import error_response

__all__ = ["CHAT", "plan_for", "prompt_for"]

_ID = hole("id")
_CALL = hole("call")
_FINISH = {
    "end": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_call": "tool_calls",
}
_DONE_EVENT = b"data: [DONE]\n\n"


def _turns(message: dict[str, Any]) -> Iterator[Turn]:
    role = message.get("role")
    role = "system" if role == "developer" else role if isinstance(role, str) else ""
    yield (role, text_of(message.get("content")))
    calls = message.get("tool_calls") if role == "assistant" else None
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            yield call_turn(function.get("name"), function.get("arguments"))


def _cap(body: dict[str, Any]) -> int | None:
    caps = [body.get("max_tokens"), body.get("max_completion_tokens")]
    limits = [c for c in caps if isinstance(c, int) and not isinstance(c, bool)]
    if any(c < 0 for c in limits):
        raise BadRequest("max_tokens: must not be negative")
    return min(limits, default=None)


def _tools(body: dict[str, Any]) -> tuple[Tool, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    functions = [t.get("function") for t in tools if isinstance(t, dict)]
    return tuple(
        Tool(str(f.get("name") or "tool"), f.get("parameters"))
        for f in functions
        if isinstance(f, dict)
    )


def _forced_tool(choice: Any) -> str | None:
    named = choice.get("function") if isinstance(choice, dict) else None
    name = named.get("name") if isinstance(named, dict) else None
    return name if isinstance(name, str) else None


def prompt_for(body: dict[str, Any], config: SimConfig) -> Prompt:
    """The :class:`Prompt` of a chat-completions request body."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages: required, must be a list")
    turns: list[Turn] = []
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("messages: every message must be an object")
        turns.extend(_turns(message))
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return Prompt(
        model=str(body.get("model") or config.model),
        turns=tuple(turns),
        tools=_tools(body),
        tools_allowed=body.get("tool_choice") != "none",
        forced_tool=_forced_tool(body.get("tool_choice")),
        max_tokens=_cap(body),
        stop_sequences=tuple(s for s in stops if isinstance(s, str)),
        logprobs=body.get("logprobs") is True,
        stream=body.get("stream") is True,
    )


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def _logprob_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}


def _logprobs(answer: Answer, start: int, stop: int) -> dict[str, Any] | None:
    if answer.logprobs is None:
        return None
    pairs = zip(answer.tokens[start:stop], answer.logprobs[start:stop], strict=True)
    return {"content": [_logprob_entry(t, lp) for t, lp in pairs]}


def _tool_call(call: ToolCall, arguments: str) -> dict[str, Any]:
    return {
        "id": _CALL if call.id is None else "call_" + call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _body(answer: Answer, ids: ChatIds | None, thought: tuple[str, ...]) -> bytes:
    # A message of tool calls alone has no content (null), as OpenAI's.
    content = answer.text if answer.tokens or not answer.calls else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if answer.calls:
        message["tool_calls"] = [_tool_call(call, call.arguments) for call in answer.calls]
    if thought:
        message["reasoning_content"] = "".join(thought)
    choice = {
        "index": 0,
        "message": message,
        "logprobs": _logprobs(answer, 0, len(answer.tokens)),
        "finish_reason": _FINISH[answer.stop],
    }
    body: dict[str, Any] = {
        "id": _ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": answer.model,
        "choices": [choice],
        "usage": _usage(answer),
    }
    if ids is not None:
        choice["token_ids"] = ids.completion
        body["prompt_token_ids"] = ids.prompt
    return orjson.dumps(body)


class _Chunks:
    """Builds the stream's ``chat.completion.chunk`` events for one answer."""

    def __init__(
        self, answer: Answer, include_usage: bool, ids: ChatIds | None, thought: tuple[str, ...]
    ) -> None:
        self.answer = answer
        self.include_usage = include_usage
        self.ids = ids
        self.thought = thought
        self._first = True

    def event(self, choices: list[Any], usage: dict[str, int] | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": _ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.answer.model,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = usage
        if self.ids is not None and self._first:
            chunk["prompt_token_ids"] = self.ids.prompt
        self._first = False
        return sse(chunk)

    def delta(
        self, delta: dict[str, Any], lp: Any = None, finish: str | None = None,
        ids: list[int] | None = None,
    ) -> bytes:  # fmt: skip
        choice = {"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}
        if self.ids is not None:
            choice["token_ids"] = ids or []
        return self.event([choice])

    def piece(self, i: int) -> list[int]:
        """The ids of text token ``i`` (of the tool call, for ``i`` 0)."""
        pieces = [] if self.ids is None else self.ids.pieces
        return pieces[i] if i < len(pieces) else []

    def thinking(self) -> list[bytes]:
        """The reasoning's chunks (none without one), its ids on the first."""
        events = []
        for i, word in enumerate(self.thought):
            first = i == 0
            delta = {"role": "assistant", "reasoning_content": word} if first else {
                "reasoning_content": word}  # fmt: skip
            ids = self.ids.thinking if first and self.ids is not None else None
            events.append(self.delta(delta, ids=ids))
        return events

    def tokens(self) -> list[bytes]:
        events = self.thinking()
        answer = self.answer
        if not answer.tokens and not answer.calls:
            return [*events, self.delta({"role": "assistant", "content": ""})]
        for i, token in enumerate(answer.tokens):
            delta = {"role": "assistant", "content": token} if i == 0 else {"content": token}
            events.append(self.delta(delta, _logprobs(answer, i, i + 1), ids=self.piece(i)))
        for index, call in enumerate(answer.calls):
            events += self.call(index, call, first=index == 0 and not answer.tokens)
        return events

    def call(self, index: int, call: ToolCall, *, first: bool) -> list[bytes]:
        """One tool call's chunks: its id and name, then its arguments in pieces."""
        opening: dict[str, Any] = {"tool_calls": [{"index": index, **_tool_call(call, "")}]}
        if first:
            opening = {"role": "assistant", "content": None, **opening}
        events = [self.delta(opening, ids=self.piece(0) if first else None)]
        for fragment in fragments(call.arguments):
            more = {"index": index, "function": {"arguments": fragment}}
            events.append(self.delta({"tool_calls": [more]}))
        return events


def plan_for(body: dict[str, Any], config: SimConfig, turn: ScriptTurn | None = None) -> Plan:
    """Serialize the answer to ``body`` (``turn``: the script's) for the wire shape the
    request asked for."""
    prompt = prompt_for(body, config)
    answer = answer_for(prompt, config, turn)
    thought = reasoning_of(answer, config)
    ids = None
    if body.get("return_token_ids") is True:
        ids = chat_ids(prompt, answer, thought, retokenize=config.retokenize_history)
    if not answer.stream:
        return Plan.whole(_body(answer, ids, thought), tokens=len(answer.tokens))
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    chunks = _Chunks(answer, include_usage, ids, thought)
    events = chunks.tokens()
    token_events = len(events)
    end = None if ids is None else ids.end
    events.append(chunks.delta({}, finish=_FINISH[answer.stop], ids=end))
    if include_usage:
        events.append(chunks.event([], _usage(answer)))
    events.append(_DONE_EVENT)
    return Plan.streamed(events, first_token=0, token_events=token_events)


def _prompt_tokens(body: dict[str, Any], config: SimConfig) -> PromptTokens:
    prompt = prompt_for(body, config)
    return conversation_tokens(prompt, answer_for(prompt, config))


#: The chat-completions dialect, served at ``POST /v1/chat/completions``.
CHAT = Dialect(
    name="chat",
    plan=plan_for,
    error=error_response,
    ids={"id": "chatcmpl-sim-", "call": "call_sim_"},
    malformed_body=b'{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{not json',
    malformed_event=b"data: {not json\n\n",
    prompt_tokens=_prompt_tokens,
    plan_turn=plan_for,
)
