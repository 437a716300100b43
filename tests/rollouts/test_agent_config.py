"""The agent harnesses' pieces without an agent: command lines, the generated Codex
config, the isolated environment, task fields, the ``[harness]`` table, check scoring."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolltap.errors import ConfigError
from rolltap.events import EventKind, EventLog
from rolltap.rollouts import RewardSpec, RunConfig, Scorer, Task, load_tasks, process
from rolltap.rollouts.agent_claude import claude_command, claude_env
from rolltap.rollouts.agent_codex import codex_command, codex_config, write_codex_home
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.agent_workdir import Workspace, isolated_env
from rolltap.rollouts.agents import AGENT_KINDS, agent_harness, prompt_of
from rolltap.rollouts.config import load_run_config
from rolltap.rollouts.harness import HarnessContext
from rolltap.rollouts.harness_loader import AGENT_HARNESSES, load_harness
from rolltap.rollouts.prepare import prepare
from rolltap.rollouts.process import ProcessOutput, run_process
from rolltap.rollouts.rewards import CheckNotRunError
from rolltap.rollouts.tasks import task_from_dict
from rolltap.serve.protocol import FILE_PATH

CTX = HarnessContext(
    rollout_id="r1", openai_base_url="http://127.0.0.1:9/r/r1/v1",
    anthropic_base_url="http://127.0.0.1:9/r/r1", api_key="rollout-secret", model="m1",
)  # fmt: skip


def test_claude_command_puts_flags_before_the_prompt() -> None:
    options = AgentOptions(model="opus", max_turns=3, allowed_tools=["Bash", "Edit"],
                           args=["--effort", "low"])  # fmt: skip
    argv = claude_command("/bin/claude", "-rm everything", options)
    assert argv[:2] == ["/bin/claude", "-p"]
    assert argv[-2:] == ["--", "-rm everything"]  # a prompt that looks like a flag stays one
    joined = " ".join(argv)
    for flags in ("--output-format stream-json", "--verbose", "--no-session-persistence",
                  "--permission-mode bypassPermissions", "--model opus", "--max-turns 3",
                  "--allowedTools Bash,Edit", "--effort low"):  # fmt: skip
        assert flags in joined
    plain = claude_command("claude", "hi", AgentOptions(permission_mode="dontAsk"))
    assert "--model" not in plain and "--max-turns" not in plain
    assert "--permission-mode dontAsk" in " ".join(plain)


def test_claude_env_points_at_the_rollout_with_traffic_off(tmp_path: Path) -> None:
    env = claude_env(CTX, AgentOptions(), Workspace(tmp_path))
    assert env["ANTHROPIC_BASE_URL"] == CTX.anthropic_base_url
    assert env["ANTHROPIC_API_KEY"] == "rollout-secret"
    for name in ("DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"):  # fmt: skip
        assert env[name] == "1"
    # only root needs to be told it may skip permissions, and only when it does
    assert ("IS_SANDBOX" in env) == (os.geteuid() == 0)
    asked = claude_env(CTX, AgentOptions(permission_mode="acceptEdits"), Workspace(tmp_path))
    assert "IS_SANDBOX" not in asked


def test_codex_home_holds_one_provider_at_the_rollout(tmp_path: Path) -> None:
    space = Workspace(tmp_path)
    space.home.mkdir()
    write_codex_home(space, CTX, AgentOptions())
    config = tomllib.loads((space.home / ".codex" / "config.toml").read_text())
    assert config["model"] == "m1" and config["model_provider"] == "rolltap"
    assert config["model_providers"] == {"rolltap": {
        "name": "rolltap", "base_url": CTX.openai_base_url, "env_key": "ROLLTAP_API_KEY",
        "wire_api": "responses"}}  # fmt: skip
    assert config["sandbox_mode"] == "workspace-write"
    assert config["approval_policy"] == "never"
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False}
    assert config["feedback"] == {"enabled": False}
    assert config["history"] == {"persistence": "none"}
    assert config["otel"] == {"exporter": "none"}
    assert "rollout-secret" not in (space.home / ".codex" / "config.toml").read_text()
    write_codex_home(space, CTX, AgentOptions(model="gpt-x", sandbox="danger-full-access"))
    config = tomllib.loads((space.home / ".codex" / "config.toml").read_text())
    assert (config["model"], config["sandbox_mode"]) == ("gpt-x", "danger-full-access")


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_codex_config_strings_survive_any_text(text: str) -> None:
    config = tomllib.loads(codex_config(text, "http://h/" + text, "workspace-write"))
    assert config["model"] == text
    assert config["model_providers"]["rolltap"]["base_url"] == "http://h/" + text


def test_codex_command_is_one_headless_turn() -> None:
    argv = codex_command("codex", "--help me", AgentOptions(args=["-c", "x=1"]))
    assert argv == ["codex", "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                    "-c", "x=1", "--", "--help me"]  # fmt: skip


def test_isolated_env_takes_nothing_but_path_and_locale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"ANTHROPIC_API_KEY": "user-key", "OPENAI_API_KEY": "user-key",
                        "CODEX_HOME": "/root/.codex", "CLAUDE_CONFIG_DIR": "/root/.claude",
                        "HTTPS_PROXY": "http://proxy", "HOME": "/home/user",
                        "LC_ALL": "C.UTF-8"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    space = Workspace(tmp_path)
    env = isolated_env(space, {"EXTRA": "1"})
    assert env["HOME"] == str(space.home) and env["TMPDIR"] == str(space.tmp)
    assert env["XDG_CONFIG_HOME"].startswith(str(space.home))
    assert env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"
    assert env["EXTRA"] == "1"
    assert "user-key" not in env.values()
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_HOME", "CLAUDE_CONFIG_DIR",
                 "HTTPS_PROXY"):  # fmt: skip
        assert name not in env


def test_task_fields_load_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    row = ('{"id": "a", "prompt": "p", "files": {"src/x.py": "x = 1\\n"}, "check": "test -f x",'
           ' "check_timeout_s": 5, "harness": {"max_turns": 2}}\n')  # fmt: skip
    path.write_text(row + '{"prompt": "old style"}\n')
    task, old = load_tasks(path)
    assert task.files == {"src/x.py": "x = 1\n"} and task.check == "test -f x"
    assert task.check_timeout_s == 5.0 and task.harness == AgentOptions(max_turns=2)
    assert task.to_dict() == {"id": "a", "prompt": "p", "files": {"src/x.py": "x = 1\n"},
                              "check": "test -f x", "check_timeout_s": 5.0,
                              "harness": {"max_turns": 2}}  # fmt: skip
    assert old.to_dict() == {"id": "2", "prompt": "old style"}  # as before


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ('"files": {"/etc/passwd": "x"}', "must be a relative path"),
        ('"files": {"a/../../b": "x"}', "must be a relative path"),
        ('"files": {"dir/": "x"}', "must be a relative path"),
        ('"files": {"a": 1}', "content of 'a' must be a string"),
        ('"files": ["a"]', "'files' must be an object"),
        ('"check": ""', "'check' must be a non-empty string"),
        ('"check": "true", "check_timeout_s": 0', "'check_timeout_s' must be a positive"),
        ('"check": "true", "check_timeout_s": true', "'check_timeout_s' must be a positive"),
        ('"harness": {"max_turn": 2}', "harness.max_turn: Extra inputs"),
        ('"harness": "codex"', "'harness' must be an object"),
    ],
)
def test_bad_task_fields_are_named(tmp_path: Path, fields: str, fragment: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(f'{{"prompt": "p", {fields}}}\n')
    with pytest.raises(ConfigError) as info:
        load_tasks(path)
    assert f"{path}:1: " in str(info.value) and fragment in str(info.value)


def test_harness_table_is_stored_and_comes_back(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('[harness]\nkind = "codex"\nsandbox = "danger-full-access"\n'
                    'args = ["-c", "x=1"]\n')  # fmt: skip
    config = load_run_config(toml)
    assert config.harness == "codex"
    assert config.harness_options == AgentOptions(sandbox="danger-full-access", args=["-c", "x=1"])
    stored = config.model_dump(mode="json")  # what the run row keeps, for --resume
    assert RunConfig.model_validate(stored) == config
    assert config.merged({"harness": "claude-code"}).harness_options == config.harness_options
    toml.write_text('[harness]\nkind = "codex"\nsandbox = "everything"\n')
    with pytest.raises(ConfigError, match=r"harness_options\.sandbox"):
        load_run_config(toml)


def test_options_are_for_agents_only() -> None:
    with pytest.raises(ConfigError, match="options are for the agent harnesses"):
        load_harness("chat", AgentOptions(model="x"))
    with pytest.raises(ConfigError, match="not --cmd"):
        prepare(RunConfig(cmd="true", harness_options=AgentOptions(model="x")))
    assert load_harness("chat", AgentOptions()).__name__ == "chat_harness"


def test_an_option_the_cli_lacks_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o755)
    monkeypatch.setenv("ROLLTAP_CODEX", str(agent))
    with pytest.raises(ConfigError, match="codex harness has no max_turns"):
        agent_harness("codex", AgentOptions(max_turns=3))
    assert agent_harness("codex", AgentOptions(sandbox="read-only")).__name__ == "codex_harness"


def test_agent_kinds_are_the_harness_names() -> None:
    assert set(AGENT_KINDS) == AGENT_HARNESSES


def test_options_merge_task_over_run() -> None:
    run = AgentOptions(model="a", max_turns=8, env={"A": "1", "B": "1"})
    task = AgentOptions(max_turns=2, env={"B": "2"})
    merged = run.merged(task)
    assert (merged.model, merged.max_turns, merged.env) == ("a", 2, {"A": "1", "B": "2"})
    assert run.merged(None) is run and not AgentOptions().is_set() and task.is_set()


def test_prompt_of_messages_task() -> None:
    task = Task(id="t", messages=[
        {"role": "system", "content": "sys"}, {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ])  # fmt: skip
    assert prompt_of(task) == "second"
    assert prompt_of(Task(id="t", prompt="p")) == "p"
    with pytest.raises(ValueError, match="needs a prompt"):
        prompt_of(Task(id="t", messages=[{"role": "system", "content": "s"}]))


def _checked(passed: bool) -> EventLog:
    log = EventLog()
    log.append(EventKind.CHECK, {"passed": passed, "exit_code": 0 if passed else 1})
    return log


async def test_a_task_with_a_check_is_scored_by_it() -> None:
    scorer = Scorer([RewardSpec("contains")])  # the default rewards
    checked = Task(id="t", prompt="p", check="true")
    assert await scorer.score(checked, "anything", list(_checked(True))) == (1.0, {"check": 1.0})
    assert await scorer.score(checked, "anything", list(_checked(False))) == (0.0, {"check": 0.0})
    # with an answer to compare too: both count
    both = Task(id="t", prompt="p", answer="yes", check="true")
    reward, parts = await scorer.score(both, "no", list(_checked(True)))
    assert (reward, parts) == (0.5, {"contains": 0.0, "check": 1.0})
    # a weight given to check is its weight
    weighted = Scorer([RewardSpec("contains"), RewardSpec("check", 3.0)])
    reward, _ = await weighted.score(both, "no", list(_checked(True)))
    assert reward == 0.75
    # a task without a check scores as it always did, check named or not
    plain = Task(id="t", prompt="p", answer="yes")
    assert await weighted.score(plain, "yes", []) == (0.25, {"contains": 1.0, "check": 0.0})
    with pytest.raises(CheckNotRunError, match="ran none"):
        await scorer.score(checked, "anything", [])


async def test_agent_lines_arrive_whole_across_reads_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = "import sys; sys.stdout.write('a' * 40000 + '\\nb\\n\\n' + 'x' * 300 + '\\nc')"
    lines: list[bytes] = []
    output = ProcessOutput(on_line=lines.append)
    code = await run_process([sys.executable, "-c", script], dict(os.environ), output)
    assert code == 0
    assert lines == [b"a" * 40000, b"b", b"", b"x" * 300, b"c"]  # 16 KiB reads, rejoined
    assert output.stdout.total == 40000 + 3 + 1 + 301 + 1
    monkeypatch.setattr(process, "LINE_LIMIT", 100)  # a line past it is cut, not buffered
    lines.clear()
    await run_process([sys.executable, "-c", script], dict(os.environ), output)
    assert lines == [b"a" * 100, b"b", b"", b"x" * 100, b"c"]


@given(st.from_regex(FILE_PATH, fullmatch=True))
def test_every_path_the_serve_schema_allows_is_taken(path: str) -> None:
    task = task_from_dict({"prompt": "p", "files": {path: ""}}, "1")
    assert task.files == {path: ""}
