"""Fake agent binaries (``ROLLTAP_CLAUDE=/path/to/script``) and what the agent tests share."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

#: a stand-in for ``claude -p … --output-format stream-json``: one Messages call through
#: the gateway with the URL and key it was given, then what it saw, as its result
FAKE_CLAUDE = """\
import json, os, sys, urllib.request
print(json.dumps({"type": "system", "subtype": "init", "cwd": os.getcwd()}), flush=True)
print("a line that is not JSON", flush=True)
print("a warning on stderr", file=sys.stderr)
body = {"model": "x", "max_tokens": 8, "messages": [{"role": "user", "content": sys.argv[-1]}]}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=json.dumps(body).encode(),
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json",
             "anthropic-version": "2023-06-01"})
with urllib.request.urlopen(request, timeout=30) as response:
    reply = json.load(response)
with open("hello.txt", "w") as f:
    f.write("hello")
seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ),
        "given": open("given.txt").read(), "reply": reply["content"][0]["text"],
        "home_files": sorted(os.listdir(os.environ["HOME"]))}
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": json.dumps(seen)}), flush=True)
"""


def write_agent(directory: Path, name: str, body: str, *, python: bool = True) -> Path:
    """An executable ``directory/name`` running ``body`` (Python, or ``sh``)."""
    path = directory / name
    shebang = f"#!{sys.executable}\n" if python else "#!/bin/sh\n"
    path.write_text(shebang + body)
    path.chmod(0o755)
    return path


def process_state(pid: int) -> str:
    """``gone``, or the process's state letter (``Z``: a zombie, dead but not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"


async def until(predicate: Callable[[], bool], *, tries: int = 1_500) -> None:
    """Wait for what another process does (a file it writes, its exit) to show: it
    happens in that process, so there is no event of ours to wait on (~30 s at most)."""
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")
