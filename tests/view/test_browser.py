"""`rolltap view` in a real headless Chromium over a store filled by real rollouts.

Each test saves a screenshot of the page it checked (see viewkit.Screens).
"""

from __future__ import annotations

import asyncio
import re

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from view.viewkit import Filled, Screens, finish, run_row


def test_the_runs_page_lists_the_runs(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(viewer)
    runs = [
        tr.get_attribute("data-run")
        for tr in browser.find_elements(By.CSS_SELECTOR, "tr[data-run]")
    ]
    assert set(runs) == {filled.tools, filled.broken, filled.live, filled.lost, filled.baseline}
    tools = run_row(browser, filled.tools)
    assert tools["name"].startswith("tools") and tools["harness"] == "tool-agent"
    assert tools["rollouts"] == "8" and "pass@2" in tools["pass"]
    assert run_row(browser, filled.broken)["statuses"] == "failed 2"
    browser.save_screenshot(str(screens.path("runs")))


def test_a_click_opens_a_run(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(viewer)
    browser.find_element(By.CSS_SELECTOR, f'tr[data-run="{filled.tools}"] a').click()
    WebDriverWait(browser, 10).until(ec.url_contains(f"/runs/{filled.tools}"))
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("tools")
    bars = browser.find_elements(By.CSS_SELECTOR, "#hist-reward rect.bar")
    assert sum(int(b.get_attribute("data-count") or 0) for b in bars) == 8
    tasks = browser.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")
    assert [t.get_attribute("data-task") for t in tasks] == ["t0", "t1", "t2", "t3"]
    browser.save_screenshot(str(screens.path("run")))


def test_filtering_failed_shows_exactly_the_failed_rollouts(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(f"{viewer}runs/{filled.tools}")
    every = _statuses(browser)
    assert {"completed", "failed"} <= set(every.values())
    Select(browser.find_element(By.ID, "status")).select_by_value("failed")
    browser.find_element(By.ID, "apply").click()
    WebDriverWait(browser, 10).until(ec.url_contains("status=failed"))
    shown = _statuses(browser)
    assert shown == {sid: s for sid, s in every.items() if s == "failed"}
    codes = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "#sessions .code")}
    assert codes == {"upstream_http_error"}
    browser.save_screenshot(str(screens.path("run-failed")))


def _statuses(browser: WebDriver) -> dict[str, str]:
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions tr[data-session]")
    return {
        r.get_attribute("data-session") or "": r.get_attribute("data-status") or "" for r in rows
    }


def _failed_after_a_tool_call(browser: WebDriver, viewer: str, filled: Filled) -> None:
    """Three clicks from the runs page: the run, the failed filter, the rollout."""
    browser.get(viewer)
    browser.find_element(By.CSS_SELECTOR, f'tr[data-run="{filled.tools}"] a').click()
    Select(browser.find_element(By.ID, "status")).select_by_value("failed")
    browser.find_element(By.ID, "apply").click()
    WebDriverWait(browser, 10).until(ec.url_contains("status=failed"))
    # the failed rollouts whose first call answered (with a tool call) have more events
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions tr[data-session]")
    longest = max(rows, key=lambda r: int(r.find_elements(By.CSS_SELECTOR, "td")[-1].text))
    longest.find_element(By.TAG_NAME, "a").click()
    WebDriverWait(browser, 10).until(ec.url_contains("/sessions/"))


def test_a_rollout_shows_its_tool_call_and_error_code(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    _failed_after_a_tool_call(browser, viewer, filled)
    assert browser.find_element(By.ID, "rollout-status").text == "failed"
    call = browser.find_element(By.CSS_SELECTOR, "#transcript .tool-call")
    assert call.find_element(By.CSS_SELECTOR, ".tool-name").text == "calculator"
    assert '"expression"' in call.find_element(By.CSS_SELECTOR, ".tool-args").text
    error = browser.find_element(By.CSS_SELECTOR, "#transcript .call-error")
    assert error.find_element(By.CSS_SELECTOR, ".code").text == "upstream_http_error"
    assert "HTTP 500" in error.text
    browser.save_screenshot(str(screens.path("rollout")))


def test_the_token_view_colours_tokens_and_shows_the_mask(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    _failed_after_a_tool_call(browser, viewer, filled)
    tokens = browser.find_elements(By.CSS_SELECTOR, "#tokens .segment .tok")
    masks = [t.get_attribute("data-mask") for t in tokens]
    assert "0" in masks and "1" in masks  # prompt and sampled tokens both shown
    sampled = [t for t in tokens if t.get_attribute("data-mask") == "1"]
    colours = {t.value_of_css_property("background-color") for t in sampled}
    prompt_colour = next(t for t in tokens if t.get_attribute("data-mask") == "0")
    assert prompt_colour.value_of_css_property("background-color") not in colours
    for tok in sampled:
        logprob = float(tok.get_attribute("data-logprob") or "nan")
        assert re.search(rf"logprob {logprob:.4f}", tok.get_attribute("title") or "")
    browser.execute_script("document.getElementById('tokens').scrollIntoView()")
    browser.save_screenshot(str(screens.path("tokens")))


def test_a_run_in_progress_updates_live(
    browser: WebDriver, viewer: str, filled: Filled, screens: Screens
) -> None:
    browser.get(viewer)
    assert run_row(browser, filled.live)["statuses"] == "pending 3"
    asyncio.run(finish(filled.url, filled.live_sessions[0], "completed", 1.0))
    wait = WebDriverWait(browser, 15, poll_frequency=0.2)  # the page polls every 2 s
    wait.until(lambda d: run_row(d, filled.live)["statuses"] == "completed 1, pending 2")
    assert run_row(browser, filled.live)["reward"] == "1"
    browser.save_screenshot(str(screens.path("runs-live")))
