"""What the viewer tests share: a store filled by real rollouts, a real `rolltap view`
process, a headless Chromium, screenshots.

The store holds runs that went through the gateway against the simulator: ``tools``
(the tool agent on the token client, so its calls carry token records with logprobs;
the simulator fails about a third of its calls with HTTP 500, so some rollouts fail
after a tool call) and ``broken`` (every call fails); plus ``live``, written directly,
whose pending sessions a test finishes while the browser watches.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from clikit import cli_env
from rolltap.config import EndpointConfig
from rolltap.events import EventKind, EventLog
from rolltap.rollouts import Task
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store
from runkit import evaluate

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def require_chromium() -> None:
    """Skip without Debian's chromium and chromium-driver (fail under CI=true)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing and shutil.which("chromedriver", path=str(CHROMEDRIVER.parent)):
        return
    reason = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true runs the browser tests)")
    pytest.skip(reason)


@dataclass(frozen=True)
class Filled:
    url: str
    tools: str
    broken: str
    live: str
    live_sessions: tuple[str, ...]
    #: a run whose owner went away (lease expired) with two sessions unfinished
    lost: str
    lost_sessions: tuple[str, ...]
    #: a run with the tools run's tasks and known rewards, to compare with
    baseline: str


async def _evaluate(url: str, tokenizer: Path) -> tuple[str, str]:
    tasks = [Task(id=f"t{i}", prompt="what is 6*7?", info={"regex": "."}) for i in range(4)]
    async with Simulator(SimConfig(seed=7, faults=("status=500@0.3",))) as sim:
        endpoint = EndpointConfig(
            base_url=sim.base_url, model="sim-model", client="tokens",
            tokenizer=str(tokenizer), completions_api="vllm",
        )  # fmt: skip
        tools = await evaluate(tasks, harness="tool-agent", endpoint=endpoint, store=url,
                               rewards=["regex"], r=2, name="tools")  # fmt: skip
    async with Simulator(SimConfig(faults=("status=500",))) as broken_sim:
        endpoint = EndpointConfig(base_url=broken_sim.base_url, model="m")
        broken = await evaluate(tasks[:2], endpoint=endpoint, store=url, name="broken")
    assert {"completed", "failed"} <= tools.summary["statuses"].keys(), tools.summary
    return tools.run_id, broken.run_id


async def _live(url: str) -> tuple[str, tuple[str, ...]]:
    async with await Store.open(url) as store:
        run = await store.create_run("live", {"run": {"harness": "chat", "model": "m"}})
        ids = [(await store.create_session(run.id, task={"task_id": f"l{i}"})).id for i in range(3)]
    return run.id, tuple(ids)


async def _lost(url: str) -> tuple[str, tuple[str, ...]]:
    async with await Store.open(url) as store:
        run = await store.create_run("lost", {"run": {"harness": "chat", "model": "m"}})
        # the owner takes the run and is never heard of again
        await store.acquire_lease(run.id, owner="gone@host:1", ttl_s=0.001)
        ids = [(await store.create_session(run.id, task={"task_id": f"x{i}"})).id for i in range(3)]
        log = EventLog()
        log.append(EventKind.STATUS, {"status": "completed"})
        await store.commit(ids[2], log, status="completed", reward=1.0)
    return run.id, tuple(ids[:2])


#: the baseline run's rewards per task (t3 has no rollout there)
BASELINE = {"t0": [1.0, 1.0], "t1": [0.0, 0.0], "t2": [1.0, 0.0]}


async def _baseline(url: str) -> str:
    async with await Store.open(url) as store:
        run = await store.create_run("baseline", {"run": {"r": 2, "harness": "chat"}})
        for task, rewards in BASELINE.items():
            for reward in rewards:
                s = await store.create_session(run.id, task={"task_id": task})
                log = EventLog()
                log.append(EventKind.STATUS, {"status": "completed"})
                await store.commit(s.id, log, status="completed", reward=reward)
    return run.id


def fill(tmp: Path) -> Filled:
    from gateway.simtok import build_sim_tokenizer

    url = f"sqlite:///{tmp / 'view.db'}"
    tokenizer = build_sim_tokenizer(tmp / "tokenizer")
    tools, broken = asyncio.run(_evaluate(url, tokenizer))
    live, sessions = asyncio.run(_live(url))
    lost, lost_sessions = asyncio.run(_lost(url))
    baseline = asyncio.run(_baseline(url))
    return Filled(url, tools, broken, live, sessions, lost, lost_sessions, baseline)


async def finish(url: str, session_id: str, status: str, reward: float) -> None:
    """Commit a live session's end, as its owner would."""
    async with await Store.open(url) as store:
        log = await store.load_log(session_id)
        log.append(EventKind.STATUS, {"status": status})
        await store.commit(session_id, log, status=status, reward=reward)


def start_view(store_url: str, *flags: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    """A real ``rolltap view`` on a free port, and the URL it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolltap", "view", "--store", store_url, "--port", "0", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(**env),
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # bounded by the test's timeout
        seen.append(line)
        match = re.match(r"rolltap view: (http://\S+)", line)
        if match:
            return proc, match.group(1)
    proc.wait()
    raise AssertionError(f"rolltap view exited {proc.returncode}: {''.join(seen)}")


def stop_view(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the viewer; what it printed after its URL. It must stop cleanly."""
    proc.terminate()
    assert proc.stdout is not None
    # read through the text wrapper: start_view's reads may have buffered lines past the
    # URL there, which communicate() (reading the pipe itself) would lose
    with proc.stdout:
        out = proc.stdout.read()  # bounded by the test's timeout
    proc.wait(timeout=20)
    assert proc.returncode == 0, out
    return out


@dataclass
class Screens:
    """Where screenshots go: ``ROLLTAP_TEST_ARTIFACTS`` or the test run's tmp dir."""

    root: Path

    def path(self, name: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f"{name}.png"


def screens_dir(tmp_factory: pytest.TempPathFactory) -> Screens:
    given = os.environ.get("ROLLTAP_TEST_ARTIFACTS")
    root = Path(given) / "view" if given else tmp_factory.mktemp("view-screens")
    return Screens(root)


def run_row(driver: WebDriver, run_id: str) -> dict[str, str]:
    """The runs page's row of ``run_id``: its cells by ``data-col``."""
    tr = driver.find_element(By.CSS_SELECTOR, f'tr[data-run="{run_id}"]')
    return {
        td.get_attribute("data-col") or "": td.text
        for td in tr.find_elements(By.CSS_SELECTOR, "td[data-col]")
    }
