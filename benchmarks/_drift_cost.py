"""The drift check's cost per turn at long histories, against one orjson parse of the ids.

Per turn, a code path with ids checks the new prompt against the rollout's previous
prompt + completion (:meth:`rolltap.tokens.drift.TurnHistory.check`) and remembers what
was sampled (:meth:`~rolltap.tokens.drift.TurnHistory.sampled`). The token client skips
the check when it extended the prompt itself (the ids extend by construction: O(1)); a
full render, or a relay with server-side ids, pays for the compare. Three cases at
``n`` history ids (ids drawn from a 150k vocabulary, the prompt sent as a JSON list, as a
relay reads it):

* ``extends, lists`` / ``extends, tuples``: the prompt extends the history (ids as a relay
  parses them, as the token client renders them): one slice compare of the history;
* ``drift @ n/2``: it parts halfway (the compare, then the bisection for the position);
* ``relay turn``: a relay's whole per-turn cost: the parsed ids checked and remembered;

each against ``orjson.loads`` of the prompt's JSON (the parse any path with ids pays),
timed in alternate batches: the ratio is the median of the rounds' ratios.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from rolltap.tokens.drift import TurnHistory

GOAL = 0.5  # ≤ this × one orjson parse of the same ids


def _batch_s(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    for _ in range(10):
        fn()
    return (time.perf_counter() - t0) / 10


def _against(fn: Callable[[], Any], parse: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """Median seconds per call of ``fn`` and of ``parse``, timed in alternate batches of 10
    (a busy machine slows both alike), and the median of their per-round ratios."""
    pairs = [(_batch_s(fn), _batch_s(parse)) for _ in range(rounds)]
    check_s = statistics.median(c for c, _ in pairs)
    return check_s, statistics.median(c / p for c, p in pairs)


def drift_cost(n: int = 32_768, rounds: int = 50) -> list[dict[str, Any]]:
    """Rows ``{case, n, check_us, parse_us, ratio}`` (see the module doc)."""
    rng = random.Random(19)
    history_ids = [rng.randrange(150_000) for _ in range(n)]
    grown = [*history_ids, *(rng.randrange(150_000) for _ in range(64))]
    parted = list(grown)
    parted[n // 2] = (parted[n // 2] + 1) % 150_000
    body = orjson.dumps(grown)

    def parse() -> None:
        orjson.loads(body)

    parse_s = statistics.median(_batch_s(parse) for _ in range(rounds))

    # each side parsed on its own, as each turn's ids are: equal ints, never the same objects
    def parsed(ids: list[int]) -> list[int]:
        out: list[int] = orjson.loads(orjson.dumps(ids))
        return out

    lists = TurnHistory()
    lists.sampled(parsed(history_ids[:-200]), parsed(history_ids[-200:]))
    tuples = TurnHistory()
    tuples.sampled(tuple(parsed(history_ids[:-200])), tuple(parsed(history_ids[-200:])))
    got_list, got_tuple, parted_list = parsed(grown), tuple(parsed(grown)), parsed(parted)
    assert lists.check(got_list) is None
    assert tuples.check(got_tuple) is None
    drift = lists.check(parted_list)
    assert drift is not None
    assert drift.at == n // 2

    def relay_turn() -> None:
        mine = TurnHistory(lists.prompt, lists.completion)
        mine.check(got_list)
        mine.sampled(got_list, got_list[-200:])

    cases = {
        "extends, lists": lambda: lists.check(got_list),
        "extends, tuples": lambda: tuples.check(got_tuple),
        f"drift @ {n // 2}": lambda: lists.check(parted_list),
        "relay turn": relay_turn,
    }
    rows = []
    for case, fn in cases.items():
        check_s, ratio = _against(fn, parse, rounds)
        rows.append({
            "case": case, "n": n, "check_us": check_s * 1e6, "parse_us": parse_s * 1e6,
            "ratio": ratio,
        })  # fmt: skip
    return rows


def print_drift_cost(rows: list[dict[str, Any]]) -> None:
    print(f"\ndrift check per turn vs one orjson parse of the same ids (goal ≤ {GOAL}×)")
    print(f"{'case':>16} {'ids':>7} {'check µs':>9} {'parse µs':>9} {'ratio':>6}")
    for r in rows:
        verdict = "met" if r["ratio"] <= GOAL else "MISSED"
        print(
            f"{r['case']:>16} {r['n']:>7} {r['check_us']:>9.1f} {r['parse_us']:>9.1f} "
            f"{r['ratio']:>6.3f} {verdict}"
        )


if __name__ == "__main__":
    print_drift_cost(drift_cost())
