"""The rows of the translation table (read it through :mod:`rolltap.dialects.allowlist`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ROWS", "Action", "Level", "Row"]

Level = Literal["request", "message", "part", "tool", "element", "header"]
Action = Literal["mapped", "dropped", "policy"]
_ALL = ("chat", "messages", "responses")


@dataclass(frozen=True, slots=True)
class Row:
    """What a translation to one of ``targets`` does with ``dialect``'s ``field``."""

    dialect: str
    level: Level
    field: str
    action: Action
    reason: str
    targets: tuple[str, ...] = _ALL
    #: the row applies only to values this accepts (None: to every value)
    when: Callable[[Any], bool] | None = None
    #: ``when`` in words, for the docs
    cond: str = ""
    #: the parser reads the field into the canonical request: an extra of the same name
    #: (a tool list or choice the canonical model has no form for) is another row's
    parsed: bool = False


def _row(
    dialect: str, level: Level, field: str, action: Action, reason: str,
    *, to: Iterable[str] = _ALL, when: Callable[[Any], bool] | None = None, cond: str = "",
    parsed: bool = False,
) -> Row:  # fmt: skip
    targets = tuple(d for d in to if d != dialect)
    return Row(dialect, level, field, action, reason, targets, when, cond, parsed)


def _parsed(dialect: str, level: Level, fields: str, reason: str, **kw: Any) -> list[Row]:
    """Fields the parser reads into canonical ones: mapped, and documented here."""
    return _rows(dialect, level, fields, "mapped", reason, parsed=True, **kw)


def _rows(
    dialect: str, level: Level, fields: str, action: Action, reason: str,
    **kw: Any,
) -> list[Row]:  # fmt: skip
    return [_row(dialect, level, f, action, reason, **kw) for f in fields.split()]


def _unless(
    dialect: str, field: str, value: Any, cond: str, mapped: str, action: Action, reason: str
) -> list[Row]:  # fmt: skip
    """A request ``field`` that maps at ``value`` (``cond`` in words; ``mapped`` says why:
    the default, plain text) and is ``action`` at any other (``reason``)."""
    return [
        _row(dialect, "request", field, "mapped", mapped, when=_is(value), cond=cond),
        _row(dialect, "request", field, action, reason),
    ]


def _is(*values: Any) -> Callable[[Any], bool]:
    return lambda value: value in values


def _not(*values: Any) -> Callable[[Any], bool]:
    return lambda value: value not in values


def _empty(value: Any) -> bool:
    return not value


_PLAIN_TEXT = {"type": "text"}
_PLAIN = "plain text, every dialect's default"
_STRUCTURED = "structured output (JSON)"
_CACHE = "a prompt-caching hint"
_ITEM_IDS = "an item's id and status: the provider's own bookkeeping"
_SAMPLING = "a sampling setting the target has no field for"
_CHOICE = "a tool choice the target cannot express (allowed_tools, a hosted or custom tool)"
_EFFORT = "→ chat `reasoning_effort`, Messages `output_config.effort`, Responses `reasoning.effort`"

