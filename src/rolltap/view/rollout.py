"""The Rollout page: the transcript (the model ``rolltap sessions show`` renders), each
call's timing, usage and rewrites, the token view, the raw events, and the export.

The token view is built from the ``tokens`` records of ``model_response`` events
(:mod:`rolltap.exports.tokens`): each sequence's ids with the loss mask, the sampled
ones coloured by their logprob; a turn is marked as drift when its record says it drifted
(``tokens.drift``: where its prompt parts from the previous prompt + completion, and why)
or its ``extend`` claim does not hold (its prompt is not the sequence so far).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from rolltap.events import Event, EventKind
from rolltap.exports import (
    TokenRecordError,
    TokenTurn,
    assemble,
    build_transcript,
    export_jsonl,
    token_turn,
)
from rolltap.results.rollout import describe_versions, policy_versions
from rolltap.store import fetch_run, iter_event_rows, reading, retried_by, row_event
from rolltap.view.base import page, session_of, store_of

__all__ = ["TokenView", "export_view", "rollout_view", "token_view"]


@dataclass(slots=True)
class TokenView:
    """What the token view shows: segments of (id, mask, logprob), turns, drift marks."""

    segments: list[list[tuple[int, int, float | None]]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    error: str | None = None


def token_view(events: list[Event]) -> TokenView:
    """The token records of a history, assembled as the training export assembles them."""
    view = TokenView()
    turns: list[TokenTurn] = []
    try:
        for event in events:
            if event.kind == EventKind.MODEL_RESPONSE:
                turn = token_turn(event.seq, event.payload)
                if turn is not None:
                    turns.append(turn)
    except TokenRecordError as exc:
        view.error = f"malformed token record: {exc}"
        return view
    segments, placed, view.drift = assemble(turns)
    drifted = {int(w.split()[1]) for w in view.drift if w.startswith("turn ")}
    for number, turn in enumerate(turns):
        if turn.drift is not None:
            drifted.add(number)
            view.drift.append(_recorded(number, turn.seq, turn.drift))
    for number, (turn, segment) in enumerate(zip(turns, placed, strict=True)):
        view.turns.append({
            "number": number, "seq": turn.seq, "segment": segment, "render": turn.render,
            "prompt": len(turn.prompt_ids), "completion": len(turn.completion_ids),
            "drift": number in drifted,
        })  # fmt: skip
    for seg in segments:
        view.segments.append(list(zip(seg.tokens, seg.loss_mask, seg.logprobs, strict=True)))
    return view


def _recorded(number: int, seq: int, drift: dict[str, Any]) -> str:
    """A recorded drift, said: where, why, and the ids either side."""
    reason = drift.get("reason") or "reason unknown"
    return (
        f"turn {number} (event {seq}) drifted at id {drift['at']} ({reason}): "
        f"expected {drift.get('expected')}, got {drift.get('got')}"
    )


def _rewrites(events: list[Event]) -> dict[str, list[Any]]:
    """Each call's recorded rewrites (by intercept id), from its request event."""
    out: dict[str, list[Any]] = {}
    for event in events:
        if event.kind == EventKind.MODEL_REQUEST and event.payload.get("rewrites"):
            out[str(event.payload.get("intercept_id"))] = list(event.payload["rewrites"])
    return out


async def rollout_view(request: web.Request) -> web.Response:
    store = store_of(request)
    async with reading(store.engine) as conn:
        info = await session_of(conn, store, request.match_info["session"])
        run = await fetch_run(conn, info.run_id)
        events = [row_event(*row) async for row in iter_event_rows(conn, info)]
        # its next attempts (rolltap eval --retry-failed), found by their retry_of
        again = await retried_by(conn, info.id)
    transcript = build_transcript(events)
    return page(request, "rollout.html", {
        "session": info, "run": run, "transcript": transcript, "events": events,
        "rewrites": _rewrites(events), "tokens": token_view(events), "retried_by": again,
        # read from the events: cheap beside the transcript built from them already
        "versions": describe_versions(policy_versions(events)),
    })  # fmt: skip


async def export_view(request: web.Request) -> web.Response:
    """The session as ``rolltap sessions export`` writes it (one JSONL line)."""
    store = store_of(request)
    async with reading(store.engine) as conn:
        session_id = (await session_of(conn, store, request.match_info["session"])).id
    out = io.BytesIO()
    await export_jsonl(store, out, session=session_id)
    return web.Response(
        body=out.getvalue(),
        content_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{session_id}.jsonl"'},
    )
