"""The Python client of ``rolltap serve``.

>>> async def train_step(url: str, token: str, specs: list[RolloutSpec]) -> None:  # doctest: +SKIP
...     async with ServeClient(url, token) as client:
...         async for result in client.submit_batch(specs):
...             print(result.id, result.status, result.reward)
...         async with client.batch(specs) as batch:      # when the ids are needed first
...             await client.cancel(batch.rollouts[0])
...             results = [r async for r in batch]
...         await client.pause("drain")                  # a weight update: nothing in flight
...         await client.set_policy_version("step-8")    # every worker, before it answers
...         await client.resume()

Errors arrive as the server's :class:`~rolltap.errors.RolltapError` subclasses
(``ServiceFullError`` is retryable: wait ``retry_after`` and submit again). A stream that
goes quiet past ``read_timeout_s`` (the server sends keepalives) or breaks before its
end raises ``ServiceUnreachableError``: a caller never waits forever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from rolltap.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    RolloutNotFoundError,
    RolltapError,
    ServiceDrainingError,
    ServiceFullError,
    ServiceUnreachableError,
)
from rolltap.gateway.policy import PauseMode
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.remote_errors import error_from_wire
from rolltap.store import StoreFullError, StoreUnavailableError

__all__ = ["BatchStream", "ServeClient", "ServeResult"]

_ERRORS: dict[str, type[RolltapError]] = {
    cls.code: cls
    for cls in (
        AuthenticationError, InvalidRequestError, NotFoundError, RolloutNotFoundError,
        ServiceDrainingError, ServiceFullError, StoreFullError, StoreUnavailableError,
    )
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ServeResult:
    """How one rollout ended. ``id`` is also its store session id."""

    id: str
    batch: str
    run_id: str
    task_id: str
    sample: int
    status: str
    reward: float | None = None
    answer: str | None = None
    error: str | None = None
    #: the rolltap error code of ``error`` (``worker_lost``, ``store_fenced``, …)
    error_code: str | None = None
    worker: int | None = None
    duration_s: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: the harness ended without a single model call (docs/events.md, "No model calls")
    no_model_calls: bool = False
    #: the store gave up before this rollout's session was saved: the file holding it
    #: (``rolltap sessions import`` loads it)
    unsaved_file: str | None = None
    #: the policy versions its answers were generated under, first seen first
    policy_versions: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServeResult:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def _error(status: int, body: bytes, retry_after: str | None) -> RolltapError:
    try:
        detail = orjson.loads(body).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        detail = {}
    message = str(detail.get("message") or f"HTTP {status}")
    wait = float(retry_after) if retry_after and retry_after.isdigit() else None
    cls = _ERRORS.get(str(detail.get("code")))
    if cls is None:  # any other rolltap error (a worker's, a policy route's) by its code
        wire = {"code": detail.get("code"), "status": status, "message": message}
        return error_from_wire({**wire, "retry_after": wait})
    if cls is InvalidRequestError:
        return InvalidRequestError(message)
    return cls(message, retry_after=wait)


class BatchStream:
    """One submitted batch: ``id``, ``run_id``, ``rollouts`` (ids), and its results."""

    def __init__(self, client: ServeClient, body: dict[str, Any]) -> None:
        self._client, self._body = client, body
        self._response: aiohttp.ClientResponse | None = None
        self.id = self.run_id = ""
        self.rollouts: list[str] = []
        self._buffer = bytearray()
        self._ended = False

    async def __aenter__(self) -> BatchStream:
        http = self._client.http
        try:
            self._response = await http.post(
                self._client.url + "/rollouts", data=orjson.dumps(self._body),
                headers={**self._client.headers, "Content-Type": "application/json"},
            )  # fmt: skip
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ServiceUnreachableError(f"cannot submit: {exc!r}") from exc
        if self._response.status != 200:
            body = await self._response.read()
            self._response.release()
            raise _error(self._response.status, body, self._response.headers.get("Retry-After"))
        accepted = await self._next_line()
        if accepted is None or accepted.get("type") != "accepted":
            raise ServiceUnreachableError("the service did not accept the batch")
        self.id, self.run_id = accepted["batch"], accepted["run_id"]
        self.rollouts = list(accepted["rollouts"])
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the stream (an unfinished, undetached batch is cancelled). Idempotent."""
        if self._response is not None:
            self._response.close()
            self._response = None

    async def _next_line(self) -> dict[str, Any] | None:
        assert self._response is not None
        while (end := self._buffer.find(b"\n")) < 0:
            try:
                chunk = await self._response.content.readany()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise ServiceUnreachableError(f"the result stream broke: {exc!r}") from exc
            if not chunk:
                return None
            self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        parsed: dict[str, Any] = orjson.loads(line)
        return parsed

    def __aiter__(self) -> AsyncIterator[ServeResult]:
        return self._results()

    async def _results(self) -> AsyncIterator[ServeResult]:
        got = 0
        while not self._ended:
            line = await self._next_line()
            if line is None:
                raise ServiceUnreachableError(
                    f"the result stream ended after {got} of {len(self.rollouts)} results"
                )
            if line["type"] == "result":
                got += 1
                yield ServeResult.from_dict(line)
            elif line["type"] == "end":
                self._ended = True


