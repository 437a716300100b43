"""Capture what the real CLI agents send: ``python tests/agents/capture.py OUT_DIR``.

Runs Claude Code and Codex CLI headless against ``rolltap.sim`` (a script of turns,
:mod:`rolltap.sim.script`) through a logging proxy on loopback, and writes each request
they made (method, path, headers with credentials redacted, JSON body) to
``OUT_DIR/<name>.json``, one file per run:

- ``claude_code.json``, ``codex.json``: the first turn ("Say hello in one word", answered
  with text);
- ``claude_code_loop.json``, ``codex_loop.json``: a whole tool loop: turn 1 calls the
  agent's own shell tool to write a file (Claude Code's ``Bash`` ``{"command": …}``,
  Codex's ``exec_command`` ``{"cmd": …}``), turn 2 says done. The run fails unless the
  file was written and the agent exited 0.

The fixtures in ``tests/agents/fixtures/`` were made this way; rerun it when the pinned
versions in ``.ci/run`` change. The tests use the proxy (:func:`scripted`) to see every
request an agent makes (unredacted: they never leave the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rolltap.sim import SimConfig, Simulator

if __name__ == "__main__":  # run as a script: the helpers it shares are one folder up
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from upstreams import Recorder, recording

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie"})
_TIMEOUT_S = 90.0
#: the tool loop's prompt, and the command its first turn runs: it writes hello.txt
LOOP_PROMPT = "Create hello.txt holding hi."
LOOP_COMMAND = "echo hi > hello.txt"


@asynccontextmanager
async def scripted(turns: Any) -> AsyncIterator[tuple[str, Recorder]]:
    """A simulator saying ``turns`` (a script, :mod:`rolltap.sim.script`) behind a
    :class:`Recorder`: the proxy's root URL, and the recorder."""
    async with Simulator(SimConfig(script=turns)) as sim, recording(sim.url) as served:
        yield served


def shell_call(tool: str, command: str) -> dict[str, Any]:
    """A script turn calling the agent's shell tool: Claude Code's ``Bash``
    ``{"command": …}``, or Codex's ``exec_command`` ``{"cmd": …}``."""
    key = "command" if tool == "Bash" else "cmd"
    return {"tool_call": {"name": tool, "arguments": {key: command}}}


async def run_agent(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run an agent to its end in its own process group (killed whole on a timeout);
    its exit code and output."""
    proc = await asyncio.create_subprocess_exec(
        *argv, env={"PATH": os.environ["PATH"], **env}, cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        async with asyncio.timeout(_TIMEOUT_S):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8", "replace")


def _claude(base: str, home: Path, prompt: str, loop: bool) -> tuple[list[str], dict[str, str]]:
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-capture",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    # as root, Claude Code takes no bypassPermissions; allowing Bash is enough
    tail = ["--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"]
    return ["claude", "-p", prompt, *(tail if loop else ["--output-format", "json"])], env


def _codex(base: str, home: Path, prompt: str, loop: bool) -> tuple[list[str], dict[str, str]]:
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "m"\nmodel_provider = "capture"\n\n[model_providers.capture]\n'
        f'name = "capture"\nbase_url = "{base}/v1"\nenv_key = "CAPTURE_KEY"\n'
        'wire_api = "responses"\n'
    )
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "CAPTURE_KEY": "sk-capture"}
    sandbox = ["--sandbox", "workspace-write"] if loop else []
    return ["codex", "exec", "--skip-git-repo-check", "--json", *sandbox, prompt], env


#: per agent: its fixture's name, its shell tool, how to run it
_AGENTS = {"claude_code": ("Bash", _claude), "codex": ("exec_command", _codex)}


def agent_command(
    agent: str, base: str, home: Path, prompt: str, *, loop: bool
) -> tuple[list[str], dict[str, str]]:
    """``agent``'s (``claude_code`` or ``codex``) headless command line and environment
    against ``base`` (a root URL, no ``/v1``), ``home`` its home: one turn answered in
    JSON, or a tool ``loop`` (its shell tool allowed, the events in JSON lines)."""
    return _AGENTS[agent][1](base, home, prompt, loop)


def loop_script(agent: str) -> list[dict[str, Any]]:
    """The tool loop's script: turn 1 runs :data:`LOOP_COMMAND` with ``agent``'s shell
    tool, turn 2 says done."""
    return [shell_call(_AGENTS[agent][0], LOOP_COMMAND), {"text": "done"}]


async def capture(agent: str, loop: bool, out: Path) -> None:
    """Run ``agent`` once (its first turn, or its tool ``loop``) and write its requests."""
    turns = loop_script(agent) if loop else [{"text": "Hello"}]
    prompt = LOOP_PROMPT if loop else "Say hello in one word"
    with tempfile.TemporaryDirectory() as root:
        home, work = Path(root) / "home", Path(root) / "work"
        home.mkdir()
        work.mkdir()
        async with scripted(turns) as (base, recorder):
            argv, env = agent_command(agent, base, home, prompt, loop=loop)
            rc, output = await run_agent(argv, env, work)
        written = (work / "hello.txt").is_file()
    if rc != 0 or (loop and not written):
        raise SystemExit(f"{agent}: exit {rc}, hello.txt written: {written}\n{output[-3000:]}")
    _write(out / f"{agent}{'_loop' if loop else ''}.json", recorder.requests, rc)


def _redacted(request: dict[str, Any]) -> dict[str, Any]:
    headers = {k: ("<redacted>" if k in SECRET_HEADERS else v)
               for k, v in request["headers"].items()}  # fmt: skip
    return {**request, "headers": headers}


def _write(path: Path, requests: list[dict[str, Any]], rc: int) -> None:
    data = {"exit": rc, "requests": [_redacted(r) for r in requests]}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{path}: {len(requests)} requests, exit {rc}")


async def main(out_dir: Path) -> None:
    for agent in _AGENTS:
        for loop in (False, True):
            await capture(agent, loop, out_dir)


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/agents/fixtures")
    target.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
