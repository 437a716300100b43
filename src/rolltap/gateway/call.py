"""One model call through the gateway: parse, rewrite, call, deliver, record.

The handler (:mod:`rolltap.gateway.harness`) parses the harness's body in its dialect;
:meth:`ModelCall.run` then takes the same steps whatever the dialects and whatever
kind of upstream the rollout has (:class:`~rolltap.clients.upstream.Upstream`):

1. rewrite: the upstream makes the call its own request; the request event records
   what the harness sent, the rewrites and whatever the upstream adds;
2. call: past the endpoint's policy gate (held there while a trainer pauses it,
   :mod:`rolltap.gateway.policy`), the upstream sends it, within the endpoint's cap on
   calls in flight;
3. deliver: :func:`path_of`, the one place that decides it, picks how the reply
   reaches the harness — the upstream's stream relayed as it arrives (translated event
   by event when the dialects differ), or a whole answer as a body or made into a
   stream, passed through byte for byte or translated through the canonical model;
4. record: the response event keeps what the upstream answered, in its dialect, with
   a chat-shaped ``usage`` (:mod:`rolltap.gateway.answer_record`), before a ``drain``
   pause can return; the answer is finished here, not after the handler returns, so that
   a harness gone by then is noticed and the answer kept for its SDK's retry
   (:mod:`rolltap.gateway.replay`). A body the harness's connection takes at once is
   written just before it is recorded (the harness does not wait for the record; its
   timing and policy version are those of the moment it was ready); a stream's end, or a
   larger body, once it is recorded.

The request event of step 1 is written once the request is on its way
(:meth:`ModelCall.defer_request`): the bookkeeping it takes (the conversation index, the
event) runs while the upstream works instead of before the request leaves, and always
before anything else is recorded of the call. What each event holds is
:mod:`rolltap.gateway.call_events`' (:class:`ModelCall` is a
:class:`~rolltap.gateway.call_events.CallEvents`).

An SDK retry of a call whose answer arrived but was not delivered takes none of these
steps: :meth:`ModelCall.replay` answers it from that answer.

A failure at any step is recorded and delivered by :meth:`ModelCall.fail`; one before
the request was made (limits, a full pool, a translation the upstream cannot express)
records the call's request event too, marked ``"sent": false``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.token_upstream import TokenUpstream
from rolltap.clients.upstream import ModelRequest, Reply, status_error
from rolltap.dialects.canonical import Dialect, Response
from rolltap.dialects.streams import StreamRenderer, stream_renderer
from rolltap.errors import RolltapError
from rolltap.gateway.answer_record import answer_recorded
from rolltap.gateway.call_events import CallEvents, DeferredRequests, Timing
from rolltap.gateway.conversation import After, Found
from rolltap.gateway.policy import InFlight
from rolltap.gateway.relay_body import is_relay
from rolltap.gateway.replay import (
    NOT_A_RETRY,
    Answer,
    Lookup,
    ReplayBook,
    replayed_fields,
    settle,
)
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.stats import GatewayStats
from rolltap.gateway.streaming import StreamRelay, events_of
from rolltap.http.errors import error_response
from rolltap.http.json_body import EncodedMembers

__all__ = ["ModelCall", "Path", "path_of"]

_JSON = "application/json"
#: room left for a response's status line and headers under the high-water mark
_HEADERS_ROOM = 16 * 1024


@dataclass(frozen=True, slots=True)
class Path:
    """How one reply reaches the harness; :func:`path_of` is where it is decided."""

    #: the harness gets an event stream
    stream: bool
    #: ... which is the upstream's own, relayed chunk by chunk as it arrives
    relay: bool
    #: through the canonical model: the dialects differ, or the upstream parsed the
    #: answer itself
    translate: bool
    #: chat on both sides, passed through: summarized in chat's own shape
    chat: bool


#: every path there is, made once (one is picked per call)
_PATHS = {flags: Path(*flags) for flags in itertools.product((False, True), repeat=4)}


def path_of(harness: Dialect, reply: Reply, *, stream: bool) -> Path:
    """The path of a reply with a status under 400 to a harness that spoke ``harness``
    (and asked for a stream when ``stream``)."""
    if reply.kind == "answer":
        return _PATHS[stream, False, True, False]
    same = harness.name == reply.dialect.name
    relay = reply.kind == "stream"
    return _PATHS[relay, relay, not same, same and harness.name == "chat"]


#: a whole answer's header: the gateway's own share of the call, in milliseconds
OVERHEAD_HEADER = "X-Rolltap-Overhead-Ms"


class ModelCall(CallEvents):
    """State of one intercepted model call: its steps, on top of the events that record
    them (:class:`~rolltap.gateway.call_events.CallEvents`)."""

    __slots__ = (
        "canonical", "frames", "harness_usage", "keepalive_s", "raw", "relayed",
        "reply_dialect", "request", "response", "upstream",
    )  # fmt: skip

    def __init__(
        self, request: web.Request, rollout: Rollout, intercept: Intercept, harness: Dialect,
        body: dict[str, Any], stats: GatewayStats, *, keepalive_s: float,
        deferred: DeferredRequests, lookup: Lookup = NOT_A_RETRY,
        found: Found | After | None = None, arrived: float | None = None, raw: bytes | None = None,
        encoded: EncodedMembers | None = None,
    ) -> None:  # fmt: skip
        super().__init__(rollout, intercept, harness, body, stats, deferred=deferred,
                         lookup=lookup, found=found, arrived=arrived, encoded=encoded)  # fmt: skip
        self.request, self.upstream, self.keepalive_s = request, rollout.upstream, keepalive_s
        #: the body's bytes as read, until the upstream has made its request of them
        self.raw = raw if is_relay(harness.name, self.upstream_name) else None
        #: the answer in the canonical model when delivery made it, and the dialect of the
        #: reply (to make it later if needed)
        self.canonical: Response | None = None
        self.reply_dialect: Dialect | None = None
        # read before the rewrites, which may add include_usage to a chat body
        opts = body.get("stream_options")
        self.harness_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        # the harness dialect's frames (content when translating, keepalives, in-band
        # errors) and the response, once a stream to the harness is open
        self.frames: StreamRenderer | None = None
        self.response: web.StreamResponse | None = None
        #: a relayed stream whose terminal event the harness has been sent, and its reply
        self.relayed: tuple[Reply, StreamRelay] | None = None

    async def run(self) -> web.StreamResponse:
        """The call, start to end: every path takes these steps, in this order."""
        rollout = self.rollout
        if self.lookup.replay is not None:
            return await self.replay(self.lookup.replay)
        rollout.admit_call()
        if rollout.pin is not None:  # re-pinned first if its replica is down
            self.replica = await rollout.pin.route(rollout)
        raw, self.raw = self.raw, None  # a relay that changes nothing sends it as it is
        sent = await self.upstream.rewrite(
            ModelRequest(
                self.harness, self.body, self.request.headers, rollout.id, self.intercept.id,
                rollout.sampling, self.stream, raw=raw, encoded=self.encoded,
            )
        )  # fmt: skip
        del raw
        if rollout.gate is not None:  # paused (or too far ahead): held here, in order
            held = time.perf_counter()
            await rollout.gate.wait_open(begins=rollout.first_epoch is None)
            self.waited += time.perf_counter() - held
        # From the gate on, nothing awaits until the call counts as in flight (a drain
        # waits for it, an abort cuts it), even while it queues for a slot. Staleness is
        # judged as it leaves the gate: a call held through an update goes out under the
        # new version. Its request event says it was sent only once it is.
        rollout.admit_policy()
        if rollout.gate is not None:
            self.sent_version = rollout.gate.version
        self.defer_request(sent)
        slot = rollout.slot() if rollout.pin is None else rollout.pin.slot(rollout)
        queued = time.perf_counter()
        async with self.cuttable() as in_flight, slot:
            self.t_sent = time.perf_counter()
            self.waited += self.t_sent - queued
            async with self.upstream.call(sent) as reply:
                self.flush_request()
                self.t_headers = time.perf_counter()
                recorded, response = await self.deliver(reply)
                # Recorded inside these scopes, with nothing awaited since the answer
                # came whole: a drain returns once its calls are recorded, and a harness
                # that hangs up once it has read the last event cancels the call only
                # after. A body the connection takes at once is written first (the
                # harness need not wait for the record): that write cannot wait on the
                # harness, so it holds the slot and the connection for no time and
                # nothing runs between it and the record.
                if self.writes_at_once(response):
                    if in_flight is not None:
                        in_flight.disarm()  # the answer is whole: an abort leaves it
                    try:
                        return await self.finish(response, self.answer_ready())
                    finally:
                        self.record_reply(reply, recorded)
                self.record_reply(reply, recorded)
        # a stream's end, or a body the harness must read before it is all written: out
        # of the scopes, as a harness slow to read must hold no slot and no drain
        return await self.finish(response)

    def cuttable(self) -> AbstractAsyncContextManager[InFlight | None]:
        """The scope an ``abort`` pause cuts: the whole call, for a relay (it then ends
        ``upstream_aborted``); nothing for the token upstream, which cuts and continues
        each of its completion's parts itself."""
        gate = self.rollout.gate
        if gate is None or isinstance(self.upstream, TokenUpstream):
            return nullcontext()
        return gate.cuttable()

    def writes_at_once(self, response: web.StreamResponse) -> bool:
        """Whether ``response`` is a whole body the harness's connection takes without
        waiting: under the transport's high-water mark, aiohttp writes it without
        suspending (a stream, or a larger body, may wait for the harness to read)."""
        transport = self.request.transport
        if response.prepared or transport is None or not isinstance(response, web.Response):
            return False
        body = response.body
        if not isinstance(body, bytes):
            return False
        high = transport.get_write_buffer_limits()[1]
        return transport.get_write_buffer_size() + len(body) + _HEADERS_ROOM <= high

    async def finish(
        self, response: web.StreamResponse, timing: Timing | None = None
    ) -> web.StreamResponse:
        """End the answer here: a body is written (saying what the gateway added to the
        call, ``X-Rolltap-Overhead-Ms``, from ``timing`` or the response event's), a
        stream closed."""
        if not response.prepared:
            if timing is None:
                timing = (self.answered or {}).get("timing") or {}
            if timing.get("gateway_ms") is not None:
                response.headers[OVERHEAD_HEADER] = f"{timing['gateway_ms']:.3f}"
            await response.prepare(self.request)
        await response.write_eof()
        self.delivery.delivered = True
        return response

    async def replay(self, answer: Answer) -> web.StreamResponse:
        """Answer an SDK retry from the answer its original call could not deliver: the
        upstream is not called again, and the event carries no second token record."""
        self.record_replayed(answer)
        headers = {"x-rolltap-replay-of": str(self.lookup.retry_of)}
        if self.stream:
            resp, frames = await self.open_stream(answer.status, headers)
            await resp.write(b"".join(frames.render(e) for e in events_of(answer.response)))
            return await self.finish(resp)
        if self.upstream_name == self.harness.name and "body" in answer.recorded:
            body = orjson.dumps(answer.recorded["body"])  # a relay's answer, as it came
        else:
            body = orjson.dumps(self.harness.response_from_canonical(answer.response))
        return await self.finish(
            web.Response(body=body, status=answer.status, headers=headers, content_type=_JSON)
        )

    def answer_for_replay(self) -> Answer:
        """The recorded answer, for a retry to get (called only when one may need it)."""
        assert self.answered is not None
        canonical = self.canonical
        if canonical is None:
            assert self.reply_dialect is not None
            canonical = self.reply_dialect.response_to_canonical(self.answered["body"])
        size = len(orjson.dumps(self.answered.get("body")))
        return Answer(int(self.answered["status"]), canonical, replayed_fields(self.answered), size)

    def settle(self, book: ReplayBook | None, *, max_bytes: int) -> ReplayBook | None:
        """Remember what an SDK retry of this call will need (:func:`~rolltap.gateway.
        replay.settle`); the rollout's book."""
        try:
            return settle(
                book, self.lookup, self.delivery, self.request_digest, self.answer_for_replay,
                max_bytes=max_bytes,
            )  # fmt: skip
        except RolltapError:
            # a relayed answer the canonical model cannot read (a relay passes any):
            # not replayable, but a retry is still linked to this call
            self.delivery.answered = False
            return settle(
                book, self.lookup, self.delivery, self.request_digest, self.answer_for_replay,
                max_bytes=max_bytes,
            )  # fmt: skip

    # -- deliver -------------------------------------------------------------------

    async def deliver(self, reply: Reply) -> tuple[dict[str, Any], web.StreamResponse]:
        """Deliver ``reply`` to the harness: what the response event records of it, and
        the response (an open stream is closed once that is recorded)."""
        if reply.status >= 400:
            raise status_error(reply, await reply.body.read())
        path = path_of(self.harness, reply, stream=self.stream)
        self.reply_dialect = reply.dialect
        if path.relay:
            return await self._relay(reply, path)
        return await self._whole(reply, path)

    async def _relay(self, reply: Reply, path: Path) -> tuple[dict[str, Any], web.StreamResponse]:
        """The upstream's stream, chunk by chunk as it arrives."""
        resp, frames = await self.open_stream(reply.status, reply.headers)
        relay = StreamRelay(
            reply.dialect, frames, translate=path.translate, chat=path.chat,
            harness_usage=self.harness_usage, capture=reply.capture,
        )  # fmt: skip
        async for chunk in self.chunks(reply):
            if self.t_first is None:
                self.t_first = time.perf_counter()
            if out := relay.feed(chunk):
                await resp.write(out)
            if relay.ended and self.relayed is None:
                self.relayed = (reply, relay)
        self.t_done = time.perf_counter()
        if out := relay.finish():
            await resp.write(out)
        return relay.recorded(), resp

    async def _whole(self, reply: Reply, path: Path) -> tuple[dict[str, Any], web.StreamResponse]:
        """A whole answer: as a body, or made into a stream (opened at once, with
        keepalives while the upstream is silent)."""
        if path.stream:
            resp, frames = await self.open_stream(200, {})
            raw = b"".join([chunk async for chunk in self.chunks(reply)])
        else:
            raw = await reply.body.read()
        self.t_first = self.t_done = time.perf_counter()
        answer = await reply.parse(raw)
        if answer.sent_version is not None:  # its parts were gated apart from the call
            self.sent_version = answer.sent_version
        self.waited_inside = answer.waited_s
        canonical = None
        if not path.chat:
            canonical = answer.canonical or _canonical(reply.dialect, answer.body, path)
        if canonical is None and not path.chat:
            # a relayed answer the canonical model cannot read: passed on as it came
            recorded = {"body": answer.body, "usage": None, "finish_reason": None}
        else:
            recorded = answer_recorded(answer, canonical)
        self.canonical = canonical
        if path.stream:
            assert canonical is not None
            await resp.write(b"".join(frames.render(e) for e in events_of(canonical)))
            return recorded, resp
        # the upstream's bytes, unless its answer changed them (a token capture's)
        raw = answer.raw
        if path.translate:
            assert canonical is not None
            raw = orjson.dumps(self.harness.response_from_canonical(canonical))
        return recorded, web.Response(
            body=raw, status=reply.status, headers=reply.headers, content_type=_JSON
        )

    async def open_stream(
        self, status: int, headers: dict[str, str]
    ) -> tuple[web.StreamResponse, StreamRenderer]:
        """Start the harness's event stream; its response and its dialect's renderer."""
        self.frames = stream_renderer(
            self.harness.name, model=self.rollout.endpoint.model,
            include_usage=self.harness_usage,
        )  # fmt: skip
        headers = {**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = self.response = web.StreamResponse(status=status, headers=headers)
        await resp.prepare(self.request)
        return resp, self.frames

    async def chunks(self, reply: Reply) -> AsyncIterator[bytes]:
        """The upstream's body as it arrives; each ``keepalive_s`` of silence sends the
        open harness stream its dialect's keepalive."""
        while True:
            chunk = await reply.body.read_chunk(self.keepalive_s)
            if chunk is None:
                if self.response is not None and self.frames is not None:
                    await self.response.write(self.frames.keepalive())
                continue
            if not chunk:
                return
            yield chunk

    # -- end -----------------------------------------------------------------------

    def record_delivered(self) -> bool:
        """Whether the harness had the whole answer when it went away, its response
        recorded: an agent stops reading at ``response.completed`` or ``message_stop`` and
        hangs up, maybe before the upstream's stream has closed (then the answer is
        recorded here) or before the gateway has ended its own stream (recorded already).
        False when it did not: a body is delivered only once :meth:`finish` wrote it."""
        if self.answered is None:
            if self.relayed is None:
                return False
            reply, relay = self.relayed
            self.record_reply(reply, relay.recorded())
        elif self.response is None:  # no event stream: the body went unwritten
            return False
        self.delivery.delivered = True
        return True

    async def fail(self, err: RolltapError) -> web.StreamResponse:
        """Record ``err`` and deliver it: a response, or an in-band event mid-stream."""
        self.record_error(err)
        resp, frames = self.response, self.frames
        if resp is None or frames is None:
            self.delivery.delivered = True  # handed to aiohttp
            return error_response(err, self.harness.error_body)
        await resp.write(frames.error(err))
        await resp.write_eof()
        return resp


def _canonical(dialect: Dialect, body: dict[str, Any], path: Path) -> Response | None:
    """``body`` (the upstream's answer in ``dialect``) as canonical; None when a relayed
    answer is not one the canonical model can read (translated, that is an error)."""
    try:
        return dialect.response_to_canonical(body)
    except RolltapError:
        if path.translate:
            raise
        return None
