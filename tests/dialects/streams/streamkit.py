"""Scenarios and realistic upstream streams for the stream-translation tests.

A :class:`Scenario` says what a model produced (blocks and their fragments in wire
order, stop reason, usage); ``upstream(dialect, scenario)`` writes it the way that
provider's server would, field for field, so the parsers see real-shaped input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from dialects.streams.wires import anthropic_wire, chat_wire, responses_wire
from rolltap.dialects.canonical import BlockKind, StopReason, Usage
from rolltap.dialects.sse import SSESplitter
from rolltap.dialects.streams import stream_parser, stream_renderer

__all__ = ["SCENARIOS", "Block", "Scenario", "translate", "upstream"]


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    id: str | None = None
    name: str | None = None
    signature: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    blocks: tuple[Block, ...]
    deltas: tuple[tuple[int, str], ...]  # (block number, fragment), in wire order
    stop: StopReason
    usage: Usage

    def joined(self, kind: BlockKind) -> str:
        return "".join(t for b, t in self.deltas if self.blocks[b].kind == kind)

    def calls(self) -> list[tuple[str, str, str]]:
        """(id, name, exact argument JSON) per tool call, in block order."""
        return [
            (str(block.id), str(block.name), "".join(t for b, t in self.deltas if b == number))
            for number, block in enumerate(self.blocks)
            if block.kind == "tool_call"
        ]


_TOOL = Block("tool_call", "call_w1", "get_weather")
SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "text",
        (Block("text"),),
        ((0, "Hello"), (0, ", wor"), (0, 'ld! "quoted" \\ ✓')),
        "end_turn",
        Usage(12, 5),
    ),
    Scenario(
        "reasoning",
        (Block("reasoning", signature="sig-Zm9v"), Block("text")),
        ((0, "Let me think"), (0, " about 2+2."), (1, "The answer"), (1, " is 4.")),
        "end_turn",
        Usage(20, 31),
    ),
    Scenario(
        "tool_call",
        (Block("text"), _TOOL),
        ((0, "Checking."), (1, '{"ci'), (1, 'ty": "Par'), (1, 'is", "unit'), (1, '": "c"}')),
        "tool_use",
        Usage(40, 18),
    ),
    Scenario(
        "parallel_tools",
        (Block("tool_call", "call_a", "add"), Block("tool_call", "call_b", "lookup")),
        ((0, '{"a": '), (1, '{"keys": ['), (0, "1, "), (1, '"x", "y"'), (0, '"b": 2}'), (1, "]}")),
        "tool_use",
        Usage(55, 30),
    ),
    Scenario(
        "max_tokens",
        (Block("text"),),
        ((0, "This answer is cut"), (0, " off mid")),
        "max_tokens",
        Usage(9, 4),
    ),
    Scenario(
        "cached_usage",
        (Block("text"),),
        ((0, "Cached."),),
        "end_turn",
        Usage(1200, 3, cache_read_tokens=1024),
    ),
)


def upstream(dialect: str, scenario: Scenario, **options: Any) -> bytes:
    """The scenario as ``dialect``'s server streams it."""
    if dialect == "chat":
        return chat_wire(scenario, **options)
    if dialect == "messages":
        return anthropic_wire(scenario, **options)
    return responses_wire(scenario, **options)


def translate(source: str, target: str, wire: bytes, *, keepalive: bool = False) -> bytes:
    """Run ``wire`` through ``source``'s parser and ``target``'s renderer, fed in
    uneven pieces so events straddle reads; ``keepalive`` adds one after every frame."""
    splitter = SSESplitter()
    parser = stream_parser(source)
    renderer = stream_renderer(target, model="harness-model", include_usage=True)
    out: list[bytes] = []
    for start in range(0, len(wire), 37):
        for sse in splitter.feed(wire[start : start + 37]):
            for event in parser.feed(sse):
                out.append(renderer.render(event))
                if keepalive:
                    out.append(renderer.keepalive())
    assert parser.done
    assert not splitter.pending
    return b"".join(out)


def frame(payload: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"
