"""Hypothesis strategies for canonical requests and responses a dialect can express.

:data:`CAPS` says per dialect what its wire format can carry; :func:`requests` and
:func:`responses` draw only canonical values in that dialect's normal form (the form
its parser produces), so ``to_canonical(from_canonical(x)) == x`` must hold. The
intersection of two dialects' caps (``a & b``) draws what both express.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import orjson
from hypothesis import strategies as st

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Response,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.dialects.chat import dialect as chat_canonical
from rolltap.dialects.messages import dialect as anthropic_messages
from rolltap.dialects.responses import dialect as openai_responses

MODULES: dict[str, Any] = {
    "chat": chat_canonical,
    "messages": anthropic_messages,
    "responses": openai_responses,
}
PORTABLE = {"role", "strict", "detail"}


@dataclass(frozen=True)
class Caps:
    """What one dialect's requests and responses can carry (True: it can)."""

    stop: bool = True
    seed: bool = True
    top_k: bool = True
    no_max_tokens: bool = True
    developer: bool = True  # a developer system text; a system/developer message later on
    empty_user: bool = True
    empty_assistant: bool = True
    adjacent_assistant: bool = True
    empty_schema: bool = True
    tool_images: bool = True
    free_order: bool = True  # assistant parts in any order, several reasoning parts
    is_error: bool = True
    image_detail: bool = True
    bare_base64: bool = True  # an inline image without a media type
    any_arguments: bool = True  # tool-call arguments that are not a compact JSON object
    # responses
    stop_sequence: bool = True
    free_stop: bool = True  # end_turn/tool_use independent of tool calls
    unknown_usage: bool = True  # cache/reasoning counts may be None
    reasoning_tokens: bool = True

    def __and__(self, other: Caps) -> Caps:
        return Caps(
            **{f.name: getattr(self, f.name) and getattr(other, f.name) for f in fields(self)}
        )


CAPS: dict[str, Caps] = {
    "chat": Caps(
        tool_images=False, free_order=False, is_error=False, adjacent_assistant=True, free_stop=True
    ),
    "messages": Caps(
        seed=False,
        no_max_tokens=False,
        developer=False,
        empty_user=False,
        empty_schema=False,
        image_detail=False,
        bare_base64=False,
        any_arguments=False,
        reasoning_tokens=False,
    ),
    "responses": Caps(
        stop=False,
        seed=False,
        top_k=False,
        empty_user=True,
        empty_assistant=False,
        adjacent_assistant=False,
        is_error=False,
        stop_sequence=False,
        free_stop=False,
        unknown_usage=False,
    ),
}

# --- atoms -----------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=12)  # no lone surrogates
names = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=10)
json_scalars = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | texts
json_objects = st.dictionaries(names, json_scalars, max_size=3)


def images(caps: Caps) -> st.SearchStrategy[Image]:
    b64 = st.text("ABCDEFGHIJ0123456789+/=", min_size=1, max_size=12)
    media = st.sampled_from(["image/png", "image/jpeg"])
    inline = st.builds(
        Image, st.just("base64"), b64, media if not caps.bare_base64 else st.none() | media
    )
    urls = st.builds(Image, st.just("url"), st.builds("https://img.test/{}.png".format, names))
    base = inline | urls
    if caps.image_detail:
        detail = st.sampled_from([{}, {"detail": "low"}, {"detail": "high"}])
        return st.builds(lambda i, d: replace(i, extra=d), base, detail)
    return base


def arguments(caps: Caps) -> st.SearchStrategy[str]:
    compact = json_objects.map(lambda o: orjson.dumps(o).decode())
    return compact | texts if caps.any_arguments else compact


def tool_calls(caps: Caps) -> st.SearchStrategy[ToolCall]:
    return st.builds(ToolCall, ids, names, arguments(caps))


def reasonings(signed: bool) -> st.SearchStrategy[Reasoning]:
    return st.builds(Reasoning, texts, ids if signed else st.none())


def user_messages(caps: Caps) -> st.SearchStrategy[Message]:
    parts = st.lists(
        texts.map(Text) | images(caps), min_size=0 if caps.empty_user else 1, max_size=3
    )
    plain = st.builds(lambda p: Message("user", tuple(p)), parts)
    if not caps.developer:
        return plain
    marked = st.builds(
        lambda p, r: Message("user", tuple(Text(t) for t in p), {"role": r}),
        st.lists(texts, min_size=1, max_size=2),
        st.sampled_from(["system", "developer"]),
    )
    return plain | marked


