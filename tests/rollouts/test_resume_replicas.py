"""A run given several replica URLs keeps them in its stored config, and resumes on them."""

from __future__ import annotations

from pathlib import Path

import rolltap
from rolltap.rollouts import RunConfig, Task
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store
from runkit import evaluate


async def test_replica_urls_are_stored_and_resumed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    async with Simulator(SimConfig(seed=1)) as one, Simulator(SimConfig(seed=1)) as two:
        urls = [one.base_url, two.base_url]
        first = await evaluate([Task(id="t", prompt="p")], endpoint=urls, store=url)
        assert first.summary["statuses"] == {"completed": 1}
        async with await Store.open(url) as store:
            stored = (await store.get_run(first.run_id)).config["run"]
        assert stored["endpoint"] == urls
        endpoint = RunConfig.model_validate(stored).endpoint_config()
        assert endpoint is not None
        assert endpoint.replicas == tuple(urls)
        again = await rolltap.resume(first.run_id, store=url)
    assert again.run_id == first.run_id
    assert again.summary["statuses"] == {"completed": 1}
    assert one.stats.requests + two.stats.requests >= 1
