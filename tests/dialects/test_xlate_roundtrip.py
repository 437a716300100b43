"""Property tests: canonical -> dialect -> canonical is the identity on what the dialect
can express, within one dialect (with its own extras) and across two."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anthropic.types
import openai.types.chat
import openai.types.responses
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dialects.dialectkit import (
    CAPS,
    MODULES,
    json_objects,
    names,
    requests,
    with_origin,
)
from dialects.responsekit import responses
from rolltap.dialects.canonical import (
    Message,
    Reasoning,
    Request,
    Response,
    Text,
    ToolCall,
    ToolResult,
)

DIALECTS = ("chat", "messages", "responses")
PAIRS = [(a, b) for a in DIALECTS for b in DIALECTS if a != b]

relaxed = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _json(body: dict[str, Any]) -> dict[str, Any]:
    """The body as it travels: through JSON and back."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(body))
    return out


# --- same dialect, with that dialect's own extras -------------------------------------


def _map_parts(req: Request, fn: Any) -> Request:
    msgs = tuple(Message(m.role, tuple(fn(m, p) for p in m.parts), m.extra) for m in req.messages)
    return replace(req, messages=msgs)


@st.composite
def chat_requests(draw: st.DrawFn) -> Request:
    req = draw(requests(CAPS["chat"]))
    extra = draw(
        st.fixed_dictionaries(
            {}, optional={"n": st.just(1), "logprobs": st.booleans(), "min_p": json_objects}
        )
    )
    if req.max_tokens is not None and draw(st.booleans()):
        extra["max_completion_tokens"] = req.max_tokens  # the spelling it came with

    def part(m: Message, p: Any) -> Any:
        if isinstance(p, ToolResult) and draw(st.booleans()):
            return replace(p, extra={"name": draw(names)})
        if isinstance(p, ToolCall) and draw(st.booleans()):
            return replace(p, extra={"index": 0})
        return p

    req = _map_parts(replace(req, extra=extra), part)
    return with_origin(req, "chat")


@st.composite
def messages_requests(draw: st.DrawFn) -> Request:
    req = draw(requests(CAPS["messages"], signed=True))
    extra = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "thinking": st.just({"type": "enabled", "budget_tokens": 1024}),
                "service_tier": st.just("auto"),
            },
        )
    )
    cache = {"cache_control": {"type": "ephemeral"}}

    def part(m: Message, p: Any) -> Any:
        if isinstance(p, Text | ToolResult | ToolCall) and draw(st.booleans()):
            return replace(p, extra=cache)
        if isinstance(p, Reasoning) and p.signature and draw(st.booleans()):
            return Reasoning("", p.signature, {"type": "redacted_thinking"})
        return p

    # the thinking budget's effort is read into the canonical field (1024: low)
    effort = "low" if "thinking" in extra else None
    req = _map_parts(replace(req, extra=extra, reasoning_effort=effort), part)
    cache_system = draw(st.booleans())
    if req.system and cache_system:
        req = replace(req, system=(replace(req.system[0], extra=cache), *req.system[1:]))
    return with_origin(req, "messages")


@st.composite
def responses_requests(draw: st.DrawFn) -> Request:
    req = draw(requests(CAPS["responses"], signed=True))
    extra = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "store": st.booleans(),
                "include": st.just(["reasoning.encrypted_content"]),
                "reasoning": st.just({"effort": "low"}),
            },
        )
    )

    def part(m: Message, p: Any) -> Any:
        if not draw(st.booleans()):
            return p
        if isinstance(p, ToolCall):
            return replace(p, extra={"id": "fc_" + p.id, "status": "completed"})
        if isinstance(p, Reasoning):
            return replace(p, extra={"id": "rs_1"})
        if isinstance(p, Text) and m.role == "assistant":
            return replace(p, extra={"item": {"id": "msg_1", "status": "completed"}})
        return p

    effort = "low" if "reasoning" in extra else None  # reasoning.effort is read, and kept
    req = replace(req, extra=extra, reasoning_effort=effort)
    return with_origin(_map_parts(req, part), "responses")


