"""A model call the gateway refused before it began, recorded as every call is.

Once a call's rollout is known, whichever step refuses it — its secret, its body (too
large, too slow, not JSON, not an object), validation (a relay's:
:mod:`rolltap.gateway.relay_body`), an ``Idempotency-Key`` — the rollout's log gets a
``model_request`` of what the harness sent and a ``model_error`` with the refusal's code,
so a refused call never leaves an empty log (``docs/events.md``, "Refused calls"). A call
refused later, inside :class:`~rolltap.gateway.call.ModelCall` (limits, a full pool,
a translation the upstream cannot express), is recorded there the same way.

Not recorded: an attempt refused by the authentication throttle (429
``auth_rate_limited``: a guesser must not grow the log at its own pace) and a call to a
rollout already closed (its log is its owner's by then).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rolltap.dialects.canonical import Dialect
from rolltap.errors import AuthRateLimitedError, InvalidRequestError, RolltapError
from rolltap.events import EventKind
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.conversation import CONVERSATION_KEYS, conversation_of
from rolltap.gateway.replay import retry_count_of
from rolltap.gateway.rollout import Rollout
from rolltap.http.json_body import check_depth

__all__ = ["Arrival"]


@dataclass(slots=True)
class Arrival:
    """What is known of an arriving call, step by step, should a step refuse it."""

    rollout: Rollout
    dialect: Dialect
    started: float = field(default_factory=time.perf_counter)
    #: the body's size, once read
    size: int | None = None
    #: the body, once parsed as a JSON object
    body: dict[str, Any] | None = None

    def refuse(
        self, err: RolltapError, headers: Mapping[str, str], context: GatewayContext
    ) -> None:
        """Record the refusal ``err`` (request and error events), count it, tell the
        rollout's observers; nothing for a throttled attempt or a closed rollout."""
        rollout = self.rollout
        if rollout.closed is not None or isinstance(err, AuthRateLimitedError):
            return
        call_id = rollout.next_call_id()
        request = self._request(call_id, headers)
        rollout.log.append(EventKind.MODEL_REQUEST, request)
        total_ms = round((time.perf_counter() - self.started) * 1000.0, 3)
        rollout.log.append(
            EventKind.MODEL_ERROR,
            {
                "intercept_id": call_id, **err.to_dict(), "stream": request["stream"],
                "timing": {"ttfb_ms": None, "ttfc_ms": None, "total_ms": total_ms},
                # as every model_error: the version current when the call failed
                **({} if rollout.gate is None else {"policy_version": rollout.gate.version}),
            },
        )  # fmt: skip
        context.stats.record_error(err.code)
        for observer in context.observers:
            observer.call_finished(rollout)

    def _request(self, call_id: str, headers: Mapping[str, str]) -> dict[str, Any]:
        """The ``model_request`` payload: the shape of an accepted call's, with what is
        known (no body before it was parsed; never a header, so never a credential)."""
        dialect, body = self.dialect, self.body
        payload: dict[str, Any] = {
            "intercept_id": call_id,
            "route": dialect.path.removeprefix("/v1/").replace("/", "."),
            "dialect": dialect.name,
            "upstream_dialect": self.rollout.upstream.name,
            "stream": False,
            "prefix_digest": None,
            "prefix_messages": 0,
            "messages": [],
            "params": {},
            "rewrites": [],
            "sent": False,
        }
        if body is not None and _recordable(body):
            payload.update(self._conversation(body))
        if self.size is not None:
            payload["body_bytes"] = self.size
        if retries := retry_count_of(headers):
            payload["retry_count"] = retries
        return payload

    def _conversation(self, body: dict[str, Any]) -> dict[str, Any]:
        """``stream``, the messages past the longest conversation recorded before (not
        remembered: the body was refused) and the other fields as ``params``."""
        name = self.dialect.name
        key = CONVERSATION_KEYS[name]
        value = body.get(key)
        out: dict[str, Any] = {"stream": bool(body.get("stream"))}
        if not (isinstance(value, list) or (name == "responses" and isinstance(value, str))):
            out.update(self.rollout.kept_params.fields(body))  # no conversation: the whole body
            return out
        conversation = conversation_of(name, body)
        match = self.rollout.conversations.match(conversation, remember=False, dialect=name)
        out.update(match.fields())
        out["messages"] = conversation[match.length :]
        out.update(self.rollout.kept_params.fields({k: v for k, v in body.items() if k != key}))
        return out


def _recordable(body: dict[str, Any]) -> bool:
    """Whether a refused body can be recorded: one nested too deep could not be written
    (its size is recorded, not its content)."""
    try:
        check_depth(body)
    except InvalidRequestError:
        return False
    return True
