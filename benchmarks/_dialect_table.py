"""The dialect matrix's table: what each pair adds over calling the simulator directly.

+µs/chunk is (p50 stream through the gateway − p50 direct) / chunks in the upstream's
stream (~260): it includes the call's fixed cost spread over them, a few µs. CPU is the
gateway process's, per call and per chunk. "translation" is a translating pair's added
cost minus the same harness's pass-through (H → H): what translating costs on top of
relaying, the number the goals are about.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from _dialect_load import PairResult

__all__ = ["print_matrix"]

GOAL_CALL_MS = 0.3
GOAL_CHUNK_US = 20.0


@dataclass(frozen=True)
class _Row:
    call_ms: float  # added p50 per non-streaming call
    chunk_us: float  # added p50 stream time per upstream chunk
    cpu_call_ms: float  # gateway CPU per non-streaming call
    cpu_chunk_us: float  # gateway CPU per upstream chunk of a stream


def _row(r: PairResult) -> _Row:
    med = statistics.median
    return _Row(
        call_ms=(med(r.gateway_call) - med(r.direct_call)) * 1e3,
        chunk_us=(med(r.gateway_stream) - med(r.direct_stream)) / r.chunks * 1e6,
        cpu_call_ms=r.cpu_call / len(r.gateway_call) * 1e3,
        cpu_chunk_us=r.cpu_stream / len(r.gateway_stream) / r.chunks * 1e6,
    )


def _versus(value: float, goal: float) -> str:
    return f"{value:6.3f} {'ok' if value <= goal else 'MISS'}"


def print_matrix(results: list[PairResult]) -> None:
    rows = {(r.harness, r.upstream): _row(r) for r in results}
    print("\n(d) added over the simulator called directly in the harness's dialect")
    print(
        f"{'harness → upstream':<24} {'+p50 ms/call':>12} {'translation':>12}"
        f" {'+µs/chunk':>10} {'translation':>12} {'gw CPU ms/call':>14} {'CPU µs/chunk':>12}"
    )
    print(f"{'goal (translation)':<24} {'':>12} {'≤ 0.3':>12} {'':>10} {'≤ 20':>12}")
    for r in results:
        row, relay = rows[(r.harness, r.upstream)], rows[(r.harness, r.harness)]
        name = f"{r.harness} → {r.upstream}" + (" (relay)" if r.passthrough else "")
        call_x = "" if r.passthrough else _versus(row.call_ms - relay.call_ms, GOAL_CALL_MS)
        chunk_x = "" if r.passthrough else _versus(row.chunk_us - relay.chunk_us, GOAL_CHUNK_US)
        print(
            f"{name:<24} {row.call_ms:>12.3f} {call_x:>12} {row.chunk_us:>10.2f}"
            f" {chunk_x:>12} {row.cpu_call_ms:>14.3f} {row.cpu_chunk_us:>12.2f}"
        )
    print()
    seen = set()
    for r in results:
        if r.harness in seen:
            continue
        seen.add(r.harness)
        med = statistics.median
        print(
            f"direct {r.harness:<9}: p50 {med(r.direct_call) * 1e3:.3f} ms/call, "
            f"{med(r.direct_stream) * 1e3:.3f} ms/stream"
        )
    first = results[0]
    print(
        f"per pair: {len(first.gateway_call)} call and {len(first.gateway_stream)} stream "
        f"samples each way; upstream chunks/stream: "
        + ", ".join(f"{r.upstream} {r.chunks}" for r in results if r.passthrough)
    )
