"""The engine's weight-update routes, in SGLang's and vLLM's shapes.

What they change is :class:`~rolltap.sim.weights.Weights`; they are not model requests
(not counted in ``requests``), and a bad query or body is a 400 in the simulator's
OpenAI error shape.

================================  ============================================================
``GET /get_weight_version``       SGLang: ``{"weight_version": V}`` (``null`` before any)
``POST /update_weight_version``   SGLang: body ``{"new_version": V, "abort_all_requests":
                                  false}``; with ``abort_all_requests`` every generation in
                                  flight is aborted first (answered with what it has); answers
                                  ``{"success": true, "message": …, "new_version": V}``
``POST /pause?mode=M``            vLLM: ``abort`` (the default), ``wait`` (returns once
                                  nothing is in flight) or ``keep`` (in flight freeze);
                                  ``{"status": "paused"}``
``POST /resume``                  vLLM: ``{"status": "resumed"}``
``GET /is_paused``                vLLM: ``{"is_paused": BOOL}``
``POST /pause_generation``        SGLang: body ``{"mode": "abort" | "retract" |
                                  "in_place"}`` (default ``abort``; the others freeze)
``POST /continue_generation``     SGLang: the resume
================================  ============================================================

While paused, new generation requests wait (they are not refused) until the resume.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.content import BadRequest
from rolltap.sim.weights import PauseMode, Weights
from rolltap.sim.wire import error_response

__all__ = ["CONTROL_ROUTES", "answer"]

_VLLM_MODES: dict[str, PauseMode] = {"abort": "abort", "wait": "wait", "keep": "keep"}
_SGLANG_MODES: dict[str, PauseMode] = {"abort": "abort", "retract": "keep", "in_place": "keep"}


def _choose(modes: dict[str, PauseMode], value: Any, where: str) -> PauseMode:
    mode = modes.get(value) if isinstance(value, str) else None
    if mode is None:
        known = ", ".join(modes)
        raise BadRequest(f"{where}: expected one of {known}, got {value!r}")
    return mode


async def _body(request: web.BaseRequest, *, required: bool) -> dict[str, Any]:
    """The JSON object the request sent; an empty body is ``{}`` unless ``required``."""
    raw = await request.read()
    if not raw.strip() and not required:
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


async def _get_version(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    return {"weight_version": weights.version}


async def _update_version(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    body = await _body(request, required=True)
    version, abort = body.get("new_version"), body.get("abort_all_requests", False)
    if not isinstance(version, str):
        raise BadRequest("new_version: required, a string")
    if not isinstance(abort, bool):
        raise BadRequest("abort_all_requests: expected a boolean")
    await weights.update(version, abort=abort)
    message = f"Weight version updated to {version}"
    return {"success": True, "message": message, "new_version": version}


async def _pause(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    query = request.query
    # wait_for_inflight_requests=true: vLLM's older spelling of mode=wait
    legacy = query.get("wait_for_inflight_requests", "").lower() == "true"
    mode = query.get("mode", "wait" if legacy else "abort")
    await weights.pause(_choose(_VLLM_MODES, mode, "mode"))
    return {"status": "paused"}


async def _resume(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    weights.resume()
    return {"status": "resumed"}


async def _is_paused(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    return {"is_paused": weights.paused}


async def _pause_generation(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    body = await _body(request, required=False)
    await weights.pause(_choose(_SGLANG_MODES, body.get("mode", "abort"), "mode"))
    return {"message": "Generation paused successfully.", "status": "ok"}


async def _continue_generation(weights: Weights, request: web.BaseRequest) -> dict[str, Any]:
    await _body(request, required=False)  # SGLang's body has only cache options
    weights.resume()
    return {"message": "Generation continued successfully.", "status": "ok"}


_Route = Callable[[Weights, web.BaseRequest], Awaitable[dict[str, Any]]]
_ROUTES: dict[str, tuple[str, _Route]] = {
    "/get_weight_version": ("GET", _get_version),
    "/update_weight_version": ("POST", _update_version),
    "/pause": ("POST", _pause),
    "/resume": ("POST", _resume),
    "/is_paused": ("GET", _is_paused),
    "/pause_generation": ("POST", _pause_generation),
    "/continue_generation": ("POST", _continue_generation),
}
#: the paths :func:`answer` serves
CONTROL_ROUTES = frozenset(_ROUTES)


async def answer(
    weights: Weights, request: web.BaseRequest, headers: dict[str, str]
) -> web.Response:
    """Serve one of :data:`CONTROL_ROUTES`."""
    method, route = _ROUTES[request.path]
    if request.method != method:
        return error_response(405, f"use {method}", "method_not_allowed", headers)
    try:
        data = await route(weights, request)
    except BadRequest as exc:
        return error_response(400, str(exc), "invalid_request", headers)
    return web.Response(body=orjson.dumps(data), content_type="application/json", headers=headers)
