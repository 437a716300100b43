"""Abort and continue, part by part, against a stand-in SGLang engine (scripted answers)
and a real policy gate: parts the engine aborted continued from prompt + ids with the rest
of the budget, a part an abort pause cut resent after the resume, the bound on
continuations, error statuses, keepalive reads and a closed reply's connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web

from helpers import settle
from rolltap.clients.completions import completions_body
from rolltap.clients.continuation import MAX_CONTINUATIONS, Continuation
from rolltap.clients.relay import RelayClient, UpstreamResponse
from rolltap.config import EndpointConfig
from rolltap.dialects.registry import get_dialect
from rolltap.errors import UpstreamAbortedError, UpstreamStatusError
from rolltap.gateway.policy import PolicyGate
from upstreams import serving

PROMPT = [1, 2, 3]
#: an answer: output ids, whether the engine aborted, the version it reports (None: none)
Script = tuple[list[int], bool, str | None]


def _sglang(ids: list[int], aborted: bool, version: str | None) -> dict[str, Any]:
    finish = {"type": "abort", "message": "Aborted"} if aborted else {"type": "stop"}
    meta: dict[str, Any] = {
        "id": "r", "prompt_tokens": 3, "completion_tokens": len(ids), "finish_reason": finish,
        "output_token_logprobs": [[-0.5 - i, i, None] for i in ids],
    }  # fmt: skip
    if version is not None:
        meta["weight_version"] = version
    return {"output_ids": ids, "meta_info": meta}


@dataclass
class Engine:
    """Answers ``/generate`` from ``script`` in order (the last one for ever after); an
    entry ``"hold"`` waits until released (its handler cancelled when the client goes),
    ``("status", N)`` answers HTTP N."""

    script: list[Any]
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        step = self.script[min(len(self.bodies), len(self.script)) - 1]
        if step == "hold":
            self.arrived.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.hung_up.set()
                raise
            return web.json_response(_sglang([9], False, None))
        if step[0] == "status":
            return web.json_response({"error": {"message": "too long"}}, status=step[1])
        return web.json_response(_sglang(*step))


@asynccontextmanager
async def engine(script: list[Any]) -> AsyncIterator[tuple[Engine, RelayClient]]:
    stand_in = Engine(script)
    app = web.Application()
    app.router.add_post("/generate", stand_in.handle)
    async with serving(app, handler_cancellation=True) as url:
        client = RelayClient(EndpointConfig(base_url=url + "/v1", model="m"), None)
        try:
            yield stand_in, client
        finally:
            await client.aclose()


def _parts(
    client: RelayClient, gate: PolicyGate | None = None, max_tokens: int = 8
) -> Continuation:
    body = completions_body("sglang", model="m", prompt_ids=PROMPT,
                            options={"max_tokens": max_tokens})  # fmt: skip

    def send(raw: bytes) -> AbstractAsyncContextManager[UpstreamResponse]:
        return client.send("/generate", raw, {}, rollout_id="r", from_root=True)

    return Continuation("sglang", body, PROMPT, send, max_tokens=max_tokens, gate=gate,
                        errors=get_dialect("chat"))  # fmt: skip


async def test_engine_aborts_are_continued_from_the_ids_sampled_so_far() -> None:
    script: list[Script] = [([4, 5], True, "v1"), ([], True, "v2"), ([6], True, "v2"),
                            ([7, 8], False, "v2")]  # fmt: skip
    async with engine(script) as (stand_in, client), _parts(client) as parts:
        assert (await parts.head()).status == 200
        raw = await parts.read()
    done = parts.result
    assert done is not None and done.continued == 3
    assert orjson.loads(raw) == _sglang([7, 8], False, "v2")  # the last part's body
    assert done.completion.ids == (4, 5, 6, 7, 8) and done.completion.stop_reason == "end_turn"
    assert done.completion.logprobs == (-4.5, -5.5, -6.5, -7.5, -8.5)
    assert done.completion.usage.input_tokens == 3
    assert done.spans == [{"version": "v1", "start": 0, "end": 2},
                          {"version": "v2", "start": 2, "end": 5}]  # fmt: skip
    assert done.engine_version == "v2"
    sent = [(b["input_ids"], b["sampling_params"]["max_new_tokens"]) for b in stand_in.bodies]
    assert sent == [(PROMPT, 8), ([*PROMPT, 4, 5], 6), ([*PROMPT, 4, 5], 6),
                    ([*PROMPT, 4, 5, 6], 5)]  # fmt: skip


async def test_a_spent_budget_ends_the_answer_at_max_tokens() -> None:
    script: list[Script] = [([4, 5], True, None), ([6], True, None)]
    async with engine(script) as (stand_in, client), _parts(client, max_tokens=3) as parts:
        await parts.read()
    assert parts.result is not None and parts.result.continued == 1
    assert parts.result.completion.ids == (4, 5, 6)
    assert parts.result.completion.stop_reason == "max_tokens"
    assert len(stand_in.bodies) == 2


async def test_an_engine_that_never_finishes_ends_upstream_aborted() -> None:
    async with engine([([], True, None)]) as (stand_in, client), _parts(client) as parts:
        with pytest.raises(UpstreamAbortedError, match="gave up after 16 continuations"):
            await parts.read()
    assert len(stand_in.bodies) == MAX_CONTINUATIONS + 1


async def test_error_statuses_the_first_as_the_replys_a_later_one_raised() -> None:
    async with engine([("status", 400)]) as (_, client), _parts(client) as parts:
        assert (await parts.head()).status == 400
        assert b"too long" in await parts.read()
    async with engine([([4], True, None), ("status", 500)]) as (_, client), _parts(client) as parts:
        assert (await parts.head()).status == 200
        with pytest.raises(UpstreamStatusError) as info:
            await parts.read()
    assert info.value.upstream_status == 500


async def test_an_abort_pause_cuts_the_part_which_is_resent_after_the_resume() -> None:
    gate = PolicyGate(pause_max_s=60.0)
    gate.set_version("v1")
    async with (
        engine(["hold", ([4, 5], False, None)]) as (stand_in, client),
        _parts(client, gate) as parts,
    ):
        await stand_in.arrived.wait()
        assert await parts.read_chunk(0) is None  # still waiting: the caller's keepalive
        assert await gate.pause("abort") == 1
        await stand_in.hung_up.wait()  # the cut part's connection is closed
        await settle(lambda: gate.held == 1)  # the next part waits for the resume
        assert (await parts.head()).status == 200  # the reply opened: keepalives go
        assert len(stand_in.bodies) == 1 and await parts.read_chunk(0) is None
        gate.set_version("v2")
        gate.resume()
        raw = await parts.read()
        assert orjson.loads(raw)["output_ids"] == [4, 5]
        assert await parts.read_chunk(0) == b""
    done = parts.result
    assert done is not None and done.continued == 1 and done.completion.ids == (4, 5)
    # nothing of the cut part was known: the resent one is the first's body again
    assert stand_in.bodies[1] == stand_in.bodies[0]
    assert done.spans == [{"version": "v2", "start": 0, "end": 2}]
    assert gate.snapshot()["in_flight"] == 0


async def test_closing_the_reply_early_closes_the_parts_connection() -> None:
    async with engine(["hold"]) as (stand_in, client):
        async with _parts(client) as parts:
            await stand_in.arrived.wait()
            assert await parts.read_chunk(0) is None
        await stand_in.hung_up.wait()
        assert parts.result is None
