"""Tell an inference engine that the gateway paused or resumed its endpoint
(``forward_pause``), in the engine's own API:

==========  ==========================================  =========================
engine      pause (hold / drain / abort)                resume
==========  ==========================================  =========================
``vllm``    ``POST /pause?mode=keep | wait | abort``    ``POST /resume``
``sglang``  ``POST /pause_generation``, ``{"mode":       ``POST /continue_generation``
            "in_place" | "in_place" | "abort"}``
==========  ==========================================  =========================

SGLang has no mode that waits for requests in flight: the gateway drains them first,
then pauses the engine in place. An engine that answers an error status, or cannot be
reached, fails the change with :class:`~rolltap.errors.ForwardPauseError` (502, whatever
the engine's own status: the trainer's call failed because of the engine, not itself).
"""

from __future__ import annotations

import orjson

from rolltap.clients.relay import RelayClient
from rolltap.errors import ForwardPauseError, UpstreamError

__all__ = ["ENGINES", "forward_pause", "forward_resume"]

ENGINES = ("vllm", "sglang")
_VLLM_MODES = {"hold": "keep", "drain": "wait", "abort": "abort"}
_SGLANG_MODES = {"hold": "in_place", "drain": "in_place", "abort": "abort"}


async def forward_pause(client: RelayClient, engine: str, mode: str) -> None:
    """Pause the engine behind ``client`` the way the gateway pauses (``mode``: hold,
    drain or abort)."""
    if engine == "vllm":
        await _post(client, f"/pause?mode={_VLLM_MODES[mode]}", b"")
    else:
        await _post(client, "/pause_generation", orjson.dumps({"mode": _SGLANG_MODES[mode]}))


async def forward_resume(client: RelayClient, engine: str) -> None:
    """Resume the engine behind ``client``."""
    await _post(client, "/resume" if engine == "vllm" else "/continue_generation", b"")


async def _post(client: RelayClient, path: str, body: bytes) -> None:
    try:
        async with client.send(path, body, {}, rollout_id="policy", from_root=True) as up:
            raw = await up.read()
    except UpstreamError as exc:
        raise ForwardPauseError(
            f"the engine at {client.endpoint.base_url} did not take POST {path}: {exc.message}"
        ) from exc
    if up.status >= 300:
        text = raw[:200].decode("utf-8", "replace")
        raise ForwardPauseError(
            f"the engine at {client.endpoint.base_url} answered POST {path} with HTTP "
            f"{up.status}: {text}"
        )
