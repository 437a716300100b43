"""The curated public API: additions are deliberate, removals are breaking."""

from __future__ import annotations

import inspect

import rolltap
from rolltap import errors

EXPECTED = {
    # run an eval
    "evaluate", "resume", "retry_failed", "score", "Scored", "eval_set", "resume_eval_set",
    "SetResult", "RunConfig", "InProcess", "Workers",
    "Ray", "Task",
    "Harness", "HarnessContext", "HarnessResult", "Hooks", "RunResult", "RolloutResult",
    # the gateway, and beneath it
    "Gateway", "Rollout", "EndpointConfig", "GatewaySettings", "Timeouts", "ModelClientPool",
    "Lease", "PoolSnapshot", "ModelClient", "RelayClient", "join_url",
    # results and storage
    "Store", "Event", "EventKind", "EventLog",
    # the rollout service; a model without a server
    "ServeClient", "LocalModel", "SimConfig", "Simulator",
    # errors
    "AuthenticationError", "ConfigError", "GatewayClosedError", "InvalidRequestError",
    "LimitReachedError", "ModelPoolClosedError", "ModelPoolFullError", "PoolCloseError",
    "PoolError", "RolloutClosedError", "RolloutNotFoundError", "RolltapError",
    "StoreBusyError", "StoreError", "UpstreamError", "UpstreamProtocolError",
    "UpstreamStatusError", "UpstreamTimeoutError",
    "__version__",
}  # fmt: skip


def test_public_names_are_exactly_the_curated_set() -> None:
    assert set(rolltap.__all__) == EXPECTED
    for name in rolltap.__all__:
        assert hasattr(rolltap, name), name


def test_every_error_has_a_unique_stable_code_and_an_http_status() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, errors.RolltapError)
    ]
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), codes
    for cls in classes:
        assert 400 <= cls.status < 600, cls
        assert cls.code.isidentifier(), cls


def test_retryable_errors_are_marked() -> None:
    assert errors.ModelPoolFullError.retryable and errors.ModelPoolFullError.status == 429
    assert errors.StoreBusyError.retryable
    assert not errors.InvalidRequestError.retryable
