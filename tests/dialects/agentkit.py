"""The captured requests of the real agents (tests/agents/fixtures), and a way to take a
refused field out of a body so the next one can be refused."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "agents" / "fixtures"
DIALECT_OF_PATH = {"/v1/messages": "messages", "/v1/responses": "responses",
                   "/v1/chat/completions": "chat"}  # fmt: skip
DIALECTS = ("chat", "messages", "responses")


@dataclass(frozen=True)
class Captured:
    """One POST an agent made: its dialect, headers and body."""

    agent: str
    dialect: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def fresh(self) -> dict[str, Any]:
        """A copy of the body to change."""
        return copy.deepcopy(self.body)


def captured(agent: str) -> Captured:
    """The agent's first model call (``claude_code`` or ``codex``)."""
    data = json.loads((FIXTURES / f"{agent}.json").read_text())
    for request in data["requests"]:
        path = request["path"].partition("?")[0]
        if request["method"] == "POST" and path in DIALECT_OF_PATH:
            return Captured(agent, DIALECT_OF_PATH[path], request["path"], request["headers"],
                            request["body"])  # fmt: skip
    raise AssertionError(f"{agent}: no model call in the fixture")


AGENTS = ("claude_code", "codex")
#: (agent, the dialect it is translated to)
PAIRS = [(a, t) for a in AGENTS for t in DIALECTS if t != captured(a).dialect]

_STEP = re.compile(r"([^.\[]+)|\[(\d+)\]|\[type=([^\]]+)\]")


def remove(body: dict[str, Any], param: str) -> None:
    """Take the field a 400 named out of ``body`` (a top-level field, a dotted one, a tool
    or element by its type: ``tools[type=web_search]``, a list item: ``input[3].type``
    names the item)."""
    param = re.sub(r"\.(type|role)$", "", param)
    steps = [m.groups() for m in _STEP.finditer(param)]
    parent: Any = body
    for name, index, kind in steps[:-1]:
        parent = parent[name] if name is not None else parent[int(index) if index else kind]
    name, index, kind = steps[-1]
    if kind is not None:
        parent[:] = [item for item in parent if item.get("type") != kind]
    elif index is not None:
        del parent[int(index)]
    else:
        del parent[name]
