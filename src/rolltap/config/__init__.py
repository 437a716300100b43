"""Endpoint configs, identity digests and settings (``ROLLTAP_*`` variables, TOML)."""

from rolltap.config.endpoint import Dialect, EndpointConfig, Timeouts
from rolltap.config.settings import GatewaySettings

__all__ = ["Dialect", "EndpointConfig", "GatewaySettings", "Timeouts"]
