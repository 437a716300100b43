"""The three wire dialects by name, each with its upstream path and translators.

>>> get_dialect("messages").path
'/v1/messages'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from rolltap.dialects import anthropic_messages, chat_canonical, openai_responses
from rolltap.dialects.canonical import Request, Response
from rolltap.errors import ConfigError, RolltapError

__all__ = ["DIALECTS", "Dialect", "DialectName", "get_dialect"]

DialectName = Literal["chat", "messages", "responses"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """One wire dialect: where its upstream listens and how its bodies translate."""

    name: DialectName
    path: str
    validate_request: Callable[[bytes], dict[str, Any]]
    #: validate a parsed body past its first N conversation items (validated before)
    validate_body: Callable[[dict[str, Any], int], dict[str, Any]]
    to_canonical: Callable[[dict[str, Any]], Request]
    from_canonical: Callable[[Request], dict[str, Any]]
    response_to_canonical: Callable[[dict[str, Any]], Response]
    response_from_canonical: Callable[[Response], dict[str, Any]]
    error_body: Callable[[RolltapError], bytes]
    upstream_error_detail: Callable[[bytes], dict[str, Any] | None]


DIALECTS: Mapping[str, Dialect] = MappingProxyType(
    {
        "chat": Dialect(
            name="chat",
            path="/v1/chat/completions",
            validate_request=chat_canonical.validate_request,
            validate_body=chat_canonical.validate_body,
            to_canonical=chat_canonical.to_canonical,
            from_canonical=chat_canonical.from_canonical,
            response_to_canonical=chat_canonical.response_to_canonical,
            response_from_canonical=chat_canonical.response_from_canonical,
            error_body=chat_canonical.error_body,
            upstream_error_detail=chat_canonical.upstream_error_detail,
        ),
        "messages": Dialect(
            name="messages",
            path="/v1/messages",
            validate_request=anthropic_messages.validate_request,
            validate_body=anthropic_messages.validate_body,
            to_canonical=anthropic_messages.to_canonical,
            from_canonical=anthropic_messages.from_canonical,
            response_to_canonical=anthropic_messages.response_to_canonical,
            response_from_canonical=anthropic_messages.response_from_canonical,
            error_body=anthropic_messages.error_body,
            upstream_error_detail=anthropic_messages.upstream_error_detail,
        ),
        "responses": Dialect(
            name="responses",
            path="/v1/responses",
            validate_request=openai_responses.validate_request,
            validate_body=openai_responses.validate_body,
            to_canonical=openai_responses.to_canonical,
            from_canonical=openai_responses.from_canonical,
            response_to_canonical=openai_responses.response_to_canonical,
            response_from_canonical=openai_responses.response_from_canonical,
            error_body=openai_responses.error_body,
            upstream_error_detail=openai_responses.upstream_error_detail,
        ),
    }
)


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name``; :class:`ConfigError` for any other name.

    >>> get_dialect("chat").path
    '/v1/chat/completions'
    """
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ConfigError(f"unknown dialect {name!r} (known: {known})") from None
