"""Token drift on a chat relay with server-side token capture (``capture_tokens``).

The server renders and tokenizes each prompt itself, so its ``prompt_token_ids`` arrive
with the answer; :class:`RelayTurns` (one per rollout, the relay upstream's state) checks
them against the previous turn's prompt + completion ids
(:class:`~rolltap.tokens.drift.TurnHistory`) and, on a drift, records ``tokens.drift``
exactly as the token client does (docs/events.md, "Token drift"). Each call is checked
against the state its request was sent from (:meth:`RelayTurns.begin`): an overlapping
call of the rollout may record its own sample meanwhile.

There is no local tokenizer to decode the ids, so the reason comes from the messages and
from where the ids line up again:

* ``history_rewritten``: the gateway's conversation index says this call does not extend
  the conversation of the turn it is checked against (an edited, dropped or reordered
  earlier message);
* ``reasoning_dropped``: the drift lies in a completion that carried reasoning, and that
  reasoning is not in the new request's messages (the harness left it out), or the new
  prompt goes on with that completion's last ids sooner than it did (the template dropped
  the reasoning the harness sent back: ids before the end are gone);
* ``retokenized``: else, the messages extending: the same text in other ids.

The check is one compare of the history's ids in C (:meth:`TurnHistory.check`); the
messages are serialized only when a turn has drifted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from rolltap.tokens.drift import Drift, DriftReason, ReasoningSpan, TurnHistory

__all__ = ["RelayTurns", "TurnCheck"]


@dataclass(slots=True)
class RelayTurns:
    """One rollout's captured turns: what the next server-rendered prompt should extend."""

    history: TurnHistory = field(default_factory=TurnHistory)
    #: messages in the conversation the previous turn was sampled from
    messages: int = 0

    def begin(self) -> TurnCheck:
        """The check of a call about to be sent, against the state as it is now."""
        return TurnCheck(self, self.history.snapshot(), self.messages)


@dataclass(slots=True)
class TurnCheck:
    """One call's drift check, against the state its request was sent from."""

    turns: RelayTurns
    history: TurnHistory
    messages: int

    def settle(self, recorded: dict[str, Any], *, prefix: int, conversation: Sequence[Any]) -> None:
        """Check the answer's ``tokens`` record (in ``recorded``, the response event's
        fields; added to in place) and remember the turn. ``prefix``: how many leading
        messages of ``conversation`` (the request's) the rollout had sent before, as the
        conversation index matched them. Nothing to do when the server sent no ids."""
        tokens = recorded.get("tokens")
        if not isinstance(tokens, dict):
            return
        prompt, completion = tokens["prompt_ids"], tokens["completion_ids"]
        drift = self.history.check(prompt)
        if drift is not None:
            reason = self._reason(drift, prompt, prefix, conversation)
            tokens["drift"] = drift.with_reason(reason).to_record()
        reasoning = recorded.get("reasoning")
        # kept JSON-escaped: looked for in the messages' JSON (only after a drift)
        texts = (orjson.dumps(reasoning).decode()[1:-1],) if isinstance(reasoning, str) else ()
        self.turns.history.sampled(prompt, completion, reasoning=texts)
        self.turns.messages = len(conversation)

    def _reason(
        self, drift: Drift, got: Sequence[int], prefix: int, conversation: Sequence[Any]
    ) -> DriftReason:
        if prefix < self.messages:
            return "history_rewritten"
        span = self.history.span_at(drift.at)
        if span is not None and (
            span.missing_from(_json(conversation))
            or _skipped(self.history.expected, got, span, drift.at)
        ):
            return "reasoning_dropped"
        return "retokenized"


#: ids of a completion's end looked for in a prompt that parted from it
_TAIL = 8
#: fewer ids skipped than this read as a re-tokenization (a merge here or there)
_MIN_SKIPPED = 4


def _skipped(expected: Sequence[int], got: Sequence[int], span: ReasoningSpan, at: int) -> bool:
    """Whether ``got``, which parts from ``expected`` at ``at`` inside the sampled
    completion ``span``, goes on with that completion's last ids at least
    :data:`_MIN_SKIPPED` ids sooner than the completion did: ids before its end are gone
    (a template dropped reasoning the harness sent back), where the same text in other ids
    would not line its end up. Only after a drift; O(completion)."""
    k = min(_TAIL, span.end - at - 1)
    if k < 2:
        return False
    tail = list(expected[span.end - k : span.end])
    ids = got if isinstance(got, list) else list(got)
    last = span.end - k - _MIN_SKIPPED  # the latest start that skips enough
    q = at
    while q <= last:
        try:
            q = ids.index(tail[0], q, last + 1)
        except ValueError:
            return False
        if ids[q : q + k] == tail:
            return True
        q += 1
    return False


def _json(conversation: Sequence[Any]) -> str:
    try:
        return orjson.dumps(list(conversation)).decode()
    except orjson.JSONEncodeError:
        return ""  # nested too deep: validation would have refused it
