"""A relayed body read past the conversation its rollout sent before (gateway/relay_splice.py).

An agent loop written as orjson writes is read past its known prefix from its second call
on (``/stats`` ``totals.read_past``); the same loop written with spaces is read whole. Both
must come to the same thing: the upstream receives the same bytes, and the request events
record the same prefixes and messages. Bodies that only look like a known loop (the
conversation moved, a member named twice, a trailing comma, a message nested too deep)
are read whole and answered as a whole read answers them. And on bodies drawn at random
around a known loop, a body read past its prefix is byte for byte the body read whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers import ADMIN_HEADERS, ADMIN_TOKEN, events, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import InvalidRequestError
from rolltap.gateway import Gateway
from rolltap.gateway.conversation import ConversationIndex
from rolltap.gateway.relay_body import check_relayed
from rolltap.gateway.relay_splice import layout_of, read_past
from rolltap.gateway.rollout import Rollout
from rolltap.http.json_body import parse_json_object
from upstreams import CHAT_ANSWER, serving

MODEL = "up-model"
MESSAGES_ANSWER: dict[str, Any] = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
}  # fmt: skip
ROUTES = {"chat": "/chat/completions", "messages": "/v1/messages"}
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


@dataclass
class Upstream:
    """Keeps each request body's bytes as it arrived."""

    received: list[bytes] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(await request.read())
        answer = MESSAGES_ANSWER if request.path.endswith("/messages") else CHAT_ANSWER
        return web.json_response(answer)


@asynccontextmanager
async def relay(dialect: str) -> AsyncIterator[tuple[Gateway, Upstream]]:
    upstream = Upstream()
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/chat/completions", upstream.handle)
    app.router.add_post("/v1/messages", upstream.handle)
    async with serving(app) as url:
        endpoint = EndpointConfig(base_url=url + "/v1", model=MODEL, dialect=dialect)
        gateway = Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN))
        await gateway.start()
        try:
            yield gateway, upstream
        finally:
            await gateway.aclose()


async def _call(
    http: aiohttp.ClientSession, rollout: dict[str, Any], dialect: str, raw: bytes
) -> tuple[int, dict[str, Any]]:
    base = rollout["openai_base_url" if dialect == "chat" else "anthropic_base_url"]
    headers = {"Authorization": f"Bearer {rollout['api_key']}", "x-api-key": rollout["api_key"],
               "Content-Type": "application/json", "anthropic-version": "2023-06-01"}  # fmt: skip
    async with http.post(base + ROUTES[dialect], data=raw, headers=headers) as resp:
        answer: dict[str, Any] = await resp.json()
        return resp.status, answer


async def _read_past(http: aiohttp.ClientSession, gateway: Gateway) -> int:
    async with http.get(gateway.admin_url + "/stats", headers=ADMIN_HEADERS) as resp:
        stats = await resp.json()
        count: int = stats["totals"]["read_past"]
        return count


def _turn(dialect: str, i: int) -> list[dict[str, Any]]:
    """An agent's tool call and its result (``messages``: Claude Code's blocks)."""
    if dialect == "chat":
        return [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}",
             "type": "function", "function": {"name": "search", "arguments": '{"q":"é"}'}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} \u2028 \"quoted\""},
        ]  # fmt: skip
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "search",
                                           "input": {"q": f"q{i}", "n": 1.5}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                      "content": f"result {i}"}]},
    ]  # fmt: skip