# the rows, one field each (a row written for several fields is one per field); kept as
# written, one row a line where it fits, so the table reads as a table
_CHAT = [
    *_parsed("chat", "request", "model", "the endpoint's model replaces it"),
    *_parsed("chat", "request", "messages",
             "leading system/developer messages → system; the rest in order"),
    *_rows("chat", "request", "max_tokens max_completion_tokens", "mapped",
           "→ Messages `max_tokens`, Responses `max_output_tokens`"),
    *_parsed("chat", "request", "temperature top_p stream", "the same field"),
    *_parsed("chat", "request", "top_k", "→ Messages `top_k`", to=["messages"]),
    *_parsed("chat", "request", "stop", "→ Messages `stop_sequences`", to=["messages"]),
    *_parsed("chat", "request", "user", "→ Messages `metadata.user_id`, Responses `user`"),
    *_parsed("chat", "request", "tools", "function tools → each dialect's function tools"),
    *_parsed("chat", "request", "tool_choice parallel_tool_calls",
             "→ Messages `tool_choice` (`any`, `disable_parallel_tool_use`), Responses the same"),
    *_parsed("chat", "request", "reasoning_effort",
             "→ Messages `output_config.effort` (`none`: `thinking` disabled, `minimal`: low),"
             " Responses `reasoning.effort`"),
    *_unless("chat", "n", 1, "= 1", "one choice, as every dialect answers", "policy",
             "several choices: the target answers one"),
    *_unless("chat", "response_format", _PLAIN_TEXT, "= text", _PLAIN, "policy", _STRUCTURED),
    *_rows("chat", "request", "stream_options", "dropped",
           "the stream's framing (the gateway asks a chat upstream for usage itself)"),
    *_rows("chat", "request", "logprobs top_logprobs", "policy",
           "token log-probabilities: the target returns none"),
    *_rows("chat", "request", "frequency_penalty presence_penalty logit_bias", "policy", _SAMPLING),
    *_rows("chat", "request", "store metadata", "dropped",
           "the provider's own storage of the completion and its labels"),
    *_rows("chat", "request", "prompt_cache_key", "dropped", _CACHE),
    *_rows("chat", "request", "safety_identifier service_tier", "dropped",
           "the provider's own abuse monitoring and processing tier"),
    *_rows("chat", "request", "tool_choice", "policy", _CHOICE),
    *_parsed("chat", "message", "role",
             "system/developer messages after the first turn → Messages `system` entries,"
             " Responses system/developer items, in place"),
    _row("chat", "message", "tool_calls", "mapped", "an SDK's empty echo", when=_empty,
         cond="empty"),
    _row("chat", "message", "annotations", "mapped", "an SDK's empty echo", when=_empty,
         cond="empty"),
    *_rows("chat", "message", "name", "policy", "a participant's name: the target has none"),
    *_rows("chat", "part", "index", "dropped", "a streamed tool call's position, echoed back"),
    *_rows("chat", "part", "fields", "mapped",
           "which key held the reasoning (`reasoning_content` or vLLM's `reasoning`)"),
    _row("chat", "tool", "type", "policy", "a custom (free-form) tool: the target has only"
         " JSON-schema function tools", when=_not("function"), cond="!= function"),
]  # fmt: skip

