"""The admin API's answers as docs/gateway.md documents them: `?since=N`, the DELETE body."""

from __future__ import annotations

import aiohttp

from helpers import ADMIN_HEADERS, openai_client, register
from rolltap.gateway import Gateway


async def _seqs(http: aiohttp.ClientSession, url: str) -> list[int]:
    async with http.get(url, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 200, await resp.text()
        return [e["seq"] for e in (await resp.json())["events"]]


async def test_since_is_inclusive(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    """`?since=N` answers the events whose seq is N or more: event N itself included."""
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        for turn in range(2):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"q{turn}"}]
            )
    url = f"{gateway.admin_url}/rollouts/{rollout['id']}/events"
    assert await _seqs(http, url) == [0, 1, 2, 3]
    assert await _seqs(http, url + "?since=0") == [0, 1, 2, 3]
    assert await _seqs(http, url + "?since=2") == [2, 3]
    assert await _seqs(http, url + "?since=3") == [3]
    assert await _seqs(http, url + "?since=4") == []
    assert await _seqs(http, url + "?since=99") == []
    async with http.get(url + "?since=-1", headers=ADMIN_HEADERS) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["param"] == "since"


async def test_delete_answers_the_id_status_and_event_count(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    url = f"{gateway.admin_url}/rollouts/{rollout['id']}"
    async with http.delete(url, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body == {"id": rollout["id"], "status": "unregistered", "events": 2}
    async with http.delete(url, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == "rollout_not_found"
