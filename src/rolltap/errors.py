"""rolltap's exception tree.

Every error rolltap raises derives from :class:`RolltapError` and carries a stable
``code`` (a machine-readable string that never changes meaning) and the HTTP
``status`` the gateway answers with. Errors from libraries are translated at the
boundary (``raise ... from exc``) so callers only ever need to catch these.

>>> try:
...     raise ModelPoolFullError("pool full", retry_after=1.0)
... except RolltapError as err:
...     (err.code, err.status, err.retryable)
('model_pool_full', 429, True)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AmbiguousIdError",
    "AuthRateLimitedError",
    "AuthenticationError",
    "BodyTooLargeError",
    "ClusterError",
    "ConfigError",
    "GatewayClosedError",
    "HarnessDisconnectedError",
    "HarnessNotAllowedError",
    "IdempotencyKeyReusedError",
    "InvalidRequestError",
    "LimitReachedError",
    "MalformedJSONError",
    "MethodNotAllowedError",
    "MissingAgentError",
    "MissingExtraError",
    "ModelPoolClosedError",
    "ModelPoolFullError",
    "NotFoundError",
    "PoolCloseError",
    "PoolError",
    "RendererPoolClosedError",
    "RequestTimeoutError",
    "RolloutClosedError",
    "RolloutNotFoundError",
    "RolltapError",
    "ServiceDrainingError",
    "ServiceFullError",
    "ServiceUnreachableError",
    "SessionExistsError",
    "StoreBusyError",
    "StoreError",
    "TokenizerError",
    "TokenizerMismatchError",
    "UpstreamBusyError",
    "UpstreamConnectionError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "UsageError",
    "WorkerLostError",
    "WorkersLostError",
    "http_status_of",
]


class RolltapError(Exception):
    """Root of every rolltap error."""

    code: ClassVar[str] = "rolltap_error"
    status: ClassVar[int] = 500
    #: the OpenAI-style ``error.type`` used in error bodies
    type: ClassVar[str] = "server_error"
    retryable: ClassVar[bool] = False
    #: one line on what to do about it (the CLI prints it as ``hint: …``)
    hint: str | None = None
    #: evidence to show under the error, verbatim (e.g. a crashed child's last output)
    details: str | None = None

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, safe to log and persist (never holds credentials)."""
        out: dict[str, Any] = {"code": self.code, "status": self.status, "message": self.message}
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out


class UsageError(RolltapError):
    """The caller asked for something that cannot be done as asked: a bad flag, config
    value or id. The command line exits 2 on these (1 on every other error)."""

    code = "usage_error"
    status = 400
    type = "invalid_request_error"


class ConfigError(UsageError):
    """A configuration is invalid or incomplete (e.g. a named API-key variable is unset)."""

    code = "invalid_config"
    status = 400
    type = "invalid_request_error"


class MissingExtraError(ConfigError):
    """An optional dependency is not installed; the message names the extra to install.

    >>> MissingExtraError.for_extra("postgres", "asyncpg").message
    "asyncpg is not installed; install the 'postgres' extra: pip install 'rolltap[postgres]'"
    """

    code = "missing_extra"

    @classmethod
    def for_extra(cls, extra: str, what: str) -> MissingExtraError:
        return cls(f"{what} is not installed; install the {extra!r} extra: "
                   f"pip install 'rolltap[{extra}]'")  # fmt: skip


class MissingAgentError(ConfigError):
    """The CLI agent a built-in agent harness runs (``claude``, ``codex``) is not installed;
    the hint names the npm package.

    >>> err = MissingAgentError.for_agent("codex", "codex", "ROLLTAP_CODEX", "@openai/codex")
    >>> (err.code, err.hint)
    ('missing_agent', 'npm install -g @openai/codex')
    """

    code = "missing_agent"

    @classmethod
    def for_agent(
        cls, kind: str, binary: str, variable: str, package: str, *, given: str | None = None
    ) -> MissingAgentError:
        where = (f"{variable}={given} is not an executable file" if given is not None
                 else f"{binary!r} is not on PATH and {variable} is not set")  # fmt: skip
        err = cls(f"the {kind} harness runs the {binary} CLI: {where}")
        err.hint = f"npm install -g {package}"
        return err


