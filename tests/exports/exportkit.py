"""Token records in a real store, for the training-export tests: sessions whose
``model_response`` events carry the ``tokens`` records given, and the export read back."""

from __future__ import annotations

import io
from typing import Any

import orjson

from rolltap.events import EventLog
from rolltap.exports.tokens import OnDrift, TokenExport, export_tokens
from rolltap.store import SessionInfo, Store
from rolltap.store.reader import reading

#: one turn's record: prompt ids, completion ids, logprobs (or None), render, and optional
#: extra fields of the record (``drift``)
Turn = tuple[Any, ...]


def response_payload(
    prompt: list[int], completion: list[int], logprobs: Any, render: str, **extra: Any
) -> Any:
    tokens = {"prompt_ids": prompt, "completion_ids": completion, "render": render, **extra}
    if logprobs is not None:
        tokens["completion_logprobs"] = logprobs
    return {"intercept_id": "ic", "status": 200, "stream": False, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "…"}, "usage": None, "timing": {},
            "tokens": tokens}  # fmt: skip


def token_log(*turns: Turn) -> EventLog:
    """A request and a response event per turn (responses at seq 2, 4, 6 …)."""
    log = EventLog()
    log.append("status", {"status": "running"})
    for prompt, completion, logprobs, render, *extra in turns:
        log.append("model_request", {"intercept_id": "ic", "messages": []})
        log.append(
            "model_response",
            response_payload(prompt, completion, logprobs, render, **(extra[0] if extra else {})),
        )
    log.append("reward", {"reward": 1.0})
    return log


async def add_session(store: Store, run_id: str, sid: str, log: EventLog) -> SessionInfo:
    await store.create_session(run_id, session_id=sid, user="ana", task={"q": sid})
    await store.commit(sid, log, status="completed", reward=0.5)
    return await store.get_session(sid)


async def export_lines(
    store: Store, *, on_drift: OnDrift = "split", **where: str | None
) -> tuple[list[Any], TokenExport]:
    out = io.BytesIO()
    async with reading(store.engine) as conn:
        result = await export_tokens(
            conn, out, run=where.get("run"), session=where.get("session"), on_drift=on_drift
        )
    return [orjson.loads(line) for line in out.getvalue().splitlines()], result