OWN = {"chat": chat_requests(), "messages": messages_requests(), "responses": responses_requests()}


@pytest.mark.parametrize("dialect", DIALECTS)
@relaxed
@given(data=st.data())
def test_request_round_trips_within_its_dialect(dialect: str, data: st.DataObject) -> None:
    mod = MODULES[dialect]
    req = data.draw(OWN[dialect])
    assert mod.to_canonical(_json(mod.from_canonical(req))) == req


@pytest.mark.parametrize("dialect", DIALECTS)
@relaxed
@given(data=st.data())
def test_plain_request_round_trips_and_validates(dialect: str, data: st.DataObject) -> None:
    mod = MODULES[dialect]
    req = data.draw(requests(CAPS[dialect]))
    body = _json(mod.from_canonical(req))
    assert mod.to_canonical(body) == req
    assert mod.validate_request(orjson.dumps(body)) == body


# --- responses ---------------------------------------------------------------------


def _chat_extra(resp: Response) -> Response:
    extra = {
        "system_fingerprint": "fp_1",
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "logprobs": {
                    "content": [{"token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": []}]
                },
                "token_ids": [7],
            }
        ],
    }
    return with_origin(replace(resp, extra=extra), "chat")


def _messages_extra(resp: Response) -> Response:
    extra = {"usage": {"cache_creation_input_tokens": 0, "service_tier": "standard"}}
    return with_origin(replace(resp, extra=extra), "messages")


def _responses_extra(resp: Response) -> Response:
    extra = {"created_at": 1700000000, "reasoning": {"effort": "low", "summary": None}}
    return with_origin(replace(resp, extra=extra), "responses")


VALIDATE = {
    "chat": openai.types.chat.ChatCompletion.model_validate,
    "messages": anthropic.types.Message.model_validate,
    "responses": openai.types.responses.Response.model_validate,
}
DECORATE = {"chat": _chat_extra, "messages": _messages_extra, "responses": _responses_extra}


@pytest.mark.parametrize("dialect", DIALECTS)
@relaxed
@given(data=st.data())
def test_response_round_trips_and_fits_the_sdk_model(dialect: str, data: st.DataObject) -> None:
    mod = MODULES[dialect]
    resp = with_origin(data.draw(responses(CAPS[dialect], signed=dialect != "chat")), dialect)
    if data.draw(st.booleans()):
        resp = DECORATE[dialect](resp)
    body = _json(mod.response_from_canonical(resp))
    assert mod.response_to_canonical(body) == resp
    if resp.stop_reason is not None or dialect != "chat":  # chat's finish_reason is never null
        VALIDATE[dialect](body)


# --- across dialects -------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), PAIRS)
@relaxed
@given(data=st.data())
def test_request_survives_a_trip_through_two_dialects(a: str, b: str, data: st.DataObject) -> None:
    req = data.draw(requests(CAPS[a] & CAPS[b]))
    via_a = MODULES[a].to_canonical(_json(MODULES[a].from_canonical(req)))
    assert via_a == req
    assert MODULES[b].to_canonical(_json(MODULES[b].from_canonical(via_a))) == req


# Anthropic counts no reasoning tokens and Responses always does: no usage fits both.
RESPONSE_PAIRS = [p for p in PAIRS if set(p) != {"messages", "responses"}]


@pytest.mark.parametrize(("a", "b"), RESPONSE_PAIRS)
@relaxed
@given(data=st.data())
def test_response_survives_a_trip_through_two_dialects(a: str, b: str, data: st.DataObject) -> None:
    resp = data.draw(responses(CAPS[a] & CAPS[b]))
    via_a = MODULES[a].response_to_canonical(_json(MODULES[a].response_from_canonical(resp)))
    assert via_a == resp
    assert (
        MODULES[b].response_to_canonical(_json(MODULES[b].response_from_canonical(via_a))) == resp
    )
