"""Validation past the prefix a rollout already sent: the same answers as validating all.

The gateway validates only the messages past the longest conversation the rollout sent
before (in the same dialect); an edited earlier message is no prefix, so it is validated
again and gets the same 400 naming the same field.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from helpers import GatewayFactory, events, register

CHAT_OK = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]
MESSAGES_OK = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]
RESPONSES_OK = [
    {"role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]},
]
#: per dialect: its path, a body for a conversation, the conversation's key, a message
#: that is invalid there and the field its 400 names (at index i)
CASES: dict[str, tuple[str, Any, str, Any, str]] = {
    "chat": ("/v1/chat/completions", {"model": "m", "max_tokens": 8}, "messages",
             {"role": "wizard", "content": "x"}, "messages[{i}].role"),
    "messages": ("/v1/messages", {"model": "m", "max_tokens": 8}, "messages",
                 {"role": "user", "content": 5}, "messages[{i}].content"),
    "responses": ("/v1/responses", {"model": "m", "max_output_tokens": 8}, "input",
                  {"role": "wizard", "content": "x"}, "input[{i}].role"),
}  # fmt: skip
OK: dict[str, list[Any]] = {"chat": CHAT_OK, "messages": MESSAGES_OK, "responses": RESPONSES_OK}


async def _post(
    http: aiohttp.ClientSession, rollout: dict[str, Any], dialect: str, convo: list[Any]
) -> tuple[int, dict[str, Any]]:
    path, params, key, _, _ = CASES[dialect]
    root = rollout["anthropic_base_url"]
    headers = {"Authorization": f"Bearer {rollout['api_key']}"}
    async with http.post(root + path, json={**params, key: convo}, headers=headers) as resp:
        return resp.status, await resp.json()


def _param(body: dict[str, Any]) -> str | None:
    param: str | None = body["error"].get("param")
    return param


@pytest.mark.parametrize("dialect", ["chat", "messages", "responses"])
async def test_an_edited_earlier_message_is_validated_again(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession, dialect: str
) -> None:
    # translated: a relay checks only what the gateway reads (test_relay_passthrough.py)
    gateway = await make_gateway(dialect="messages" if dialect == "chat" else "chat")
    rollout = await register(http, gateway)
    ok, bad, field = OK[dialect], CASES[dialect][3], CASES[dialect][4]
    assert (await _post(http, rollout, dialect, ok))[0] == 200
    # a new message past the prefix is checked, and named where it is in the whole list
    status, body = await _post(http, rollout, dialect, [*ok, bad])
    assert (status, _param(body)) == (400, field.format(i=len(ok)))
    # an earlier message edited: no prefix, so the same 400 as for a fresh rollout
    edited = [bad, *ok[1:], {"role": "user", "content": "more"}]
    status, body = await _post(http, rollout, dialect, edited)
    fresh = await _post(http, await register(http, gateway), dialect, edited)
    assert (status, _param(body)) == (400, field.format(i=0))
    assert body == fresh[1]
    # the valid extension still records only what is new
    status, _ = await _post(http, rollout, dialect, [*ok, {"role": "user", "content": "more"}])
    assert status == 200
    requests = [
        e["payload"]
        for e in await events(http, gateway, rollout["id"])
        if e["kind"] == "model_request" and e["payload"].get("sent", True)
    ]
    assert [(r["prefix_messages"], len(r["messages"])) for r in requests] == [
        (0, len(ok)),
        (len(ok), 1),
    ]