class ServeClient:
    """An HTTP client of one service; ``async with`` it (or call :meth:`aclose`)."""

    def __init__(self, url: str, token: str, *, read_timeout_s: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=read_timeout_s)
        self._http: aiohttp.ClientSession | None = None
        self._timeout = timeout

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=self._timeout)
        return self._http

    async def __aenter__(self) -> ServeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        if self._http is not None:
            await self._http.close()
            self._http = None

    def batch(
        self,
        rollouts: Sequence[RolloutSpec | Mapping[str, Any]],
        *,
        run_id: str | None = None,
        run_name: str | None = None,
        detach: bool = False,
    ) -> BatchStream:
        """Submit ``rollouts``; ``async with`` the answer, then iterate its results."""
        specs = [r.model_dump(mode="json", exclude_none=True) if isinstance(r, RolloutSpec)
                 else dict(r) for r in rollouts]  # fmt: skip
        body: dict[str, Any] = {"rollouts": specs, "detach": detach}
        if run_id is not None:
            body["run_id"] = run_id
        if run_name is not None:
            body["run_name"] = run_name
        return BatchStream(self, body)

    async def submit_batch(
        self, rollouts: Sequence[RolloutSpec | Mapping[str, Any]], **options: Any
    ) -> AsyncIterator[ServeResult]:
        """Submit ``rollouts`` and yield each result as it finishes."""
        async with self.batch(rollouts, **options) as stream:
            async for result in stream:
                yield result

    async def submit(self, rollout: RolloutSpec | Mapping[str, Any], **options: Any) -> ServeResult:
        """Run one rollout; its result."""
        async with self.batch([rollout], **options) as stream:
            results = [result async for result in stream]
        return results[0]

    async def _call(self, method: str, path: str, json: dict[str, Any] | None = None) -> Any:
        headers, data = self.headers, None
        if json is not None:
            headers, data = {**headers, "Content-Type": "application/json"}, orjson.dumps(json)
        try:
            async with self.http.request(
                method, self.url + path, headers=headers, data=data
            ) as resp:
                body = await resp.read()
                if resp.status >= 400:
                    raise _error(resp.status, body, resp.headers.get("Retry-After"))
                return orjson.loads(body) if body else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ServiceUnreachableError(f"{method} {path}: {exc!r}") from exc

    async def cancel(self, rollout_id: str) -> None:
        """Cancel one running rollout (it still reports, as ``cancelled``)."""
        await self._call("DELETE", f"/rollouts/{rollout_id}")

    async def cancel_batch(self, batch_id: str) -> int:
        """Cancel every unfinished rollout of a batch; how many were asked to stop."""
        answer = await self._call("DELETE", f"/batches/{batch_id}")
        return int(answer["cancelling"])

    async def rollout(self, rollout_id: str) -> dict[str, Any]:
        """Where one rollout stands (running, or finished with its result)."""
        answer: dict[str, Any] = await self._call("GET", f"/rollouts/{rollout_id}")
        return answer

    async def status(self) -> dict[str, Any]:
        """The service's status: workers, their latest stats, capacity, totals."""
        answer: dict[str, Any] = await self._call("GET", "/status")
        return answer

    async def health(self) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call("GET", "/health")
        return answer

    # -- the trainer's policy: versions and pauses, on every worker ---------------------

    async def policy(self) -> dict[str, Any]:
        """Each endpoint's policy version and pause, and each worker's gates."""
        answer: dict[str, Any] = await self._call("GET", "/policy")
        return answer

    async def set_policy_version(
        self, version: str | None, endpoint: str | None = None
    ) -> dict[str, Any]:
        """Make ``version`` current on ``endpoint`` (None: every endpoint); returns once
        every worker has it (answers recorded from then on carry it)."""
        body = {"version": version, "endpoint": endpoint}
        answer: dict[str, Any] = await self._call("POST", "/policy", body)
        return answer

    async def pause(self, mode: PauseMode, endpoint: str | None = None) -> dict[str, Any]:
        """Pause ``endpoint`` (None: every endpoint) on every worker: new calls wait (up to
        ``pause_max_s``); ``hold`` lets calls in flight run on, ``drain`` returns once none
        is left (a drain longer than ``read_timeout_s`` raises ``ServiceUnreachableError``:
        the pause stands), ``abort`` cuts them."""
        answer: dict[str, Any] = await self._call(
            "POST", "/pause", {"mode": mode, "endpoint": endpoint}
        )
        return answer

    async def resume(self, endpoint: str | None = None) -> dict[str, Any]:
        """End the pause: held calls go, in the order they arrived."""
        answer: dict[str, Any] = await self._call("POST", "/resume", {"endpoint": endpoint})
        return answer
