"""What a relay refuses of a harness's body: only what the gateway itself cannot handle.

When the rollout's upstream speaks the harness's own dialect the call is relayed: the body
goes on with the documented rewrites only (``model``, the run's sampling, a chat stream's
``stream_options.include_usage``), every other field, role, content-block type and tool
type untouched whatever its value, so that a new API feature never needs a rolltap
release to pass. The gateway reads ``model``, ``stream``, the conversation
(:func:`~rolltap.gateway.conversation.conversation_of`: its prefix index and its events)
and the fields it rewrites; :func:`check_relayed` refuses a body only where one of those
could not be read, or where the body could not be recorded or passed on (nested deeper
than :data:`~rolltap.http.json_body.MAX_JSON_DEPTH`). The upstream judges the rest, and
its answer (an error included) reaches the harness and the record as it came.

>>> check_relayed("messages", {"messages": [{"role": "system", "content": "x"}]}, 0)
>>> check_relayed("chat", {"messages": "hi"}, 0)
Traceback (most recent call last):
...
rolltap.errors.InvalidRequestError: messages: must be an array
"""

from __future__ import annotations

from typing import Any

from rolltap.errors import InvalidRequestError
from rolltap.gateway.conversation import CONVERSATION_KEYS
from rolltap.http.json_body import EncodedMembers, check_depth

__all__ = ["check_relayed", "check_shape", "is_relay"]


def is_relay(harness: str, upstream: str) -> bool:
    """Whether a call of the ``harness`` dialect to an upstream named ``upstream`` is
    relayed (a token upstream's name, ``completions.*``, never matches a dialect's)."""
    return harness == upstream


def check_relayed(dialect: str, body: dict[str, Any], start: int) -> EncodedMembers | None:
    """Refuse (400 ``invalid_request``) a relayed ``dialect`` body the gateway could not
    handle; its first ``start`` conversation items were checked before (a prefix the
    rollout already sent) and are not walked again. A body checked whole comes back
    written member by member (:class:`~rolltap.http.json_body.EncodedMembers`), for the
    relay to encode its rewrites from."""
    conversation = check_shape(dialect, body)
    if start > 0 and isinstance(conversation, list):
        check_depth({**body, CONVERSATION_KEYS[dialect]: conversation[start:]})
        return None
    return EncodedMembers.check(body)


def check_shape(dialect: str, body: dict[str, Any]) -> object:
    """:func:`check_relayed` but for the depth; the body's conversation member."""
    key = CONVERSATION_KEYS[dialect]
    conversation = body.get(key)
    if key in body and not isinstance(conversation, list):
        # a Responses input may be one string (a user turn); an absent conversation is
        # the upstream's to refuse (a Responses call may have none)
        if dialect != "responses":
            raise InvalidRequestError("must be an array", field=key)
        if not isinstance(conversation, str):
            raise InvalidRequestError("must be a string or an array", field=key)
    if dialect == "chat" and body.get("stream"):
        # the gateway adds include_usage to it: it must be an object (or absent/empty)
        options = body.get("stream_options")
        if options and not isinstance(options, dict):
            raise InvalidRequestError("must be an object", field="stream_options")
    return conversation
