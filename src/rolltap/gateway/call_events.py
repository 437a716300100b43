"""What one model call writes to its rollout's log, and the counters that go with it.

Every call writes its request event first: once, deferred until the request is on its way
(:meth:`CallEvents.defer_request`), or at once when the call ends before it was made
(``"sent": false``). Then one of: its response event (the upstream's answer, its usage
counted), a replayed answer's (an SDK retry's, :meth:`CallEvents.record_replayed`), or its
error event. Each carries the call's timing from the intercept's start.

:class:`~rolltap.gateway.call.ModelCall` is a :class:`CallEvents`: the steps that call the
upstream and deliver its answer, on top of what records them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from rolltap.clients.relay_upstream import RelayRequest
from rolltap.clients.upstream import Reply, UpstreamRequest
from rolltap.dialects.canonical import Dialect
from rolltap.errors import RolltapError, UpstreamStatusError, http_status_of
from rolltap.events import EventKind
from rolltap.gateway.conversation import CONVERSATION_KEYS, After, Found, conversation_of
from rolltap.gateway.policy import reported_version
from rolltap.gateway.replay import NOT_A_RETRY, Answer, Delivery, Lookup
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.stats import GatewayStats
from rolltap.http.json_body import EncodedMembers

__all__ = ["CallEvents", "DeferredRequests"]

_MAX_ERROR_BODY = 4096

#: a call's timing (:meth:`CallEvents.timing`), in milliseconds
Timing = dict[str, float | None]


class _Deferred(Protocol):
    def flush_request(self) -> None: ...


class DeferredRequests:
    """The request events of one gateway's calls written just after their requests left.

    A deferred event is written two turns of the loop later: by then a request sent on
    an idle pooled connection is on the socket (:mod:`rolltap.clients.wire` writes it as
    the exchange begins), and the work (the conversation index, the event, freeing the
    parsed history) is done while the upstream works. Until then the call holds its
    parsed body: a burst of arrivals all parsed in one turn would each keep theirs, so
    at most ``limit`` wait, and past them an event is written at once.
    """

    __slots__ = ("limit", "waiting")

    def __init__(self, limit: int = 4) -> None:
        self.limit = limit
        #: events deferred and not yet written
        self.waiting = 0

    def defer(self, call: _Deferred) -> None:
        if self.waiting >= self.limit:
            call.flush_request()
            return
        self.waiting += 1
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._flush, call)

    def _flush(self, call: _Deferred) -> None:
        self.waiting -= 1
        call.flush_request()


class CallEvents:
    """The events of one intercepted model call, and the state they are made from."""

    __slots__ = (
        "answered", "arrived", "body", "deferred", "delivery", "encoded", "found", "harness",
        "intercept",
        "keep_body", "lookup", "pending", "prefix", "ready", "replica", "requested", "rollout",
        "sent_version", "stats", "stream", "t_done", "t_first", "t_headers", "t_sent",
        "upstream_name", "waited", "waited_inside",
    )  # fmt: skip

    def __init__(
        self, rollout: Rollout, intercept: Intercept, harness: Dialect, body: dict[str, Any],
        stats: GatewayStats, *, deferred: DeferredRequests, lookup: Lookup = NOT_A_RETRY,
        found: Found | After | None = None, arrived: float | None = None,
        encoded: EncodedMembers | None = None,
    ) -> None:  # fmt: skip
        self.rollout, self.intercept, self.harness = rollout, intercept, harness
        self.body, self.stats = body, stats
        #: where its request event waits for the request to leave
        self.deferred = deferred
        #: whether the body's conversation is kept to the call's end (a tracer reads it)
        self.keep_body = False
        self.stream = bool(body.get("stream"))
        #: what the events name as the upstream dialect
        self.upstream_name: str = rollout.upstream.name
        #: whether this call is an SDK retry, of which call, with an answer to replay
        self.lookup, self.delivery = lookup, Delivery(intercept.id)
        #: what the rollout's conversations knew of the body when it was validated (a body
        #: read past its prefix: what is found once the request has left)
        self.found = found
        #: the body's members as checked (a relay's rewrites and the request event's
        #: large fields are written from them), until the request event is recorded
        self.encoded = encoded
        #: leading messages of the body the rollout sent before (the index's match)
        self.prefix = 0
        #: the ``model_response`` payload once recorded
        self.answered: dict[str, Any] | None = None
        #: when the upstream's headers and its first chunk arrived (set by delivery)
        self.t_headers: float | None = None
        self.t_first: float | None = None
        #: when the request left for the upstream and its last byte was read, and the
        #: seconds the call waited for a pause or a slot (its overhead leaves them out)
        self.t_sent: float | None = None
        self.t_done: float | None = None
        self.waited = 0.0
        #: of the upstream's window, seconds its own parts waited at the gate (a token
        #: completion cut by a pause and continued after the resume): counted as waited
        self.waited_inside = 0.0
        #: when the request arrived (before its body was read and checked)
        self.arrived = intercept.started if arrived is None else arrived
        #: the replica's label, on an endpoint with replicas
        self.replica: str | None = None
        #: the request sent, while its event is still to be written
        self.pending: UpstreamRequest | None = None
        #: whether the request event is written
        self.requested = False
        #: the gateway's policy version when the call left the gate
        self.sent_version: str | None = None
        #: the call's timing and the gateway's policy version when its answer was ready
        #: for the harness (:meth:`answer_ready`), which its response event records
        self.ready: tuple[Timing, str | None] | None = None

    def defer_request(self, sent: UpstreamRequest) -> None:
        """Write the request event once the request is on its way (:class:`DeferredRequests`),
        so the work is done while the upstream works. :meth:`flush_request` writes it at
        once if the call got further, or failed, first."""
        self.pending = sent
        self.deferred.defer(self)

    def flush_request(self) -> None:
        """Write the request event if it is still to be written (once; before any
        other event of the call), then let go of what the call no longer needs."""
        if self.pending is not None:
            sent, self.pending = self.pending, None
            self.record_request(sent)
            self.let_go(sent)

    def let_go(self, sent: UpstreamRequest) -> None:
        """Drop the body's conversation (the history's size: MBs for a long agent) once
        the request event holds what it records of it and the upstream holds the bytes it
        sends (a relay's ``data``): held through the upstream's answer it would double
        what each call in flight costs. Nothing after this reads it — a retry's digest is
        kept apart (:class:`~rolltap.gateway.replay.Lookup`) — except a token capture's
        drift check and a tracer recording prompts (``keep_body``), which keep it."""
        if self.keep_body or not isinstance(sent, RelayRequest) or sent.capture is not None:
            return
        lookup = self.lookup
        if not (lookup.request or lookup.sent is not None):
            return  # its digest would still be made of the body
        self.body.pop(CONVERSATION_KEYS[self.harness.name], None)
        if sent.body is not self.body:  # a translation: the upstream dialect's own copy
            sent.body.pop(CONVERSATION_KEYS[self.upstream_name], None)

    def request_digest(self) -> str:
        """The request's digest as the harness sent it (what a retry is looked up by)."""
        return self.lookup.digest_of(self.harness.name, self.body)

    def record_request(self, sent: UpstreamRequest | None, *, refused: bool = False) -> None:
        """The request event: what the harness sent, past the prefix already recorded
        (``sent`` None: nothing is sent, a retry is replayed, or the call was ``refused``
        before its request was made)."""
        self.requested = True
        conversations, found = self.rollout.conversations, self.found
        key = CONVERSATION_KEYS[self.harness.name]
        if isinstance(found, After):
            found = conversations.found_after(found)
        elif found is None:
            conversation = conversation_of(self.harness.name, self.body)
            # the bytes the harness sent them as, where they were checked whole
            value, encoded = self.body.get(key), self.encoded
            written = None
            if encoded is not None and isinstance(value, list):
                written = encoded.json_of(key, value)
            found = conversations.find(conversation, dialect=self.harness.name, sent=written)
        match = conversations.remember(found, self.harness.name)
        self.prefix = match.length
        self.lookup = self.lookup.with_conversation(found.identity)
        self.found = None
        self.rollout.log.append(
            EventKind.MODEL_REQUEST,
            {
                "intercept_id": self.intercept.id,
                "route": self.harness.path.removeprefix("/v1/").replace("/", "."),
                "dialect": self.harness.name,
                "upstream_dialect": self.upstream_name,
                "stream": self.stream,
                **match.fields(),
                "messages": found.past(match.length),
                **self.rollout.kept_params.fields(
                    {k: v for k, v in self.body.items() if k != key}, self.encoded
                ),
                "rewrites": [] if sent is None else sent.rewrites,
                **({} if self.replica is None else {"replica": self.replica}),
                **self._retry_fields(),
                **({} if sent is None else sent.record),
                **({"sent": False} if refused else {}),
            },
        )
        self.encoded = None  # the body's size: not kept through the call
        if sent is not None:
            self.stats.record_rewrites(sent.rewrites)

    def _retry_fields(self) -> dict[str, Any]:
        lookup, out = self.lookup, dict[str, Any]()
        if lookup.retry_count:
            out["retry_count"] = lookup.retry_count
        if lookup.retry_of is not None:
            out["retry_of"] = lookup.retry_of
        return out

    def record_reply(self, reply: Reply, recorded: dict[str, Any]) -> None:
        """The response event of ``reply``, its server-side ids checked for drift first."""
        if reply.capture is not None:
            conversation = conversation_of(self.harness.name, self.body)
            reply.capture.settle(recorded, prefix=self.prefix, conversation=conversation)
        self.record_response(reply.status, recorded)

    def answer_ready(self) -> Timing:
        """The answer is ready for the harness: what its response event records of this
        moment (the call's timing, the policy version it was answered under) is fixed now,
        before it is written — a slow harness may read it through a policy update. The
        timing."""
        self.ready = self._moment()
        return self.ready[0]

    def _moment(self) -> tuple[Timing, str | None]:
        gate = self.rollout.gate
        return self.timing(final=True), None if gate is None else gate.version

    def record_response(self, status: int, recorded: dict[str, Any]) -> None:
        """The response event, and the counters its usage goes to."""
        timing, current = self._moment() if self.ready is None else self.ready
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            "status": status,
            "stream": self.stream,
            "dialect": self.upstream_name,
            **recorded,
            "timing": timing,
        }
        mismatch = self._stamp_policy(payload, current)
        self.rollout.log.append(EventKind.MODEL_RESPONSE, payload)
        if mismatch is not None:
            self.rollout.log.append(EventKind.NOTE, mismatch)
        self.answered, self.delivery.answered = payload, True
        overhead = payload["timing"].get("gateway_ms")
        self.stats.record_response(
            payload["usage"], payload.get("tokens"),
            overhead_s=None if overhead is None else overhead / 1000.0,
        )  # fmt: skip
        self.rollout.add_usage(payload["usage"])

    def _stamp_policy(self, payload: dict[str, Any], current: str | None) -> dict[str, Any] | None:
        """Set the answer's ``policy_version``: the engine's own where it reported one
        (the upstream's record, or the answer's body), else ``current``, the gateway's as
        the answer was ready. Returns the note to record when the engine's is neither that
        version nor the one the call was sent under (a version set between the end of the
        engine's answer and this record is no disagreement)."""
        engine = payload.get("policy_version")
        if engine is None:
            engine = reported_version(payload.get("body"))
        payload["policy_version"] = current if engine is None else engine
        if engine is None or current is None or engine in (current, self.sent_version):
            return None
        return {
            "text": f"the engine answered with weights {engine!r}, the gateway's policy "
            f"version is {current!r}",
            "reason": "policy_version_mismatch", "intercept_id": self.intercept.id,
            "engine_version": engine, "gateway_version": current,
        }  # fmt: skip

    def record_replayed(self, answer: Answer) -> None:
        """The request and response events of an SDK retry answered from ``answer``, its
        original call's: no second token record, nor usage counted twice."""
        self.t_headers = self.t_first = time.perf_counter()
        self.record_request(None)
        self.rollout.log.append(
            EventKind.MODEL_RESPONSE,
            {
                "intercept_id": self.intercept.id, "status": answer.status,
                "stream": self.stream, "dialect": self.upstream_name, **answer.recorded,
                "replay_of": self.lookup.retry_of, "retry_count": self.lookup.retry_count,
                "timing": self.timing(),
            },
        )  # fmt: skip
        self.stats.replays += 1

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
            "timing": self.timing(),
        }
        if self.rollout.gate is not None:
            payload["policy_version"] = self.rollout.gate.version
        if isinstance(err, UpstreamStatusError):
            payload["upstream_body"] = err.body[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        self.rollout.log.append(EventKind.MODEL_ERROR, payload)
        self.delivery.error_status = http_status_of(err)
        self.stats.record_error(err.code)

    def timing(self, *, final: bool = False) -> Timing:
        """From the intercept's start: headers, first chunk, now; ``final`` (an answer
        read whole from the upstream) adds the upstream's window, the waits and the
        gateway's own share (:mod:`rolltap.gateway.overhead`)."""
        t0, now = self.intercept.started, time.perf_counter()
        timing = {
            "ttfb_ms": _ms(t0, self.t_headers),
            "ttfc_ms": _ms(t0, self.t_first),
            "total_ms": _ms(t0, now),
        }
        if final and self.t_sent is not None and self.t_done is not None:
            upstream = self.t_done - self.t_sent - self.waited_inside
            waited = self.waited + self.waited_inside
            gateway = max(0.0, (now - self.arrived) - upstream - waited)
            timing["upstream_ms"] = round(upstream * 1000.0, 3)
            timing["waited_ms"] = round(waited * 1000.0, 3)
            timing["gateway_ms"] = round(gateway * 1000.0, 3)
        return timing


def _ms(t0: float, t: float | None) -> float | None:
    return None if t is None else round((t - t0) * 1000.0, 3)
