"""The dialect registry and each dialect's error bodies."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import anthropic.types
import orjson
import pytest

from rolltap.dialects.chat import dialect as chat_canonical
from rolltap.dialects.messages import dialect as anthropic_messages
from rolltap.dialects.registry import DIALECTS, get_dialect
from rolltap.dialects.responses import dialect as openai_responses
from rolltap.errors import (
    AuthenticationError,
    BodyTooLargeError,
    ConfigError,
    GatewayClosedError,
    InvalidRequestError,
    ModelPoolFullError,
    NotFoundError,
    RolloutClosedError,
    RolltapError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)


@pytest.mark.parametrize(
    ("name", "path", "module"),
    [
        ("chat", "/v1/chat/completions", chat_canonical),
        ("messages", "/v1/messages", anthropic_messages),
        ("responses", "/v1/responses", openai_responses),
    ],
)
def test_registry(name: str, path: str, module: ModuleType) -> None:
    dialect = get_dialect(name)
    assert (dialect.name, dialect.path) == (name, path)
    for attr in (
        "validate_request",
        "to_canonical",
        "from_canonical",
        "response_to_canonical",
        "response_from_canonical",
        "error_body",
        "upstream_error_detail",
    ):
        assert getattr(dialect, attr) is getattr(module, attr)
    with pytest.raises(dataclasses.FrozenInstanceError):
        dialect.path = "/x"  # type: ignore[misc]


def test_unknown_dialect_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="completions"):
        get_dialect("completions")
    assert sorted(DIALECTS) == ["chat", "messages", "responses"]


def _upstream(status: int) -> UpstreamStatusError:
    err = UpstreamStatusError("upstream said no", upstream_status=status)
    err.upstream_error = {"type": "overloaded_error", "message": "Overloaded"}
    return err


@pytest.mark.parametrize(
    ("err", "kind"),
    [
        (InvalidRequestError("bad", field="messages[0].role"), "invalid_request_error"),
        (AuthenticationError("no key"), "authentication_error"),
        (NotFoundError("no route"), "not_found_error"),
        (BodyTooLargeError("too big"), "request_too_large"),
        (ModelPoolFullError("full"), "rate_limit_error"),
        (GatewayClosedError("closing"), "overloaded_error"),
        (RolloutClosedError("gone"), "invalid_request_error"),  # another 4xx
        (UpstreamTimeoutError("slow"), "api_error"),
        (_upstream(529), "overloaded_error"),  # the status the gateway answers with
        (_upstream(403), "permission_error"),
    ],
)
def test_anthropic_error_body(err: RolltapError, kind: str) -> None:
    body = orjson.loads(anthropic_messages.error_body(err))
    assert body["type"] == "error"
    assert body["error"]["type"] == kind
    assert (body["error"]["message"], body["error"]["code"]) == (err.message, err.code)
    assert body["error"].get("param") == getattr(err, "field", None)
    assert body["error"].get("upstream") == getattr(err, "upstream_error", None)
    if kind != "request_too_large":  # documented for 413, but not in the SDK's union
        anthropic.types.ErrorResponse.model_validate(body)


@pytest.mark.parametrize("module", [chat_canonical, openai_responses])
def test_openai_error_body(module: ModuleType) -> None:
    err = InvalidRequestError("bad", field="model")
    body = orjson.loads(module.error_body(err))
    assert body == {
        "error": {
            "message": "model: bad",
            "type": "invalid_request_error",
            "code": "invalid_request",
            "param": "model",
        }
    }


def test_anthropic_upstream_error_detail() -> None:
    error = {"type": "rate_limit_error", "message": "slow down"}
    raw = orjson.dumps({"type": "error", "error": error, "request_id": "req_1"})
    assert anthropic_messages.upstream_error_detail(raw) == {
        "type": "rate_limit_error",
        "message": "slow down",
    }
    assert anthropic_messages.upstream_error_detail(b"{}") is None
    assert anthropic_messages.upstream_error_detail(b"\xff") is None
