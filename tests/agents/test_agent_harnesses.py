"""The built-in agent harnesses with the real CLIs (Claude Code, Codex CLI) through a real
tool loop against ``rolltap.sim`` with a script: the agent's own shell tool writes a file,
the task's check sees it. Skipped without the CLI, except under CI=true (which installs it).

The harness unit runs the agent against the simulator directly (its URL in place of the
gateway's, through a recording proxy that keeps every request); ``rolltap eval`` runs the
example tasks through the gateway against ``rolltap sim --script``, relaying the agent's
dialect and translating it to a chat upstream, and the store is read back as exported.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from agents.capture import scripted, shell_call
from agents.loopkit import (
    DROPPED_ON_CHAT,
    EXAMPLES,
    KINDS,
    SHELL_TOOL,
    SOLVE,
    model_calls,
    sim_process,
    solving_script,
)
from clikit import arolltap_ok, arolltap_parts
from helpers import ADMIN_HEADERS, ADMIN_TOKEN, events, register, require_agent
from rollouts.agentkit import process_state, until
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.events import EventLog
from rolltap.gateway import Gateway
from rolltap.gateway.conversation import CONVERSATION_KEYS
from rolltap.rollouts import Task
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.harness import HarnessContext, answer_of
from rolltap.rollouts.harness_loader import load_harness
from rolltap.rollouts.tasks import load_tasks

MARKER = "USER-CONFIG-MARKER-7f3a"


def _user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, bytes]]:
    """A user's home whose configuration would change what the agents send if they read
    it (memory files holding a marker, settings pointing elsewhere); and its contents."""
    home = tmp_path / "user"
    files = {
        ".claude/CLAUDE.md": MARKER,
        ".claude/settings.json": '{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}}',
        ".codex/AGENTS.md": MARKER,
        ".codex/config.toml": 'model = "elsewhere"\ndeveloper_instructions = "' + MARKER + '"\n',
    }
    for relative, content in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-users-own-key")
    monkeypatch.setenv("OPENAI_API_KEY", "the-users-own-key")
    return home, _contents(home)


def _contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _context(base: str, log: EventLog) -> HarnessContext:
    return HarnessContext(rollout_id="r1", openai_base_url=base + "/v1", anthropic_base_url=base,
                          api_key="rollout-secret", model="m", log=log)  # fmt: skip


def _loop(kind: str, command: str, final: str = "done") -> list[dict[str, Any]]:
    return [shell_call(SHELL_TOOL[kind], command), {"text": final}]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_one_tool_loop_writes_the_file_and_the_check_passes(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary, dialect = KINDS[kind]
    require_agent(binary)
    home, before = _user_home(tmp_path, monkeypatch)
    task = Task(id="t", prompt="-Create hello.txt", files={"seed.txt": "seed"},
                check='test "$(cat hello.txt)" = hello && test -f seed.txt')  # fmt: skip
    log = EventLog()
    async with scripted(_loop(kind, "printf hello > hello.txt", "all done")) as (base, up):
        result = answer_of(await load_harness(kind)(task, _context(base, log)))
    assert result.answer == "all done"
    calls = model_calls(up.requests)
    assert [c["path"].partition("?")[0] for c in calls] == [f"/v1/{dialect}"] * 2
    auth = {c["headers"].get("x-api-key") or c["headers"].get("authorization") for c in calls}
    assert auth <= {"rollout-secret", "Bearer rollout-secret"}
    sent = orjson.dumps([c["body"] for c in calls]).decode()
    assert "-Create hello.txt" in sent  # the prompt after "--" stays the prompt
    if kind == "codex":  # what Codex says of its own settings: ours, not the user's
        for call in calls:
            meta = orjson.loads(call["headers"]["x-codex-turn-metadata"])
            assert (meta["analytics_enabled"], meta["sandbox_mode"]) == (False, "workspace-write")
    # nothing of the user's home was read, nor written
    assert MARKER not in sent and "the-users-own-key" not in sent
    assert _contents(home) == before
    check = [e.payload for e in log if e.kind == "check"]
    assert len(check) == 1 and check[0]["passed"] is True, check
    lines = [e.payload["text"] for e in log if e.payload.get("stream") == "stdout"]
    assert any("hello.txt" in line for line in lines)  # the tool call, as the agent told it


async def test_codex_sandbox_option_reaches_codex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_agent("codex")
    _user_home(tmp_path, monkeypatch)
    task = Task(id="t", prompt="Create hello.txt", check="test -f hello.txt",
                harness=AgentOptions(sandbox="read-only"))  # fmt: skip
    log = EventLog()
    async with scripted(_loop("codex", "printf hello > hello.txt")) as (base, up):
        await load_harness("codex")(task, _context(base, log))
    assert len(model_calls(up.requests)) == 2  # the command ran, and its result came back
    check = next(e.payload for e in log if e.kind == "check")
    assert check["passed"] is False  # the read-only sandbox kept it from writing


async def test_a_cancelled_claude_code_takes_its_tools_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_agent("claude")
    _user_home(tmp_path, monkeypatch)
    pid_file = tmp_path / "tool.pid"
    # Claude Code starts its Bash tool in a session of its own: not in the agent's group
    command = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    async with scripted(_loop("claude-code", command)) as (base, _):
        harness = load_harness("claude-code")
        turn = harness(Task(id="t", prompt="p"), _context(base, EventLog()))
        running: asyncio.Future[Any] = asyncio.ensure_future(turn)
        try:
            await until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        finally:
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
    pid = int(pid_file.read_text())
    await until(lambda: process_state(pid) in ("gone", "Z"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("kind", "upstream_dialect"),
    [("claude-code", "messages"), ("claude-code", "chat"), ("codex", "responses"),
     ("codex", "chat")],
)  # fmt: skip
async def test_eval_runs_the_example_tasks_through_the_gateway(
    kind: str, upstream_dialect: str, tmp_path: Path
) -> None:
    """Each agent through its own dialect relayed, and translated to a chat upstream, as a
    user runs it: ``rolltap sim --script``, ``rolltap eval``, ``rolltap sessions export``."""
    binary, dialect = KINDS[kind]
    require_agent(binary)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    async with sim_process(solving_script(kind), tmp_path) as url:
        code, out, err = await arolltap_parts(
            "eval", str(EXAMPLES), "--harness", kind, "--endpoint", url, "--dialect",
            upstream_dialect, "--model", "m", "--store", store, "--json",
        )  # fmt: skip
        async with aiohttp.ClientSession() as http, http.get(url[:-3] + "/stats") as resp:
            stats = await resp.json()
    assert code == 0, err
    summary = orjson.loads(out)
    assert (summary["statuses"], summary["reward"]["mean"]) == ({"completed": 3}, 1.0), summary
    assert summary["model_errors"] == 0
    # each rollout its own script session (the gateway's X-Rolltap-Rollout), both turns used
    assert sorted(stats["script_turns"].values()) == [2, 2, 2], stats
    await arolltap_ok("sessions", "export", "--store", store, "-o", str(tmp_path / "out.jsonl"))
    exported = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert {s["session"]["task"]["task_id"] for s in exported} == {
        t.id for t in load_tasks(EXAMPLES)
    }
    for line in exported:
        session, events = line["session"], line["events"]
        assert (session["status"], session["reward"]) == ("completed", 1.0), session
        kinds = [e["kind"] for e in events if e["kind"] != "harness_output"]
        assert kinds == ["model_request", "model_response"] * 2 + ["check", "reward", "status"]
        of = {e["kind"]: e["payload"] for e in events}  # the last of each kind
        assert of["check"]["passed"] is True and of["reward"] == {"reward": 1.0, "check": 1.0}
        requests = [e["payload"] for e in events if e["kind"] == "model_request"]
        assert [(r["dialect"], r["upstream_dialect"]) for r in requests] == [
            (dialect, upstream_dialect)
        ] * 2
        dropped = [{w["dropped"] for w in r["rewrites"] if "dropped" in w} for r in requests]
        assert dropped == (DROPPED_ON_CHAT[kind] if upstream_dialect == "chat" else [set()] * 2)
        assert _tool_round(kind, requests[1]["messages"]) == SOLVE


def _tool_round(kind: str, messages: list[dict[str, Any]]) -> str:
    """The command of the one shell call the second turn carries back, with its result
    for the same call id (the agent ran it): Messages blocks, or Responses items."""
    if kind == "claude-code":
        parts = [p for m in messages if isinstance(m["content"], list) for p in m["content"]]
        (use,) = [p for p in parts if p["type"] == "tool_use"]
        (result,) = [p for p in parts if p["type"] == "tool_result"]
        assert (use["name"], result["tool_use_id"]) == ("Bash", use["id"])
        command: str = use["input"]["command"]
        return command
    (call,) = [m for m in messages if m.get("type") == "function_call"]
    (output,) = [m for m in messages if m.get("type") == "function_call_output"]
    assert (call["name"], output["call_id"]) == ("exec_command", call["call_id"])
    cmd: str = orjson.loads(call["arguments"])["cmd"]
    return cmd


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_real_agents_second_call_is_read_past_its_prefix(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's own bytes through a gateway relaying its dialect: its second call is
    read past the conversation its first sent (``/stats`` ``totals.read_past``), and the
    upstream still gets the whole history, the events the prefix and what is new."""
    binary, dialect = KINDS[kind]
    require_agent(binary)
    _user_home(tmp_path, monkeypatch)
    task = Task(id="t", prompt="-Create hello.txt", check='test "$(cat hello.txt)" = hello')
    key = CONVERSATION_KEYS[dialect]
    async with scripted(_loop(kind, "printf hello > hello.txt")) as (base, up):
        endpoint = EndpointConfig(base_url=base + "/v1", model="m", dialect=dialect)
        settings = GatewaySettings(admin_token=ADMIN_TOKEN)
        async with Gateway(endpoint, settings) as gateway, aiohttp.ClientSession() as http:
            rollout = await register(http, gateway)
            context = HarnessContext(
                rollout_id=rollout["id"], openai_base_url=rollout["openai_base_url"],
                anthropic_base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"],
                model="m", log=EventLog(),
            )  # fmt: skip
            result = answer_of(await load_harness(kind)(task, context))
            async with http.get(gateway.admin_url + "/stats", headers=ADMIN_HEADERS) as resp:
                totals = (await resp.json())["totals"]
            log = await events(http, gateway, rollout["id"])
    assert result.answer == "done"
    assert (totals["requests"], totals["read_past"]) == (2, 1), totals
    first, second = (c["body"][key] for c in model_calls(up.requests))
    requests = [e["payload"] for e in log if e["kind"] == "model_request"]
    assert requests[1]["prefix_messages"] == len(first)
    assert len(first) + len(requests[1]["messages"]) == len(second)