def assistant_messages(caps: Caps, signed: bool = False) -> st.SearchStrategy[Message]:
    low = 0 if caps.empty_assistant else 1
    if caps.free_order:
        part = texts.map(Text) | tool_calls(caps) | reasonings(signed)
        return st.lists(part, min_size=low, max_size=4).map(
            lambda p: Message("assistant", tuple(p))
        )

    def chat_order(r: list[Reasoning], t: list[str], c: list[ToolCall]) -> Message:
        return Message("assistant", (*r, *(Text(x) for x in t), *c))

    msgs = st.builds(
        chat_order,
        st.lists(reasonings(False), max_size=1),
        st.lists(texts, max_size=2),
        st.lists(tool_calls(caps), max_size=2),
    )
    return msgs.filter(lambda m: len(m.parts) >= low)


def tool_messages(caps: Caps) -> st.SearchStrategy[Message]:
    content = st.lists(
        texts.map(Text) | images(caps) if caps.tool_images else texts.map(Text),
        min_size=1,
        max_size=2,
    )
    result = st.builds(
        lambda i, c, e: ToolResult(i, tuple(c), e),
        ids,
        content,
        st.booleans() if caps.is_error else st.just(False),
    )
    return st.lists(result, min_size=1, max_size=3).map(lambda r: Message("tool", tuple(r)))


def _normal(messages: list[Message], caps: Caps) -> bool:
    """Dialect-independent normal form: tool turns never adjacent, the first message is
    not a marked system message (it would parse as the system prompt)."""
    if messages and "role" in messages[0].extra:
        return False
    for a, b in itertools.pairwise(messages):
        if a.role == b.role == "tool":
            return False
        if a.role == b.role == "assistant" and not caps.adjacent_assistant:
            return False
    return True


def conversations(caps: Caps, signed: bool = False) -> st.SearchStrategy[tuple[Message, ...]]:
    message = user_messages(caps) | assistant_messages(caps, signed) | tool_messages(caps)
    return st.lists(message, min_size=1, max_size=5).filter(lambda m: _normal(m, caps)).map(tuple)


def tools(caps: Caps) -> st.SearchStrategy[Tool]:
    schema = st.builds(
        lambda p: {"type": "object", "properties": p},
        st.dictionaries(names, st.just({"type": "string"}), max_size=2),
    )
    params: st.SearchStrategy[dict[str, Any]] = (
        st.just({}) | schema if caps.empty_schema else schema
    )
    return st.builds(
        Tool, names, st.none() | texts, params, st.sampled_from([{}, {"strict": True}])
    )


def tool_choices() -> st.SearchStrategy[ToolChoice]:
    parallel = st.none() | st.booleans()
    plain = st.builds(
        ToolChoice, st.sampled_from(["auto", "none", "required"]), st.none(), parallel
    )
    return plain | st.builds(lambda n, p: ToolChoice("tool", n, p), names, parallel)


def system_texts(caps: Caps) -> st.SearchStrategy[tuple[Text, ...]]:
    marks = st.sampled_from([{}, {"role": "developer"}]) if caps.developer else st.just({})
    return st.lists(st.builds(Text, texts, marks), max_size=3).map(tuple)


def _opt(allowed: bool, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy if allowed else st.none()


def requests(caps: Caps, signed: bool = False) -> st.SearchStrategy[Request]:
    """Canonical requests in the normal form of every dialect ``caps`` allows."""
    unit = st.floats(0, 1, allow_nan=False)
    max_tokens = st.integers(1, 10_000)
    return st.builds(
        Request,
        messages=conversations(caps, signed),
        model=st.none() | names,
        system=system_texts(caps),
        tools=st.lists(tools(caps), max_size=2).map(tuple),
        tool_choice=st.none() | tool_choices(),
        max_tokens=st.none() | max_tokens if caps.no_max_tokens else max_tokens,
        temperature=st.none() | unit,
        top_p=st.none() | unit,
        top_k=_opt(caps.top_k, st.integers(1, 100)),
        stop=st.lists(texts, max_size=2).map(tuple) if caps.stop else st.just(()),
        seed=_opt(caps.seed, st.integers(0, 2**31)),
        stream=st.booleans(),
        user=st.none() | names,
    )


R = TypeVar("R", Request, Response)


def with_origin(x: R, dialect: str) -> R:
    """``x`` with ``origin`` set as the parsers set it: when anything only ``dialect``
    understands is there (a non-portable extra, a reasoning signature)."""
    return replace(x, origin=dialect if _bears(x) else None)


def _bears(x: Any) -> bool:
    if isinstance(x, Request):
        objs: list[Any] = [*x.system, *x.tools, *x.messages]
        return bool(x.extra) or any(_bears(o) for o in objs)
    if isinstance(x, Response):
        return bool(x.extra) or any(_bears(p) for p in x.parts)
    if any(k not in PORTABLE for k in x.extra):
        return True
    if isinstance(x, Message):
        return any(_bears(p) for p in x.parts)
    if isinstance(x, ToolResult):
        return any(_bears(c) for c in x.content)
    return isinstance(x, Reasoning) and x.signature is not None
