"""Addresses: whether binding one listens on loopback only.

>>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("example")
(True, True, False, False)
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only (a name other than localhost,
    or an unspecified address like ``0.0.0.0``, is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