_MESSAGES = [
    *_parsed("messages", "request", "model", "the endpoint's model replaces it"),
    *_parsed("messages", "request", "messages system",
             "`system` → chat's leading system message, Responses `instructions`"),
    *_parsed("messages", "request", "max_tokens",
             "→ chat `max_tokens`, Responses `max_output_tokens`"),
    *_parsed("messages", "request", "temperature top_p stream", "the same field"),
    *_parsed("messages", "request", "top_k", "→ chat `top_k` (vLLM, llama.cpp)", to=["chat"]),
    *_parsed("messages", "request", "stop_sequences", "→ chat `stop`", to=["chat"]),
    *_parsed("messages", "request", "tools", "custom tools (`input_schema`) → function tools"),
    *_parsed("messages", "request", "tool_choice",
             "`auto`/`any`/`tool`/`none` → `auto`/`required`/a function/`none`;"
             " `disable_parallel_tool_use` → `parallel_tool_calls` (negated)"),
    *_parsed("messages", "request", "metadata.user_id",
             "→ chat and Responses `user` (kept as sent, a JSON string included)"),
    *_rows("messages", "request", "metadata.*", "dropped", "labels for the provider's own use"),
    _row("messages", "request", "thinking.type", "mapped",
         "`enabled` with a budget: see `thinking.budget_tokens`; `adaptive` alone maps to"
         " nothing (the model decides)", when=_is("enabled", "adaptive"),
         cond="= enabled, adaptive"),
    _row("messages", "request", "thinking.type", "dropped",
         "reasoning off has no portable spelling; the upstream model's default applies",
         when=_is("disabled"), cond="= disabled"),
    *_rows("messages", "request", "thinking.budget_tokens", "mapped",
           "→ an effort when `output_config.effort` is not set: under 4096 low, under 16384"
           f" medium, else high ({_EFFORT})"),
    *_rows("messages", "request", "thinking.display", "dropped",
           "presentation: whether thinking comes back summarized or not at all"),
    *_rows("messages", "request", "output_config.effort", "mapped",
           _EFFORT + " (`max` → `xhigh`)"),
    *_rows("messages", "request", "output_config.format", "policy", _STRUCTURED),
    *_rows("messages", "request", "context_management", "dropped",
           "the provider's own context editing (it clears old thinking or tool results on"
           " its side); the target gets the whole conversation"),
    *_rows("messages", "request", "service_tier inference_geo", "dropped",
           "the provider's own processing tier and region"),
    *_rows("messages", "request", "container mcp_servers", "policy",
           "a code-execution container or MCP servers the provider runs"),
    *_rows("messages", "request", "tool_choice", "policy", _CHOICE),
    *_parsed("messages", "message", "role",
             "`system` entries inside `messages` (Anthropic's mid-conversation system beta) →"
             " chat system messages, Responses system items, in place"),
    *_rows("messages", "message", "cache_control", "dropped", _CACHE),
    *_rows("messages", "part", "cache_control", "dropped", _CACHE),
    *_rows("messages", "part", "citations", "dropped",
           "presentation: where a text quotes its sources"),
    _row("messages", "part", "type", "dropped",
         "Anthropic's encrypted thinking: opaque to another provider",
         when=_is("redacted_thinking"), cond="= redacted_thinking"),
    *_rows("messages", "tool", "cache_control", "dropped", _CACHE),
    _row("messages", "tool", "type", "mapped", "a custom tool: a function tool",
         when=_is("custom"), cond="= custom"),
    _row("messages", "tool", "type", "policy",
         "an Anthropic server tool (web search, bash, text editor, computer, code execution):"
         " run by the provider, which a translated call does not reach", cond="!= custom"),
]  # fmt: skip

