"""The built-in agent harnesses with the real CLIs (Claude Code, Codex CLI) through one
tool loop against a scripted upstream: the agent's own shell tool writes a file, the
task's check sees it. Skipped without the CLI, except under CI=true (which installs it).

The harness unit runs the agent against the upstream directly (its base URL in place of
the gateway's); ``rolltap eval`` runs it through the gateway, relaying its dialect.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agents.scripted_upstream import ScriptedUpstream, scripted_upstream
from rollouts.agentkit import process_state, until
from rolltap.rollouts import Task
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.harness import HarnessContext, answer_of, load_harness
from rolltap.rollouts.tasks import load_tasks
from rolltap.store import EventLog, Store

EXAMPLES = Path(__file__).parents[2] / "examples" / "agent_tasks.jsonl"
CLI = "from rolltap.cli.main import main; main()"
PACKAGES = {
    "claude-code": ("claude", "@anthropic-ai/claude-code"),
    "codex": ("codex", "@openai/codex"),
}
#: what each example task's scripted tool call runs (keyed by a word of its prompt)
SOLUTIONS = {
    "hello.txt": "printf hello > hello.txt",
    "greet.py": "printf \"def greet(name):\\n    return 'Hello, ' + name + '!'\\n\" > greet.py",
    "numbers.txt": "sort -n -o numbers.txt numbers.txt",
}
MARKER = "USER-CONFIG-MARKER-7f3a"
HARNESS_DIALECT = {"claude-code": "messages", "codex": "responses"}


def require(kind: str) -> None:
    """Skip without the agent's CLI, except under CI (which installs it)."""
    binary, package = PACKAGES[kind]
    variable = "ROLLTAP_CLAUDE" if kind == "claude-code" else "ROLLTAP_CODEX"
    if os.environ.get(variable) or shutil.which(binary):
        return
    message = f"{binary} is not installed (npm install -g {package})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true requires it")
    pytest.skip(message)


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


def _sent(upstream: ScriptedUpstream) -> str:
    return orjson.dumps(upstream.requests).decode()


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
async def test_one_tool_loop_writes_the_file_and_the_check_passes(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(kind)
    home, before = _user_home(tmp_path, monkeypatch)
    task = Task(id="t", prompt="-Create hello.txt", files={"seed.txt": "seed"},
                check='test "$(cat hello.txt)" = hello && test -f seed.txt')  # fmt: skip
    log = EventLog()
    async with scripted_upstream("printf hello > hello.txt", final="all done") as (base, up):
        result = answer_of(await load_harness(kind)(task, _context(base, log)))
    assert result.answer == "all done"
    calls = up.model_calls()
    assert [c["path"] for c in calls] == (["/v1/messages"] * 2 if kind == "claude-code"
                                          else ["/v1/responses"] * 2)  # fmt: skip
    auth = {c["headers"].get("x-api-key") or c["headers"].get("authorization") for c in calls}
    assert auth <= {"rollout-secret", "Bearer rollout-secret"}
    assert "-Create hello.txt" in _sent(up)  # the prompt after "--" stays the prompt
    if kind == "codex":  # what Codex says of its own settings: ours, not the user's
        for call in calls:
            meta = orjson.loads(call["headers"]["x-codex-turn-metadata"])
            assert (meta["analytics_enabled"], meta["sandbox_mode"]) == (False, "workspace-write")
    # nothing of the user's home was read, nor written
    assert MARKER not in _sent(up) and "the-users-own-key" not in _sent(up)
    assert _contents(home) == before
    check = [e.payload for e in log if e.kind == "check"]
    assert len(check) == 1 and check[0]["passed"] is True, check
    lines = [e.payload["text"] for e in log if e.payload.get("stream") == "stdout"]
    assert any("hello.txt" in line for line in lines)  # the tool call, as the agent told it


async def test_codex_sandbox_option_reaches_codex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("codex")
    _user_home(tmp_path, monkeypatch)
    task = Task(id="t", prompt="Create hello.txt", check="test -f hello.txt",
                harness=AgentOptions(sandbox="read-only"))  # fmt: skip
    log = EventLog()
    async with scripted_upstream("printf hello > hello.txt") as (base, _):
        await load_harness("codex")(task, _context(base, log))
    check = next(e.payload for e in log if e.kind == "check")
    assert check["passed"] is False  # the read-only sandbox kept it from writing


async def test_a_cancelled_claude_code_takes_its_tools_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("claude-code")
    _user_home(tmp_path, monkeypatch)
    pid_file = tmp_path / "tool.pid"
    # Claude Code starts its Bash tool in a session of its own: not in the agent's group
    command = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    async with scripted_upstream(command) as (base, _):
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


@pytest.mark.parametrize(
    ("kind", "upstream_dialect"),
    [("claude-code", "messages"), ("claude-code", "chat"), ("codex", "responses"),
     ("codex", "chat")],
)  # fmt: skip
async def test_eval_runs_the_example_tasks_through_the_gateway(
    kind: str, upstream_dialect: str, tmp_path: Path
) -> None:
    """Each agent through its own dialect relayed, and translated to a chat upstream."""
    require(kind)
    db = tmp_path / "runs.db"
    async with scripted_upstream(SOLUTIONS) as (base, upstream):
        code, out, err = await _eval(
            str(EXAMPLES), "--harness", kind, "--endpoint", base + "/v1", "--dialect",
            upstream_dialect, "--model", "m", "--store", f"sqlite:///{db}", "--json",
        )  # fmt: skip
    assert code == 0, err
    summary = orjson.loads(out)
    assert summary["statuses"] == {"completed": 3}, summary
    assert summary["reward"]["mean"] == 1.0
    calls = upstream.model_calls()
    assert len(calls) == 6  # a tool call and a final text per task
    route = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}
    assert {c["path"] for c in calls} == {route.get(upstream_dialect, "/v1/responses")}
    ids = {t.id for t in load_tasks(EXAMPLES)}
    async with await Store.open(f"sqlite:///{db}") as store:
        sessions = await store.list_sessions()
        assert {s.task["task_id"] for s in sessions} == ids
        for session in sessions:
            events = await store.events(session.id)
            kinds = [e.kind for e in events]
            assert kinds.count("model_request") == 2 and kinds.count("model_response") == 2
            requests = [e.payload for e in events if e.kind == "model_request"]
            # what the agent spoke, whatever the upstream does
            assert {r["dialect"] for r in requests} == {HARNESS_DIALECT[kind]}
            assert kinds.index("model_response") < kinds.index("check") < kinds.index("reward")
            assert next(e.payload for e in events if e.kind == "check")["passed"] is True


async def _eval(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "eval", *args, env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
