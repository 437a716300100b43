"""Admission: whether a batch may run, and on which workers — never a queue.

A batch is admitted whole or not at all. Its rollouts go, one by one, to the
least-loaded ready worker with room; when the ready workers together lack room for
the whole batch it is refused at once with the retryable ``429 service_full``, so
nothing ever waits in an unbounded queue inside the service.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AsyncExitStack

from rolltap.errors import (
    HarnessNotAllowedError,
    InvalidRequestError,
    ServiceDrainingError,
    ServiceFullError,
)
from rolltap.rollouts.harness_loader import AGENT_HARNESSES, builtin_harness_names
from rolltap.rollouts.rewards import BUILTIN_REWARDS, parse_reward_spec
from rolltap.serve.config import ServeConfig
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.supervisor.placement import WorkerHandle
from rolltap.store import LeaseKeeper, Store, StoreNotFoundError

__all__ = ["check_batch", "ensure_run", "place"]


def check_batch(config: ServeConfig, specs: Sequence[RolloutSpec], *, closed: bool) -> None:
    """Refuse a batch the service cannot take (draining, empty, too big, bad fields)."""
    if closed:
        raise ServiceDrainingError("the service is shutting down", retry_after=5.0)
    if not specs:
        raise InvalidRequestError("a batch needs at least one rollout", field="rollouts")
    if len(specs) > config.max_batch:
        raise InvalidRequestError(f"at most {config.max_batch} rollouts a batch", field="rollouts")
    names = config.endpoint_names()
    for i, spec in enumerate(specs):
        if spec.endpoint is not None and spec.endpoint not in names:
            raise InvalidRequestError("unknown endpoint", field=f"rollouts[{i}].endpoint")
        if spec.block_loop_s is not None and not config.test_hooks:
            raise InvalidRequestError("test hooks are off", field=f"rollouts[{i}].block_loop_s")
    if config.restricts_code:
        for i, spec in enumerate(specs):
            check_allowed(config, spec, f"rollouts[{i}]")


def check_allowed(config: ServeConfig, spec: RolloutSpec, where: str) -> None:
    """``403 harness_not_allowed`` unless every piece of code ``spec`` names is a
    built-in or on ``config.allow_harness`` (the caller holds the token, not a shell).

    The agent harnesses (``claude-code``, ``codex``) run shell commands the model (and so
    the caller's prompt) chooses: they must be listed. A task's ``check`` is a shell
    command too: it runs only under a listed agent harness (which runs commands anyway)
    or when the command line itself is listed."""
    allowed = set(config.allow_harness)
    named: list[tuple[str, str]] = []
    if spec.cmd is not None:
        named.append(("cmd", spec.cmd))
    elif spec.harness in AGENT_HARNESSES or spec.harness not in builtin_harness_names():
        named.append(("harness", spec.harness))
    check = spec.task.get("check")
    if isinstance(check, str) and (spec.cmd is not None or spec.harness not in AGENT_HARNESSES):
        named.append(("task.check", check))
    for reward in spec.rewards:
        name = parse_reward_spec(reward).name
        if name not in BUILTIN_REWARDS:
            named.append(("rewards", name))
    for field, value in named:
        if value not in allowed:
            raise HarnessNotAllowedError(
                f"{where}.{field}: {value!r} is not on this service's allowlist "
                "(serve --allow-harness); only built-ins and listed code run"
            )


def place(ready: Sequence[WorkerHandle], count: int, max_inflight: int) -> list[WorkerHandle]:
    """A worker for each of ``count`` rollouts, least loaded first; or ``ServiceFullError``."""
    loads = {handle: handle.load for handle in ready}
    room = sum(max(0, max_inflight - load) for load in loads.values())
    if room < count:
        raise ServiceFullError(
            f"{count} rollouts asked, room for {room} "
            f"({len(loads)} ready workers × {max_inflight} in flight)",
            retry_after=1.0,
        )
    placed: list[WorkerHandle] = []
    for _ in range(count):
        handle = min(loads, key=lambda h: loads[h])
        loads[handle] += 1
        placed.append(handle)
    return placed


async def ensure_run(store: Store, run_id: str, name: str | None, *, given: bool) -> None:
    """Create the batch's run, unless the caller named one that exists."""
    if given:
        try:
            await store.get_run(run_id)
            return
        except StoreNotFoundError:
            pass  # a caller may name a new run: it is created under that id
    name = name or f"serve {time.strftime('%Y-%m-%d %H:%M:%S')}"
    await store.create_run(name, {"source": "rolltap serve"}, run_id=run_id)


class RunLeases:
    """The leases of the runs a supervisor writes, each taken on its first batch and
    renewed until the supervisor closes (after its workers stopped)."""

    def __init__(self, store: Store, ttl_s: float) -> None:
        self._store, self._ttl_s = store, ttl_s
        self._stack = AsyncExitStack()
        self._held: dict[str, int] = {}

    async def __aenter__(self) -> RunLeases:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def own(self, run_id: str) -> int:
        """Hold ``run_id``'s lease (a caller naming a run another owner left takes it over);
        its epoch, which the workers' writes of the run carry."""
        epoch = self._held.get(run_id)
        if epoch is None:
            keeper = LeaseKeeper(self._store, run_id, ttl_s=self._ttl_s, role="serve")
            epoch = self._held[run_id] = (await self._stack.enter_async_context(keeper)).epoch
        return epoch
