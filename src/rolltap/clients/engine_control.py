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
then pauses the engine in place.
"""

from __future__ import annotations

import orjson

from rolltap.clients.relay import RelayClient
from rolltap.errors import UpstreamStatusError

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
    async with client.send(path, body, {}, rollout_id="policy", from_root=True) as up:
        raw = await up.read()
        if up.status >= 300:
            raise UpstreamStatusError(
                f"the engine answered POST {path} with HTTP {up.status}",
                upstream_status=up.status, body=raw,
            )  # fmt: skip
