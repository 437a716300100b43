"""Scripted answers: per session, a list of turns the simulator says in order.

A script drives a real agent through a real tool loop (turn 1: a call of the agent's own
shell tool; turn 2: "done"). It is JSON (``rolltap sim --script FILE``,
:attr:`SimConfig.script <rolltap.sim.SimConfig.script>`)::

    {
      "default": [
        {"tool_call": {"name": "Bash", "arguments": {"command": "echo hi > hello.txt"}}},
        {"text": "done"}
      ],
      "sessions": {
        "rollout-7": [
          {"text": "Two calls at once.",
           "tool_calls": [{"name": "Read", "arguments": {"file_path": "a.txt"}},
                          {"name": "Read", "arguments": {"file_path": "b.txt"}}]},
          {"text": "done"}
        ]
      }
    }

- **A turn** is an object with ``text`` (a string), or ``tool_call`` (one call), or
  ``tool_calls`` (a non-empty list of calls), or ``text`` with either: the text comes first
  (a chat message's ``content``, a Messages ``text`` block, a Responses ``message`` item),
  then the calls in order. A call is ``{"name": NAME, "arguments": {...}}`` (``arguments``
  a JSON object, ``{}`` when left out). The tool need not be one the request declares, and
  a request's ``tool_choice`` does not stop it: the script is what the model says.
- **Sessions.** A model call belongs to the session named by its ``X-Rolltap-Rollout``
  header (the gateway sends it on every upstream call), else its ``X-Session-ID`` header,
  else to one shared session. The n-th call of a session gets the n-th turn of
  ``sessions[id]``, or of ``default`` for a session not listed there (each session counts
  its own calls). A session neither listed nor covered by a ``default`` gets the
  simulator's ordinary generated answer.
- **After the last turn** every further call of the session is answered with the text
  ``done`` (no tool call), so an agent's turn loop always ends.
- A file that is a JSON list of turns is short for ``{"default": [...]}``.
- Which calls count: the model calls on ``/v1/chat/completions``, ``/v1/messages`` and
  ``/v1/responses`` (stream and not) whose body is valid; not token counting or the token
  routes. A call answered with an injected fault (``--fault``, ``x-sim-fault``) does not use
  its turn up: the agent's retry gets it.
- Every tool call gets its own id (``call_sim_N_I`` in chat, ``toolu_sim_N_I`` in
  Messages, ``call_sim_N_I``/``fc_sim_N_I`` in Responses; ``N`` the request's number,
  ``I`` the call's index in the turn).

Unknown keys, a turn with nothing to say, a call without a name or with non-object
arguments are refused when the script is loaded: one :class:`~rolltap.errors.ConfigError`
naming the entry (``script.json: sessions["r1"][0].tool_call.arguments: …``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rolltap.errors import ConfigError

__all__ = ["DONE", "Script", "ScriptPlayer", "ScriptTurn", "ToolCall", "load_script",
           "parse_script", "session_of"]  # fmt: skip

_TOP_KEYS = ("default", "sessions")
_TURN_KEYS = ("text", "tool_call", "tool_calls")
_CALL_KEYS = ("name", "arguments")
_FORMAT = 'expected {"default": [TURN, …], "sessions": {"ID": [TURN, …]}} or a list of turns'


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an answer: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str
    #: the id suffix a dialect puts after its prefix (``call_``, ``toolu_``, ``fc_``);
    #: ``None``: the dialect's per-request id (an answer with one generated call)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    """One scripted answer: its text (may be empty), then its tool calls (may be none)."""

    text: str
    calls: tuple[ToolCall, ...] = ()

    def numbered(self, number: int) -> ScriptTurn:
        """This turn as request ``number`` says it: each call with its own id."""
        calls = tuple(
            ToolCall(c.name, c.arguments, f"sim_{number}_{i}") for i, c in enumerate(self.calls)
        )
        return ScriptTurn(self.text, calls)


#: what a session says once its turns are used up
DONE = ScriptTurn("done")


@dataclass(frozen=True, slots=True)
class Script:
    """A validated script: the ``default`` turns (``None``: none) and per-session turns."""

    default: tuple[ScriptTurn, ...] | None
    sessions: Mapping[str, tuple[ScriptTurn, ...]]

    def turns_for(self, session: str | None) -> tuple[ScriptTurn, ...] | None:
        """The turns of ``session`` (``None``: the shared one); ``None`` when unscripted."""
        if session is not None:
            turns = self.sessions.get(session)
            if turns is not None:
                return turns
        return self.default


def session_of(headers: Mapping[str, str]) -> str | None:
    """The script session of a request: its ``X-Rolltap-Rollout`` header (the gateway's),
    else its ``X-Session-ID``; ``None`` (the shared session) without either (``headers``
    looked up as given: pass aiohttp's case-insensitive ones)."""
    return headers.get("x-rolltap-rollout") or headers.get("x-session-id") or None


class ScriptPlayer:
    """Where each session stands in a :class:`Script` (one per simulator)."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._next: dict[str | None, int] = {}

    def peek(self, session: str | None, number: int) -> ScriptTurn | None:
        """The turn the session's next call gets, ids for request ``number``; ``None``
        when the session is not scripted. Nothing is used up until :meth:`advance`."""
        turns = self._script.turns_for(session)
        if turns is None:
            return None
        at = self._next.get(session, 0)
        return (turns[at] if at < len(turns) else DONE).numbered(number)

    def advance(self, session: str | None) -> int:
        """Use up the session's current turn; returns how many it has used."""
        used = self._next.get(session, 0) + 1
        self._next[session] = used
        return used


def _bad(source: str, where: str, why: str) -> ConfigError:
    return ConfigError(f"invalid simulator script {source}: {where}: {why}")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


def _unknown(source: str, where: str, data: dict[str, Any], known: tuple[str, ...]) -> None:
    extra = [key for key in data if key not in known]
    if extra:
        allowed = ", ".join(known)
        raise _bad(source, where, f"unknown key {extra[0]!r} (allowed: {allowed})")


def _call(source: str, where: str, data: Any) -> ToolCall:
    if not isinstance(data, dict):
        raise _bad(source, where, f'a tool call is {{"name": …, "arguments": {{…}}}}, '
                   f"got {_kind(data)}")  # fmt: skip
    _unknown(source, where, data, _CALL_KEYS)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(source, f"{where}.name", f"a non-empty string is required, got {_kind(name)}")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, dict):
        raise _bad(source, f"{where}.arguments", f"must be a JSON object, got {_kind(arguments)}")
    return ToolCall(name, orjson.dumps(arguments).decode())


def _turn(source: str, where: str, data: Any) -> ScriptTurn:
    if not isinstance(data, dict):
        raise _bad(source, where, f"a turn is an object, got {_kind(data)}")
    _unknown(source, where, data, _TURN_KEYS)
    if not any(key in data for key in _TURN_KEYS):
        raise _bad(source, where, 'a turn needs "text", "tool_call" or "tool_calls"')
    if "tool_call" in data and "tool_calls" in data:
        raise _bad(source, where, 'give "tool_call" or "tool_calls", not both')
    text = data.get("text", "")
    if not isinstance(text, str):
        raise _bad(source, f"{where}.text", f"must be a string, got {_kind(text)}")
    if "tool_call" in data:
        return ScriptTurn(text, (_call(source, f"{where}.tool_call", data["tool_call"]),))
    listed = data.get("tool_calls", [])
    if not isinstance(listed, list) or ("tool_calls" in data and not listed):
        raise _bad(source, f"{where}.tool_calls", f"must be a non-empty list of calls, got "
                   f"{'an empty list' if listed == [] else _kind(listed)}")  # fmt: skip
    calls = tuple(_call(source, f"{where}.tool_calls[{i}]", c) for i, c in enumerate(listed))
    return ScriptTurn(text, calls)


def _turns(source: str, where: str, data: Any) -> tuple[ScriptTurn, ...]:
    if not isinstance(data, list):
        raise _bad(source, where, f"must be a list of turns, got {_kind(data)}")
    return tuple(_turn(source, f"{where}[{i}]", turn) for i, turn in enumerate(data))


def parse_script(data: Any, source: str = "script") -> Script:
    """Validate a script's parsed JSON (see the module); ``source`` names it in errors.

    Raises :class:`~rolltap.errors.ConfigError` naming the first bad entry.
    """
    if isinstance(data, list):
        data = {"default": data}
    if not isinstance(data, dict):
        raise _bad(source, "top level", f"{_FORMAT}, got {_kind(data)}")
    _unknown(source, "top level", data, _TOP_KEYS)
    default = _turns(source, "default", data["default"]) if "default" in data else None
    listed = data.get("sessions", {})
    if not isinstance(listed, dict):
        raise _bad(source, "sessions", f"must be an object of session id to turns, "
                   f"got {_kind(listed)}")  # fmt: skip
    sessions = {key: _turns(source, f"sessions[{orjson.dumps(key).decode()}]", turns)
                for key, turns in listed.items()}  # fmt: skip
    return Script(default, sessions)


def load_script(path: str | Path) -> Script:
    """Read and validate the script file at ``path`` (JSON, see the module).

    Raises :class:`~rolltap.errors.ConfigError` for a missing or unreadable file, JSON
    that does not parse (with its line and column), or a bad entry.
    """
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read simulator script {source}: {exc.strerror}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _bad(source, where, f"not valid JSON ({exc.msg})") from exc
    return parse_script(data, source)
