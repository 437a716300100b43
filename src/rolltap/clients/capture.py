"""Server-side token capture on a chat relay: the ids the server saw and sampled, recorded.

An endpoint with ``capture_tokens`` asks a vLLM chat server for its own token ids
(``return_token_ids: true``, and ``logprobs: true`` with ``capture_logprobs``; both
recorded rewrites, :func:`capture_rewrites`). vLLM answers with ``prompt_token_ids`` at
the top of the body (of a stream's first chunk) and ``token_ids`` in each choice (each
chunk's own ids, in a stream). A :class:`ServerCapture` takes those fields out of what
the harness gets — it receives the answer it asked for — and keeps them as the response
event's ``tokens`` record, in the token client's shape with ``render = "server"``
(docs/events.md, "Token records"). Only what the gateway added is taken out: a harness
that asked for logprobs (or for the ids) keeps them.

>>> capture = ServerCapture(strip_ids=True, strip_logprobs=False)
>>> body = {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3]}]}
>>> record, changed = capture.take_body(body)
>>> record["prompt_ids"], record["completion_ids"], record["render"], changed
([1, 2], [3], 'server', True)
>>> body
{'choices': [{'index': 0}]}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rolltap.clients.relay_drift import TurnCheck

__all__ = [
    "SERVER_RENDER", "ServerCapture", "capture_rewrites", "captured_fields", "server_tokens",
]  # fmt: skip

#: the ``render`` of a token record whose ids the server itself tokenized
SERVER_RENDER = "server"
_NO_IDS = "the upstream returned no token ids (return_token_ids is vLLM's)"


def captured_fields(tokens: dict[str, Any] | None) -> dict[str, Any]:
    """What a captured call's response event adds: its ``tokens`` record, or, when the
    server sent no ids, ``capture_problems`` saying so (never a silent empty capture)."""
    return {"tokens": tokens} if tokens is not None else {"capture_problems": [_NO_IDS]}


def capture_rewrites(
    body: dict[str, Any], *, logprobs: bool, turn: TurnCheck | None = None
) -> tuple[list[dict[str, Any]], ServerCapture]:
    """Ask for the ids (and ``logprobs``) in ``body`` (a chat request, rewritten in place):
    the rewrites made, and the capture that undoes them on the answer (and checks its
    prompt ids for drift with ``turn``)."""
    rewrites: list[dict[str, Any]] = []
    asked_ids = body.get("return_token_ids") is True
    if not asked_ids:
        rewrites.append({"field": "return_token_ids", "from": body.get("return_token_ids"),
                         "to": True})  # fmt: skip
        body["return_token_ids"] = True
    asked_logprobs = body.get("logprobs") is True
    if logprobs and not asked_logprobs:
        rewrites.append({"field": "logprobs", "from": body.get("logprobs"), "to": True})
        body["logprobs"] = True
    capture = ServerCapture(
        strip_ids=not asked_ids, strip_logprobs=logprobs and not asked_logprobs, turn=turn
    )
    return rewrites, capture


def server_tokens(
    prompt_ids: Any, completion_ids: Any, logprobs: list[Any] | None
) -> dict[str, Any] | None:
    """The ``tokens`` record of what a server returned; None when it sent no ids (a server
    that ignores ``return_token_ids``)."""
    if not _is_ids(prompt_ids) or not _is_ids(completion_ids):
        return None
    return {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "completion_logprobs": _per_id(logprobs, len(completion_ids)),
        "render": SERVER_RENDER,
    }


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(type(i) is int for i in value)


def _per_id(entries: list[Any] | None, count: int) -> list[float | None] | None:
    """One logprob per completion id: a chat answer's ``logprobs.content`` entries, with
    ``None`` for trailing ids they do not cover (an end-of-sequence id); None when there are
    none or more entries than ids."""
    if not entries or len(entries) > count:
        return None
    values = [e.get("logprob") if isinstance(e, dict) else None for e in entries]
    numbers = [v if isinstance(v, int | float) and not isinstance(v, bool) else None
               for v in values]  # fmt: skip
    return numbers + [None] * (count - len(numbers))


@dataclass(slots=True)
class ServerCapture:
    """One call's capture: what to take out of the answer, and the ids taken (streams)."""

    #: the gateway asked for the ids (the harness did not): they leave the answer
    strip_ids: bool
    #: the gateway asked for logprobs (the harness did not): they leave the answer
    strip_logprobs: bool
    prompt_ids: Any = None
    completion_ids: list[Any] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)
    #: the rollout's drift check for this call (:mod:`rolltap.clients.relay_drift`)
    turn: TurnCheck | None = None

    def settle(self, recorded: dict[str, Any], *, prefix: int, conversation: Sequence[Any]) -> None:
        """The answer is recorded as ``recorded``: its prompt ids checked for drift
        (``tokens.drift`` added in place) and the turn remembered for the next one
        (:meth:`~rolltap.clients.relay_drift.TurnCheck.settle`)."""
        if self.turn is not None:
            self.turn.settle(recorded, prefix=prefix, conversation=conversation)

    def take_body(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
        """A whole chat answer: its ``tokens`` record (choice 0's), and whether ``body``
        changed: the extra fields are taken out of it (in place)."""
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        ids = first.get("token_ids") if isinstance(first, dict) else None
        lp = first.get("logprobs") if isinstance(first, dict) else None
        content = lp.get("content") if isinstance(lp, dict) else None
        record = server_tokens(body.get("prompt_token_ids"), ids, content)
        return record, self._strip(body)

    def take_chunk(self, chunk: dict[str, Any]) -> bool:
        """A stream chunk: its ids and logprobs kept (choice 0's), the extra fields taken
        out (in place); whether it changed."""
        if self.prompt_ids is None and "prompt_token_ids" in chunk:
            self.prompt_ids = chunk["prompt_token_ids"]
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self.take_extras(choice.get("token_ids"), choice.get("logprobs"))
        return self._strip(chunk)

    def take_extras(self, ids: Any, logprobs: Any) -> None:
        """One chunk's choice-0 ``token_ids`` and ``logprobs`` (as a chat choice has them)."""
        if isinstance(ids, list):
            self.completion_ids.extend(ids)
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            self.logprobs.extend(content)

    def record(self) -> dict[str, Any] | None:
        """A stream's ``tokens`` record, once it has ended."""
        return server_tokens(self.prompt_ids, self.completion_ids, self.logprobs)

    def take_extras_of(self, extras: dict[str, Any]) -> dict[str, Any] | None:
        """A translated stream's ``tokens`` record, from what its parser kept beside the
        canonical events (:attr:`~rolltap.dialects.streams.StreamParser.extras`); the ids,
        and logprobs the gateway asked for, leave ``extras`` (in place)."""
        record = server_tokens(
            extras.pop("prompt_token_ids", None), extras.pop("token_ids", None),
            extras.get("logprobs"),
        )  # fmt: skip
        if self.strip_logprobs:
            extras.pop("logprobs", None)
        return record

    def _strip(self, obj: dict[str, Any]) -> bool:
        changed = False
        if self.strip_ids and "prompt_token_ids" in obj:
            del obj["prompt_token_ids"]
            changed = True
        for choice in obj.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            if self.strip_ids and "token_ids" in choice:
                del choice["token_ids"]
                changed = True
            if self.strip_logprobs and choice.get("logprobs") is not None:
                choice["logprobs"] = None  # as a call without logprobs is answered
                changed = True
        return changed
