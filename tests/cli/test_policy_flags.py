"""``--max-staleness`` and ``--pause-max-s``: on every command that runs a gateway, each
also a config field, stored with an eval's run so that ``--resume`` runs with them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import rolltap
from clikit import TASKS, arolltap_ok
from rolltap.cli import gateway_cmd, serve_cmd
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.rollouts import Hooks, RunConfig, load_run_config
from rolltap.rollouts.api import Stoppable
from rolltap.rollouts.runner import Runner
from rolltap.serve import ServeConfig
from rolltap.serve.supervisor.eval_driver import EvalDriver
from rolltap.sim import Simulator
from rolltap.store import Store

register_commands()
runner = CliRunner()
FLAGS = ("--max-staleness", "--pause-max-s")


@pytest.mark.parametrize("command", ["eval", "serve", "gateway"])
def test_the_flags_are_in_the_help(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    for flag in FLAGS:
        assert flag in plain, (command, flag)


def test_the_gateway_flags_reach_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[GatewaySettings] = []

    async def fake_serve(
        endpoint: EndpointConfig | None, settings: GatewaySettings, *rest: Any
    ) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(gateway_cmd, "_serve", fake_serve)
    args = ["gateway", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m",
            "--max-staleness", "2", "--pause-max-s", "7.5"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (seen[0].max_staleness, seen[0].pause_max_s) == (2, 7.5)


def test_the_serve_flags_go_over_the_config_files_gateway_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[ServeConfig] = []

    async def fake_serve(values: dict[str, Any], config_file: Path | None, **_: Any) -> int:
        assert config_file is not None
        seen.append(ServeConfig.from_toml(config_file, **values))
        return 0

    path = tmp_path / "serve.toml"
    path.write_text(
        "[serve.gateway]\nmax_staleness = 5\npause_max_s = 9\nmultiplex = 4\n"
        '[endpoints.policy]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
        'forward_pause = "sglang"\n'
    )
    monkeypatch.setattr(serve_cmd, "_serve", fake_serve)
    result = runner.invoke(app, ["serve", "--config", str(path), "--max-staleness", "2"])
    assert result.exit_code == 0, result.output
    gateway = seen[0].gateway
    # the flag wins, the file's other gateway fields stay
    assert (gateway.max_staleness, gateway.pause_max_s, gateway.multiplex) == (2, 9.0, 4)
    assert seen[0].endpoints[0].forward_pause == "sglang"  # an endpoint table takes it


def test_the_run_config_takes_them_and_a_bad_value_names_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        "max_staleness = 3\npause_max_s = 30\n"
        '[endpoints.train]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
        'forward_pause = "vllm"\n'
    )
    config = load_run_config(path).merged({"endpoint": "train"})
    assert (config.max_staleness, config.pause_max_s) == (3, 30.0)
    endpoint = config.endpoint_config()
    assert endpoint is not None and endpoint.forward_pause == "vllm"
    settings = config.gateway_settings(None)
    assert settings is not None and (settings.max_staleness, settings.pause_max_s) == (3, 30.0)
    assert RunConfig().gateway_settings(None) is None  # nothing set: the gateway's own
    # a run on worker processes gives them to every worker's gateway
    placed = EvalDriver(config.placed({"workers": 2}), Hooks())._serve_config(endpoint)
    assert (placed.gateway.max_staleness, placed.gateway.pause_max_s) == (3, 30.0)
    result = runner.invoke(app, ["eval", TASKS, "--max-staleness", "0"])
    assert result.exit_code == 2
    assert "--max-staleness" in result.output


async def test_an_evals_flags_are_stored_and_a_resume_runs_with_them(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    await arolltap_ok(
        "eval", TASKS, "-n", "2", "--harness", "chat", "--endpoint", sim.base_url,
        "--model", "sim-model",
        "--store", url, "--max-staleness", "3", "--pause-max-s", "45",
    )  # fmt: skip
    async with await Store.open(url) as store:
        (run,) = await store.list_runs()
        stored = (await store.get_run(run.id)).config["run"]
        # one rollout to redo: the resume must run it under the stored settings
        sessions = await store.list_sessions(run=run.id)
        await store.delete_session(sessions[0].id)
    assert (stored["max_staleness"], stored["pause_max_s"]) == (3, 45.0)
    settings: list[GatewaySettings] = []

    def keep(stoppable: Stoppable) -> None:
        assert isinstance(stoppable, Runner)
        settings.append(stoppable.gateway.settings)

    resumed = await rolltap.resume(run.id, store=url, hooks=Hooks(on_runner=keep))
    assert [res.status for res in resumed.results] == ["completed", "completed"]
    assert (settings[0].max_staleness, settings[0].pause_max_s) == (3, 45.0)
