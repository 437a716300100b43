"""Which kind of upstream an endpoint's rollouts get: decided here, once per rollout."""

from __future__ import annotations

from typing import Any

from rolltap.clients.relay import RelayClient
from rolltap.clients.relay_upstream import RelayUpstream
from rolltap.clients.token_upstream import TokenUpstream
from rolltap.clients.upstream import CallGate, Upstream
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.tokens import RendererRegistry

__all__ = ["move_upstream", "upstream_for"]


def upstream_for(
    endpoint: EndpointConfig, client: RelayClient, renderers: RendererRegistry,
    gate: CallGate | None = None,
) -> Upstream[Any]:  # fmt: skip
    """A registering rollout's upstream on the model client the pool lent it: the token
    upstream for a ``client = "tokens"`` endpoint (rendering with ``renderers``; ``gate``,
    its endpoint's policy, lets it continue completions a pause or the engine cut), the
    relay upstream for any other."""
    if endpoint.client == "tokens":
        return TokenUpstream(endpoint, client, renderers, gate)
    return RelayUpstream(endpoint, client)


def move_upstream(upstream: Upstream[Any], client: RelayClient) -> None:
    """Send ``upstream``'s next calls through ``client`` (its rollout was re-pinned to
    another replica). What it keeps per rollout stays: a token upstream goes on extending
    the same prompt ids, whichever replica samples them."""
    if not isinstance(upstream, RelayUpstream | TokenUpstream):
        raise ConfigError(f"a {upstream.name!r} upstream cannot move to another replica")
    upstream.client = client
