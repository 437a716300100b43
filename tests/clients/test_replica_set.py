"""The replica set: pinning, least-loaded choice, cool-off, re-pinning, caps and stats."""

from __future__ import annotations

import asyncio
import socket
import ssl

import orjson
import pytest

from rolltap.clients.relay import RelayClient
from rolltap.clients.replicas import (
    Repin,
    ReplicaSet,
    down_reason,
    replica_label,
    routing_headers,
)
from rolltap.config import EndpointConfig
from rolltap.errors import (
    ConfigError,
    UpstreamBusyError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)

A, B, C = "http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def three(clock: Clock) -> ReplicaSet:
    return ReplicaSet([A, B, C], cooloff_s=10.0, clock=clock)


def pinned_counts(replicas: ReplicaSet) -> list[int]:
    return [s.pinned_rollouts for s in replicas.stats()]


def refused() -> UpstreamConnectionError:
    """What a client raises for a refused connection: rolltap's error from the OS's."""
    cause = ConnectionRefusedError(111, "Connection refused")
    try:
        raise UpstreamConnectionError("cannot connect to upstream") from cause
    except UpstreamConnectionError as exc:
        return exc


async def fail_call(replicas: ReplicaSet, rollout: str, exc: BaseException) -> str:
    """One call of ``rollout`` that raises ``exc`` inside the block; the replica it used."""
    used: list[str] = []
    with pytest.raises(type(exc)):
        async with replicas.call(rollout) as call:
            used.append(call.replica)
            raise exc
    return used[0]


