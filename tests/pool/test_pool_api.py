"""Public API of rolltap.pool: construction, leases, identity isolation, snapshots."""

from __future__ import annotations

import dataclasses

import pytest

import rolltap.pool
from pool.pool_fakes import Builder, FakeClient, identity, run_now
from rolltap.errors import ConfigError, ModelPoolClosedError, ModelPoolFullError
from rolltap.pool import Lease, ModelClientPool, PoolSnapshot

Pool = ModelClientPool[FakeClient]


def test_exports_exactly_the_public_api() -> None:
    assert sorted(rolltap.pool.__all__) == ["Lease", "ModelClientPool", "PoolSnapshot"]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8"])
def test_max_clients_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ConfigError):
        Pool(bad)  # type: ignore[arg-type]


def test_retry_after_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        Pool(4, retry_after=0)


def test_defaults() -> None:
    pool = Pool()
    assert pool.max_clients == 64
    assert pool.snapshot() == PoolSnapshot(max_clients=64)


async def test_same_key_reuses_one_client() -> None:
    pool = Pool(4)
    build = Builder()
    first = await pool.borrow(identity(), build, holder="r1")
    second = await pool.borrow(identity(), build, holder="r2")
    assert first.client is second.client
    assert build.calls == 1
    snap = pool.snapshot()
    assert (snap.clients, snap.leases, snap.constructions) == (1, 2, 1)


async def test_lease_fields() -> None:
    pool = Pool(4)
    key = identity()
    lease = await pool.borrow(key, Builder("a"), holder="rollout-1")
    assert isinstance(lease, Lease)
    assert (lease.client.name, lease.key, lease.holder, lease.released) == (
        "a#1",
        key,
        "rollout-1",
        False,
    )
    lease.release()
    assert lease.released


async def test_release_twice_is_harmless_and_does_not_free_another_lease() -> None:
    pool = Pool(1)
    key = identity()
    build = Builder()
    first = await pool.borrow(key, build, holder="r1")
    second = await pool.borrow(key, build, holder="r2")
    first.release()
    first.release()
    assert pool.snapshot().leases == 1
    # The second lease still pins the only slot: a new key finds the pool full.
    with pytest.raises(ModelPoolFullError):
        run_now(pool.borrow(identity(user="bob"), Builder()))
    assert not second.client.close_started.is_set()
    second.release()
    second.release()
    assert pool.snapshot().leases == 0


async def test_lease_as_async_context_manager_releases_on_error() -> None:
    pool = Pool(2)
    async with await pool.borrow(identity(), Builder()) as lease:
        assert pool.snapshot().leases == 1
        assert not lease.released
    assert lease.released
    assert pool.snapshot().leases == 0
    with pytest.raises(RuntimeError, match="body failed"):
        async with await pool.borrow(identity(), Builder()):
            raise RuntimeError("body failed")
    assert pool.snapshot().leases == 0


async def test_users_with_the_same_endpoint_get_separate_clients() -> None:
    pool = Pool(4)
    alice = await pool.borrow(identity(user="alice"), Builder("alice"))
    bob = await pool.borrow(identity(user="bob"), Builder("bob"))
    assert alice.key != bob.key
    assert alice.client is not bob.client
    assert pool.snapshot().constructions == 2


async def test_credential_change_builds_a_new_client_and_old_borrowers_keep_theirs() -> None:
    pool = Pool(4)
    old_key, new_key = identity(credential="sk-old"), identity(credential="sk-new")
    assert old_key != new_key
    old = await pool.borrow(old_key, Builder("old"), holder="old-run")
    new = await pool.borrow(new_key, Builder("new"), holder="new-run")
    assert new.client is not old.client
    assert old.client.close_calls == 0  # the old rollout keeps using its client
    again = await pool.borrow(new_key, Builder("unused"))
    assert again.client is new.client
    for lease in (old, new, again):
        lease.release()
    await pool.aclose()
    assert old.client.closed
    assert new.client.closed


async def test_snapshot_is_frozen_and_converts_to_dict() -> None:
    pool = Pool(3)
    lease = await pool.borrow(identity(), Builder())
    snap = pool.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.clients = 9  # type: ignore[misc]
    assert snap.as_dict() == {
        "clients": 1,
        "closing": 0,
        "leases": 1,
        "max_clients": 3,
        "constructions": 1,
        "evictions": 0,
        "close_failures": 0,
        "injected": 0,
        "building": 0,
        "waiting": 0,
        "closed": False,
    }
    lease.release()


async def test_messages_show_keys_only_truncated() -> None:
    pool = Pool(1)
    held = await pool.borrow(identity(), Builder(), holder="r1")
    key = identity(user="bob")
    with pytest.raises(ModelPoolFullError) as caught:
        run_now(pool.borrow(key, Builder(), holder="r2"))
    assert key[:12] in str(caught.value)
    assert key not in str(caught.value)
    assert held.key not in repr(held)
    assert held.key[:12] in repr(held)
    held.release()


async def test_inject_rejects_a_key_that_already_has_a_client() -> None:
    pool = Pool(2)
    key = identity()
    (await pool.borrow(key, Builder())).release()
    with pytest.raises(ConfigError):
        pool.inject(key, FakeClient("external"))
    pool.inject(identity(user="bob"), FakeClient("external"))
    with pytest.raises(ConfigError):
        pool.inject(identity(user="bob"), FakeClient("again"))


async def test_pool_as_async_context_manager_closes_and_stops_admission() -> None:
    build = Builder()
    async with Pool(2) as pool:
        (await pool.borrow(identity(), build)).release()
    assert build.built[0].closed
    assert pool.snapshot().closed
    with pytest.raises(ModelPoolClosedError):
        await pool.borrow(identity(), build)  # even a key that had a client
    with pytest.raises(ModelPoolClosedError):
        pool.inject(identity(user="x"), FakeClient("late"))
    assert build.calls == 1
