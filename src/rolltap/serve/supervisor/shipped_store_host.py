"""The supervisor's end of the workers' shipped stores: on SQLite, the writes workers ship,
made through the supervisor's one store.

A worker's commit brings the events past what it sent before (or, after a rewind, the
history from the rewind on). The host keeps a mirror of each open session's log and
commits it through the supervisor's :class:`~rolltap.store.Store`, which writes only
what is new — so the one serial writer sees exactly what a local store would.
Mirrors are dropped when the worker forgets the session (after its final commit).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rolltap.errors import StoreError
from rolltap.events import EventLog
from rolltap.serve.protocol import Msg
from rolltap.store import Store, StoreValidationError

__all__ = ["ShippedStoreHost"]

log = logging.getLogger("rolltap.serve.supervisor")


class ShippedStoreHost:
    """Answers ``store`` frames: ``create_session``, ``commit``, ``forget``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._mirrors: dict[str, EventLog] = {}

    @property
    def open_sessions(self) -> int:
        return len(self._mirrors)

    async def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The ``store_reply`` for ``message`` (None for a notification)."""
        op, request_id = message.get("op"), message.get("id")
        try:
            if op == "forget":
                self.drop(str(message.get("session_id")))
                return None
            if op == "create_session":
                value = await self._create_session(message)
            elif op == "commit":
                value = await self._commit(message)
            else:
                raise StoreValidationError(f"unknown store op {op!r}")
        except StoreError as err:
            return {"type": Msg.STORE_REPLY, "id": request_id, "ok": False, "error": err.to_dict()}
        return {"type": Msg.STORE_REPLY, "id": request_id, "ok": True, "value": value}

    def drop(self, session_id: str) -> None:
        """Forget a session: its mirror, and what the store remembers of it."""
        self._mirrors.pop(session_id, None)
        self.store.forget(session_id)

    async def _create_session(self, message: dict[str, Any]) -> dict[str, Any]:
        info = await self.store.create_session(
            _text(message, "run_id"),
            session_id=message.get("session_id"),
            user=message.get("user"),
            task=message.get("task"),
            # absent from frames of a worker that names no placement
            node_id=message.get("node_id"),
            worker_id=message.get("worker_id"),
            # absent from frames of a worker that runs no later attempts
            attempt=message.get("attempt") or 0,
            retry_of=message.get("retry_of"),
        )
        self._mirrors[info.id] = EventLog()
        return info.to_dict()

    async def _commit(self, message: dict[str, Any]) -> dict[str, Any]:
        session_id = _text(message, "session_id")
        start, events = message.get("start"), message.get("events")
        if not isinstance(start, int) or not isinstance(events, list):
            raise StoreValidationError("a commit needs start and events")
        mirror = self._mirrors.get(session_id)
        if mirror is None:
            # not created through this host (the supervisor restarted, or it was
            # forgotten): what is stored is the truth to extend
            mirror = await self.store.load_log(session_id) if start else EventLog()
            self._mirrors[session_id] = mirror
        if start > len(mirror):
            raise StoreValidationError(f"commit of {session_id} starts past its history")
        mirror.truncate(start)
        for event in events:
            mirror.append(event["kind"], event["payload"], ts=event["ts"])
        result = await self.store.commit(
            session_id, mirror, status=message.get("status"), reward=message.get("reward")
        )
        return dataclasses.asdict(result)


def _text(message: dict[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str):
        raise StoreValidationError(f"{name} must be a string")
    return value
