"""``POST /v1/chat/completions``: the OpenAI chat-completions wire format, with vLLM's
``return_token_ids`` and ``reasoning_content`` (:mod:`rolltap.sim.chat_ids`).

With a weight version, the body (a stream: the chunk with the finish reason) ends with
``"metadata": {"weight_version": V}`` (SGLang's). An aborted generation answers the text it
had generated (no tool call) with the finish reason ``abort`` (vLLM's and SGLang's); a
stream ends with a chunk carrying it (then usage, when asked, and ``[DONE]``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson

from rolltap.sim.chat_ids import ChatIds, chat_ids, reasoning_of
from rolltap.sim.chat_in import prompt_for
from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, answer_for, cut_short
from rolltap.sim.plan import CREATED, VERSION, Dialect, Plan, fragments, hole, sse, versioned
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
    "abort": "abort",
}
_DONE_EVENT = b"data: [DONE]\n\n"
_METADATA = {"weight_version": VERSION}


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


def _body(answer: Answer, ids: ChatIds | None, thought: tuple[str, ...], version: bool) -> bytes:
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
    if version:
        body["metadata"] = _METADATA
    return orjson.dumps(body)


class _Chunks:
    """Builds the stream's ``chat.completion.chunk`` events for one answer."""

    def __init__(
        self, answer: Answer, include_usage: bool, ids: ChatIds | None, thought: tuple[str, ...],
        version: bool, *, first: bool = True,
    ) -> None:  # fmt: skip
        self.answer = answer
        self.include_usage = include_usage
        self.ids = ids
        self.thought = thought
        self.version = version
        #: whether the next chunk is the stream's first (it carries the prompt's ids)
        self.first = first

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
        if self.ids is not None and self.first:
            chunk["prompt_token_ids"] = self.ids.prompt
        if self.version and any(c["finish_reason"] is not None for c in choices):
            chunk["metadata"] = _METADATA
        self.first = False
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
    version = versioned(config)
    if not answer.stream:
        cut = partial(_cut, answer, ids, thought, version)
        body_bytes = _body(answer, ids, thought, version)
        return Plan.whole(body_bytes, tokens=len(answer.tokens), abort=cut)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    chunks = _Chunks(answer, include_usage, ids, thought, version)
    events = chunks.tokens()
    token_events = len(events)
    end = None if ids is None else ids.end
    events.append(chunks.delta({}, finish=_FINISH[answer.stop], ids=end))
    if include_usage:
        events.append(chunks.event([], _usage(answer)))
    events.append(_DONE_EVENT)
    tail = partial(_tail, _Chunks(answer, include_usage, ids, thought, version))
    return Plan.streamed(events, first_token=0, token_events=token_events, abort=tail)


def _cut(
    answer: Answer, ids: ChatIds | None, thought: tuple[str, ...], version: bool, n: int
) -> Plan:
    """The whole answer of a generation aborted after ``n`` tokens: the thought comes with
    the first token."""
    cut, thought = cut_short(answer, n), thought if n else ()
    if ids is not None:
        ids = ChatIds(ids.prompt, ids.thinking if n else [], ids.pieces[:n], [])
    return Plan.whole(_body(cut, ids, thought, version), tokens=n)


def _tail(chunks: _Chunks, sent: int) -> Plan:
    """The end of a stream aborted after ``sent`` chunks (the thought's, then the text's)."""
    chunks = _Chunks(chunks.answer, chunks.include_usage, chunks.ids, chunks.thought,
                     chunks.version, first=sent == 0)  # fmt: skip
    cut = cut_short(chunks.answer, max(0, sent - len(chunks.thought)))
    events = [chunks.delta({}, finish="abort", ids=None if chunks.ids is None else [])]
    if chunks.include_usage:
        events.append(chunks.event([], _usage(cut)))
    events.append(_DONE_EVENT)
    return Plan.streamed(events, first_token=0, token_events=0)


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
