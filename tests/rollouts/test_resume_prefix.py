"""``rolltap eval --resume RUN`` takes a unique prefix of the run's id."""

from __future__ import annotations

from pathlib import Path

import pytest

import rolltap
from rolltap.rollouts import Task
from rolltap.sim import Simulator
from rolltap.store import StoreNotFoundError
from runkit import evaluate


async def test_resume_by_prefix(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    # a base URL (not an EndpointConfig) is kept in the run's config, for the resume
    first = await evaluate([Task(id="t", prompt="p")], endpoint=sim.base_url, store=url)
    again = await rolltap.resume(first.run_id[:6], store=url)
    assert again.run_id == first.run_id
    assert again.summary["statuses"] == {"completed": 1}  # the finished rollout is kept
    with pytest.raises(StoreNotFoundError, match="at least 4 characters"):
        await rolltap.resume(first.run_id[:3], store=url)
