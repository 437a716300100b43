"""Abort and continue: one token completion sent in parts, answered whole.

A weight update may cut a completion mid-way: an ``abort`` pause of the gateway cuts the
request (:meth:`~rolltap.clients.upstream.CallGate.cuttable`; nothing of it is known, the
ids went with the connection), or the engine aborts the generation itself and answers the
ids it had sampled (:attr:`~rolltap.clients.completions.Completion.aborted`). Either way
no sampled id is lost and the harness sees no error: the completion is sent again as the
prompt + every id sampled so far, with ``max_tokens`` less those ids (none left: the
answer ends ``max_tokens``), once the gate is open again (after the resume). Each such
*part* runs ``gate.waiting()`` (held while paused, not in flight) then ``gate.cuttable()``
around its request and answer. After :data:`MAX_CONTINUATIONS` resubmissions the call
ends ``upstream_aborted``. The parts make one answer: the ids and logprobs
concatenated, the last part's stop reason and body, usage counted from the original
prompt; a span of policy versions per part (:mod:`rolltap.clients.completion_parts`).

Design: the continuation is the :class:`~rolltap.clients.upstream.Reply`'s
:class:`~rolltap.clients.upstream.Body`, and its parts run in one task it owns (started
when the reply opens, cancelled and awaited when it closes: no loose task, and each
part's ``send`` context closes its connection however the part ends). The task is needed
because a gate's cut lands on the task that entered ``cuttable`` wherever that task
waits: entered in the gateway's call task, a cut would land in whatever it awaits then —
a keepalive written to the harness between two reads — and end the call. In its own
task a cut ends only the part. The call task waits for the parts through
:meth:`Continuation.read_chunk`, which returns None after ``silence_s`` (the gateway
writes its keepalive, as for any whole answer), and the bytes of the last part once the
completion is whole. The reply's status and headers are the first part's; when a part is
cut before any arrived, the reply opens with a plain 200 at once, so that a harness that
asked for a stream gets keepalives while the completion waits for the resume (a later
error status then ends the answer as an error, like any failure after the headers).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson

from rolltap.clients.completion_parts import Continued, Head, Part, merge, read_part, version_spans
from rolltap.clients.completions import CompletionsFlavor, continued_body
from rolltap.clients.relay import UpstreamResponse, relayed_headers
from rolltap.clients.upstream import Answer, CallGate, Reply, status_error
from rolltap.dialects.canonical import Dialect, StopReason
from rolltap.errors import UpstreamAbortedError, UpstreamProtocolError

__all__ = ["MAX_CONTINUATIONS", "Continuation", "Continued", "Head"]

#: resubmissions of one completion before the call gives up (``upstream_aborted``)
MAX_CONTINUATIONS = 16

#: sends one part's request body; the response lives inside the block
Sender = Callable[[bytes], AbstractAsyncContextManager[UpstreamResponse]]


class Continuation:
    """The body of a token completion's reply: its parts, sent and continued until whole
    (see the module's docstring). Use as an async context manager around the reply."""

    def __init__(
        self, flavor: CompletionsFlavor, body: Mapping[str, Any], prompt_ids: Sequence[int],
        send: Sender, *, max_tokens: int, gate: CallGate | None, errors: Dialect,
    ) -> None:  # fmt: skip
        self.flavor, self.body, self.prompt_ids = flavor, body, tuple(prompt_ids)
        self.max_tokens, self.gate, self.errors = max_tokens, gate, errors
        self._send = send
        #: the whole completion, once the parts made it (None: not yet, or an error status)
        self.result: Continued | None = None
        self._head: asyncio.Future[Head] | None = None
        self._task: asyncio.Task[bytes] | None = None
        self._taken = False
        #: seconds its parts waited at the gate (paused): inside the upstream's window
        self.waited_s = 0.0

    async def __aenter__(self) -> Continuation:
        loop = asyncio.get_running_loop()
        self._head = loop.create_future()
        self._task = loop.create_task(self._run(), name="rolltap-token-parts")
        return self

    async def __aexit__(self, *exc: object) -> None:
        task = self._task
        if task is None:
            return
        task.cancel()
        try:
            await asyncio.wait({task})
        finally:
            if task.done() and not task.cancelled():
                task.exception()  # read: a failure the reply never delivered is not logged

    async def head(self) -> Head:
        """The reply's status and headers: the first part's, or a plain 200 once a part
        was cut before any had (a later part's error status is then raised by
        :meth:`read`); raises what ended the parts before either."""
        head, task = self._started()
        either: set[asyncio.Future[Any]] = {head, task}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if head.done():
            return head.result()
        task.result()
        raise UpstreamProtocolError("the upstream answered nothing")

    async def read(self) -> bytes:
        """The last part's bytes once the completion is whole (or the first part's error
        body); raises what ended the parts."""
        if self._taken:
            return b""
        await asyncio.wait({self._started()[1]})
        return self._take()

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        """:meth:`read`, or None after ``silence_s`` of waiting (call again); then ``b""``."""
        if self._taken:
            return b""
        done, _ = await asyncio.wait({self._started()[1]}, timeout=silence_s)
        return self._take() if done else None

    def _started(self) -> tuple[asyncio.Future[Head], asyncio.Task[bytes]]:
        if self._head is None or self._task is None:
            raise RuntimeError("Continuation used outside its async with block")
        return self._head, self._task

    def _take(self) -> bytes:
        self._taken = True
        return self._started()[1].result()

    # -- the parts (in the task) ---------------------------------------------------

    async def _run(self) -> bytes:
        parts: list[Part] = []
        sampled: list[int] = []  # every part's ids so far
        continued, body = 0, self.body
        while True:
            part = await self._part(body, len(self.prompt_ids) + len(sampled))
            if isinstance(part, bytes):
                return part  # the first answer was an error status: the reply's
            if part is not None:
                parts.append(part)
                sampled += part.completion.ids
                if not part.completion.aborted:
                    return self._whole(parts, continued, part.completion.stop_reason)
            left = self.max_tokens - len(sampled)
            if left <= 0 and parts:
                return self._whole(parts, continued, "max_tokens")
            if continued == MAX_CONTINUATIONS:
                raise UpstreamAbortedError(
                    f"the completion was cut {continued + 1} times (abort pauses or engine "
                    f"aborts); gave up after {MAX_CONTINUATIONS} continuations"
                )
            continued += 1
            body = continued_body(
                self.flavor, self.body, prompt_ids=(*self.prompt_ids, *sampled),
                max_tokens=left,
            )  # fmt: skip

    def _whole(self, parts: list[Part], continued: int, stop: StopReason | None) -> bytes:
        last = parts[-1]
        completion = last.completion
        if continued or completion.aborted:  # (a lone aborted part: it used the whole budget)
            completions = [p.completion for p in parts]
            completion = merge(completions, prompt_len=len(self.prompt_ids), stop=stop)
        spans = version_spans([(p.version, len(p.completion.ids)) for p in parts])
        self.result = Continued(
            completion,
            last.body,
            last.raw,
            spans,
            continued,
            last.completion.weight_version,
            last.gate_version,
            self.waited_s,
        )
        return last.raw

    async def _part(self, body: Mapping[str, Any], prompt_len: int) -> Part | bytes | None:
        """One part: whole or aborted by the engine (a :class:`Part`), cut by an abort
        pause (None), or the first answer's error body (bytes)."""
        gate = self.gate
        if gate is None:
            return await self._request(body, prompt_len)
        held = time.perf_counter()
        try:
            async with gate.waiting():
                self.waited_s += time.perf_counter() - held
                async with gate.cuttable():
                    return await self._request(body, prompt_len)
        except UpstreamAbortedError:
            head = self._started()[0]
            if not head.done():  # the reply opens now: the harness gets keepalives meanwhile
                head.set_result(Head(200, {}, None))
            return None  # cut: what it had sampled went with the connection

    async def _request(self, body: Mapping[str, Any], prompt_len: int) -> Part | bytes:
        head = self._started()[0]
        async with self._send(orjson.dumps(body)) as up:
            first = not head.done()
            if first:
                retry = up.headers.get("Retry-After")
                head.set_result(Head(up.status, relayed_headers(up.headers), retry))
            raw = await up.read()
            if up.status >= 400:
                if first:
                    return raw
                reply = Reply(
                    up.status, {}, "answer", self.errors, up, _unparsed,
                    retry_after=up.headers.get("Retry-After"),
                )  # fmt: skip
                raise status_error(reply, raw)
        # the gate's version as the part arrived: the weights it was sampled with, unless
        # the engine says which
        gated = version = None if self.gate is None else self.gate.version
        parsed, completion = read_part(self.flavor, raw, prompt_len)
        if completion.weight_version is not None:
            version = completion.weight_version
        return Part(completion, version, parsed, raw, gated)


async def _unparsed(raw: bytes) -> Answer:
    raise UpstreamProtocolError("an error answer is not parsed")
