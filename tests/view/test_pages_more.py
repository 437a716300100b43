"""More of `rolltap view` in Chromium: interrupted rollouts, run compare, the Service page
against a real `rolltap serve` in front of the simulator."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

import rolltap
from clikit import cli_env
from rolltap.store import Store
from rolltap.view.render import fmt_num
from view.viewkit import BASELINE, Filled, Screens, run_row, start_view, stop_view

pytestmark = pytest.mark.timeout(180)
SERVE_TOKEN = "view-test-serve-token"


def test_a_run_whose_owner_went_away_shows_its_rollouts_interrupted(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(viewer)
    row = run_row(browser, filled.lost)
    assert (row["statuses"], row["interrupted"]) == ("completed 1, interrupted 2", "2")
    assert "live" not in (browser.find_element(
        By.CSS_SELECTOR, f'tr[data-run="{filled.lost}"]').get_attribute("class") or "")  # fmt: skip
    browser.get(f"{viewer}runs/{filled.lost}")
    assert browser.find_element(By.ID, "sum-interrupted").text.startswith("2")
    browser.find_element(By.CSS_SELECTOR, '#sum-statuses a[data-status="interrupted"]').click()
    WebDriverWait(browser, 10).until(ec.url_contains("status=interrupted"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions tr[data-session]")
    shown = {r.get_attribute("data-session"): r.get_attribute("data-status") for r in rows}
    assert shown == dict.fromkeys(filled.lost_sessions, "interrupted")
    Select(browser.find_element(By.ID, "status")).select_by_value("pending")
    browser.find_element(By.ID, "apply").click()
    WebDriverWait(browser, 10).until(ec.url_contains("status=pending"))
    assert not browser.find_elements(By.CSS_SELECTOR, "#sessions tr[data-session]")
    browser.save_screenshot(str(screens.path("run-interrupted")))


def _mean(text: str) -> float | None:
    return None if text == "–" else float(text)


def test_compare_shows_per_task_deltas_side_by_side(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(f"{viewer}runs/{filled.tools}")
    field = browser.find_element(By.ID, "compare")
    field.send_keys(filled.baseline)
    field.submit()
    WebDriverWait(browser, 10).until(ec.url_contains(f"compare={filled.baseline}"))
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#tasks thead th")]
    assert heads[4:] == ["baseline: mean reward", "Δ mean reward", "passed"], heads
    seen: dict[str, list[str]] = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "#tasks tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        seen[tr.get_attribute("data-task") or ""] = cells
    assert list(seen) == ["t0", "t1", "t2", "t3"]
    for task, cells in seen.items():
        mine, theirs, delta, passed = _mean(cells[2]), cells[4], cells[5], cells[6]
        rewards = BASELINE.get(task)
        if rewards is None:  # no rollout of t3 in the baseline
            assert (theirs, delta, passed) == ("–", "–", "–")
            continue
        mean = sum(rewards) / len(rewards)
        assert _mean(theirs) == pytest.approx(mean)
        assert passed == f"{sum(r >= 1.0 for r in rewards)}/{len(rewards)}"
        assert delta == ("–" if mine is None else f"{mine - mean:+.3f}")
    browser.save_screenshot(str(screens.path("run-compare")))


def _url_from(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # bounded by the test's timeout
        seen.append(line)
        match = re.search(rf"{prefix}.*?(http://\S+)", line)
        if match:
            return match.group(1).rstrip("/")
    proc.wait()
    raise AssertionError(f"no URL: {''.join(seen)}")


def _start(args: list[str], prefix: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolltap", *args], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=cli_env(**env),
    )  # fmt: skip
    try:
        return proc, _url_from(proc, prefix)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    """A real `rolltap serve` (one worker) in front of a `rolltap sim`."""
    sim, sim_url = _start(["sim", "--port", "0"], "")
    try:
        serve, url = _start(
            ["serve", "--endpoint", sim_url, "--model", "sim-model", "--workers", "1",
             "--port", "0", "--store", f"sqlite:///{tmp_path / 'serve.db'}"],
            "rolltap serve:", ROLLTAP_SERVE_TOKEN=SERVE_TOKEN,
        )  # fmt: skip
        try:
            yield url
        finally:
            _stop(serve)
    finally:
        _stop(sim)


def test_the_service_page_shows_a_real_service(
    browser: WebDriver, filled: Filled, serve: str, screens: Screens
) -> None:
    proc, viewer = start_view(filled.url, "--serve", serve, ROLLTAP_SERVE_TOKEN=SERVE_TOKEN)
    try:
        browser.get(f"{viewer}service")

        def ready(driver: WebDriver) -> bool:
            rows = driver.find_elements(By.CSS_SELECTOR, "#table-workers tbody tr")
            if not rows:
                driver.refresh()  # the worker is still starting
            return bool(rows)

        WebDriverWait(browser, 60, poll_frequency=0.5).until(ready)
        scalars = {
            tr.find_element(By.TAG_NAME, "th").text: tr.find_element(By.TAG_NAME, "td").text
            for tr in browser.find_elements(By.CSS_SELECTOR, "#service tr")
        }
        assert scalars["state"] == "running"
        assert {"capacity", "inflight", "ready_workers"} <= scalars.keys()
        assert SERVE_TOKEN not in browser.page_source  # sent to the service, never shown
        browser.save_screenshot(str(screens.path("service")))
    finally:
        stop_view(proc)


def test_a_run_scored_again_is_read_under_the_chosen_scoring(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    # last in this module: the scoring it adds is the tools run's latest from now on
    scored = asyncio.run(rolltap.score(filled.tools, ["exact"], store=filled.url, name="strict"))
    own = asyncio.run(_own_mean(filled.url, filled.tools))
    browser.get(f"{viewer}runs/{filled.tools}")
    current = browser.find_element(By.CSS_SELECTOR, "#sum-scoring a.current")
    assert (current.text, current.get_attribute("data-scoring")) == ("strict", scored.scoring.id)
    assert browser.find_element(By.ID, "sum-reward").text.split()[0] == fmt_num(
        scored.summary["reward"]["mean"]
    )
    rewards = {r.session_id: fmt_num(r.reward) for r in scored.results}
    for row in browser.find_elements(By.CSS_SELECTOR, "#sessions tr[data-session]"):
        sid = row.get_attribute("data-session") or ""
        assert row.find_element(By.CSS_SELECTOR, "td.reward").text == rewards[sid]
    browser.find_element(By.CSS_SELECTOR, '#sum-scoring a[data-scoring="original"]').click()
    WebDriverWait(browser, 10).until(ec.url_contains("scoring=original"))
    current = browser.find_element(By.CSS_SELECTOR, "#sum-scoring a.current")
    assert current.get_attribute("data-scoring") == "original"
    assert browser.find_element(By.ID, "sum-reward").text.split()[0] == fmt_num(own)
    browser.save_screenshot(str(screens.path("run-scoring")))


async def _own_mean(url: str, run_id: str) -> float | None:
    async with await Store.open(url) as store:
        mean: float | None = (await store.run_summary(run_id))["reward"]["mean"]
        return mean
