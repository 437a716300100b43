"""Latencies as people read them, the same in the eval summary, ``runs compare`` and the
viewer: one helper (``rolltap.results.figures.fmt_ms``), no false precision."""

from __future__ import annotations

import asyncio
import doctest
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from rich.console import Console
from typer.testing import CliRunner

import rolltap.results.figures
from rolltap.cli.main import register_commands
from rolltap.cli.report import render_summary
from rolltap.results.figures import fmt_ms
from rolltap.results.summary import summarize
from rolltap.store import Store
from rolltap.view import ViewConfig, ViewServer

#: what the summary holds (to the microsecond) and how each reads
LATENCY = {"p50": 1302.671, "p90": 17.2345, "p99": 0.84123}
SHOWN = ["1,303 ms", "17.2 ms", "0.84 ms"]


def test_the_doctests_hold() -> None:
    assert doctest.testmod(rolltap.results.figures).failed == 0


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1302.671, "1,303 ms"), (100.0, "100 ms"), (99.94, "99.9 ms"), (99.96, "100 ms"),
        (17.2345, "17.2 ms"), (9.994, "9.99 ms"), (9.996, "10.0 ms"), (0.84123, "0.84 ms"),
        (0.004, "<0.01 ms"), (0, "0 ms"), (0.0, "0 ms"), (2_500_000, "2,500,000 ms"),
    ],
)  # fmt: skip
def test_fmt_ms_keeps_about_three_significant_figures(value: float, shown: str) -> None:
    assert fmt_ms(value) == shown


def test_fmt_ms_says_missing_its_callers_way() -> None:
    assert (fmt_ms(None), fmt_ms(None, missing="–")) == ("-", "–")


def _summary() -> dict[str, Any]:
    return {**summarize([]), "latency_ms": LATENCY, "ttfc_ms": {"p50": 0.5, "p90": None}}


def test_the_eval_summary_prints_sensible_latencies() -> None:
    console = Console(record=True, width=120)
    render_summary(console, "run-1", _summary())
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") == 3}  # fmt: skip
    assert [rows[f"latency {q}"] for q in LATENCY] == SHOWN
    assert (rows["ttfc p50"], rows["ttfc p90"]) == ("0.50 ms", "-")
    assert "1302.671" not in text and "0.841" not in text


async def _stored_runs(url: str) -> list[str]:
    async with await Store.open(url) as store:
        ids = []
        for name in ("a", "b"):
            run = await store.create_run(name)
            await store.write_run_summary(run.id, _summary())
            ids.append(run.id)
        return ids


def test_runs_compare_prints_the_same_figures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cmp.db'}"
    ids = asyncio.run(_stored_runs(url))
    result = CliRunner().invoke(
        register_commands(), ["runs", "compare", *ids, "--store", url], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    for q, shown in zip(LATENCY, SHOWN, strict=True):
        (line,) = [x for x in result.stdout.splitlines() if f"latency {q} " in x]
        assert line.count(shown) == 2, line
    assert "1302.671" not in result.stdout


async def test_the_viewer_shows_the_same_figures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'view.db'}"
    run_id, _ = await _stored_runs(url)
    async with (
        await Store.open(url) as store,
        ViewServer(store, ViewConfig(port=0)) as server,
        aiohttp.ClientSession() as http,
        http.get(f"{server.url}runs/{run_id}") as resp,
    ):
        assert resp.status == 200
        page = await resp.text()
    for q, shown in zip(LATENCY, SHOWN, strict=True):
        assert f"<dt>latency {q}</dt><dd>{shown}</dd>" in page
    assert "1302.671" not in page and "1,303 ms" in page
