"""The gateway borrows every client from its bounded pool: isolation and a full pool."""

from __future__ import annotations

import hashlib

import aiohttp

from helpers import ADMIN_HEADERS, GatewayFactory, events, openai_client, register
from rolltap.gateway import Gateway
from rolltap.sim import Simulator


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


async def test_users_and_credentials_never_share_a_client(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    alice = await register(http, gateway, user="alice", api_key="key-alice")
    bob = await register(http, gateway, user="bob", api_key="key-bob")
    alice_again = await register(http, gateway, user="alice", api_key="key-alice")
    alice_rotated = await register(http, gateway, user="alice", api_key="key-alice-2")
    seen = {}
    for name, rollout in [
        ("alice", alice),
        ("bob", bob),
        ("alice_again", alice_again),
        ("alice_rotated", alice_rotated),
    ]:
        async with openai_client(rollout) as client:
            raw = await client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": name}]
            )
        seen[name] = raw.headers["x-sim-auth-digest"]
    assert seen["alice"] == seen["alice_again"] == digest("Bearer key-alice")
    assert seen["bob"] == digest("Bearer key-bob")
    assert seen["alice_rotated"] == digest("Bearer key-alice-2")
    # the rollout's own secret never reaches the upstream
    assert digest(f"Bearer {alice['api_key']}") not in seen.values()
    snap = gateway.pool.snapshot()
    assert (snap.clients, snap.constructions, snap.leases) == (3, 3, 4)
    for rollout in (alice, bob, alice_again, alice_rotated):
        for event in await events(http, gateway, rollout["id"]):
            assert "key-" not in str(event)


async def test_full_pool_answers_429_with_retry_after(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_model_clients=1)
    first = await register(http, gateway, user="a")
    async with http.post(
        gateway.admin_url + "/rollouts", json={"user": "b"}, headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 429
        assert int(resp.headers["Retry-After"]) >= 1
        body = await resp.json()
    assert body["error"]["code"] == "model_pool_full"
    # the same identity still fits; once user a's rollouts end, user b gets a client
    same = await register(http, gateway, user="a")
    await gateway.unregister(first["id"])
    await gateway.unregister(same["id"])
    second = await register(http, gateway, user="b")
    async with openai_client(second) as client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content
    snap = gateway.pool.snapshot()
    assert (snap.constructions, snap.evictions) == (2, 1)
