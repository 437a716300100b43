"""Policy versions in the exports: each turn's ``policy_versions`` spans and ``continued``
count in ``--format tokens``, placed over each sequence's ids (``segments``) and over the
Hugging Face row's ``completion_ids``; malformed spans refused; a JSONL export imported back
keeps them."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from exports.exportkit import add_session, export_lines, response_payload
from rolltap.events import EventLog
from rolltap.exports import export_jsonl, import_jsonl
from rolltap.exports.hf_rows import token_columns
from rolltap.store import Store, StoreValidationError

P1, C1 = [1, 2, 3], [10, 11, 12]
P2, C2 = [*P1, *C1, 4], [13, 14, 15, 16]
#: turn 2 was cut by a weight update and continued: 2 ids under v1, 2 under v2
SPANS2 = [{"version": "v1", "start": 0, "end": 2}, {"version": "v2", "start": 2, "end": 4}]


#: a turn: prompt, completion, fields of the token record, fields of the payload
Turn = tuple[list[int], list[int], dict[str, Any], dict[str, Any]]


def _log(*turns: Turn) -> EventLog:
    """Per turn: prompt, completion, fields of the token record, fields of the payload."""
    log = EventLog()
    for n, (prompt, completion, record, payload) in enumerate(turns):
        log.append("model_request", {"intercept_id": "ic", "messages": []})
        body = response_payload(prompt, completion, None, "extend" if n else "full", **record)
        log.append("model_response", {**body, **payload})
    return log


#: turn 1 recorded before policy versions (its span is the answer's policy_version)
TURNS: tuple[Turn, ...] = (
    (P1, C1, {}, {"policy_version": "v1"}),
    (P2, C2, {"policy_versions": SPANS2, "continued": 1}, {"policy_version": "v2"}),
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


async def test_the_tokens_format_carries_spans_per_turn_and_per_sequence(store: Store) -> None:
    run = await store.create_run()
    await add_session(store, run.id, "s1", _log(*TURNS))
    (line,), _ = await export_lines(store)
    one, two = line["turns"]
    assert one["policy_versions"] == [{"version": "v1", "start": 0, "end": 3}]
    assert (one["continued"], two["continued"]) == (0, 1)
    assert two["policy_versions"] == SPANS2
    # over the sequence's tokens: turn 1's ids at 3..6, turn 2's at 7..11
    want: list[dict[str, Any]] = [
        {"version": "v1", "start": 3, "end": 6},
        {"version": "v1", "start": 7, "end": 9},
        {"version": "v2", "start": 9, "end": 11},
    ]
    assert line["segments"][0]["policy_versions"] == want == line["policy_versions"]
    mask = line["loss_mask"]
    assert [i for s in want for i in range(s["start"], s["end"])] == [
        i for i, m in enumerate(mask) if m
    ]  # every sampled id has one version, the prompt's none


@pytest.mark.parametrize(
    "spans",
    [
        [{"version": "v1", "start": 0, "end": 3}],  # covers 3 of 4 ids
        [{"version": "v1", "start": 0, "end": 2}, {"version": "v2", "start": 1, "end": 4}],
        [{"version": "v1", "start": 0, "end": 2}, {"version": "v2", "start": 3, "end": 4}],
        [{"version": 7, "start": 0, "end": 4}],
        [{"version": "v1", "start": 0, "end": 0}, {"version": "v1", "start": 0, "end": 4}],
        {"version": "v1", "start": 0, "end": 4},
    ],
)
async def test_malformed_spans_are_refused(store: Store, spans: Any) -> None:
    run = await store.create_run()
    await add_session(store, run.id, "good", _log(*TURNS))
    await add_session(store, run.id, "bad", _log((P2, C2, {"policy_versions": spans}, {})))
    lines, result = await export_lines(store)
    assert [line["session_id"] for line in lines] == ["good"]
    assert "policy_versions" in result.malformed["bad"]


async def test_a_negative_continued_count_is_refused(store: Store) -> None:
    run = await store.create_run()
    await add_session(store, run.id, "bad", _log((P1, C1, {"continued": -1}, {})))
    with pytest.raises(StoreValidationError, match="continued must be a non-negative"):
        await export_lines(store)


def test_the_hf_row_places_spans_over_its_completion_ids() -> None:
    events = list(_log(*TURNS))
    warnings: list[str] = []
    columns = token_columns(events, warnings)
    assert warnings == [] and columns["continued"] == 1
    assert columns["prompt_ids"] == P1
    # completion_ids: C1, 4, C2; the spans are over those places
    assert columns["policy_versions"] == [
        {"version": "v1", "start": 0, "end": 3}, {"version": "v1", "start": 4, "end": 6},
        {"version": "v2", "start": 6, "end": 8},
    ]  # fmt: skip
    assert columns["segments"][0]["policy_versions"] == columns["policy_versions"]


def test_the_hf_schema_declares_the_columns() -> None:
    datasets = pytest.importorskip("datasets")
    from rolltap.exports.hf import features

    schema = features().arrow_schema
    span = schema.field("policy_versions").type.value_type
    assert {span.field(n).type for n in ("start", "end")} == {datasets.Value("int64").pa_type}
    assert str(span.field("version").type) == "string"
    assert str(schema.field("continued").type) == "int64"
    segment = schema.field("segments").type.value_type
    assert segment.field("policy_versions").type == schema.field("policy_versions").type


async def test_a_jsonl_export_imports_back_with_the_spans(store: Store, tmp_path: Path) -> None:
    run = await store.create_run()
    await add_session(store, run.id, "s1", _log(*TURNS))
    out = io.BytesIO()
    assert await export_jsonl(store, out) == 1
    async with await Store.open(f"sqlite:///{tmp_path / 'other.db'}") as other:
        assert await import_jsonl(other, io.BytesIO(out.getvalue())) == 1
        (lines_back,), _ = await export_lines(other)
    (line,), _ = await export_lines(store)
    assert lines_back["turns"] == line["turns"]
    assert lines_back["turns"][1]["policy_versions"] == SPANS2
    assert lines_back["turns"][1]["continued"] == 1
