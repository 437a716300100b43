"""A relayed body read whole against read past its known prefix, in process.

    python benchmarks/read_past.py [--messages 20,100,400] [--calls 300] [--repeat 3]

One rollout's agent loop, shaped as gateway_overhead.py's (a tool call and a ~170-byte
result a turn; the model first, the conversation, then the other fields): the history of
N messages sent once, then ``--calls`` calls each with a new turn, as its (a) part sends
them. Per call, what the gateway does with the body before its request leaves and, with
its request event, after:

- ``read whole`` (every body until stop 50, and any body the gateway has a doubt about):
  parsed (orjson), checked for what the gateway reads and its depth (its members written,
  :class:`~rolltap.http.json_body.EncodedMembers`), its layout learnt; after the send,
  the conversation found by the bytes sent and remembered;
- ``read past`` (:func:`rolltap.gateway.relay_splice.read_past`): the known prefix found
  by its bytes, only what is past it parsed and checked; after the send, found
  (``found_after``) and remembered.

Prints the median µs a call before and after the send (median and range over the
repeats; hot caches: the gateway's own calls are colder). Not CI.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, cast

from _history_load import Target, _turn, body, history
from _procs import loop_sizes

from rolltap.gateway.conversation import ConversationIndex, conversation_of
from rolltap.gateway.relay_body import check_relayed
from rolltap.gateway.relay_splice import layout_of, read_past
from rolltap.gateway.rollout import Rollout
from rolltap.http.json_body import parse_json_object

_TARGET = Target("bench", "http://unused", "k")


class _Rollout:
    """What :func:`read_past` reads of a rollout."""

    def __init__(self) -> None:
        self.conversations = ConversationIndex()
        self.conversation_at: int | None = None


def _whole(raw: bytes, rollout: _Rollout) -> Callable[[], None]:
    """Read ``raw`` whole (before the send); what is left for after it."""
    body = parse_json_object(raw)
    encoded = check_relayed("chat", body, 0)
    rollout.conversation_at = layout_of(raw, "chat", encoded)
    assert encoded is not None

    def after() -> None:
        index = rollout.conversations
        sent = encoded.json_of("messages", body["messages"])
        found = index.find(conversation_of("chat", body), dialect="chat", sent=sent)
        index.remember(found, "chat")

    return after


def _past(raw: bytes, rollout: _Rollout) -> Callable[[], None]:
    spliced = read_past(raw, "chat", cast(Rollout, rollout))
    if spliced is None:
        raise SystemExit("the body was not read past its prefix: the code changed")

    def after() -> None:
        index = rollout.conversations
        index.remember(index.found_after(spliced.after), "chat")

    return after


def _run(way: str, n: int, calls: int) -> tuple[float, float]:
    """Median µs a call before and after the send."""
    rollout = _Rollout()
    base = history(n - 2)
    _whole(body(base, _TARGET, stream=False), rollout)()  # the history sent once
    read = _whole if way == "read whole" else _past
    before: list[float] = []
    after: list[float] = []
    for i in range(calls):
        raw = body([*base, *_turn(100_000 + i, "new")], _TARGET, stream=False)
        t0 = time.perf_counter()
        rest = read(raw, rollout)
        t1 = time.perf_counter()
        rest()
        t2 = time.perf_counter()
        before.append(t1 - t0)
        after.append(t2 - t1)
    return statistics.median(before) * 1e6, statistics.median(after) * 1e6


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}–{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", default="20,100,400")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = loop_sizes(parser, args, 4)
    print("| history | way | before the send (µs) | after it (µs) |")
    print("|---|---|---|---|")
    for n in sizes:
        runs: dict[str, list[tuple[float, float]]] = {"read whole": [], "read past": []}
        for _ in range(args.repeat):
            for way, got in runs.items():
                got.append(_run(way, n, args.calls))
        kb = len(body(history(n), _TARGET, stream=False)) / 1000
        for way, got in runs.items():
            cells: list[Any] = [_cell([b for b, _ in got]), _cell([a for _, a in got])]
            print(f"| {n} messages ({kb:.0f} KB) | {way} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
