"""Run ``rolltap`` as a user does: a separate process, its exit code and its output."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).parent
REPO = TESTS.parent
TASKS = str(REPO / "examples" / "patterns.jsonl")


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI process: this checkout's sources and the tests' modules
    (harnesses loaded by ``module:function``) on the path."""
    paths = [str(REPO / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def argv(*args: str, block: tuple[str, ...] = ()) -> list[str]:
    """``python -m rolltap ARGS``; with ``block``, as if those modules were not installed
    (``None`` in ``sys.modules`` makes their import fail and ``find_spec`` say absent)."""
    if not block:
        return [sys.executable, "-m", "rolltap", *args]
    code = (
        "import sys\n"
        f"for name in {list(block)!r}:\n    sys.modules[name] = None\n"
        "from rolltap.cli.main import main\nmain()\n"
    )
    return [sys.executable, "-c", code, *args]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error [")]


def rolltap(*args: str, block: tuple[str, ...] = (), cwd: Path | None = None) -> Outcome:
    """Run the CLI to the end (blocking: only for commands that need no server here)."""
    done = subprocess.run(
        argv(*args, block=block), capture_output=True, text=True, env=cli_env(), cwd=cwd,
        timeout=50, check=False,
    )  # fmt: skip
    return Outcome(done.returncode, done.stdout, done.stderr)


async def arolltap(
    *args: str, block: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Outcome:
    """:func:`rolltap` without blocking the loop (for a simulator served by this test)."""
    proc = await asyncio.create_subprocess_exec(
        *argv(*args, block=block), env=cli_env(**(env or {})),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return Outcome(proc.returncode, out.decode(), err.decode())


async def arolltap_parts(*args: str) -> tuple[int, str, str]:
    """:func:`arolltap` as ``(exit code, stdout, stderr)``."""
    done = await arolltap(*args)
    return done.code, done.stdout, done.stderr


async def arolltap_ok(*args: str) -> str:
    """:func:`arolltap` that must exit 0; its output (stdout and stderr)."""
    done = await arolltap(*args)
    assert done.code == 0, done.output
    return done.output


def assert_one_line_error(outcome: Outcome, exit_code: int, code: str) -> str:
    """The run exited ``exit_code`` with exactly one ``error [code]`` line (maybe a hint
    after it) and no traceback; that line."""
    assert "Traceback" not in outcome.output, outcome.output
    assert outcome.code == exit_code, outcome.output
    lines = outcome.error_lines()
    assert len(lines) == 1, outcome.output
    assert lines[0].startswith(f"error [{code}] "), outcome.output
    after = outcome.stderr.splitlines()
    rest = after[after.index(lines[0]) + 1 :]
    assert all(line.startswith("hint: ") for line in rest), outcome.output
    return lines[0]