# -- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("urls", "cap", "message"),
    [
        ([], None, "at least one replica"),
        ([A, A], None, "distinct"),
        ([A], 0, "max_inflight must be positive"),
    ],
)
def test_bad_sets_are_config_errors(urls: list[str], cap: int | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReplicaSet(urls, max_inflight=cap)


def test_for_endpoint_takes_the_endpoints_fields(clock: Clock) -> None:
    endpoint = EndpointConfig(
        replicas=[A, B], model="m", max_inflight=3, replica_cooloff_s=2.5,
        max_queued=7, inflight_timeout_s=4.0,
    )  # fmt: skip
    replicas = ReplicaSet.for_endpoint(endpoint, clock=clock)
    assert replicas.replicas == (A, B)
    assert (replicas.max_inflight, replicas.cooloff_s) == (3, 2.5)
    assert (replicas.max_queued, replicas.queue_timeout_s) == (7, 4.0)
    single = ReplicaSet.for_endpoint(EndpointConfig(base_url=C, model="m"))
    assert single.replicas == (C,)
    assert single.cooloff_s == 10.0


# -- pinning --------------------------------------------------------------------------------


def test_rollouts_spread_evenly_in_listed_order(three: ReplicaSet) -> None:
    chosen = [three.register(f"r{i}") for i in range(7)]
    assert chosen == [A, B, C, A, B, C, A]
    assert pinned_counts(three) == [3, 2, 2]


def test_register_is_idempotent_and_release_frees(three: ReplicaSet) -> None:
    assert three.register("r0") == A
    assert three.register("r0") == A
    assert pinned_counts(three) == [1, 0, 0]
    assert three.pinned("r0") == A
    three.release("r0")
    three.release("r0")  # twice: ignored
    three.release("never-registered")
    assert three.pinned("r0") is None
    assert pinned_counts(three) == [0, 0, 0]
    assert three.register("r1") == A  # A is empty again


def test_released_slots_are_refilled_first(three: ReplicaSet) -> None:
    for i in range(6):
        three.register(f"r{i}")
    three.release("r1")  # on B
    three.release("r4")  # on B
    assert pinned_counts(three) == [2, 0, 2]
    assert [three.register("x"), three.register("y"), three.register("z")] == [B, B, A]


async def test_calls_in_flight_break_ties_between_equally_pinned(three: ReplicaSet) -> None:
    three.register("r0")  # A
    three.register("r1")  # B
    three.register("r2")  # C
    async with three.call("r0"), three.call("r2"):
        # each holds one rollout; only B has no call in flight
        assert three.register("r3") == B
    # A and C hold one rollout each, nothing in flight: the first listed
    assert three.register("r4") == A


async def test_pinned_rollouts_weigh_before_calls_in_flight(clock: Clock) -> None:
    two = ReplicaSet([A, B], clock=clock)
    assert [two.register("r0"), two.register("r1"), two.register("r2")] == [A, B, A]
    async with two.call("r1"), two.call("r1"):
        # A: 2 pinned, nothing in flight; B: 1 pinned, 2 calls in flight
        assert two.register("r3") == B
        # equal pins now: A has nothing in flight
        assert two.register("r4") == A


async def test_every_call_of_a_rollout_goes_to_its_replica(three: ReplicaSet) -> None:
    for i in range(9):
        three.register(f"r{i}")
    seen: dict[str, set[str]] = {}
    for _turn in range(5):
        for i in range(9):
            async with three.call(f"r{i}") as call:
                assert call.repin is None
                seen.setdefault(f"r{i}", set()).add(call.replica)
    assert all(len(replicas) == 1 for replicas in seen.values())
    assert [s.calls for s in three.stats()] == [15, 15, 15]


def test_route_registers_an_unknown_rollout(three: ReplicaSet) -> None:
    three.register("r0")
    assert three.route("late") == (B, None)
    assert three.pinned("late") == B


# -- health, cool-off and re-pinning --------------------------------------------------------


def test_new_rollouts_avoid_a_down_replica_until_its_cooloff_ends(
    three: ReplicaSet, clock: Clock
) -> None:
    three.mark_down(A, "connect_refused")
    assert not three.is_up(A)
    assert [three.register(f"r{i}") for i in range(4)] == [B, C, B, C]
    clock.now += 9.999
    assert three.register("r4") == B
    clock.now += 0.001  # cool-off over
    assert three.is_up(A)
    # the replica brought back is the least loaded: it receives the new rollouts
    assert [three.register("r5"), three.register("r6"), three.register("r7")] == [A, A, A]


def test_marking_down_again_restarts_the_cooloff(three: ReplicaSet, clock: Clock) -> None:
    three.mark_down(B, "connect_timeout")
    clock.now += 8
    three.mark_down(B, "connect_refused")
    clock.now += 8
    state = three.stats()[1]
    assert (state.up, state.down_reason, state.downs) == (False, "connect_refused", 2)
    assert state.down_for_s == pytest.approx(2.0)
    clock.now += 2
    assert three.stats()[1].up
    assert three.stats()[1].down_for_s == 0.0


def test_with_every_replica_down_a_rollout_goes_to_the_first_back(
    three: ReplicaSet, clock: Clock
) -> None:
    three.mark_down(B, "connect_refused")
    clock.now += 1
    three.mark_down(A, "connect_refused")
    clock.now += 1
    three.mark_down(C, "connect_refused")
    assert three.register("r0") == B  # its cool-off ends first


async def test_connect_refusal_fails_the_call_then_repins_at_the_next(
    three: ReplicaSet,
) -> None:
    three.register("r0")  # A
    three.register("r1")  # B
    bodies = 0

    async def attempt() -> None:
        nonlocal bodies
        async with three.call("r0"):
            bodies += 1
            raise refused()

    with pytest.raises(UpstreamConnectionError):
        await attempt()
    assert bodies == 1  # the failed call ran once: no retry
    assert not three.is_up(A)
    assert three.pinned("r0") == A  # still pinned until its next call
    state = three.stats()[0]
    assert (state.errors, state.down_reason) == (1, "connect_refused")

    async with three.call("r0") as call:  # the harness retries the turn itself
        assert call.replica == C  # the least loaded of the replicas up (B holds r1)
        assert call.repin == Repin("r0", A, C, "connect_refused")
        assert call.repin.note() == {
            "text": "repinned",
            "data": {"from": A, "to": C, "reason": "connect_refused"},
        }
    assert three.pinned("r0") == C
    assert pinned_counts(three) == [0, 1, 1]
    assert three.repins == 1
    async with three.call("r0") as call:
        assert (call.replica, call.repin) == (C, None)  # re-pinned once, then stays


async def test_connect_timeout_marks_down_with_its_reason(three: ReplicaSet) -> None:
    three.register("r0")
    try:
        raise UpstreamTimeoutError("cannot connect to a:8000 within 10 s", connecting=True)
    except UpstreamTimeoutError as cause:
        error = UpstreamTimeoutError("upstream timed out")
        error.__cause__ = cause
    await fail_call(three, "r0", error)
    async with three.call("r0") as call:
        assert call.repin is not None
        assert call.repin.reason == "connect_timeout"


@pytest.mark.parametrize(
    "error",
    [
        UpstreamStatusError("503 from upstream", upstream_status=503),
        UpstreamTimeoutError("upstream timed out (TimeoutError)"),
        UpstreamProtocolError("upstream connection broke: ServerDisconnectedError"),
        ValueError("a bug, not the replica"),
    ],
)
async def test_other_failures_count_but_do_not_mark_down(
    three: ReplicaSet, error: Exception
) -> None:
    three.register("r0")
    assert await fail_call(three, "r0", error) == A
    state = three.stats()[0]
    assert (state.up, state.errors, state.calls, state.in_flight) == (True, 1, 1, 0)
    async with three.call("r0") as call:
        assert (call.replica, call.repin) == (A, None)


async def test_a_down_replica_with_nowhere_better_keeps_its_rollouts(clock: Clock) -> None:
    one = ReplicaSet([A], clock=clock)
    one.register("r0")
    await fail_call(one, "r0", refused())
    async with one.call("r0") as call:
        assert (call.replica, call.repin) == (A, None)
    two = ReplicaSet([A, B], clock=clock)
    two.register("r0")
    two.mark_down(A, "connect_refused")
    two.mark_down(B, "connect_refused")
    async with two.call("r0") as call:
        assert (call.replica, call.repin) == (A, None)


async def test_repin_skips_a_replica_that_is_down_too(three: ReplicaSet) -> None:
    three.register("r0")  # A
    three.mark_down(A, "connect_refused")
    three.mark_down(B, "connect_refused")
    async with three.call("r0") as call:
        assert call.replica == C


async def test_handled_failures_are_counted_once(three: ReplicaSet) -> None:
    three.register("r0")
    with pytest.raises(UpstreamConnectionError):
        async with three.call("r0") as call:
            error = refused()
            assert call.failed(error) == "connect_refused"  # the gateway saw it first
            raise error
    async with three.call("r1") as call:  # B: a 500 delivered to the harness
        assert call.failed() is None
        assert call.failed() is None
    errors = [s.errors for s in three.stats()]
    assert errors == [1, 1, 0]
    assert [s.up for s in three.stats()] == [False, True, True]


async def test_a_cancelled_call_is_not_an_error(three: ReplicaSet) -> None:
    three.register("r0")
    entered = asyncio.Event()

    async def hang() -> None:
        async with three.call("r0"):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hang())
    await entered.wait()
    assert three.stats()[0].in_flight == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = three.stats()[0]
    assert (state.errors, state.in_flight, state.calls, state.up) == (0, 0, 1, True)


