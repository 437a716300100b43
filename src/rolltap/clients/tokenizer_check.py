"""Tokenizer agreement at start-up: the server's ids for a probe string against the local ones.

The token client renders prompts with a local tokenizer and the server samples from those
ids: a local tokenizer that is not the served model's own makes every prompt wrong, with
nothing failing. Where the server can tokenize (``POST /tokenize`` at its root: vLLM's and
SGLang's ``{model, prompt}`` and llama.cpp's ``{content}``, each answering
``{"tokens": [ids]}``), :func:`check_tokenizer` has it tokenize :data:`PROBE` and compares
the ids with the local tokenizer's, before any rollout: a difference is
:class:`~rolltap.errors.TokenizerMismatchError` naming both tokenizers and the first
position where they part. No special tokens are added on either side (the chat template
writes those). A server without the route (404, 405) is not checked, logged at debug;
one that fails otherwise is logged as a warning and not checked either (the rollouts will
meet the same server and report what it does).

>>> first_difference([1, 2, 3], [1, 2, 4]), first_difference([1, 2], [1, 2, 3])
(2, 2)
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from rolltap.clients.relay import RelayClient
from rolltap.config import EndpointConfig
from rolltap.errors import TokenizerMismatchError, UpstreamError
from rolltap.tokens.handle import RendererHandle

__all__ = ["PROBE", "check_tokenizer", "first_difference", "tokenize_body"]

log = logging.getLogger("rolltap.clients.tokenizer_check")

#: mixed case, digits, punctuation, JSON, runs of whitespace, accents, CJK and an emoji: the
#: text where two tokenizers that differ tend to show it (no special-token spellings)
PROBE = (
    'Tokenizer probe: Hello, World! 0123456789 {"key": [1, 2.5]}\n'
    "\tIndented  twice; ÄÖÜ ß é 日本語 🙂"
)
_PATH = "/tokenize"
#: statuses of a server without the route
_ABSENT = frozenset({404, 405})
_SHOWN = 4  # ids shown either side of the first difference


def tokenize_body(endpoint: EndpointConfig, text: str) -> dict[str, Any]:
    """The ``/tokenize`` request for ``text`` in the dialect of the endpoint's server."""
    if endpoint.completions_api == "llamacpp":
        return {"content": text, "add_special": False}
    return {"model": endpoint.model, "prompt": text, "add_special_tokens": False}


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where ``a`` and ``b`` differ (one ending counts); None: equal."""
    for at, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return at
    return None if len(a) == len(b) else min(len(a), len(b))


async def server_ids(endpoint: EndpointConfig, client: RelayClient) -> list[int] | None:
    """The server's ids of :data:`PROBE`; None when it cannot say (see the module)."""
    body = orjson.dumps(tokenize_body(endpoint, PROBE))
    where = f"endpoint {endpoint.name!r} ({endpoint.base_url})"
    try:
        async with client.send(_PATH, body, {}, rollout_id="tokenizer-check",
                               from_root=True) as up:  # fmt: skip
            raw = await up.read()
            status = up.status
    except UpstreamError as exc:
        log.warning("tokenizer check skipped for %s: %s", where, exc.message)
        return None
    if status in _ABSENT:
        log.debug("tokenizer check skipped for %s: the server has no %s", where, _PATH)
        return None
    ids = _tokens(raw) if status < 400 else None
    if ids is None:
        log.warning("tokenizer check skipped for %s: %s answered HTTP %s, %r", where, _PATH,
                    status, raw[:200])  # fmt: skip
    return ids


def _tokens(raw: bytes) -> list[int] | None:
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        return None  # llama.cpp's with_pieces objects are not asked for
    return tokens


async def check_tokenizer(
    endpoint: EndpointConfig, client: RelayClient, renderer: RendererHandle
) -> None:
    """Raise :class:`~rolltap.errors.TokenizerMismatchError` when the server tokenizes
    :data:`PROBE` differently from ``renderer``; return quietly when it agrees or cannot
    tokenize."""
    theirs = await server_ids(endpoint, client)
    if theirs is None:
        return
    ours = await renderer.encode(PROBE)
    at = first_difference(theirs, ours)
    if at is None:
        log.debug("tokenizer check: endpoint %r agrees (%d ids)", endpoint.name, len(ours))
        return
    span = slice(max(0, at - _SHOWN), at + _SHOWN + 1)
    err = TokenizerMismatchError(
        f"endpoint {endpoint.name!r}: the server's tokenizer (model {endpoint.model!r} at "
        f"{endpoint.base_url}, POST {_PATH}) and the local tokenizer {endpoint.tokenizer!r} "
        f"disagree on a probe string from id {at} on (of {len(theirs)} vs {len(ours)}): "
        f"server {theirs[span]} vs local {ours[span]} (ids {span.start}-{span.stop - 1})"
    )
    err.hint = ("give the endpoint the tokenizer of the model the server serves "
                "(the same files it loaded)")  # fmt: skip
    raise err
