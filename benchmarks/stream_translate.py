"""Stream translation overhead per chunk, for every (source → target) dialect pair.

    python benchmarks/stream_translate.py [--fragments 400] [--repeat 7]

Each source stream (reasoning, text, then a tool call with its arguments in many
fragments: ``--fragments`` deltas in all) is written by that dialect's own renderer,
then cut into one network read per SSE event. Two paths read it, in the same run:

* relay: split into events and pass each event's bytes on (what the gateway does when
  the harness speaks the upstream's dialect);
* translate: split, parse, render into the target dialect.

Printed per pair: µs per upstream chunk for both paths, the difference (the
translation's own cost) and the ratio. The best of ``--repeat`` runs is kept, so
background load inflates nothing but the spread. Not part of CI.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

from rolltap.dialects.canonical import (
    BlockDelta,
    BlockStart,
    BlockStop,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.dialects.sse import SSESplitter
from rolltap.dialects.streams import DIALECTS, stream_parser, stream_renderer

WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")


def canonical_stream(fragments: int) -> list[StreamEvent]:
    """A typical agent turn: some reasoning, an answer, one tool call."""
    reasoning, text = fragments // 4, fragments // 2
    args = max(fragments - reasoning - text, 2)
    events: list[StreamEvent] = [StreamStart("id-bench", "bench-model", Usage(900, 1))]
    events.append(BlockStart(0, "reasoning"))
    events += [BlockDelta(0, WORDS[i % len(WORDS)]) for i in range(reasoning)]
    events += [BlockStop(0, "sig"), BlockStart(1, "text")]
    events += [BlockDelta(1, WORDS[i % len(WORDS)]) for i in range(text)]
    events += [BlockStop(1), BlockStart(2, "tool_call", "call_1", "search")]
    events.append(BlockDelta(2, '{"query": "'))
    events += [BlockDelta(2, "lazy dog ") for _ in range(args - 2)]
    events += [BlockDelta(2, '"}'), BlockStop(2), StreamEnd("tool_use", Usage(900, fragments))]
    return events


def upstream_reads(dialect: str, fragments: int) -> list[bytes]:
    """The stream as ``dialect``'s server sends it, one read per SSE event."""
    renderer = stream_renderer(dialect, model="bench-model", include_usage=True)
    wire = b"".join(renderer.render(e) for e in canonical_stream(fragments))
    return [event.raw for event in SSESplitter().feed(wire)]


def relay(reads: list[bytes]) -> int:
    splitter = SSESplitter()
    sent = 0
    for read in reads:
        for event in splitter.feed(read):
            sent += len(event.raw)
    return sent


def translator(source: str, target: str) -> Callable[[list[bytes]], int]:
    def run(reads: list[bytes]) -> int:
        splitter = SSESplitter()
        parser = stream_parser(source)
        renderer = stream_renderer(target, model="harness-model", include_usage=True)
        sent = 0
        for read in reads:
            for event in splitter.feed(read):
                for canonical in parser.feed(event):
                    sent += len(renderer.render(canonical))
        assert parser.done
        return sent

    return run


def best_us_per_chunk(path: Callable[[list[bytes]], int], reads: list[bytes], repeat: int) -> float:
    best = float("inf")
    gc.collect()
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(10):
            path(reads)
        best = min(best, (time.perf_counter() - start) / 10)
    return best / len(reads) * 1e6


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--fragments", type=int, default=400, help="deltas per stream")
    cli.add_argument("--repeat", type=int, default=7, help="runs per measurement (best kept)")
    args = cli.parse_args()

    print(
        f"{'source -> target':<24}{'chunks':>7}{'relay µs':>10}{'translate µs':>14}"
        f"{'added µs':>10}{'ratio':>8}"
    )
    for source in DIALECTS:
        reads = upstream_reads(source, args.fragments)
        for target in DIALECTS:
            # the baseline is re-measured next to each pair, under the same load
            base = best_us_per_chunk(relay, reads, args.repeat)
            cost = best_us_per_chunk(translator(source, target), reads, args.repeat)
            print(
                f"{source + ' -> ' + target:<24}{len(reads):>7}{base:>10.2f}{cost:>14.2f}"
                f"{cost - base:>10.2f}{cost / base:>7.1f}x"
            )


if __name__ == "__main__":
    main()