async def test_release_while_a_call_is_in_flight(three: ReplicaSet) -> None:
    three.register("r0")
    async with three.call("r0"):
        three.release("r0")
        assert pinned_counts(three) == [0, 0, 0]
    state = three.stats()[0]
    assert (state.in_flight, state.pinned_rollouts) == (0, 0)


# -- the cap on calls in flight -------------------------------------------------------------


async def test_max_inflight_queues_calls_in_order(clock: Clock) -> None:
    replicas = ReplicaSet([A], max_inflight=1, clock=clock)
    order: list[str] = []
    release = asyncio.Event()
    held = asyncio.Event()

    async def first() -> None:
        async with replicas.call("r0"):
            order.append("r0")
            held.set()
            await release.wait()

    queued = {"r1": asyncio.Event(), "r2": asyncio.Event()}

    async def later(rollout: str) -> None:
        # set just before the call: the task then runs on into the queue without yielding
        queued[rollout].set()
        async with replicas.call(rollout):
            order.append(rollout)

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(first())
        await held.wait()
        tasks.create_task(later("r1"))
        await queued["r1"].wait()
        tasks.create_task(later("r2"))
        await queued["r2"].wait()
        assert (replicas.stats()[0].in_flight, replicas.stats()[0].waiting) == (1, 2)
        release.set()
    assert order == ["r0", "r1", "r2"]
    state = replicas.stats()[0]
    assert (state.calls, state.in_flight, state.waiting, state.rejected) == (3, 0, 0, 0)


