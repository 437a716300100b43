"""``rolltap eval`` of one task by a ``--cmd`` harness against the simulator, as a user
runs it, and the one rollout it stored read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from clikit import arolltap_parts
from rolltap.events import Event
from rolltap.sim import Simulator
from rolltap.store import SessionInfo, Store


async def eval_one(
    sim: Simulator, tmp_path: Path, task: dict[str, Any], cmd: str, reward: str
) -> tuple[int, str, str, str]:
    """``rolltap eval --json`` of ``task`` by the harness command ``cmd`` on ``sim``,
    scored by ``reward``, stored in a SQLite file under ``tmp_path``: (exit code, stdout,
    stderr, the store's URL)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(orjson.dumps(task))
    url = f"sqlite:///{tmp_path}/runs.db"
    code, out, err = await arolltap_parts(
        "eval", str(tasks), "--cmd", cmd, "--endpoint", sim.base_url, "--model", "sim-model",
        "--reward", reward, "--store", url, "--json",
    )  # fmt: skip
    return code, out, err, url


async def the_session(url: str) -> tuple[SessionInfo, list[Event]]:
    """The store's one session, and its events."""
    async with await Store.open(url) as store:
        (session,) = await store.list_sessions()
        return session, await store.events(session.id)
