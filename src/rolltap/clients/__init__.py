"""Model clients: the relay client and the token client's completions wire formats."""

from rolltap.clients.base import ModelClient, join_url
from rolltap.clients.relay import RelayClient, UpstreamResponse

__all__ = ["ModelClient", "RelayClient", "UpstreamResponse", "join_url"]
