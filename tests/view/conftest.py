"""Viewer fixtures: one filled store and one `rolltap view` per module, one Chromium."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from view.viewkit import (
    CHROMEDRIVER,
    CHROMIUM,
    Filled,
    Screens,
    fill,
    require_chromium,
    screens_dir,
    start_view,
    stop_view,
)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill(tmp_path_factory.mktemp("view-store"))


@pytest.fixture(scope="module")
def viewer(filled: Filled) -> Iterator[str]:
    proc: subprocess.Popen[str]
    proc, url = start_view(filled.url)
    try:
        yield url
    finally:
        stop_view(proc)


@pytest.fixture(scope="session")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Screens:
    return screens_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--disable-gpu"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
