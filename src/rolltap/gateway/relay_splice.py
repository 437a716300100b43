"""A relayed body read past the conversation its rollout sent before: that prefix unparsed.

An agent resends its whole history every turn, byte for byte. A relayed call's body is
parsed, checked and written again member by member (:func:`~rolltap.gateway.relay_body.
check_relayed`), which at a long history is most of what the gateway does before the
request leaves. Once a rollout's harness is seen to write its body as orjson does up to
the end of its conversation (:func:`layout_of`: where that member begins), its next body
is read past the prefix it sent before (:func:`read_past`): the bytes at that place must
open the conversation member, the rollout's conversation index finds the longest
conversation it sent before that those bytes begin with (by their hash:
:meth:`~rolltap.gateway.conversation.ConversationIndex.sent_prefix`), and only the members
before it and the bytes past that prefix are parsed — ``{"messages":[`` followed by
the new messages and the rest of the body. The prefix's messages are never parsed: the
relay sends them as they came, the request event records the messages past the prefix
(as it always has), and the depth check walks the new messages only (the prefix was
checked when it was sent).

A body read so is exactly what orjson writes of the members parsed and the conversation
(the prefix's bytes were orjson's when first sent; the new messages' and the other
members' are compared with orjson's writing of what was parsed), so what the relay sends
and the events record are those a whole read makes. Every doubt reads the body whole, as
before: another place for the conversation, bytes not as orjson writes them (spaces,
escapes, a member named twice), the prefix's hash states let go, or a rollout whose calls
need the whole conversation (a token capture's drift check, a tracer recording prompts, a
retry digested before its check: :func:`splices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from rolltap.clients.relay_upstream import RelayUpstream
from rolltap.gateway.conversation import CONVERSATION_KEYS, After
from rolltap.gateway.relay_body import check_shape
from rolltap.gateway.rollout import Rollout
from rolltap.http.json_body import EncodedMembers

__all__ = ["Spliced", "layout_of", "read_past", "splices"]

#: each dialect's conversation member opened: ``"messages":[``
_OPENINGS = {name: orjson.dumps(key) + b":[" for name, key in CONVERSATION_KEYS.items()}
_BEFORE_MEMBER = frozenset(b"{,")


@dataclass(frozen=True, slots=True)
class Spliced:
    """A body read past its known prefix: its members (the conversation's holding only
    the messages past the prefix), its conversation made ready to be found (once the
    request has left: :meth:`~rolltap.gateway.conversation.ConversationIndex.
    found_after`), and the members' JSON (the conversation's: the body's own bytes of
    it, all of it)."""

    body: dict[str, Any]
    after: After
    encoded: EncodedMembers


def splices(rollout: Rollout, *, whole_needed: bool) -> bool:
    """Whether ``rollout``'s relayed calls may be read past their prefix: its upstream
    sends the body's members as written (a relay without a token capture, whose drift
    check reads the whole conversation) and nothing else of the call needs the whole
    conversation parsed (``whole_needed``: a tracer, a retry's digest)."""
    upstream = rollout.upstream
    return not whole_needed and isinstance(upstream, RelayUpstream) and upstream.turns is None


def layout_of(raw: bytes, dialect: str, encoded: EncodedMembers | None) -> int | None:
    """Where ``raw``, a relayed body checked whole into ``encoded`` (None: not whole),
    begins its conversation member, when ``raw`` is orjson's writing of the body (None
    otherwise, or without a conversation array): the place :func:`read_past` reads the
    rollout's next body at."""
    key, opening = CONVERSATION_KEYS[dialect], _OPENINGS[dialect]
    member = None if encoded is None else encoded.member(key)
    if encoded is None or member is None or member[: len(opening)] != opening:
        return None
    ahead, behind = encoded.around(key)
    at, view = len(ahead), memoryview(raw)
    stop = at + len(member)
    if len(raw) != stop + len(behind) or view[:at] != ahead or view[stop:] != behind:
        return None
    return at if view[at:stop] == member else None


def read_past(raw: bytes, dialect: str, rollout: Rollout) -> Spliced | None:
    """``raw`` read past the longest conversation ``rollout`` sent before that it extends,
    found by its bytes at the place the rollout's last body had its conversation
    (``rollout.conversation_at``); None where the body must be read whole. Raises what
    :func:`~rolltap.gateway.relay_body.check_relayed` raises, for the parts it reads."""
    at, opening = rollout.conversation_at, _OPENINGS[dialect]
    if at is None or not 0 < at < len(raw) or raw[at - 1] not in _BEFORE_MEMBER:
        return None
    if not raw.startswith(opening, at):
        return None
    view = memoryview(raw)
    start = at + len(opening) - 1  # the array's "["
    prefix = rollout.conversations.sent_prefix(view[start:], dialect)
    if prefix is None:
        return None
    end = start + prefix.size - 1  # a "," (new messages follow) or the array's "]"
    key = CONVERSATION_KEYS[dialect]
    body = _members(raw, at, end, key)
    if body is None:
        return None
    new = body[key]
    if (raw[end] == ord(",")) != bool(new):
        return None  # "[…,]": not JSON, read whole for its error
    check_shape(dialect, body)
    encoded = EncodedMembers.check(body)  # the depth: the new messages, not the prefix
    past = encoded.member(key)
    if past is None:
        return None
    # the new messages must be the bytes past the prefix, as orjson writes them
    stop = end + len(past) - len(opening) + 1 if new else end + 1
    if new and view[end + 1 : stop] != memoryview(past)[len(opening) :]:
        return None
    # the rest as orjson writes it too: the body is orjson's writing of what was parsed
    # (a member named twice is not, a conversation named twice among them neither)
    ahead, behind = encoded.around(key)
    if view[:at] != ahead or view[stop:] != behind:
        return None
    encoded.replace(key, view[at:stop])
    after = rollout.conversations.after(prefix, new, view[start:stop], skipped=prefix.known.length)
    return None if after is None else Spliced(body, after, encoded)


def _members(raw: bytes, at: int, end: int, key: str) -> dict[str, Any] | None:
    """The body's members but its conversation's prefix: those before ``at`` and, from
    the bytes past ``end``, the conversation ``key`` (its new messages) and those after
    it; None where they are not JSON objects."""
    opening = b"{" + orjson.dumps(key) + b":["
    rest = opening + (raw[end + 1 :] if raw[end] == ord(",") else b"]" + raw[end + 1 :])
    try:
        head = orjson.loads(raw[: at - 1] + b"}") if at > 1 else {}
        tail = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return None  # read whole, for its error
    if not isinstance(head, dict) or key in head or not isinstance(tail, dict):
        return None
    if not isinstance(tail.get(key), list):
        return None
    return head | tail
