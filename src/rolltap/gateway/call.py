"""One model call through the gateway: parse, rewrite, call, deliver, record.

The handler (:mod:`rolltap.gateway.harness`) parses the harness's body in its dialect;
:meth:`ModelCall.run` then takes the same steps whatever the dialects and whatever
kind of upstream the rollout has (:class:`~rolltap.clients.upstream.Upstream`):

1. rewrite: the upstream makes the call its own request; the request event records
   what the harness sent, the rewrites and whatever the upstream adds;
2. call: the upstream sends it, within the endpoint's cap on calls in flight;
3. deliver: :func:`path_of`, the one place that decides it, picks how the reply
   reaches the harness — the upstream's stream relayed as it arrives (translated event
   by event when the dialects differ), or a whole answer as a body or made into a
   stream, passed through byte for byte or translated through the canonical model;
4. record: the response event keeps what the upstream answered, in its dialect, with
   a chat-shaped ``usage`` (:mod:`rolltap.gateway.summaries`); then the answer is
   finished here, not after the handler returns, so that a harness gone by then is
   noticed and the answer kept for its SDK's retry (:mod:`rolltap.gateway.replay`).

The request event of step 1 is written once the request is on its way
(:meth:`ModelCall.defer_request`): the bookkeeping it takes (the conversation index, the
event) runs while the upstream works instead of before the request leaves, and always
before anything else is recorded of the call.

An SDK retry of a call whose answer arrived but was not delivered takes none of these
steps: :meth:`ModelCall.replay` answers it from that answer.

A failure at any step is recorded and delivered by :meth:`ModelCall.fail`; one before
the request was made (limits, a full pool, a translation the upstream cannot express)
records the call's request event too, marked ``"sent": false``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.upstream import ModelRequest, Reply, UpstreamRequest, status_error
from rolltap.dialects.canonical import Response
from rolltap.dialects.registry import Dialect
from rolltap.dialects.streams import StreamRenderer, stream_renderer
from rolltap.errors import RolltapError, UpstreamStatusError, http_status_of
from rolltap.gateway.conversation import CONVERSATION_KEYS, Found, conversation_of
from rolltap.gateway.replay import (
    NOT_A_RETRY,
    Answer,
    Lookup,
    Outcome,
    ReplayBook,
    replayed_fields,
    settle,
)
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.stats import GatewayStats
from rolltap.gateway.streaming import StreamRelay, events_of
from rolltap.gateway.summaries import answer_recorded
from rolltap.http.errors import error_response
from rolltap.store.events import EventKind

__all__ = ["ModelCall", "Path", "path_of"]

_MAX_ERROR_BODY = 4096
_JSON = "application/json"


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


def path_of(harness: Dialect, reply: Reply, *, stream: bool) -> Path:
    """The path of a reply with a status under 400 to a harness that spoke ``harness``
    (and asked for a stream when ``stream``)."""
    if reply.kind == "answer":
        return Path(stream=stream, relay=False, translate=True, chat=False)
    same = harness.name == reply.dialect.name
    relay = reply.kind == "stream"
    chat = same and harness.name == "chat"
    return Path(stream=relay, relay=relay, translate=not same, chat=chat)


class ModelCall:
    """State of one intercepted model call."""

    __slots__ = (
        "answered", "body", "canonical", "found", "frames", "harness", "harness_usage",
        "intercept", "keepalive_s", "lookup", "outcome", "pending", "prefix", "relayed",
        "replica", "reply_dialect", "request", "requested", "response", "rollout", "stats",
        "stream", "t_first", "t_headers", "upstream", "upstream_name",
    )  # fmt: skip

    def __init__(
        self, request: web.Request, rollout: Rollout, intercept: Intercept, harness: Dialect,
        body: dict[str, Any], stats: GatewayStats, *, keepalive_s: float,
        lookup: Lookup = NOT_A_RETRY, found: Found | None = None,
    ) -> None:  # fmt: skip
        self.request, self.rollout, self.intercept = request, rollout, intercept
        #: whether this call is an SDK retry, of which call, with an answer to replay
        self.lookup, self.outcome = lookup, Outcome(intercept.id)
        #: what the rollout's conversations knew of the body when it was validated
        self.found = found
        #: leading messages of the body the rollout sent before (the index's match)
        self.prefix = 0
        #: the ``model_response`` payload once recorded; the answer in the canonical model
        #: when delivery made it, and the dialect of the reply (to make it later if needed)
        self.answered: dict[str, Any] | None = None
        self.canonical: Response | None = None
        self.reply_dialect: Dialect | None = None
        self.harness, self.upstream = harness, rollout.upstream
        #: what the events name as the upstream dialect
        self.upstream_name: str = self.upstream.name
        self.body, self.stats, self.keepalive_s = body, stats, keepalive_s
        self.stream = bool(body.get("stream"))
        # read before the rewrites, which may add include_usage to a chat body
        opts = body.get("stream_options")
        self.harness_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        # the harness dialect's frames (content when translating, keepalives, in-band
        # errors) and the response, once a stream to the harness is open
        self.frames: StreamRenderer | None = None
        self.response: web.StreamResponse | None = None
        self.t_headers: float | None = None
        self.t_first: float | None = None
        #: the replica's label, on an endpoint with replicas
        self.replica: str | None = None
        #: the request sent, while its event is still to be written
        self.pending: UpstreamRequest | None = None
        #: a relayed stream whose terminal event the harness has been sent, and its reply
        self.relayed: tuple[Reply, StreamRelay] | None = None
        #: whether the request event is written
        self.requested = False

    async def run(self) -> web.StreamResponse:
        """The call, start to end: every path takes these steps, in this order."""
        rollout = self.rollout
        if self.lookup.replay is not None:
            return await self.replay(self.lookup.replay)
        rollout.admit_call()
        if rollout.pin is not None:  # re-pinned first if its replica is down
            self.replica = await rollout.pin.route(rollout)
        sent = await self.upstream.rewrite(
            ModelRequest(
                self.harness, self.body, self.request.headers, rollout.id, self.intercept.id,
                rollout.sampling, self.stream,
            )
        )  # fmt: skip
        self.defer_request(sent)
        slot = rollout.slot() if rollout.pin is None else rollout.pin.slot(rollout)
        async with slot, self.upstream.call(sent) as reply:
            self.flush_request()
            self.t_headers = time.perf_counter()
            recorded, response = await self.deliver(reply)
            self.record_reply(reply, recorded)
        return await self.finish(response)

    def record_reply(self, reply: Reply, recorded: dict[str, Any]) -> None:
        """The response event of ``reply``, its server-side ids checked for drift first."""
        if reply.capture is not None:
            conversation = conversation_of(self.harness.name, self.body)
            reply.capture.settle(recorded, prefix=self.prefix, conversation=conversation)
        self.record_response(reply.status, recorded)

    async def finish(self, response: web.StreamResponse) -> web.StreamResponse:
        """End the answer here: a body is written, a stream closed."""
        if not response.prepared:
            await response.prepare(self.request)
        await response.write_eof()
        self.outcome.delivered = True
        return response

    async def replay(self, answer: Answer) -> web.StreamResponse:
        """Answer an SDK retry from the answer its original call could not deliver: the
        upstream is not called again, and the event carries no second token record."""
        self.t_headers = self.t_first = time.perf_counter()
        self.record_request(None)
        self.rollout.log.append(
            EventKind.MODEL_RESPONSE,
            {
                "intercept_id": self.intercept.id, "status": answer.status,
                "stream": self.stream, "dialect": self.upstream_name, **answer.recorded,
                "replay_of": self.lookup.retry_of, "retry_count": self.lookup.retry_count,
                "timing": self._timing(),
            },
        )  # fmt: skip
        self.stats.replays += 1
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
                book, self.lookup, self.outcome, self.body, self.answer_for_replay,
                max_bytes=max_bytes,
            )  # fmt: skip
        except RolltapError:
            # a relayed answer the canonical model cannot read (a relay passes any):
            # not replayable, but a retry is still linked to this call
            self.outcome.answered = False
            return settle(
                book, self.lookup, self.outcome, self.body, self.answer_for_replay,
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
        self.t_first = time.perf_counter()
        answer = await reply.parse(raw)
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

    # -- record --------------------------------------------------------------------

    def defer_request(self, sent: UpstreamRequest) -> None:
        """Write the request event at the loop's next turn: by then the request is being
        sent (the upstream call has started and waits on the network), so the work is
        done while the upstream works. :meth:`flush_request` writes it at once if the
        call got further, or failed, first."""
        self.pending = sent
        asyncio.get_running_loop().call_soon(self.flush_request)

    def flush_request(self) -> None:
        """Write the request event if it is still to be written (once; before any
        other event of the call)."""
        if self.pending is not None:
            self.record_request(self.pending)
            self.pending = None

    def record_request(self, sent: UpstreamRequest | None, *, refused: bool = False) -> None:
        """The request event: what the harness sent, past the prefix already recorded
        (``sent`` None: nothing is sent, a retry is replayed, or the call was ``refused``
        before its request was made)."""
        self.requested = True
        conversations, found = self.rollout.conversations, self.found
        if found is None:
            found = conversations.find(conversation_of(self.harness.name, self.body))
        match = conversations.remember(found, self.harness.name)
        self.prefix = match.length
        self.found = None  # its dump is the history's size: not kept through the call
        key = CONVERSATION_KEYS[self.harness.name]
        self.rollout.log.append(
            EventKind.MODEL_REQUEST,
            {
                "intercept_id": self.intercept.id,
                "route": self.harness.path.removeprefix("/v1/").replace("/", "."),
                "dialect": self.harness.name,
                "upstream_dialect": self.upstream_name,
                "stream": self.stream,
                "prefix_digest": match.digest,
                "prefix_messages": match.length,
                "messages": found.messages[match.length :],
                "params": {k: v for k, v in self.body.items() if k != key},
                "rewrites": [] if sent is None else sent.rewrites,
                **({} if self.replica is None else {"replica": self.replica}),
                **self._retry_fields(),
                **({} if sent is None else sent.record),
                **({"sent": False} if refused else {}),
            },
        )
        if sent is not None:
            self.stats.record_rewrites(sent.rewrites)

    def _retry_fields(self) -> dict[str, Any]:
        lookup, out = self.lookup, dict[str, Any]()
        if lookup.retry_count:
            out["retry_count"] = lookup.retry_count
        if lookup.retry_of is not None:
            out["retry_of"] = lookup.retry_of
        return out

    def record_delivered(self) -> bool:
        """Record the answer of a stream whose last event the harness was sent when it
        went away before the upstream's stream closed (an agent stops reading at
        ``response.completed`` or ``message_stop``): it had the whole answer. False when
        there is no such answer to record."""
        if self.relayed is None or self.answered is not None:
            return False
        reply, relay = self.relayed
        self.record_reply(reply, relay.recorded())
        self.outcome.delivered = True
        return True

    def record_response(self, status: int, recorded: dict[str, Any]) -> None:
        """The response event, and the counters its usage goes to."""
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            "status": status,
            "stream": self.stream,
            "dialect": self.upstream_name,
            **recorded,
            "timing": self._timing(),
        }
        self.rollout.log.append(EventKind.MODEL_RESPONSE, payload)
        self.answered, self.outcome.answered = payload, True
        self.stats.record_response(payload["usage"], payload.get("tokens"))
        self.rollout.add_usage(payload["usage"])

    def record_error(self, err: RolltapError) -> None:
        """The error event, after the request event (written now if the call ended
        before its request was made: no call leaves an error alone)."""
        self.flush_request()
        if not self.requested:
            self.record_request(None, refused=True)
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            **err.to_dict(),
            "stream": self.stream,
            "timing": self._timing(),
        }
        if isinstance(err, UpstreamStatusError):
            payload["upstream_body"] = err.body[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        self.rollout.log.append(EventKind.MODEL_ERROR, payload)
        self.outcome.error_status = http_status_of(err)
        self.stats.record_error(err.code)

    def _timing(self) -> dict[str, float | None]:
        t0 = self.intercept.started
        return {
            "ttfb_ms": _ms(t0, self.t_headers),
            "ttfc_ms": _ms(t0, self.t_first),
            "total_ms": _ms(t0, time.perf_counter()),
        }

    async def fail(self, err: RolltapError) -> web.StreamResponse:
        """Record ``err`` and deliver it: a response, or an in-band event mid-stream."""
        self.record_error(err)
        resp, frames = self.response, self.frames
        if resp is None or frames is None:
            self.outcome.delivered = True  # handed to aiohttp
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


def _ms(t0: float, t: float | None) -> float | None:
    return None if t is None else round((t - t0) * 1000.0, 3)
