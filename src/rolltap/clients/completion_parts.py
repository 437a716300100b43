"""A token completion's parts and the one answer they make (:mod:`rolltap.clients.
continuation` sends them): each part read, the parts merged, their policy versions as
spans over the completion ids (the token record's ``policy_versions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rolltap.clients.completions import (
    Completion,
    CompletionsFlavor,
    last_event,
    parse_completion,
)
from rolltap.clients.completions_llamacpp import fold_stream
from rolltap.dialects.canonical import StopReason, Usage
from rolltap.http.json_body import upstream_json_object

__all__ = ["Continued", "Head", "Part", "merge", "read_part", "version_spans"]


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a completion, as it arrived."""

    completion: Completion
    #: the engine's reported weight version, else the gate's when the part arrived
    version: str | None
    #: the upstream's body (parsed) and bytes
    body: dict[str, Any]
    raw: bytes
    #: the gate's version when the part arrived (None: no gate): what it was sent under,
    #: since no generation crosses a drain
    gate_version: str | None = None


@dataclass(frozen=True, slots=True)
class Head:
    """The reply's status and headers: the first part's that had some (a plain 200 when a
    part was cut before)."""

    status: int
    headers: dict[str, str]
    retry_after: str | None


@dataclass(frozen=True, slots=True)
class Continued:
    """A completion made whole from its parts."""

    completion: Completion
    #: the last part's body and bytes: what the response event records
    body: dict[str, Any]
    raw: bytes
    #: ``{"version", "start", "end"}`` over the completion ids
    spans: list[dict[str, Any]]
    #: resubmissions (0: the first request answered it whole)
    continued: int
    #: the weight version the engine reported with the last part (None: none)
    engine_version: str | None
    #: the gate's version the last part was sent under (None: no gate)
    sent_version: str | None = None
    #: seconds the parts waited at the gate (paused between a cut and the resume)
    waited_s: float = 0.0


def read_part(
    flavor: CompletionsFlavor, raw: bytes, prompt_len: int
) -> tuple[dict[str, Any], Completion]:
    """An upstream answer's bytes → its body and its :class:`Completion`."""
    if flavor == "sglang":
        # asked for a whole answer; a server that streams anyway sends cumulative chunks
        raw = last_event(raw) or raw
    # llama.cpp is streamed when stop strings are set (the events keep every logprob)
    folded = fold_stream(raw) if flavor == "llamacpp" else None
    body = upstream_json_object(raw) if folded is None else folded
    return body, parse_completion(flavor, body, prompt_len=prompt_len)


def version_spans(parts: Sequence[tuple[str | None, int]]) -> list[dict[str, Any]]:
    """``{"version", "start", "end"}`` (end exclusive) over the ids of parts given as
    (version, id count): one span per run of parts with the same version, an empty part
    none, so every id is covered once.

    >>> version_spans([("a", 2), ("a", 0), ("a", 1), ("b", 3)])
    [{'version': 'a', 'start': 0, 'end': 3}, {'version': 'b', 'start': 3, 'end': 6}]
    """
    spans: list[dict[str, Any]] = []
    at = 0
    for version, count in parts:
        if count == 0:
            continue
        if spans and spans[-1]["version"] == version:
            spans[-1]["end"] += count
        else:
            spans.append({"version": version, "start": at, "end": at + count})
        at += count
    return spans


def merge(parts: Sequence[Completion], *, prompt_len: int, stop: StopReason | None) -> Completion:
    """One completion of ``parts`` (at least one): ids and logprobs concatenated (a part
    without logprobs gives None per id; None when no part has any), the text joined when
    every part has one, ``stop`` its stop reason, usage the original prompt's length and
    every id; the last part's id, model and weight version."""
    last = parts[-1]
    ids = tuple(i for p in parts for i in p.ids)
    logprobs: tuple[float | None, ...] | None = None
    if any(p.logprobs is not None for p in parts):
        logprobs = tuple(
            lp
            for p in parts
            for lp in (p.logprobs if p.logprobs is not None else (None,) * len(p.ids))
        )
    texts = [p.text for p in parts]
    text = None if any(t is None for t in texts) else "".join(t or "" for t in texts)
    return replace(
        last, text=text, ids=ids, logprobs=logprobs, stop_reason=stop,
        usage=Usage(prompt_len, len(ids)), aborted=False,
    )  # fmt: skip
