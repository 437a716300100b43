"""What the real-agent tests share: the scripted tool loop that solves the example tasks,
``rolltap sim --script`` as a process, every recorded request of the captured fixtures,
and what each agent's calls lose on the way to a chat upstream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agents.capture import shell_call
from clikit import argv, cli_env
from dialects.agentkit import DIALECT_OF_PATH, FIXTURES, Captured

EXAMPLES = Path(__file__).parents[2] / "examples" / "agent_tasks.jsonl"
#: the harness kinds, the binary each runs and the dialect it speaks
KINDS = {"claude-code": ("claude", "messages"), "codex": ("codex", "responses")}
#: the agents' shell tools
SHELL_TOOL = {"claude-code": "Bash", "codex": "exec_command"}
#: one command that solves each task of examples/agent_tasks.jsonl, told apart by the
#: files it starts with (the gateway's rollout ids, which key a script, are not known
#: before the run: every rollout gets the default script)
SOLVE = (
    "if [ -f greet.py ]; then "
    "printf \"def greet(name):\\n    return 'Hello, ' + name + '!'\\n\" > greet.py; "
    "elif [ -f numbers.txt ]; then sort -n -o numbers.txt numbers.txt; "
    "else printf hello > hello.txt; fi"
)
#: every fixture of tests/agents/fixtures (capture.py): first turn and tool loop
FIXTURE_NAMES = ("claude_code", "claude_code_loop", "codex", "codex_loop")

_CLAUDE_DROPS = {"context_management", "system[].cache_control",
                 "messages[].parts[].cache_control", "header:anthropic-beta",
                 "header:anthropic-version",
                 "header:anthropic-dangerous-direct-browser-access"}  # fmt: skip
_CODEX_DROPS = {"reasoning.summary", "store", "include", "prompt_cache_key", "client_metadata",
                "tools[type=namespace]", "tools[type=web_search]", "messages[].id"}  # fmt: skip
#: what each call of the tool loop loses on the way to a chat upstream (docs/translation.md),
#: by turn: Codex's second turn sends its function call and output items with ids and a status
DROPPED_ON_CHAT = {
    "claude-code": [_CLAUDE_DROPS, _CLAUDE_DROPS],
    "codex": [_CODEX_DROPS, _CODEX_DROPS | {"messages[].parts[].id", "messages[].parts[].status"}],
}


def solving_script(kind: str) -> dict[str, Any]:
    """The ``default`` script of a simulator driving ``kind`` through every example task:
    turn 1 runs :data:`SOLVE` with its shell tool, turn 2 says done."""
    return {"default": [shell_call(SHELL_TOOL[kind], SOLVE), {"text": "done"}]}


def model_calls(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The POSTs to a model route among ``requests`` (a :class:`Recorder`'s, a
    fixture's), in order."""
    return [r for r in requests if r["method"] == "POST" and _route(r["path"]) in DIALECT_OF_PATH]


def _route(path: str) -> str:
    return path.partition("?")[0]


def recorded(name: str) -> list[Captured]:
    """Every model call of the fixture ``name`` (:data:`FIXTURE_NAMES`), in order."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    agent = name.removesuffix("_loop")
    calls = [Captured(agent, DIALECT_OF_PATH[_route(r["path"])], r["path"],
                      r["headers"], r["body"]) for r in model_calls(data["requests"])]  # fmt: skip
    assert calls, f"{name}: no model call in the fixture"
    return calls


@asynccontextmanager
async def sim_process(script: dict[str, Any], directory: Path) -> AsyncIterator[str]:
    """``rolltap sim --port 0 --script FILE`` as a user runs it; its OpenAI base URL
    (``…/v1``, from the line it prints when serving). Terminated on exit."""
    path = directory / "script.json"
    path.write_text(json.dumps(script))
    proc = await asyncio.create_subprocess_exec(
        *argv("sim", "--port", "0", "--script", str(path)), env=cli_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        line = (await proc.stdout.readline()).decode()
        assert line.startswith("rolltap sim serving http://"), line
        yield line.split()[3]
    finally:
        if proc.returncode is None:
            proc.terminate()
        # read to the end, or its pipe outlives the test and warns when collected
        await proc.communicate()
