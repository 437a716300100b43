"""Prompt-caching markers, which an agent moves every turn, kept apart from its messages.

Anthropic's prompt caching marks a content block with ``cache_control``, and an agent
marks the end of what it sends: Claude Code marks the last block of its last message, so
each turn it sends the block it marked last turn again without the marker. Compared as
sent, no turn would extend the one before, and every request event would store the whole
history again. So in the ``messages`` dialect the conversation index compares messages
without the markers on their content blocks (:func:`unmarked`) and keeps the markers
apart (:func:`marks_of`); a request event names its prefix's markers as sent
(``prefix_cache_control``, docs/events.md), and :func:`with_marks` rebuilds the prefix
as sent from the messages recorded before.

A mark is ``(message, block, value)``: the indexes of a message and of a block of its
``content``, and the block's ``cache_control``. Only blocks of a message's own
``content`` list are marks; a ``cache_control`` deeper (inside a tool result's content,
in a tool's input) is part of the message.

>>> marked = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
>>> sent = [{"role": "user", "content": [marked]}]
>>> marks = marks_of(sent)
>>> marks
[(0, 0, {'type': 'ephemeral'})]
>>> unmarked(sent, marks)[0]["content"]
[{'type': 'text', 'text': 'hi'}]
>>> with_marks(unmarked(sent, marks), marks) == sent
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARKED_DIALECTS", "Mark", "marks_of", "unmarked", "with_marks"]

#: the dialects whose content blocks carry ``cache_control``
MARKED_DIALECTS = frozenset({"messages"})

KEY = "cache_control"

Mark = tuple[int, int, Any]


def _blocks(message: Any) -> list[Any] | None:
    content = message.get("content") if type(message) is dict else None
    return content if type(content) is list else None


def marks_of(messages: list[Any], start: int = 0) -> list[Mark]:
    """The markers on the content blocks of ``messages`` from ``start`` on, in order."""
    found: list[Mark] = []
    for i in range(start, len(messages)):
        blocks = _blocks(messages[i])
        if blocks is None:
            continue
        for j, block in enumerate(blocks):
            if type(block) is dict and KEY in block:
                found.append((i, j, block[KEY]))
    return found


def unmarked(messages: list[Any], marks: list[Mark]) -> list[Any]:
    """``messages`` without ``marks``: the marked messages copied (as deep as the marked
    block), the others shared."""
    out = list(messages)
    for i, j, _ in marks:
        message = out[i]
        if message is messages[i]:
            message = out[i] = {**message, "content": list(message["content"])}
        block = dict(message["content"][j])
        del block[KEY]
        message["content"][j] = block
    return out


def with_marks(messages: list[Any], marks: list[Mark]) -> list[Any]:
    """``messages`` with every content block's marker taken off, then ``marks`` set (a
    request's prefix as sent: the messages recorded before and its
    ``prefix_cache_control``). Copies what it changes."""
    out = unmarked(messages, marks_of(messages))
    for i, j, value in marks:
        message = out[i] = {**out[i], "content": list(out[i]["content"])}
        message["content"][j] = {**message["content"][j], KEY: value}
    return out
