"""A raw HTTP/1.1 client: sends exactly the bytes asked for, slowly or cut short.

aiohttp's client refuses to send what a hostile peer sends (bad headers, lying
``Content-Length``, a body that stops half way), so the fuzzer writes requests itself.
Every request carries ``Connection: close``: the answer ends at end of stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Mode", "RawAnswer", "RawRequest", "send"]


class Mode(StrEnum):
    """How the request is delivered."""

    PLAIN = "plain"
    #: the body in ``pieces`` chunks ``delay_s`` apart (slow but maybe in time)
    TRICKLE = "trickle"
    #: half the body, then nothing more: the server's body timeout must answer
    STALL = "stall"
    #: half the body, then the connection is closed: no answer is expected
    CUT = "cut"
    #: the whole request, then closed as soon as the answer's status line came
    CUT_ANSWER = "cut_answer"


@dataclass(slots=True)
class RawRequest:
    method: bytes
    path: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    mode: Mode = Mode.PLAIN
    delay_s: float = 0.0
    pieces: int = 1
    #: leave ``Content-Length`` to the caller's headers (a lie, or chunked framing)
    own_length: bool = False
    #: which route and mutation this is (for the report)
    label: str = ""
    #: aiohttp's own HTTP parser refuses this request before rolltap sees it (over its
    #: 8190-byte line and field sizes or 128 headers, or broken framing): it answers a
    #: plain-text 400 and closes — or resets a connection still sending, so no answer
    parser_refuses: bool = False

    def head(self, host: str) -> bytes:
        lines = [self.method + b" " + self.path + b" HTTP/1.1", b"Host: " + host.encode()]
        lines += [name + b": " + value for name, value in self.headers]
        if not self.own_length:
            lines.append(b"Content-Length: %d" % len(self.body))
        lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n"


@dataclass(slots=True)
class RawAnswer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


async def _write(writer: asyncio.StreamWriter, req: RawRequest, host: str) -> None:
    writer.write(req.head(host))
    body = req.body
    if req.mode in (Mode.STALL, Mode.CUT):
        writer.write(body[: len(body) // 2])
        await writer.drain()
        return
    if req.mode is Mode.TRICKLE and req.pieces > 1:
        size = max(1, -(-len(body) // req.pieces))
        for start in range(0, len(body), size):
            writer.write(body[start : start + size])
            await writer.drain()
            await asyncio.sleep(req.delay_s)
        return
    writer.write(body)
    await writer.drain()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readline()


async def _read_answer(reader: asyncio.StreamReader) -> RawAnswer | None:
    """One answer, framed as the server framed it: the server may linger before
    closing (aiohttp waits for the rest of a body it did not read)."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        if status >= 200:  # skip interim answers (100 Continue)
            break
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await _read_chunked(reader)
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = await reader.read()
    except asyncio.IncompleteReadError as exc:
        body = exc.partial
    return RawAnswer(status, headers, body)


async def send(host: str, port: int, req: RawRequest, *, timeout_s: float) -> RawAnswer | None:
    """Deliver ``req`` and read the whole answer; None when none came (the request was
    cut, or the server closed the connection). ``TimeoutError`` past ``timeout_s``: a hang.
    """
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writing = asyncio.ensure_future(_write(writer, req, host))
            try:
                if req.mode is Mode.CUT:
                    await writing
                    return None
                if req.mode is Mode.CUT_ANSWER:
                    await writing
                    line = await reader.readline()
                    return RawAnswer(int(line.split()[1])) if line else None
                return await _read_answer(reader)
            finally:
                writing.cancel()
                await asyncio.wait([writing])
                # the server may answer (and close) before it read the whole body
                failed = None if writing.cancelled() else writing.exception()
                if failed is not None and not isinstance(failed, ConnectionError):
                    raise failed
        except ConnectionError:
            return None
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
