"""``POST /tokenize``: the simulator's vocabulary as a server's tokenizer route.

Two request shapes, as the servers have them: vLLM's (and SGLang's) ``{"model", "prompt",
"add_special_tokens"}``, answered ``{"count", "max_model_len", "tokens", "token_strs"}``, and
llama.cpp's ``{"content", "add_special"}``, answered ``{"tokens"}``. The ids are
:meth:`VOCAB.encode <rolltap.sim.vocab.Vocab.encode>`'s (the vocabulary has no BOS, so the
special-token flags change nothing). :attr:`SimConfig.tokenize_mismatch_at` makes one id
wrong, as a server with another tokenizer would answer; :attr:`SimConfig.tokenize` False
leaves the route out (404).

>>> tokenize_answer({"content": "the ab"}, SimConfig()) == {"tokens": VOCAB.encode("the ab")}
True
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.config import SimConfig
from rolltap.sim.content import BadRequest
from rolltap.sim.vocab import VOCAB
from rolltap.sim.wire import error_response

__all__ = ["MAX_MODEL_LEN", "tokenize_answer", "tokenize_response"]

#: the context length ``/tokenize`` reports (vLLM's ``max_model_len``)
MAX_MODEL_LEN = 32768


def tokenize_answer(body: Any, config: SimConfig) -> dict[str, Any]:
    """The answer to a ``/tokenize`` request body (parsed JSON)."""
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    llamacpp = "content" in body
    text = body.get("content") if llamacpp else body.get("prompt")
    if not isinstance(text, str):
        raise BadRequest("content (llama.cpp) or prompt (vLLM): required, a string")
    ids = VOCAB.encode(text)
    at = config.tokenize_mismatch_at
    if at is not None and at < len(ids):
        ids[at] = (ids[at] + 1) % len(VOCAB)
    if llamacpp:
        return {"tokens": ids}
    return {"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": None}


async def tokenize_response(
    request: web.BaseRequest, config: SimConfig, headers: dict[str, str]
) -> web.Response:
    """Serve ``POST /tokenize`` (a bad body: 400)."""
    try:
        answer = tokenize_answer(orjson.loads(await request.read()), config)
    except (orjson.JSONDecodeError, BadRequest) as exc:
        return error_response(400, str(exc), "invalid_request", headers)
    return web.Response(body=orjson.dumps(answer), content_type="application/json",
                        headers=headers)  # fmt: skip
