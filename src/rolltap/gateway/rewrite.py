"""The gateway's documented request rewrites, applied to the body sent upstream.

Whatever dialect the harness spoke, the rewrites apply to the upstream-dialect body
(the harness's own body on pass-through, the translated one otherwise), so there is
one set of rules per upstream dialect:

- ``model`` becomes the endpoint's model;
- the run's sampling settings replace what the harness sent, under the upstream
  dialect's names (``max_tokens`` is ``max_output_tokens`` for Responses, ``stop`` is
  ``stop_sequences`` for Messages); a setting the upstream dialect cannot express is
  recorded as skipped, never sent under a name the upstream would reject;
- a chat-completions stream gets ``stream_options.include_usage`` so usage is
  always recorded.

Every rewrite is returned as ``{"field", "from", "to"}`` for the request event.

>>> body = {"model": "x", "messages": [], "max_tokens": 5}
>>> [r["field"] for r in apply_rewrites("responses", body, "m", {"max_tokens": 9})]
['model', 'max_output_tokens']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONVERSATION_KEYS", "apply_rewrites", "conversation_of"]

#: the run's sampling names (chat's) → each upstream dialect's; None: not expressible
_SAMPLING_NAMES: Mapping[str, Mapping[str, str | None]] = {
    "chat": {},
    "messages": {"stop": "stop_sequences", "seed": None, "frequency_penalty": None,
                 "presence_penalty": None},
    "responses": {"max_tokens": "max_output_tokens", "stop": None, "seed": None,
                  "top_k": None, "frequency_penalty": None, "presence_penalty": None},
}  # fmt: skip

#: where each dialect keeps the conversation in a request body
CONVERSATION_KEYS: Mapping[str, str] = {
    "chat": "messages",
    "messages": "messages",
    "responses": "input",
}


def _native(dialect: str, name: str, value: Any) -> tuple[str | None, Any]:
    names = _SAMPLING_NAMES.get(dialect, {})
    target = names.get(name, name)
    if target == "stop_sequences" and isinstance(value, str):
        value = [value]
    return target, value


def apply_rewrites(
    dialect: str, body: dict[str, Any], model: str, sampling: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Rewrite ``body`` (an upstream-``dialect`` request) in place; the rewrites made."""
    rewrites: list[dict[str, Any]] = []
    if body.get("model") != model:
        rewrites.append({"field": "model", "from": body.get("model"), "to": model})
        body["model"] = model
    for name, value in sampling.items():
        target, native = _native(dialect, name, value)
        if target is None:
            rewrites.append({"field": name, "from": None, "to": value, "skipped": dialect})
        elif body.get(target) != native:
            rewrites.append({"field": target, "from": body.get(target), "to": native})
            body[target] = native
    if dialect == "chat" and body.get("stream"):
        opts = body.get("stream_options") or {}
        if not opts.get("include_usage"):
            rewrites.append({"field": "stream_options.include_usage", "from": None, "to": True})
            body["stream_options"] = {**opts, "include_usage": True}
    return rewrites


def conversation_of(dialect: str, body: Mapping[str, Any]) -> list[Any]:
    """The request's conversation as a list (a Responses string input is one user turn)."""
    value = body.get(CONVERSATION_KEYS[dialect])
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []
