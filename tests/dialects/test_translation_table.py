"""The translation table: the docs show it, the parsers agree with it, and the real agents'
requests translate to every other dialect as it says (dropped and recorded under "drop",
one 400 per inexpressible field under "refuse")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dialects.agentkit import AGENTS, DIALECTS, PAIRS, captured, remove
from rolltap.dialects.allowlist import ROWS, Level, lookup, markdown
from rolltap.dialects.chat import parse as _chat_parse
from rolltap.dialects.messages import parse as _messages_parse
from rolltap.dialects.registry import get_dialect
from rolltap.dialects.responses import parse as _responses_parse
from rolltap.dialects.translate import translate_request
from rolltap.errors import InvalidRequestError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "translation.md"

#: what each captured call loses on the way to each other dialect, by the table
DROPPED = {
    "claude_code": {"context_management", "system[].cache_control",
                    "messages[].parts[].cache_control"},
    "codex": {"reasoning.summary", "store", "include", "prompt_cache_key", "client_metadata",
              "messages[].id", "tools[type=namespace]", "tools[type=web_search]"},
}  # fmt: skip
#: of those, the ones the policy decides: under "refuse" each is a 400, in this order
REFUSED = {"claude_code": [], "codex": ["tools[type=namespace]", "tools[type=web_search]"]}


def test_the_docs_show_the_table() -> None:
    text = DOCS.read_text()
    start = text.index("<!-- table:")
    table = text[text.index("\n", start) + 1 : text.index("<!-- end of table -->")]
    assert table == markdown(), (
        "docs/translation.md is out of date: paste rolltap.dialects.allowlist.markdown()"
    )


@pytest.mark.parametrize(
    ("dialect", "parser"),
    [("chat", _chat_parse), ("messages", _messages_parse), ("responses", _responses_parse)],
)
def test_every_field_a_parser_reads_is_a_mapped_row(dialect: str, parser: Any) -> None:
    """The table names every field the parser reads (as this dialect's, or as a canonical
    field some target lacks: ``seed``), and claims no mapping the parser does not make."""
    rows = [r for r in ROWS if r.dialect in (dialect, "any") and r.level == "request"]
    named = {r.field.partition(".")[0] for r in rows}
    parsed = {r.field.partition(".")[0] for r in rows if r.parsed}
    known = set(parser._KNOWN)
    assert known <= named, known - named
    assert parsed <= known, parsed - known
    assert all(r.action == "mapped" for r in ROWS if r.parsed)


def _names(value: Any) -> set[str]:
    """Every key and every ``type`` value in a JSON body (not its texts, nor the tools'
    parameter schemas, whose property names are the tools' own)."""
    out: set[str] = set()
    if isinstance(value, dict):
        out |= set(value)
        if isinstance(value.get("type"), str):
            out.add(value["type"])
        for key, inner in value.items():
            if key not in ("parameters", "input_schema"):
                out |= _names(inner)
    elif isinstance(value, list):
        for inner in value:
            out |= _names(inner)
    return out


def _translated(agent: str, target: str) -> tuple[dict[str, Any], set[str]]:
    call = captured(agent)
    out = translate_request(call.fresh(), call.dialect, target)
    # what the target's own validation accepts: a body its upstream can take
    get_dialect(target).validate_request(orjson.dumps(out.body))
    return out.body, {d.path for d in out.dropped}


@pytest.mark.parametrize(("agent", "target"), PAIRS)
def test_a_captured_call_translates_under_drop_saying_what_it_left_out(
    agent: str, target: str
) -> None:
    body, dropped = _translated(agent, target)
    assert dropped == DROPPED[agent]
    names = _names(body)
    for gone in ("cache_control", "context_management", "prompt_cache_key", "client_metadata",
                 "web_search", "namespace", "id", "store", "include", "thinking"):  # fmt: skip
        assert gone not in names, gone


def test_claude_code_in_chat() -> None:
    call = captured("claude_code")
    body, _ = _translated("claude_code", "chat")
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "system"]  # the system entry where it stood
    system_texts = [b["text"] for b in call.body["system"]]
    assert [p["text"] for p in body["messages"][0]["content"]] == system_texts
    assert body["messages"][2]["content"] == call.body["messages"][1]["content"]
    assert body["reasoning_effort"] == "high"  # output_config.effort; adaptive alone: nothing
    assert body["user"] == call.body["metadata"]["user_id"]
    assert (body["max_tokens"], body["stream"]) == (64000, True)
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == [t["name"] for t in call.body["tools"]]
    assert not {"thinking", "output_config", "metadata", "system"} & body.keys()


def test_claude_code_in_responses() -> None:
    call = captured("claude_code")
    body, _ = _translated("claude_code", "responses")
    assert body["instructions"] == call.body["system"][0]["text"]
    roles = [i["role"] for i in body["input"]]
    assert roles == ["system", "user", "system"]  # two system texts, the turn, the entry
    assert body["input"][2]["content"] == call.body["messages"][1]["content"]
    assert body["reasoning"] == {"effort": "high"}
    assert (body["max_output_tokens"], body["user"]) == (64000, call.body["metadata"]["user_id"])


def test_codex_in_chat() -> None:
    call = captured("codex")
    body, _ = _translated("codex", "chat")
    # developer items in place, as system messages (open-model templates know no developer)
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user", "user"]
    first = call.body["input"][0]["content"][0]["text"]
    assert body["messages"][0]["content"] == first
    functions = [t["name"] for t in call.body["tools"] if t["type"] == "function"]
    assert [t["function"]["name"] for t in body["tools"]] == functions
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("auto", True)
    assert "reasoning_effort" not in body  # reasoning.summary only: nothing to map
    assert not {"reasoning", "store", "include", "input"} & body.keys()


def test_codex_in_messages() -> None:
    call = captured("codex")
    body, _ = _translated("codex", "messages")
    developer = [p["text"] for item in call.body["input"][:2] for p in item["content"]]
    assert [b["text"] for b in body["system"]] == developer  # leading: the system prompt
    assert [m["role"] for m in body["messages"]] == ["user", "user"]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": False}
    assert all("input_schema" in t for t in body["tools"]) and len(body["tools"]) == 7


def _refused(body: dict[str, Any], source: str, target: str) -> str | None:
    """The field a strict translation refuses (None: it translates)."""
    try:
        translate_request(body, source, target, unsupported="refuse")
    except InvalidRequestError as exc:
        error = exc
    else:
        return None
    assert error.status == 400 and error.field is not None
    return error.field


@pytest.mark.parametrize(("agent", "target"), PAIRS)
def test_refuse_names_each_inexpressible_field_once(agent: str, target: str) -> None:
    call = captured(agent)
    body, refused = call.fresh(), []
    for _ in range(20):
        field = _refused(body, call.dialect, target)
        if field is None:
            break
        assert field not in refused  # taken out: never named twice
        refused.append(field)
        remove(body, field)
    assert refused == REFUSED[agent]
    # each is one of the fields "drop" records, and dropping them all is what refuse lets by
    assert set(refused) <= DROPPED[agent]
    kept = translate_request(body, call.dialect, target, unsupported="refuse")
    assert {d.path for d in kept.dropped} == DROPPED[agent] - set(refused)


@pytest.mark.parametrize("agent", AGENTS)
def test_no_translation_within_a_dialect(agent: str) -> None:
    call = captured(agent)
    body = call.fresh()
    out = translate_request(body, call.dialect, call.dialect, unsupported="refuse")
    assert out.body is body and out.dropped == []


def _action(dialect: str, level: Level, field: str, target: str, value: Any = None) -> str:
    row = lookup(dialect, level, field, target, value)
    return "none" if row is None else row.action


def test_the_table_decides_by_dialect_level_field_and_value() -> None:
    assert _action("messages", "request", "context_management", "chat") == "dropped"
    assert _action("messages", "request", "output_config.format", "chat") == "policy"
    assert _action("messages", "tool", "type", "chat", "web_search_20250305") == "policy"
    assert _action("messages", "tool", "type", "chat", "custom") == "mapped"
    assert _action("any", "request", "top_k", "responses") == "policy"
    assert _action("any", "request", "top_k", "chat") == "none"  # chat has top_k
    # a parsed row never decides an extra of the same name
    assert _action("chat", "request", "tool_choice", "messages") == "policy"
    # rows name known dialects, and never their own (a relay is no translation)
    assert all(r.dialect in (*DIALECTS, "any") for r in ROWS)
    assert all(d in DIALECTS and d != r.dialect for r in ROWS for d in r.targets)
