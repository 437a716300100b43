"""A worker's side of the service's policy changes (``policy`` frames): its gateway applies
each one, and the worker answers with a ``policy_reply``.

The supervisor sends every change to every ready worker (:mod:`rolltap.serve.supervisor.
policy_fanout`). Where an endpoint forwards its pauses to its engine (``forward_pause``),
one worker tells the engine (``forward``) and the others change their gates only, so the
engine hears each pause and resume once. A worker that starts (or restarts) gets the
service's state as a ``sync`` frame right after its ``ready``: versions and pauses set on
its gates at once, before its first rollout, and the engine left alone (it was told).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rolltap.config import EndpointConfig
from rolltap.errors import InvalidRequestError, RolltapError
from rolltap.gateway import Gateway
from rolltap.gateway.policy import parse_pause_mode
from rolltap.serve.protocol import Msg

__all__ = ["apply_policy"]


async def apply_policy(
    gateway: Gateway, endpoints: Sequence[EndpointConfig], message: Mapping[str, Any]
) -> dict[str, Any]:
    """Apply one ``policy`` frame to ``gateway``; the ``policy_reply`` to send."""
    reply: dict[str, Any] = {"type": Msg.POLICY_REPLY, "id": message.get("id")}
    try:
        value = await _apply(gateway, endpoints, message)
    except RolltapError as err:
        return {**reply, "ok": False, "error": err.to_dict()}
    return {**reply, "ok": True, "value": value}


async def _apply(
    gateway: Gateway, endpoints: Sequence[EndpointConfig], message: Mapping[str, Any]
) -> dict[str, Any]:
    op, endpoint = message.get("op"), message.get("endpoint")
    if endpoint is not None and not isinstance(endpoint, str):
        raise InvalidRequestError("must be a string or null", field="endpoint")
    if op == "sync":
        return await _sync(gateway, message.get("endpoints"))
    if op == "version":
        version = message.get("version")
        if version is not None and not isinstance(version, str):
            raise InvalidRequestError("must be a string or null", field="version")
        return await gateway.set_policy_version(version, endpoint=endpoint)
    if op not in ("pause", "resume"):
        raise InvalidRequestError(f"unknown policy op {op!r}")
    if message.get("forward", True):
        if op == "pause":
            return await gateway.pause(parse_pause_mode(message.get("mode")), endpoint=endpoint)
        return await gateway.resume(endpoint=endpoint)
    return await _gates_only(gateway, endpoints, message)


async def _gates_only(
    gateway: Gateway, endpoints: Sequence[EndpointConfig], message: Mapping[str, Any]
) -> dict[str, Any]:
    """A pause or resume of the gates alone: another worker tells the engine. A gate whose
    engine is told does not cut its calls on ``abort`` (the engine aborts them: the token
    client continues them), as the gateway's own pause does."""
    gates = gateway.policies.gates
    named = [ep for ep in endpoints if message.get("endpoint") in (None, ep.name)]
    if not named:
        raise InvalidRequestError(f"no endpoint {message.get('endpoint')!r}", field="endpoint")
    cut = 0
    for ep in named:
        if message.get("op") == "pause":
            mode = parse_pause_mode(message.get("mode"))
            cut += await gates[ep.name].pause(mode, cut=ep.forward_pause is None)
        else:
            gates[ep.name].resume()
    return {**gateway.policy(), "cut": cut}


async def _sync(gateway: Gateway, state: Any) -> dict[str, Any]:
    """Take the service's state: each endpoint's version and pause, on the gates only."""
    if not isinstance(state, dict):
        raise InvalidRequestError("a sync needs endpoints", field="endpoints")
    gates = gateway.policies.gates
    for name, wanted in state.items():
        gate = gates.get(name)
        if gate is None or not isinstance(wanted, dict):
            raise InvalidRequestError(f"no endpoint {name!r}", field="endpoints")
        version = wanted.get("version")
        gate.set_version(None if version is None else str(version))
        mode = wanted.get("paused")
        if mode is None:
            gate.resume()
        else:
            # nothing is in flight on a worker that just started: no drain waits, no cut
            await gate.pause(parse_pause_mode(mode), cut=False)
    return gateway.policy()
