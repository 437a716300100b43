"""The relay upstream: a call forwarded in the endpoint's own dialect (eval mode).

When the harness speaks the endpoint's dialect the call passes through: the harness's
body with the documented rewrites only (:func:`apply_rewrites`), the answer as it
came. Otherwise the request is translated through the canonical model
(:func:`rolltap.dialects.translate.translate_request`, under the endpoint's
``unsupported`` policy); what the translation left out is recorded as
``{"dropped", "reason"}`` rewrites, the harness's vendor headers the upstream has no use
for (``anthropic-beta`` to an OpenAI-dialect upstream) among them
(``"dropped": "header:<name>"``). The gateway translates the answer back as it
delivers it.

The rewrites apply to the upstream-dialect body (the harness's own body on
pass-through, the translated one otherwise), so there is one set of rules per upstream
dialect:

- ``model`` becomes the endpoint's model;
- the run's sampling settings replace what the harness sent, under the upstream
  dialect's names (``max_tokens`` is ``max_output_tokens`` for Responses, ``stop`` is
  ``stop_sequences`` for Messages); a setting the upstream dialect cannot express is
  recorded as skipped, never sent under a name the upstream would reject;
- a chat-completions stream gets ``stream_options.include_usage`` so usage is
  always recorded;
- with the endpoint's ``capture_tokens`` (a chat upstream), ``return_token_ids`` (and
  ``logprobs`` with ``capture_logprobs``), taken back out of the answer the harness gets
  (:mod:`rolltap.clients.capture`): the one change to an answer on pass-through. The
  server's prompt ids are then checked for drift from the rollout's previous turn
  (:mod:`rolltap.clients.relay_drift`).

Every rewrite is returned as ``{"field", "from", "to"}`` for the request event.

>>> body = {"model": "x", "messages": [], "max_tokens": 5}
>>> [r["field"] for r in apply_rewrites("responses", body, "m", {"max_tokens": 9})]
['model', 'max_output_tokens']
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import orjson
from multidict import CIMultiDict

from rolltap.clients.capture import ServerCapture, capture_rewrites, captured_fields
from rolltap.clients.exchange import Exchange
from rolltap.clients.relay import RelayClient, relayed_headers
from rolltap.clients.relay_drift import RelayTurns
from rolltap.clients.sent_body import SentOnce
from rolltap.clients.upstream import Answer, ModelRequest, Reply, UpstreamRequest
from rolltap.config import EndpointConfig
from rolltap.dialects.registry import get_dialect
from rolltap.dialects.translate import Unsupported, dropped_headers, translate_request
from rolltap.events.jsonbytes import dumps_kept
from rolltap.http.json_body import upstream_json_object

__all__ = ["RelayRequest", "RelayUpstream", "apply_rewrites", "translated"]

_SSE = "text/event-stream"


@dataclasses.dataclass(slots=True)
class RelayRequest(UpstreamRequest):
    """A relayed request, with its server-side token capture (None: the endpoint's off)
    and, when translated, the harness's headers less those dropped (None: all of them).

    ``data``: the body's bytes, made once its rewrites are done — what is sent, so the
    body itself (the history's size) need not outlive its request event; let go of once
    written, so a call waiting for its answer holds neither (:class:`SentOnce`)."""

    capture: ServerCapture | None = dataclasses.field(default=None, kw_only=True)
    headers: Mapping[str, str] | None = dataclasses.field(default=None, kw_only=True)
    data: SentOnce = dataclasses.field(kw_only=True)


class RelayUpstream:
    """An :class:`~rolltap.clients.upstream.Upstream` over a shared :class:`RelayClient`."""

    __slots__ = (
        "capture", "capture_logprobs", "client", "dialect", "model", "name", "turns",
        "unsupported",
    )  # fmt: skip

    def __init__(self, endpoint: EndpointConfig, client: RelayClient) -> None:
        self.client, self.model = client, endpoint.model
        self.dialect = get_dialect(endpoint.dialect)
        self.name: str = self.dialect.name
        #: what a translation does with a field this dialect cannot express
        self.unsupported = endpoint.unsupported
        # the endpoint's validation allows it on a chat upstream only
        self.capture, self.capture_logprobs = endpoint.capture_tokens, endpoint.capture_logprobs
        #: the rollout's captured turns, for the drift check (none without capture)
        self.turns = RelayTurns() if self.capture else None

    async def rewrite(self, call: ModelRequest) -> RelayRequest:
        """The harness's body itself on pass-through (rewritten in place), else its
        translation; either way with the run's settings under this dialect's names. Its
        ``data``: the harness's own bytes when nothing changed, else the body's."""
        dropped: list[dict[str, Any]] = []
        headers: Mapping[str, str] | None = None
        if call.dialect.name == self.name:
            body = call.body
        else:
            body, dropped, headers = translated(call, self.name, self.unsupported)
        rewrites = apply_rewrites(self.name, body, self.model, call.sampling) + dropped
        kept = call.without_raw()  # the bytes go as ``data``, once
        if self.turns is None:
            if body is call.body and not rewrites and call.raw is not None:
                data = call.raw  # nothing changed
            elif body is call.body and call.encoded is not None:
                data = call.encoded.encode(body)  # sized to fit: a join
            else:
                data = dumps_kept(body)
            return RelayRequest(kept, body, rewrites, headers=headers, data=SentOnce(data))
        more, capture = capture_rewrites(
            body, logprobs=self.capture_logprobs, turn=self.turns.begin()
        )
        return RelayRequest(kept, body, rewrites + more, capture=capture, headers=headers,
                            data=SentOnce(dumps_kept(body)))  # fmt: skip

    def call(self, request: RelayRequest) -> _RelayCall:
        """A stream when the harness asked for one and the upstream sent events; a body
        otherwise (an upstream may answer a stream request with one JSON body)."""
        call = request.call
        headers = call.headers if request.headers is None else request.headers
        send = self.client.send(
            self.dialect.path, request.data, headers, rollout_id=call.rollout_id
        )
        return _RelayCall(self, request, send)


class _RelayCall:
    """One relayed request as a block, its reply inside (a class, not a generator: every
    relayed call runs one)."""

    __slots__ = ("request", "send", "upstream")

    def __init__(self, upstream: RelayUpstream, request: RelayRequest, send: Exchange) -> None:
        self.upstream, self.request, self.send = upstream, request, send

    async def __aenter__(self) -> Reply:
        up = await self.send.__aenter__()
        capture = self.request.capture
        parse = _answer if capture is None else functools.partial(_captured, capture)
        streamed = self.request.call.stream and up.content_type == _SSE
        try:
            headers = relayed_headers(up.headers)
        except BaseException as exc:  # re-raised: the connection is let go first
            await self.send.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return Reply(
            up.status, headers, "stream" if streamed else "body", self.upstream.dialect, up,
            parse, retry_after=up.headers.get("Retry-After"), capture=capture,
        )  # fmt: skip

    async def __aexit__(self, *exc_info: object) -> None:
        await self.send.__aexit__(*exc_info)


def translated(
    call: ModelRequest, target: str, unsupported: Unsupported
) -> tuple[dict[str, Any], list[dict[str, Any]], Mapping[str, str]]:
    """``call``'s body in the ``target`` dialect, the ``dropped`` rewrites of what it left
    out (fields, then the harness's vendor headers), and the headers to send."""
    source = call.dialect.name
    translation = translate_request(call.body, source, target, unsupported=unsupported)
    lost = dropped_headers(call.headers.keys(), source, target)
    gone = {d.path.removeprefix("header:") for d in lost}
    headers: Mapping[str, str] = call.headers
    if gone:
        headers = CIMultiDict([(k, v) for k, v in call.headers.items() if k.lower() not in gone])
    return translation.body, [d.rewrite() for d in (*translation.dropped, *lost)], headers


async def _answer(raw: bytes) -> Answer:
    return Answer(upstream_json_object(raw), raw)


async def _captured(capture: ServerCapture, raw: bytes) -> Answer:
    """A whole answer less what the capture asked for: the harness gets it re-serialized
    (the one answer not relayed byte for byte), the record its ids."""
    body = upstream_json_object(raw)
    tokens, changed = capture.take_body(body)
    return Answer(body, orjson.dumps(body) if changed else raw, record=captured_fields(tokens))


#: the run's sampling names (chat's) → each upstream dialect's; None: not expressible
_SAMPLING_NAMES: Mapping[str, Mapping[str, str | None]] = {
    "chat": {},
    "messages": {"stop": "stop_sequences", "seed": None, "frequency_penalty": None,
                 "presence_penalty": None},
    "responses": {"max_tokens": "max_output_tokens", "stop": None, "seed": None,
                  "top_k": None, "frequency_penalty": None, "presence_penalty": None},
}  # fmt: skip


def _native(dialect: str, name: str, value: Any) -> tuple[str | None, Any]:
    names = _SAMPLING_NAMES.get(dialect, {})
    target = names.get(name, name)
    if target == "stop_sequences" and isinstance(value, str):
        value = [value]
    return target, value


def apply_rewrites(
    dialect: str, body: dict[str, Any], model: str, sampling: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Rewrite ``body`` (an upstream-``dialect`` request) in place; the rewrites made."""
    rewrites: list[dict[str, Any]] = []
    if body.get("model") != model:
        rewrites.append({"field": "model", "from": body.get("model"), "to": model})
        body["model"] = model
    for name, value in sampling.items():
        target, native = _native(dialect, name, value)
        if target is None:
            rewrites.append({"field": name, "from": None, "to": value, "skipped": dialect})
        elif body.get(target) != native:
            rewrites.append({"field": target, "from": body.get(target), "to": native})
            body[target] = native
    if dialect == "chat" and body.get("stream"):
        opts = body.get("stream_options") or {}
        if not opts.get("include_usage"):
            rewrites.append({"field": "stream_options.include_usage", "from": None, "to": True})
            body["stream_options"] = {**opts, "include_usage": True}
    return rewrites
