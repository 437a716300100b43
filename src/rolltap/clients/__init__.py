"""Model clients: the relay client (eval) and, later, the token client (train)."""

from rolltap.clients.base import ModelClient, join_url
from rolltap.clients.relay import RelayClient, UpstreamResponse

__all__ = ["ModelClient", "RelayClient", "UpstreamResponse", "join_url"]