def _marked(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` with a prompt-caching marker on its last block, as Claude Code moves
    it every turn."""
    last = history[-1]
    marked = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
    blocks = [*last["content"][:-1], marked]
    return [*history[:-1], {**last, "content": blocks}]


def _loop(dialect: str, turns: int) -> list[dict[str, Any]]:
    """The bodies of one agent loop, a turn longer each call: the model first, the tools
    and sampling after the conversation."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "find it"}]
    out = []
    for i in range(turns):
        messages = _marked(history) if dialect == "messages" and i else history
        out.append({"model": "m", "messages": messages, "tools": TOOLS, "max_tokens": 32})
        history = [*history, *_turn(dialect, i)]
    return out


def _spaced(body: Any) -> bytes:
    """``body`` written as Python's json module writes it: keys and items spaced."""
    return json.dumps(body).encode()


def _recorded(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e["payload"].items() if k != "intercept_id"}
        for e in log
        if e["kind"] == "model_request"
    ]


@pytest.mark.parametrize("dialect", ["chat", "messages"])
async def test_a_loop_read_past_its_prefix_records_and_sends_what_a_whole_read_does(
    http: aiohttp.ClientSession, dialect: str
) -> None:
    bodies = _loop(dialect, 8)
    async with relay(dialect) as (gateway, upstream):
        logs, received = [], []
        for writing in (orjson.dumps, _spaced):
            rollout = await register(http, gateway)
            before = await _read_past(http, gateway)
            for body in bodies:
                status, answer = await _call(http, rollout, dialect, writing(body))
                assert status == 200, answer
            logs.append(_recorded(await events(http, gateway, rollout["id"])))
            received.append(upstream.received[:])
            upstream.received.clear()
            if writing is orjson.dumps:
                assert await _read_past(http, gateway) - before == len(bodies) - 1
            else:
                assert await _read_past(http, gateway) == before
    assert logs[0] == logs[1]
    assert received[0] == received[1] == [orjson.dumps({**b, "model": MODEL}) for b in bodies]
    prefixes = [e["prefix_messages"] for e in logs[0]]
    assert prefixes == [0, *(len(b["messages"]) for b in bodies[:-1])]
    assert all(len(e["messages"]) == (1 if i == 0 else 2) for i, e in enumerate(logs[0]))


def _odd(case: str, body: dict[str, Any]) -> bytes:
    """``body`` written so that it only looks like its loop's next call."""
    raw = orjson.dumps(body)
    if case == "short":  # shorter than the place the conversation was at
        return b'{"model":"m"}'
    if case == "moved":  # a member before the conversation
        return orjson.dumps({"user": "u", **body})
    if case == "named twice":  # the last one counts, for a relay as for the upstream
        return raw[:-1] + b',"messages":[{"role":"user","content":"2nd"}]}'
    if case == "twice after it":  # a member after the conversation
        return raw[:-1] + b',"max_tokens":32}'
    if case == "trailing comma":  # the conversation cut back to the known one, "[…,]"
        known = orjson.dumps(body["messages"][:-2])
        raw = orjson.dumps({**body, "messages": body["messages"][:-2]})
        end = raw.index(known) + len(known) - 1
        return raw[:end] + b"," + raw[end:]
    assert case == "too deep"
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    messages = [*body["messages"], {"role": "user", "content": deep}]
    return orjson.dumps({**body, "messages": messages})


#: each case's status, error code and whether it is read past its prefix
ODD = {
    "short": (200, None, False), "moved": (200, None, False),
    "named twice": (200, None, False),
    "twice after it": (200, None, False), "trailing comma": (400, "malformed_json", False),
    "too deep": (400, "invalid_request", False),
}  # fmt: skip


@pytest.mark.parametrize("case", ODD)
async def test_bodies_that_only_look_like_the_loop_are_read_whole(
    http: aiohttp.ClientSession, case: str
) -> None:
    bodies = _loop("chat", 4)
    async with relay("chat") as (gateway, upstream):
        rollout = await register(http, gateway)
        for body in bodies[:3]:
            assert (await _call(http, rollout, "chat", orjson.dumps(body)))[0] == 200
        assert await _read_past(http, gateway) == 2
        raw = _odd(case, bodies[3])
        status, answer = await _call(http, rollout, "chat", raw)
        read_past = await _read_past(http, gateway) == 3
        log = await events(http, gateway, rollout["id"])
    code = answer["error"]["code"] if status != 200 else None
    assert (status, code, read_past) == ODD[case]
    request = _recorded(log)[-1]
    if status == 200:  # sent as a whole read makes it
        parsed = orjson.loads(raw)
        assert upstream.received[-1] == orjson.dumps({**parsed, "model": MODEL})
        recorded = request.get("prefix_messages", 0) + len(request.get("messages", []))
        assert recorded == len(parsed.get("messages", []))
    else:  # refused and recorded
        assert request["sent"] is False and request["body_bytes"] == len(raw)


async def test_a_call_read_past_its_prefix_then_refused_by_a_limit_records_its_prefix(
    http: aiohttp.ClientSession,
) -> None:
    bodies = _loop("chat", 4)
    async with relay("chat") as (gateway, _):
        rollout = await register(http, gateway, limits={"max_turns": 3})
        statuses = [(await _call(http, rollout, "chat", orjson.dumps(b)))[0] for b in bodies]
        read_past = await _read_past(http, gateway)
        log = await events(http, gateway, rollout["id"])
    assert statuses == [200, 200, 200, 429] and read_past == 3
    refused = _recorded(log)[-1]
    assert refused["sent"] is False
    assert refused["prefix_messages"] == len(bodies[2]["messages"])
    assert refused["messages"] == bodies[3]["messages"][len(bodies[2]["messages"]) :]


# -- read_past against a whole read, on bodies drawn at random --------------------------


class _Rollout:
    """What read_past reads of a rollout: its conversations and where its last body
    held its conversation."""

    def __init__(self) -> None:
        self.conversations = ConversationIndex()
        self.conversation_at: int | None = None


def _sent_whole(raw: bytes, rollout: _Rollout) -> None:
    """``raw`` read whole and remembered, as a relayed call's request event does."""
    body = parse_json_object(raw)
    encoded = check_relayed("chat", body, 0)
    assert encoded is not None
    rollout.conversation_at = layout_of(raw, "chat", encoded)
    sent = encoded.json_of("messages", body["messages"])
    found = rollout.conversations.find(body["messages"], dialect="chat", sent=sent)
    rollout.conversations.remember(found, "chat")


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)  # fmt: skip
NEW_MESSAGES = st.lists(st.dictionaries(st.text(max_size=5), VALUES, max_size=3), max_size=3)
#: how the new messages are written: as orjson does, spaced, or with escapes for non-ASCII
WRITERS: dict[str, Any] = {
    "orjson": orjson.dumps,
    "spaced": lambda value: json.dumps(value).encode(),
    "ascii": lambda value: json.dumps(value, separators=(",", ":")).encode(),
}
MEMBERS = st.sampled_from(["messages", "model", "tools"]) | st.text(max_size=5)
#: a mutation: insert, replace or delete one byte at a place
EDITS = st.tuples(
    st.sampled_from(["none", "insert", "replace", "delete"]),
    st.integers(0, 10_000),
    st.sampled_from(list(b' \t,]}{["0')) | st.integers(0, 255),
)


def _body(
    before: dict[str, Any], history: list[Any], new: list[Any], after: dict[str, Any],
    writer: str,
) -> bytes:  # fmt: skip
    """The body of ``before``'s members, the conversation (``new`` written by ``writer``)
    and ``after``'s."""
    items = [orjson.dumps(m) for m in history] + [WRITERS[writer](m) for m in new]
    head = orjson.dumps(before)[:-1] + (b"," if before else b"")
    tail = b"," + orjson.dumps(after)[1:] if after else b"}"
    return head + b'"messages":[' + b",".join(items) + b"]" + tail


def _edited(raw: bytes, edit: tuple[str, int, int]) -> bytes:
    kind, place, byte = edit
    at = place % (len(raw) + 1)
    if kind == "insert":
        return raw[:at] + bytes([byte]) + raw[at:]
    if kind == "replace" and at < len(raw):
        return raw[:at] + bytes([byte]) + raw[at + 1 :]
    if kind == "delete":
        return raw[:at] + raw[at + 1 :]
    return raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.dictionaries(MEMBERS.filter(lambda k: k != "messages"), VALUES, max_size=2),
    after=st.dictionaries(MEMBERS, VALUES, max_size=3),
    new=NEW_MESSAGES,
    writer=st.sampled_from(sorted(WRITERS)),
    edit=EDITS,
)
def test_a_body_read_past_its_prefix_is_the_body_read_whole(
    before: dict[str, Any], after: dict[str, Any], new: list[Any], writer: str,
    edit: tuple[str, int, int],
) -> None:  # fmt: skip
    """Any body after a known loop — the loop's next call with other members around it
    (the conversation among them, twice), its new messages written otherwise, a byte put
    in, changed or cut out anywhere — read past its prefix is read as a whole read reads
    it (its members, its messages, the bytes written of it), or refused as a whole read
    refuses it, or read whole."""
    rollout = _Rollout()
    history = _loop("chat", 3)[-1]["messages"]
    _sent_whole(orjson.dumps({**before, "messages": history}), rollout)
    raw = _edited(_body(before, history, new, after, writer), edit)
    try:
        spliced = read_past(raw, "chat", cast(Rollout, rollout))
    except InvalidRequestError:
        with pytest.raises(InvalidRequestError):
            check_relayed("chat", parse_json_object(raw), 0)
        return
    if spliced is None:
        return
    event("read past")
    whole = orjson.loads(raw)  # a body read past its prefix is JSON
    assert spliced.encoded.encode(spliced.body) == orjson.dumps(whole)
    found = rollout.conversations.found_after(spliced.after)
    length = len(history) if found.known is None else found.known.length
    assert found.past(length) == whole["messages"][length:]