_RESPONSES = [
    *_parsed("responses", "request", "model", "the endpoint's model replaces it"),
    *_parsed("responses", "request", "input instructions",
             "`instructions` and leading plain system/developer items → system; items in order"),
    *_parsed("responses", "request", "max_output_tokens", "→ `max_tokens`"),
    *_parsed("responses", "request", "temperature top_p stream user", "the same field"),
    *_parsed("responses", "request", "tools", "function tools → each dialect's"),
    *_parsed("responses", "request", "tool_choice parallel_tool_calls",
             "→ chat the same, Messages `tool_choice` (`any`, `disable_parallel_tool_use`)"),
    *_rows("responses", "request", "reasoning.effort", "mapped",
           "→ chat `reasoning_effort`, Messages `output_config.effort`"),
    *_rows("responses", "request", "reasoning.summary reasoning.generate_summary", "dropped",
           "presentation: whether reasoning summaries come back"),
    *_rows("responses", "request", "store", "dropped",
           "the provider's own storage of the response"),
    *_rows("responses", "request", "include", "dropped",
           "extra output the provider adds (encrypted reasoning, sources, logprobs)"),
    *_rows("responses", "request", "prompt_cache_key prompt_cache_retention", "dropped", _CACHE),
    *_rows("responses", "request", "client_metadata metadata", "dropped",
           "labels for the client's and the provider's own use"),
    *_rows("responses", "request", "safety_identifier service_tier", "dropped",
           "the provider's own abuse monitoring and processing tier"),
    *_unless("responses", "text.format", _PLAIN_TEXT, "= text", _PLAIN, "policy", _STRUCTURED),
    *_unless("responses", "text.verbosity", "medium", "= medium", "the default", "dropped",
             "presentation: how long the answer runs"),
    *_unless("responses", "truncation", "disabled", "= disabled", "the default", "dropped",
             "the provider's own truncation of a long context; the target gets it whole"),
    *_unless("responses", "background", False, "= false", "the default", "policy",
             "a response run in the background"),
    *_rows("responses", "request", "previous_response_id conversation", "policy",
           "a conversation the provider stores: the target never saw it"),
    *_rows("responses", "request", "max_tool_calls top_logprobs prompt", "policy",
           "a setting the target has no field for"),
    *_rows("responses", "request", "tool_choice", "policy", _CHOICE),
    *_parsed("responses", "message", "role",
             "system/developer items → chat `system` messages (open-model chat templates know"
             " no developer role), Messages `system` (leading) or `system` entries, in place"),
    *_rows("responses", "message", "id status", "dropped", _ITEM_IDS),
    *_rows("responses", "part", "id status item", "dropped", _ITEM_IDS),
    *_rows("responses", "part", "summary content", "mapped", "reasoning text"),
    _row("responses", "part", "annotations", "mapped", "an empty echo", when=_empty,
         cond="empty"),
    _row("responses", "part", "logprobs", "mapped", "an empty echo", when=_empty, cond="empty"),
    _row("responses", "part", "type", "mapped", "a text's spelling",
         when=_is("input_text", "output_text", "refusal"),
         cond="= input_text, output_text, refusal"),
    _row("responses", "tool", "type", "policy",
         "a tool namespace: its function tools are not flattened, as a call of one would come"
         " back without the namespace the agent routes it by", when=_is("namespace"),
         cond="= namespace"),
    _row("responses", "tool", "type", "policy",
         "a hosted tool (web search, file search, computer use, code interpreter, MCP, image"
         " generation, local shell) or a custom tool: run by the provider or free-form",
         cond="!= function"),
]  # fmt: skip

_ANY = [
    _row("any", "request", "seed", "policy", "the target has no seed",
         to=["messages", "responses"]),
    _row("any", "request", "stop", "policy", "Responses has no stop sequences", to=["responses"]),
    _row("any", "request", "top_k", "policy", "Responses has no top_k", to=["responses"]),
    _row("any", "message", "role", "mapped",
         "a developer text → Messages system text (Anthropic's system plays both parts);"
         " → chat system (open-model templates know no developer role)",
         to=["messages", "chat"], cond="= developer", parsed=True),
    _row("any", "part", "signature", "dropped",
         "a reasoning signature or encrypted reasoning: opaque to another provider"),
    _row("any", "part", "is_error", "dropped",
         "a tool result's error flag: neither has one (the result's text says what failed)",
         to=["chat", "responses"]),
    _row("any", "part", "detail", "dropped", "an image's resolution hint", to=["messages"]),
    _row("any", "part", "image", "policy", "an image in a tool result: chat's carry text only",
         to=["chat"], cond="in a tool result or system text"),
    _row("any", "part", "reasoning", "policy", "a second reasoning text in one assistant"
         " message: chat has one slot", to=["chat"]),
    _row("any", "element", "(any)", "policy",
         "a block, item, part or role with no canonical form (Messages `document` or"
         " `server_tool_use` blocks, Responses `web_search_call` or `custom_tool_call` items,"
         " chat `function` messages): left out whole"),
    _row("messages", "header", "anthropic-*", "dropped",
         "Anthropic's API version and beta flags", to=["chat", "responses"]),
    _row("chat", "header", "openai-*", "dropped", "OpenAI's beta, organization and project"
         " headers", to=["messages"]),
    _row("responses", "header", "openai-*", "dropped", "OpenAI's beta, organization and"
         " project headers", to=["messages"]),
]  # fmt: skip

ROWS: tuple[Row, ...] = (*_CHAT, *_MESSAGES, *_RESPONSES, *_ANY)