async def test_a_full_queue_is_upstream_busy(clock: Clock) -> None:
    replicas = ReplicaSet([A], max_inflight=1, max_queued=1, clock=clock)
    release, held = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with replicas.call("r0"):
            held.set()
            await release.wait()

    queued = asyncio.Event()

    async def wait_in_queue() -> None:
        queued.set()  # the task runs on into the queue without yielding
        async with replicas.call("r1"):
            pass

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(hold())
        await held.wait()
        tasks.create_task(wait_in_queue())
        await queued.wait()
        assert replicas.stats()[0].waiting == 1
        with pytest.raises(UpstreamBusyError) as caught:
            async with replicas.call("r2"):
                pytest.fail("admitted past a full queue")
        assert caught.value.retryable and caught.value.status == 429
        release.set()
    state = replicas.stats()[0]
    assert (state.rejected, state.calls, state.errors) == (1, 2, 0)


async def test_waiting_too_long_is_upstream_busy(clock: Clock) -> None:
    replicas = ReplicaSet([A], max_inflight=1, queue_timeout_s=0.01, clock=clock)
    release, held = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with replicas.call("r0"):
            held.set()
            await release.wait()

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(hold())
        await held.wait()
        with pytest.raises(UpstreamBusyError, match="no slot on replica"):
            async with replicas.call("r1"):
                pytest.fail("admitted past the cap")
        release.set()
    assert replicas.stats()[0].rejected == 1
    async with replicas.call("r1"):  # the slot came back
        assert replicas.stats()[0].in_flight == 1


async def test_a_repin_whose_call_found_no_slot_is_reported_with_the_next(
    clock: Clock,
) -> None:
    replicas = ReplicaSet([A, B], max_inflight=1, max_queued=0, clock=clock)
    replicas.register("r0")  # A
    replicas.register("r1")  # B
    release, held = asyncio.Event(), asyncio.Event()

    async def hold_b() -> None:
        async with replicas.call("r1"):
            held.set()
            await release.wait()

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(hold_b())
        await held.wait()
        replicas.mark_down(A, "connect_refused")
        with pytest.raises(UpstreamBusyError):
            async with replicas.call("r0"):
                pytest.fail("B is full")
        assert replicas.pinned("r0") == B  # moved all the same
        release.set()
    async with replicas.call("r0") as call:
        assert call.repin == Repin("r0", A, B, "connect_refused")
    async with replicas.call("r0") as call:
        assert call.repin is None


# -- stats ----------------------------------------------------------------------------------


async def test_stats_count_calls_errors_and_latency(three: ReplicaSet, clock: Clock) -> None:
    three.register("r0")
    async with three.call("r0"):
        clock.now += 2.0
    async with three.call("r0"):
        clock.now += 0.5
    with pytest.raises(UpstreamProtocolError):
        async with three.call("r0"):
            clock.now += 1.5
            raise UpstreamProtocolError("broke")
    state = three.stats()[0]
    assert (state.calls, state.errors, state.pinned_rollouts) == (3, 1, 1)
    assert state.latency_sum_s == pytest.approx(4.0)
    assert state.latency_mean_s == pytest.approx(4.0 / 3)
    assert state.latency_max_s == pytest.approx(2.0)
    assert three.stats()[1].latency_mean_s == 0.0  # no call ended there


