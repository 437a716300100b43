"""Training export: one JSON line per rollout with its token sequence, loss mask and logprobs.

Built from the ``tokens`` records a token client adds to ``model_response`` events (see
``docs/events.md``, "Token records"); the line format is ``rolltap.tokens`` version
:data:`TOKENS_VERSION`, documented in ``docs/training-export.md``. A turn rendered with
``"extend"`` continues the current sequence (its prompt must start with it); one rendered
``"full"`` (history rewritten) starts a new segment. Sessions are read one at a time, so
memory is bounded by the largest rollout. What a drifted turn (its prompt not the previous
prompt + completion) makes of the line is ``on_drift``'s (:mod:`rolltap.exports.token_drift`):
``split`` (today's segments), ``keep`` (one sequence, drift marked) or ``drop``. A session
with no model call at all (``no_model_calls``) is left out, and listed, unless
``include_empty`` asks for it: then its line has no turns and ``metadata.no_model_calls``
true. An export left with no line by ``drop`` is an empty file, not an error; one left with
none because no session had token records to give is an error (:func:`export_tokens`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.events import EventKind
from rolltap.exports.jsonl import iter_sessions
from rolltap.exports.token_drift import ON_DRIFT, OnDrift, assemble_kept, drifts
from rolltap.exports.token_records import Segment, TokenRecordError, TokenTurn, read_turn
from rolltap.store import SessionInfo, StoreValidationError, fetch_run, iter_event_rows

__all__ = [
    "ON_DRIFT",
    "RENDERS",
    "TOKENS_FORMAT",
    "TOKENS_VERSION",
    "OnDrift",
    "Segment",
    "TokenExport",
    "TokenRecordError",
    "TokenTurn",
    "assemble",
    "export_tokens",
    "rollout_line",
    "token_turn",
]

TOKENS_FORMAT = "rolltap.tokens"
TOKENS_VERSION = 1
#: how a turn's prompt relates to the sequence before it; ``server``: the server rendered
#: it (a relay's server-side capture), so it continues the sequence when it starts with it
RENDERS = ("extend", "full", "server")
_NAMED = 10  # sessions named in the "none qualify" error


def token_turn(seq: int, payload: Mapping[str, Any]) -> TokenTurn | None:
    """The token record of a ``model_response`` payload; ``None`` when it has none.

    Raises :class:`TokenRecordError` for a record that breaks the contract.
    """
    return read_turn(seq, payload, RENDERS)


def assemble(turns: list[TokenTurn]) -> tuple[list[Segment], list[int], list[str]]:
    """(segments, each turn's segment index, warnings) of a rollout's turns, in order."""
    segments: list[Segment] = []
    placed: list[int] = []
    warnings: list[str] = []
    for number, turn in enumerate(turns):
        current = segments[-1] if segments else None
        extends = current is not None and turn.prompt_ids[: len(current.tokens)] == current.tokens
        if turn.render == "extend" and current is not None and not extends:
            # Trusting the claim would train on a sequence the model never saw.
            warnings.append(
                f"turn {number} (event {turn.seq}) is marked extend but its prompt does not "
                "start with the sequence so far; it starts a new segment"
            )
        if current is None or turn.render == "full" or not extends:
            current = Segment()
            segments.append(current)
        current.add(turn)
        placed.append(len(segments) - 1)
    return segments, placed, warnings


def _kept(
    turns: list[TokenTurn], marks: list[dict[str, Any] | None]
) -> tuple[list[Segment], list[int], list[str]]:
    """``keep``'s one sequence; a broken ``extend`` claim is warned of as ``split`` does."""
    warnings = [
        f"turn {n} (event {turn.seq}) is marked extend but its prompt does not start with "
        "the sequence so far; the sequence is cut where they part"
        for n, (turn, mark) in enumerate(zip(turns, marks, strict=True))
        if mark is not None and turn.render == "extend" and turn.drift is None
    ]
    return [assemble_kept(turns)], [0] * len(turns), warnings


def rollout_line(
    info: SessionInfo, run_name: str | None, turns: list[TokenTurn], *,
    no_model_calls: bool = False, on_drift: OnDrift = "split",
) -> dict[str, Any]:  # fmt: skip
    """The ``rolltap.tokens`` line of one rollout (see ``docs/training-export.md``);
    ``keep`` makes one sequence and marks each drift (``drop`` is the caller's)."""
    keep = on_drift == "keep"
    marks: list[dict[str, Any] | None] = drifts(turns) if keep else [None] * len(turns)
    segments, placed, warnings = _kept(turns, marks) if keep else assemble(turns)
    flagged: dict[str, Any] = {"no_model_calls": True} if no_model_calls else {}
    if keep:
        flagged["on_drift"] = "keep"
        flagged["drift"] = [
            {"turn": n, "seq": turn.seq, "at": mark["at"], "reason": mark.get("reason")}
            for n, (turn, mark) in enumerate(zip(turns, marks, strict=True))
            if mark is not None
        ]
    single = segments[0] if len(segments) == 1 else None
    forked = {"session": info.parent_id, "at": info.fork_at} if info.parent_id else None
    return {
        "format": TOKENS_FORMAT,
        "version": TOKENS_VERSION,
        "session_id": info.id,
        "run_id": info.run_id,
        "task": info.task,
        "reward": info.reward,
        "status": info.status,
        "turns": [
            {
                "seq": turn.seq,
                "segment": segment,
                "prompt_ids": turn.prompt_ids,
                "completion_ids": turn.completion_ids,
                "completion_logprobs": turn.completion_logprobs,
                "prompt_reuse": turn.render,
                "policy_versions": turn.policy_versions,
                "continued": turn.continued,
                **({} if mark is None else {"drift": mark}),
            }
            for turn, segment, mark in zip(turns, placed, marks, strict=True)
        ],
        "segments": [s.to_dict() for s in segments],
        "tokens": single.tokens if single else None,
        "loss_mask": single.loss_mask if single else None,
        "logprobs": single.logprobs if single else None,
        "policy_versions": single.policy_versions if single else None,
        "metadata": {
            "user": info.user,
            "run_name": run_name,
            "created_at": info.created_at,
            "updated_at": info.updated_at,
            "forked_from": forked,
            "warnings": warnings,
            **flagged,
        },
    }


@dataclass(slots=True)
class TokenExport:
    """What :func:`export_tokens` did: rollouts written, and the sessions it skipped."""

    exported: int = 0
    #: sessions with no token records at all (model calls relayed as text)
    without_tokens: list[str] = field(default_factory=list)
    #: sessions with no model call at all: left out unless ``include_empty``
    no_model_calls: list[str] = field(default_factory=list)
    #: sessions skipped for a malformed record: id → what is wrong (and in which event)
    malformed: dict[str, str] = field(default_factory=dict)
    #: rollouts with a drifted turn: written (split, keep) or left out (drop)
    drifted: list[str] = field(default_factory=list)
    on_drift: OnDrift = "split"


class _LazyFile:
    """Opens a path on the first write, so an export that fails before it writes creates
    no file (one that succeeds with no line writes ``b""``)."""

    def __init__(self, dest: str | Path | IO[bytes], stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._path: str | Path | None = None
        self._out: IO[bytes] | None = None
        if isinstance(dest, str | Path):
            self._path = dest
        else:
            self._out = dest

    def write(self, data: bytes) -> None:
        if self._out is None and self._path is not None:
            try:
                self._out = self._stack.enter_context(open(self._path, "wb"))  # noqa: SIM115
            except OSError as exc:
                raise StoreValidationError(f"cannot open {self._path}: {exc.strerror}") from exc
        if self._out is not None:
            self._out.write(data)


_MODEL_KINDS = frozenset({EventKind.MODEL_REQUEST, EventKind.MODEL_ERROR})


async def _turns(conn: AsyncConnection, info: SessionInfo) -> tuple[list[TokenTurn], bool]:
    """The session's token turns, and whether it made any model call."""
    turns, called = [], False
    async for seq, kind, _ts, payload in iter_event_rows(conn, info):
        called = called or kind in _MODEL_KINDS
        if kind != EventKind.MODEL_RESPONSE:
            continue  # only responses carry token records: skip parsing the rest
        called = True
        try:
            turn = token_turn(seq, orjson.loads(payload))
        except TokenRecordError as exc:
            raise TokenRecordError(f"event {seq}: {exc}") from None
        if turn is not None:
            turns.append(turn)
    return turns, called


async def export_tokens(
    conn: AsyncConnection, dest: str | Path | IO[bytes], *, run: str | None,
    session: str | None, include_empty: bool = False, on_drift: OnDrift = "split",
) -> TokenExport:  # fmt: skip
    """Write a ``rolltap.tokens`` line per session (all, ``run``'s, or ``session``) that has
    token records; sessions without are skipped and listed in the result. Sessions that
    made no model call are listed apart, and written (with no turns) when
    ``include_empty``. Rollouts with a drifted turn are listed (``drifted``) and, by
    ``on_drift``, split into segments, kept as one sequence, or left out (``drop``).

    An export that writes no line still makes ``dest`` (an empty file) when the user's
    choice emptied it: ``on_drift="drop"`` left a rollout out, or there was no session to
    read. When the data emptied it, every session read being without token records, with
    no model call (``include_empty`` not asked) or malformed, it raises
    :class:`StoreValidationError` naming them, and creates no file.
    """
    if run is not None:
        await fetch_run(conn, run)  # StoreNotFoundError for an unknown run
    if on_drift not in ON_DRIFT:
        raise StoreValidationError(f"on_drift must be one of {', '.join(ON_DRIFT)}")
    names: dict[str, str | None] = {}
    result = TokenExport(on_drift=on_drift)
    with contextlib.ExitStack() as stack:
        out = _LazyFile(dest, stack)
        async for info in iter_sessions(conn, run, session):
            try:
                turns, called = await _turns(conn, info)
            except TokenRecordError as exc:
                result.malformed[info.id] = str(exc)
                continue
            if not called:
                result.no_model_calls.append(info.id)
                if not include_empty:
                    continue
            elif not turns:
                result.without_tokens.append(info.id)
                continue
            if any(mark is not None for mark in drifts(turns)):
                result.drifted.append(info.id)
                if on_drift == "drop":
                    continue
            if info.run_id not in names:
                names[info.run_id] = (await fetch_run(conn, info.run_id)).name
            line = rollout_line(
                info, names[info.run_id], turns, no_model_calls=not called, on_drift=on_drift
            )
            out.write(orjson.dumps(line) + b"\n")
            result.exported += 1
        _check_not_emptied_by_data(result)
        out.write(b"")  # nothing written: still a file, empty (a JSONL file of no lines)
    return result


def _check_not_emptied_by_data(result: TokenExport) -> None:
    """:class:`StoreValidationError` when nothing was written and only the data is why:
    a rollout ``--on-drift drop`` left out had token records, so the user's choice is."""
    if result.exported or (result.on_drift == "drop" and result.drifted):
        return
    skipped = [
        *result.without_tokens,
        *(f"{k} (no_model_calls)" for k in result.no_model_calls),
        *(f"{k} ({why})" for k, why in result.malformed.items()),
    ]
    if skipped:
        listed = ", ".join(skipped[:_NAMED])
        if len(skipped) > _NAMED:
            listed += f" and {len(skipped) - _NAMED} more"
        raise StoreValidationError(f"no session has token records to export: {listed}")
