"""rolltap's exception tree.

Every error rolltap raises derives from :class:`RolltapError` and carries a stable
``code`` (a machine-readable string that never changes meaning), the HTTP ``status``
the gateway answers with and the ``exit_code`` the command line ends with. Errors from
libraries are translated at the boundary (``raise ... from exc``) so callers only ever
need to catch these.

The tree, grouped by the boundary an error comes from: a caller's bad request (4xx),
a usage or configuration mistake, the upstream model endpoint, the model-client pool,
the store, the token client's renderers, ``rolltap serve``, a rollout's harness, the
local model server, the trainer's policy (pauses, staleness), the gateway's own life.
Most classes are defined here; the rest beside the code that raises them
(``rolltap.store.errors`` holds the store's).
``docs/errors.md`` lists each with its module, code, status and meaning
(``python -m rolltap.errors_doc --markdown`` writes it)::

    RolltapError
    ├── GatewayClosedError
    ├── HarnessError
    │   ├── AgentFailedError
    │   ├── CheckNotRunError
    │   └── HarnessExitError
    ├── LocalModelError
    ├── PolicyError
    │   ├── ForwardPauseError
    │   ├── PausedError
    │   └── PolicyStaleError
    ├── PoolError
    │   ├── ModelPoolClosedError
    │   ├── ModelPoolFullError
    │   └── PoolCloseError
    ├── RequestError
    │   ├── AuthRateLimitedError
    │   ├── AuthenticationError
    │   ├── BodyTooLargeError
    │   ├── HarnessDisconnectedError
    │   ├── HarnessNotAllowedError
    │   ├── IdempotencyKeyReusedError
    │   ├── InvalidRequestError
    │   │   ├── BadRequest
    │   │   ├── MalformedJSONError
    │   │   └── UnsupportedError
    │   ├── LimitReachedError
    │   ├── MethodNotAllowedError
    │   ├── NotFoundError
    │   ├── RequestTimeoutError
    │   ├── RolloutClosedError
    │   ├── RolloutNotFoundError
    │   └── SessionExistsError
    ├── ServeError
    │   ├── ChannelClosedError
    │   ├── ClusterError
    │   ├── ServiceDrainingError
    │   ├── ServiceFullError
    │   ├── ServiceUnreachableError
    │   └── WorkerLostError
    │       └── WorkersLostError
    ├── StoreError
    │   ├── InjectedFault
    │   ├── SchemaVersionError
    │   ├── StoreBusyError
    │   ├── StoreClosedError
    │   ├── StoreConflictError
    │   │   ├── ForkDependencyError
    │   │   └── StoreFencedError
    │   ├── StoreFullError
    │   ├── StoreNotFoundError
    │   ├── StoreUnavailableError
    │   ├── StoreValidationError
    │   └── TokenRecordError
    ├── TokensError
    │   ├── RendererPoolClosedError
    │   └── TokenizerError
    ├── UpstreamError
    │   ├── UpstreamAbortedError
    │   ├── UpstreamBusyError
    │   ├── UpstreamConnectionError
    │   ├── UpstreamProtocolError
    │   │   └── UpstreamStreamError
    │   ├── UpstreamStatusError
    │   └── UpstreamTimeoutError
    └── UsageError
        ├── AmbiguousIdError
        ├── ConfigError
        │   ├── MissingAgentError
        │   ├── MissingExtraError
        │   └── TokenizerMismatchError
        └── RunNotFinishedError

(``python -m rolltap.errors_doc --tree`` draws it from the classes; ``tests/test_errors.py``
checks that this drawing is the real hierarchy.)

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
    "ForwardPauseError",
    "GatewayClosedError",
    "HarnessDisconnectedError",
    "HarnessError",
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
    "PausedError",
    "PolicyError",
    "PolicyStaleError",
    "PoolCloseError",
    "PoolError",
    "RendererPoolClosedError",
    "RequestError",
    "RequestTimeoutError",
    "RolloutClosedError",
    "RolloutNotFoundError",
    "RolltapError",
    "ServeError",
    "ServiceDrainingError",
    "ServiceFullError",
    "ServiceUnreachableError",
    "SessionExistsError",
    "StoreBusyError",
    "StoreError",
    "TokenizerError",
    "TokenizerMismatchError",
    "TokensError",
    "UpstreamAbortedError",
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
    #: what the command line exits with when this error ends a command
    exit_code: ClassVar[int] = 1
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


# --- usage: the command line or a configuration asked for something impossible ---------


class UsageError(RolltapError):
    """The caller asked for something that cannot be done as asked: a bad flag, config
    value or id. The command line exits 2 on these (1 on every other error)."""

    code = "usage_error"
    status = 400
    type = "invalid_request_error"
    exit_code = 2


class ConfigError(UsageError):
    """A configuration is invalid or incomplete (e.g. a named API-key variable is unset,
    or a registration names an unknown endpoint)."""

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


class TokenizerMismatchError(ConfigError):
    """The local tokenizer of a token endpoint is not the server's: the server's
    ``/tokenize`` gave other ids for the start-up probe string
    (:mod:`rolltap.clients.tokenizer_check`). Raised before any rollout; the message names
    both tokenizers and the first differing position."""

    code = "tokenizer_mismatch"
    status = 400


class AmbiguousIdError(UsageError):
    """An id prefix matches more than one run or session; ``candidates`` lists some."""

    code = "ambiguous_id"

    def __init__(self, message: str, *, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


# --- request: the gateway or a service refuses a caller's request (4xx) ----------------


class RequestError(RolltapError):
    """Root of the refusals of a caller's request (HTTP 4xx): its body, its credentials,
    the route, or the rollout it names."""

    code = "request_error"
    status = 400
    type = "invalid_request_error"


class InvalidRequestError(RequestError):
    """A request body failed validation; ``field`` names the offending field (the
    ``param`` of the error body)."""

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
    """The request body is not valid JSON."""

    code = "malformed_json"


class BodyTooLargeError(RequestError):
    """The request body is over the limit (default 64 MiB, ``ROLLTAP_MAX_BODY_BYTES``)."""

    code = "request_too_large"
    status = 413
    type = "invalid_request_error"


class AuthenticationError(RequestError):
    """The request's secret (``Authorization: Bearer``, ``x-api-key``, the viewer's
    token) is missing or wrong."""

    code = "invalid_api_key"
    status = 401
    type = "authentication_error"


class AuthRateLimitedError(RequestError):
    """Too many failed authentications from one peer in the last minute
    (``ROLLTAP_AUTH_FAILURES_PER_MINUTE``; per rollout on harness routes); retry later."""

    code = "auth_rate_limited"
    status = 429
    type = "rate_limit_error"
    retryable = True


class HarnessNotAllowedError(RequestError):
    """A submission named a harness, command or reward that is not on the allowlist."""

    code = "harness_not_allowed"
    status = 403
    type = "permission_error"


class RequestTimeoutError(RequestError):
    """The request body did not arrive in full within the body timeout
    (``ROLLTAP_BODY_TIMEOUT_S``, default 30 s, from its headers)."""

    code = "request_timeout"
    status = 408
    type = "invalid_request_error"


class RolloutNotFoundError(RequestError):
    """No such rollout (or batch) is running here."""

    code = "rollout_not_found"
    status = 404
    type = "not_found_error"


class NotFoundError(RequestError):
    """No such route."""

    code = "not_found"
    status = 404
    type = "not_found_error"


class MethodNotAllowedError(RequestError):
    """The route does not take this HTTP method."""

    code = "method_not_allowed"
    status = 405
    type = "invalid_request_error"


class HarnessDisconnectedError(RequestError):
    """The harness went away before its call was delivered (recorded, never sent)."""

    code = "harness_disconnected"
    status = 499
    type = "invalid_request_error"


class IdempotencyKeyReusedError(RequestError):
    """A call reused a rollout's ``Idempotency-Key`` with a different request body (a key
    over 255 characters is an ``invalid_request``)."""

    code = "idempotency_key_reused"
    status = 422
    type = "invalid_request_error"


class SessionExistsError(RequestError):
    """A rollout was registered with a session id that a live rollout or the store holds."""

    code = "session_exists"
    status = 409
    type = "invalid_request_error"


class RolloutClosedError(RequestError):
    """The rollout was unregistered or aborted while the call was pending."""

    code = "rollout_closed"
    status = 409
    type = "invalid_request_error"


class LimitReachedError(RequestError):
    """A per-rollout limit (turns, tokens, wall clock) was reached."""

    code = "limit_reached"
    status = 429
    type = "invalid_request_error"


# --- the gateway's own life ---------------------------------------------------------


class GatewayClosedError(RolltapError):
    """The gateway is not running: not started, or shutting down."""

    code = "gateway_closed"
    status = 503


# --- upstream: the model endpoint the gateway relays to --------------------------------


class UpstreamError(RolltapError):
    """Root of errors talking to the upstream model endpoint."""

    code = "upstream_error"
    status = 502


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; the gateway passes that status (and
    its ``Retry-After``) through, with the upstream's own error object in
    ``error.upstream``."""

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
    """The upstream did not answer in time (to connect, between chunks, or in total);
    ``connecting``: no connection was made within ``timeouts.connect`` (a replica that
    does this counts as down)."""

    code = "upstream_timeout"
    status = 504

    def __init__(
        self, message: str, *, retry_after: float | None = None, connecting: bool = False
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.connecting = connecting


class UpstreamConnectionError(UpstreamError):
    """The upstream could not be reached (or its client is closed)."""

    code = "upstream_unreachable"
    status = 502


class UpstreamAbortedError(UpstreamError):
    """The call's upstream request was cut: an ``abort`` pause (``POST /pause``) cancelled
    it, or the engine aborted it for a weight update. A relayed call surfaces it; the
    token client continues the completion instead."""

    code = "upstream_aborted"
    status = 503
    retryable = True


class UpstreamProtocolError(UpstreamError):
    """The upstream's response was broken: malformed JSON, a dropped stream, bad SSE, a
    redirect (not followed: the body sent is not kept)."""

    code = "upstream_bad_response"
    status = 502


# --- policy: the trainer's weight updates (pauses, staleness) ---------------------------


class PolicyError(RolltapError):
    """Root of the refusals a trainer's policy settings cause (a pause, a staleness bound)."""

    code = "policy_error"
    status = 503


class ForwardPauseError(PolicyError):
    """The engine did not take a pause or resume the gateway forwarded to it
    (``forward_pause``): it answered an error status, or could not be reached. A failed
    pause is undone (neither the gateway nor the engine's other replicas stay paused); a
    failed resume leaves the gateway paused: retry it."""

    code = "forward_pause_failed"
    status = 502


class PausedError(PolicyError):
    """The endpoint stayed paused (``POST /pause``) longer than ``pause_max_s`` while the
    call waited; retry after ``Retry-After``."""

    code = "paused"
    status = 503
    retryable = True


class PolicyStaleError(PolicyError):
    """The rollout began ``max_staleness`` or more policy versions before the current one:
    it gets no new calls, and ends ``stale``."""

    code = "policy_stale"
    status = 409
    type = "invalid_request_error"


# --- pool: the model-client pool ---------------------------------------------------------


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


# --- store: the event store (the rest of its errors are in rolltap.store.errors) ---------


class StoreError(RolltapError):
    """Root of event-store errors."""

    code = "store_error"
    status = 500


class StoreBusyError(StoreError):
    """The store's write queue stayed full past the timeout; retry later."""

    code = "store_busy"
    status = 503
    retryable = True


# --- serve: the rolltap serve service, its workers and its client -----------------------


class ServeError(RolltapError):
    """Root of the errors of ``rolltap serve``: admission, its workers, the channels
    between them, its Ray cluster, and its client's connection."""

    code = "serve_error"
    status = 500


class ServiceFullError(ServeError):
    """Every worker of ``rolltap serve`` has its most rollouts in flight; retry later."""

    code = "service_full"
    status = 429
    type = "rate_limit_error"
    retryable = True


class ServiceDrainingError(ServeError):
    """``rolltap serve`` is shutting down and admits no more rollouts."""

    code = "service_draining"
    status = 503
    retryable = True


class WorkerLostError(ServeError):
    """The serve worker running a rollout died or stopped answering; it was replaced."""

    code = "worker_lost"
    status = 503
    retryable = True


class WorkersLostError(WorkerLostError):
    """Every worker of a run was lost and none came back in time: the run stops."""

    code = "workers_lost"
    retryable = False


class ClusterError(ServeError):
    """The Ray cluster could not be joined, or could not place the requested workers in
    time (``--ray``); the message says which and what the cluster has."""

    code = "cluster_unavailable"
    status = 503
    retryable = True


class ServiceUnreachableError(ServeError):
    """The serve client could not reach the service, or its answer stream broke."""

    code = "service_unreachable"
    status = 502
    retryable = True


# --- tokens: the token client's local tokenizer and renderers ---------------------------


class TokensError(RolltapError):
    """Root of the errors of the token client's local rendering (:mod:`rolltap.tokens`):
    a conversation its tokenizer refuses, a renderer used while closed. A tokenizer that
    is not the server's is a :class:`TokenizerMismatchError` (a configuration mistake)."""

    code = "tokens_error"
    status = 500


class TokenizerError(TokensError):
    """A conversation could not be turned into token ids (or ids into text).

    Raised when the chat template refuses a conversation (its ``raise_exception``, e.g.
    roles that do not alternate, or a Jinja error on what the harness sent) or when ids
    cannot be decoded; the request is at fault, so the gateway answers 400. A tokenizer
    directory that is missing or unreadable is a :class:`ConfigError` instead.
    """

    code = "tokenizer_error"
    status = 400
    type = "invalid_request_error"


class RendererPoolClosedError(TokensError):
    """The renderer registry is not open (never entered, or closed), or a renderer handle
    was used after its ``acquire()`` block ended."""

    code = "renderer_pool_closed"
    status = 503


# --- harness: a rollout's harness failed (the rollout's failure, never the run's) --------


class HarnessError(RolltapError):
    """Root of the failures of a rollout's harness: the rollout ends ``failed`` with
    ``ClassName: message`` as its error, and the run goes on."""

    code = "harness_error"
    status = 500


def http_status_of(err: RolltapError) -> int:
    """The HTTP status the gateway answers with for ``err``."""
    if isinstance(err, UpstreamStatusError):
        return err.upstream_status
    return err.status