def test_snapshot_is_json_and_names_no_credentials(clock: Clock) -> None:
    secret = "http://user:hunter2@10.0.0.7:8000/v1"
    replicas = ReplicaSet([secret, B], max_inflight=4, cooloff_s=3.0, clock=clock)
    replicas.register("r0")
    replicas.mark_down(secret, "connect_refused")
    snapshot = replicas.snapshot()
    text = orjson.dumps(snapshot).decode()
    assert "hunter2" not in text
    assert snapshot["rollouts"] == 1
    assert (snapshot["max_inflight"], snapshot["cooloff_s"], snapshot["repins"]) == (4, 3.0, 0)
    first = snapshot["replicas"][0]
    assert first["replica"] == "http://10.0.0.7:8000/v1"
    assert (first["up"], first["pinned_rollouts"], first["down_reason"]) == (
        False, 1, "connect_refused",
    )  # fmt: skip
    assert set(first) >= {"calls", "errors", "latency_mean_s", "in_flight", "waiting"}


async def test_repin_notes_name_replicas_without_credentials(clock: Clock) -> None:
    secret = "http://user:hunter2@a:8000/v1"
    replicas = ReplicaSet([secret, B], clock=clock)
    replicas.register("r0")
    replicas.mark_down(secret, "connect_refused")
    async with replicas.call("r0") as call:
        assert call.repin is not None
        assert "hunter2" not in orjson.dumps(call.repin.note()).decode()
        assert call.repin.from_replica == "http://a:8000/v1"
        assert call.label == B


def test_unknown_replicas_are_key_errors(three: ReplicaSet) -> None:
    with pytest.raises(KeyError, match="not a replica"):
        three.mark_down("http://elsewhere/v1", "connect_refused")
    with pytest.raises(KeyError):
        three.is_up("http://elsewhere/v1")


# -- what counts as down --------------------------------------------------------------------


def test_routing_headers_name_the_rollout_three_ways() -> None:
    assert routing_headers("r-7") == {
        "X-Rolltap-Rollout": "r-7", "X-Session-ID": "r-7", "X-SMG-Routing-Key": "r-7",
    }  # fmt: skip


def test_replica_label_drops_user_info_only() -> None:
    assert replica_label("https://u:p@h:1/v1") == "https://h:1/v1"
    assert replica_label("https://u@h/v1") == "https://h/v1"
    assert replica_label(A) == A


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def client_error(url: str) -> UpstreamError:
    """What the relay client raises calling ``url``."""
    client = RelayClient(EndpointConfig(base_url=url, model="m"), None)
    try:
        with pytest.raises(UpstreamError) as caught:
            async with client.send("/v1/models", b"{}", {}, rollout_id="r"):
                pass
    finally:
        await client.aclose()
    return caught.value


async def test_a_real_refused_connection_is_connect_refused() -> None:
    error = await client_error(f"http://127.0.0.1:{closed_port()}/v1")
    assert isinstance(error, UpstreamConnectionError)
    assert isinstance(error.__cause__, ConnectionRefusedError)
    assert down_reason(error) == "connect_refused"


async def answer_plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


async def test_a_tls_failure_is_not_down() -> None:
    # TLS against a plain-HTTP server: the endpoint is misconfigured, not down
    server = await asyncio.start_server(answer_plain_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        error = await client_error(f"https://127.0.0.1:{port}/v1")
    assert isinstance(error, UpstreamConnectionError)
    assert isinstance(error.__cause__, ssl.SSLError)
    assert down_reason(error) is None


def test_down_reason_of_plain_errors() -> None:
    assert down_reason(ConnectionRefusedError()) == "connect_refused"
    assert down_reason(UpstreamTimeoutError("no connection", connecting=True)) == "connect_timeout"
    assert down_reason(UpstreamTimeoutError("no answer's headers in 600 s")) is None
    assert down_reason(UpstreamConnectionError("no cause")) == "connect_refused"
    assert down_reason(TimeoutError()) is None
    assert down_reason(UpstreamProtocolError("upstream connection broke mid-body")) is None
    assert down_reason(UpstreamStatusError("503", upstream_status=503)) is None
