"""The model calls' HTTP/1.1 client (rolltap.clients.wire, wire_pool, exchange) against
raw servers that answer byte for byte as scripted: framing, keepalive, limits, timeouts,
back-pressure and every way an upstream can break an answer."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from rolltap.clients import wire_pool
from rolltap.clients.relay import RelayClient
from rolltap.clients.sent_body import SentOnce
from rolltap.clients.wire import HIGH_WATER, WireConnection
from rolltap.clients.wire_pool import Origin, WirePool
from rolltap.config import EndpointConfig, Timeouts
from rolltap.errors import (
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamTimeoutError,
)

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Upstream:
    """A raw HTTP server running ``script`` on each connection; what it was sent."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what the test is about
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> bytes:
        """One request, head and body (by its Content-Length), as sent."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )  # fmt: skip
        whole = head + await reader.readexactly(length)
        self.requests.append(whole)
        return whole


@asynccontextmanager
async def upstream(script: Callable[[Upstream, asyncio.StreamReader, asyncio.StreamWriter],
                                    Awaitable[None]]) -> AsyncIterator[Upstream]:  # fmt: skip
    up = Upstream(lambda r, w: script(up, r, w))
    server = await asyncio.start_server(up._serve, "127.0.0.1", 0)
    up.port = server.sockets[0].getsockname()[1]
    async with server:
        yield up


@asynccontextmanager
async def client(up: Upstream, **endpoint: object) -> AsyncIterator[RelayClient]:
    base = str(endpoint.pop("base_url", f"http://127.0.0.1:{up.port}/v1"))
    relay = RelayClient(EndpointConfig(base_url=base, model="m", **endpoint), "sk-1")
    try:
        yield relay
    finally:
        await relay.aclose()


async def answer_each(up: Upstream, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, answer: bytes = OK) -> None:  # fmt: skip
    while True:
        await up.request(reader)
        writer.write(answer)
        await writer.drain()


async def call(relay: RelayClient, body: bytes | SentOnce = b'{"x":1}') -> tuple[int, bytes]:
    async with relay.send("/v1/chat/completions", body, {"X-Trace": "t"}, rollout_id="r1") as up:
        return up.status, await up.read()


async def test_a_request_is_sent_whole_and_its_connection_kept() -> None:
    async with upstream(answer_each) as up, client(up) as relay:
        assert await call(relay) == (200, b"{}")
        assert await call(relay, SentOnce(b'{"x":2}')) == (200, b"{}")
    assert up.connections == 1
    head, _, body = up.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert f"Host: 127.0.0.1:{up.port}".encode() in lines
    assert b"Authorization: Bearer sk-1" in lines and b"X-Trace: t" in lines
    assert b"X-Rolltap-Rollout: r1" in lines and b"Content-Length: 7" in lines
    assert body == b'{"x":1}'
    assert up.requests[1].endswith(b'{"x":2}')


async def test_a_chunked_answer_is_read_as_it_arrives() -> None:
    go = asyncio.Event()

    async def chunked(up: Upstream, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(reader)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n")  # fmt: skip
        await go.wait()
        w.write(b"3\r\nabc\r\n0\r\n\r\n")
        await answer_each(up, reader, w)

    async with upstream(chunked) as up, client(up) as relay:
        async with relay.send("/v1/chat/completions", b"{}", {}, rollout_id="r") as resp:
            assert resp.content_type == "text/event-stream"
            assert await resp.read_chunk() == b"data: "
            assert await resp.read_chunk(silence_s=0.01) is None  # silent: nothing lost
            go.set()
            assert await resp.read_chunk() == b"abc"
            assert await resp.read_chunk() == b""
        assert await call(relay) == (200, b"{}")
    assert up.connections == 1


async def test_a_body_without_a_length_ends_with_its_connection() -> None:
    async def until_close(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")

    async with upstream(until_close) as up, client(up) as relay:
        assert await call(relay) == (200, b"all of it")
        assert await call(relay) == (200, b"all of it")
    assert up.connections == 2


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"", "before its answer's headers"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly this", "mid-body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "mid-body"),
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "no valid HTTP"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 300_000 + b"\r\n\r\n", "too large"),
    ],
    ids=["closed-before-head", "short-body", "short-chunk", "not-http", "huge-head"],
)
async def test_a_broken_answer_is_a_protocol_error(answer: bytes, words: str) -> None:
    async def broken(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(answer)
        await w.drain()

    async with upstream(broken) as up, client(up) as relay:
        with pytest.raises(UpstreamProtocolError, match=words):
            await call(relay)


async def test_bytes_after_the_answer_are_not_read_as_its_body() -> None:
    async def twice(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(OK + b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad")
        await answer_each(up, r, w)

    async with upstream(twice) as up, client(up) as relay:
        assert await call(relay) == (200, b"{}")
        assert await call(relay) == (200, b"{}")
    assert up.connections == 2  # the first connection was not trusted again


async def test_an_interim_answer_is_skipped() -> None:
    async def interim(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n" + OK)
        await answer_each(up, r, w)

    async with upstream(interim) as up, client(up) as relay:
        assert await call(relay) == (200, b"{}")
        assert await call(relay) == (200, b"{}")
    assert up.connections == 1


async def test_silence_past_the_read_timeout_fails_the_call() -> None:
    async def silent(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        await r.read()  # until the client gives up

    async with upstream(silent) as up, client(up, timeouts=Timeouts(read=0.05)) as relay:
        with pytest.raises(UpstreamTimeoutError, match="headers"):
            await call(relay)


async def test_the_read_timeout_bounds_each_silence_not_the_whole_answer() -> None:
    # five pieces 0.3 s apart under a 1 s read timeout: 1.5 s in all, no silence of 1 s
    async def trickle(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(5):
            await asyncio.sleep(0.3)
            w.write(b"1\r\nx\r\n")
        w.write(b"0\r\n\r\n")
        await r.read()

    async with upstream(trickle) as up, client(up, timeouts=Timeouts(read=1.0)) as relay:
        assert await call(relay) == (200, b"xxxxx")


async def test_the_total_timeout_bounds_waiting_for_a_connection() -> None:
    async with upstream(answer_each) as up:
        pool = WirePool(Origin(f"http://127.0.0.1:{up.port}"), limit=1, connect_s=5)
        held = await pool.acquire(None)
        soon = asyncio.get_running_loop().time() + 0.05
        with pytest.raises(UpstreamTimeoutError, match="one of its 1 connections"):
            await pool.acquire(soon)
        pool.release(held)  # never used: closed, not kept
        assert pool.size == 0
        await pool.aclose()
    assert up.connections == 1


async def test_the_limit_queues_calls_first_come_first_served() -> None:
    arrived: list[bytes] = []
    first_in, release = asyncio.Event(), asyncio.Event()

    async def ordered(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            arrived.append((await up.request(r)).rpartition(b"\r\n\r\n")[2])
            if len(arrived) == 1:
                first_in.set()
                await release.wait()
            w.write(OK)

    async with upstream(ordered) as up, client(up, max_connections=1) as relay:
        first = asyncio.create_task(call(relay, b"1"))
        await first_in.wait()
        waiting = [asyncio.create_task(call(relay, b"%d" % n)) for n in (2, 3, 4)]
        await asyncio.sleep(0)  # one turn of the loop: each task runs up to its queueing
        waiting[0].cancel()  # a waiter that gives up keeps no place
        release.set()
        assert await first == (200, b"{}")
        assert [await t for t in waiting[1:]] == [(200, b"{}")] * 2
        assert waiting[0].cancelled()
    assert arrived == [b"1", b"3", b"4"] and up.connections == 1


async def test_a_waiter_woken_then_cancelled_passes_its_turn_on() -> None:
    async with upstream(answer_each) as up:
        pool = WirePool(Origin(f"http://127.0.0.1:{up.port}"), limit=1, connect_s=5)
        held = await exchange(pool)
        assert await pool.acquire(None) is held
        a = asyncio.create_task(pool.acquire(None))
        b = asyncio.create_task(pool.acquire(None))
        await asyncio.sleep(0)  # one turn of the loop: both queue
        held.finish()
        pool.release(held)  # wakes a ...
        a.cancel()  # ... which is gone before it runs
        conn = await asyncio.wait_for(b, 5)  # a bound for a failure, not a timing
        assert a.cancelled() and pool.size == 1
        pool.release(conn)
        await pool.aclose()


async def test_a_half_read_answer_closes_its_connection() -> None:
    async def big(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if up.connections == 1:
            await up.request(r)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
        await answer_each(up, r, w)

    async with upstream(big) as up, client(up) as relay:
        async with relay.send("/v1/chat/completions", b"{}", {}, rollout_id="r") as resp:
            assert await resp.read_chunk() == b"12345"
        assert up.connections == 1
        assert await call(relay) == (200, b"{}")
    assert up.connections == 2


async def exchange(pool: WirePool) -> WireConnection:
    conn = await pool.acquire(None)
    conn.begin(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", b"")
    assert (await conn.head(None))[0] == 200
    assert await conn.read_all(None, None) == b"{}"
    pool.release(conn)
    return conn


async def test_an_idle_connection_the_upstream_closed_is_not_reused() -> None:
    async def once(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(OK)  # keep-alive by HTTP/1.1's default, then closed anyway

    async with upstream(once) as up:
        pool = WirePool(Origin(f"http://127.0.0.1:{up.port}"), limit=1, connect_s=5)
        first = await exchange(pool)
        await first.wait_closed()
        assert pool.size == 0  # its place is free
        assert await exchange(pool) is not first
        await pool.aclose()
    assert up.connections == 2


async def test_an_idle_connection_is_not_kept_past_the_keepalive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with upstream(answer_each) as up:
        pool = WirePool(Origin(f"http://127.0.0.1:{up.port}"), limit=1, connect_s=5)
        first = await exchange(pool)
        assert await exchange(pool) is first
        monkeypatch.setattr(wire_pool, "KEEPALIVE_S", 0.0)
        assert await exchange(pool) is not first
        await pool.aclose()
    assert up.connections == 2


async def test_a_slow_reader_pauses_the_socket() -> None:
    size = 8 * HIGH_WATER

    async def flood(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"z" * size)
        await w.drain()

    async with upstream(flood) as up:
        pool = WirePool(Origin(f"http://127.0.0.1:{up.port}"), limit=1, connect_s=5)
        conn = await pool.acquire(None)
        conn.begin(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", b"")
        assert (await conn.head(None))[0] == 200
        for _ in range(100_000):  # loop turns, each a socket read at most: no clock
            if conn.paused:
                break
            await asyncio.sleep(0)
        assert conn.paused
        assert conn.buffered <= HIGH_WATER + 256 * 1024  # one socket read past the mark
        got = 0
        while piece := await conn.read_any(None):
            got += len(piece)
        assert got == size
        pool.release(conn)
        await pool.aclose()


async def test_closing_the_client_ends_calls_in_flight() -> None:
    held = asyncio.Event()

    async def hold(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await up.request(r)
        held.set()
        await r.read()

    async with upstream(hold) as up, client(up) as relay:
        flying = asyncio.create_task(call(relay))
        await held.wait()
        await relay.aclose()
        with pytest.raises(UpstreamProtocolError, match="broke"):
            await flying
        with pytest.raises(UpstreamConnectionError, match="closed"):
            await call(relay)


async def test_a_header_with_a_line_break_is_refused_without_its_value() -> None:
    async with upstream(answer_each) as up, client(up) as relay:
        with pytest.raises(UpstreamProtocolError, match="'X-Evil' to send") as caught:
            relay.send("/v1/x", b"{}", {"X-Evil": "a\r\nInjected: yes"}, rollout_id="r")
        assert "Injected" not in str(caught.value)
    assert up.requests == []


async def test_a_credential_with_a_line_break_is_refused_without_its_value() -> None:
    relay = RelayClient(EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m"), "sk-2\n")
    with pytest.raises(UpstreamProtocolError, match="'Authorization' to send") as caught:
        relay.send("/v1/x", b"{}", {}, rollout_id="r")
    assert "sk-2" not in str(caught.value)
    await relay.aclose()


async def test_the_urls_user_info_is_sent_as_basic_auth_and_not_as_host() -> None:
    async with upstream(answer_each) as up:
        relay = RelayClient(
            EndpointConfig(base_url=f"http://u%40x:p@127.0.0.1:{up.port}/v1", model="m"), None
        )
        try:
            assert await call(relay) == (200, b"{}")
        finally:
            await relay.aclose()
    basic = base64.b64encode(b"u@x:p").decode()
    assert f"Authorization: Basic {basic}".encode() in up.requests[0]
    assert f"Host: 127.0.0.1:{up.port}\r\n".encode() in up.requests[0]


def test_the_host_header_names_a_port_only_when_it_is_not_the_default() -> None:
    assert Origin("http://h").host_header == "h"
    assert Origin("https://h:443/v1").host_header == "h"
    assert Origin("http://h:8080").host_header == "h:8080"
    assert Origin("http://[::1]:9000").host_header == "[::1]:9000"