class AmbiguousIdError(UsageError):
    """An id prefix matches more than one run or session; ``candidates`` lists some."""

    code = "ambiguous_id"

    def __init__(self, message: str, *, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


class InvalidRequestError(RolltapError):
    """A request body failed validation; ``field`` names the offending field."""

    code = "invalid_request"
    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.field is not None:
            out["field"] = self.field
        return out


class MalformedJSONError(InvalidRequestError):
    code = "malformed_json"


class BodyTooLargeError(RolltapError):
    code = "request_too_large"
    status = 413
    type = "invalid_request_error"


class AuthenticationError(RolltapError):
    code = "invalid_api_key"
    status = 401
    type = "authentication_error"


class AuthRateLimitedError(RolltapError):
    """Too many failed authentications from one peer in the last minute; retry later."""

    code = "auth_rate_limited"
    status = 429
    type = "rate_limit_error"
    retryable = True


class HarnessNotAllowedError(RolltapError):
    """A submission named a harness, command or reward that is not on the allowlist."""

    code = "harness_not_allowed"
    status = 403
    type = "permission_error"


class RequestTimeoutError(RolltapError):
    """The request body did not arrive in full within the body timeout."""

    code = "request_timeout"
    status = 408
    type = "invalid_request_error"


class RolloutNotFoundError(RolltapError):
    code = "rollout_not_found"
    status = 404
    type = "not_found_error"


class NotFoundError(RolltapError):
    """No such route."""

    code = "not_found"
    status = 404
    type = "not_found_error"


class MethodNotAllowedError(RolltapError):
    code = "method_not_allowed"
    status = 405
    type = "invalid_request_error"


class HarnessDisconnectedError(RolltapError):
    """The harness went away before its call was delivered (recorded, never sent)."""

    code = "harness_disconnected"
    status = 499
    type = "invalid_request_error"


class IdempotencyKeyReusedError(RolltapError):
    """A call reused a rollout's ``Idempotency-Key`` with a different request body."""

    code = "idempotency_key_reused"
    status = 422
    type = "invalid_request_error"


class SessionExistsError(RolltapError):
    """A rollout was registered with a session id that a live rollout or the store holds."""

    code = "session_exists"
    status = 409
    type = "invalid_request_error"


class RolloutClosedError(RolltapError):
    """The rollout was unregistered or aborted while the call was pending."""

    code = "rollout_closed"
    status = 409
    type = "invalid_request_error"


class LimitReachedError(RolltapError):
    """A per-rollout limit (turns, tokens, wall clock) was reached."""

    code = "limit_reached"
    status = 429
    type = "invalid_request_error"


class GatewayClosedError(RolltapError):
    code = "gateway_closed"
    status = 503


class UpstreamError(RolltapError):
    """Root of errors talking to the upstream model endpoint."""

    code = "upstream_error"
    status = 502


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; the gateway passes that status through."""

    code = "upstream_http_error"

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        body: bytes = b"",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.upstream_status = upstream_status
        self.body = body
        #: the upstream's own error object, when its body had one
        self.upstream_error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["status"] = self.upstream_status
        return out


class UpstreamBusyError(UpstreamError):
    """The endpoint's cap on calls in flight is reached and its wait queue is full."""

    code = "upstream_busy"
    status = 429
    type = "rate_limit_error"
    retryable = True


class UpstreamTimeoutError(UpstreamError):
    code = "upstream_timeout"
    status = 504


class UpstreamConnectionError(UpstreamError):
    code = "upstream_unreachable"
    status = 502


class UpstreamProtocolError(UpstreamError):
    """The upstream's response was broken: malformed JSON, a dropped stream, bad SSE."""

    code = "upstream_bad_response"
    status = 502


class PoolError(RolltapError):
    """Root of model-client pool errors."""

    code = "model_pool_error"
    status = 500


class ModelPoolFullError(PoolError):
    """Every client slot is leased; retry after ``retry_after`` seconds."""

    code = "model_pool_full"
    status = 429
    type = "rate_limit_error"
    retryable = True


class ModelPoolClosedError(PoolError):
    """The pool is closed or stopped admitting new clients after a failed close."""

    code = "model_pool_closed"
    status = 503


class PoolCloseError(PoolError):
    """Closing the pool did not finish cleanly (leases still held, or a client's close failed)."""

    code = "model_pool_close_failed"
    status = 500


class StoreError(RolltapError):
    """Root of event-store errors."""

    code = "store_error"
    status = 500


class StoreBusyError(StoreError):
    """The store's write queue stayed full past the timeout; retry later."""

    code = "store_busy"
    status = 503
    retryable = True


class ServiceFullError(RolltapError):
    """Every worker of ``rolltap serve`` has its most rollouts in flight; retry later."""

    code = "service_full"
    status = 429
    type = "rate_limit_error"
    retryable = True


class ServiceDrainingError(RolltapError):
    """``rolltap serve`` is shutting down and admits no more rollouts."""

    code = "service_draining"
    status = 503
    retryable = True


class WorkerLostError(RolltapError):
    """The serve worker running a rollout died or stopped answering; it was replaced."""

    code = "worker_lost"
    status = 503
    retryable = True


class ClusterError(RolltapError):
    """The Ray cluster could not be joined, or could not place the requested workers in
    time (``--ray``); the message says which and what the cluster has."""

    code = "cluster_unavailable"
    status = 503
    retryable = True


class WorkersLostError(WorkerLostError):
    """Every worker of a run was lost and none came back in time: the run stops."""

    code = "workers_lost"
    retryable = False


class ServiceUnreachableError(RolltapError):
    """The serve client could not reach the service, or its answer stream broke."""

    code = "service_unreachable"
    status = 502
    retryable = True


class TokenizerError(RolltapError):
    """A conversation could not be turned into token ids (or ids into text).

    Raised when the chat template refuses a conversation (its ``raise_exception``, e.g.
    roles that do not alternate, or a Jinja error on what the harness sent) or when ids
    cannot be decoded; the request is at fault, so the gateway answers 400. A tokenizer
    directory that is missing or unreadable is a :class:`ConfigError` instead.
    """

    code = "tokenizer_error"
    status = 400
    type = "invalid_request_error"


class TokenizerMismatchError(ConfigError):
    """The local tokenizer of a token endpoint is not the server's: the server's
    ``/tokenize`` gave other ids for the start-up probe string
    (:mod:`rolltap.clients.tokenizer_check`). Raised before any rollout; the message names
    both tokenizers and the first differing position."""

    code = "tokenizer_mismatch"
    status = 400


class RendererPoolClosedError(RolltapError):
    """The renderer registry is not open (never entered, or closed), or a renderer handle
    was used after its ``acquire()`` block ended."""

    code = "renderer_pool_closed"
    status = 503


def http_status_of(err: RolltapError) -> int:
    """The HTTP status the gateway answers with for ``err``."""
    if isinstance(err, UpstreamStatusError):
        return err.upstream_status
    return err.status
