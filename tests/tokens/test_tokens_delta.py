"""Prefix consistency: each turn's prompt extends the previous prompt + sampled ids exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rolltap.dialects.canonical import Message, Reasoning, Request, Text, Tool, ToolCall, ToolResult
from rolltap.tokens import RenderedPrompt, Renderer, request_to_template
from tokens.tokkit import build_tokenizer_dir

ADD = Tool("add", "Add two numbers.", {"type": "object", "properties": {"a": {}, "b": {}}})
SYSTEM = (Text("You are a calculator agent."),)


@pytest.fixture(scope="module")
def renderer(tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    return Renderer.from_pretrained(build_tokenizer_dir(tmp_path_factory.mktemp("tok")))


class Loop:
    """A harness + model stand-in: canonical conversation, sampled ids, rendered prompts."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.messages: list[Message] = [Message("user", (Text("Add the numbers 1 to 10."),))]
        self.prompt = renderer.render_conversation(*self.template())

    def template(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        return request_to_template(Request(tuple(self.messages), system=SYSTEM, tools=(ADD,)))

    def sample(self, text: str) -> list[int]:
        """What the model 'sampled': ids of ``text`` (as a real model's would decode to)."""
        return self.renderer.encode(text)

    def step(self, completion: list[int], *reply: Message) -> RenderedPrompt:
        previous = self.prompt
        self.messages.extend(reply)
        self.prompt = self.renderer.render_messages_delta(previous, completion, *self.template())
        return self.prompt


def _call_text(n: int, *, compact: bool) -> str:
    if compact:  # the model's spacing differs from the template's tojson
        return f'<tool_call>\n{{"name":"add","arguments":{{"a":{n},"b":1}}}}\n</tool_call>'
    return f'<tool_call>\n{{"name": "add", "arguments": {{"a": {n}, "b": 1}}}}\n</tool_call>'


def test_ten_turn_tool_loop_extends_every_prompt_exactly(renderer: Renderer) -> None:
    loop = Loop(renderer)
    respelled = False  # once the model's text differs from the template's, it stays so
    for n in range(10):
        # three kinds of completions: ends in <|im_end|>; stops short of it (the server
        # did not return the EOS id); spelled differently from the template's tojson
        style = n % 3
        text = _call_text(n, compact=style == 2) + ("" if style == 1 else "<|im_end|>")
        completion = loop.sample(text)
        call = ToolCall(f"call_{n}", "add", f'{{"a": {n}, "b": 1}}')
        previous = loop.prompt
        prompt = loop.step(
            completion,
            Message("assistant", (call,)),
            Message("tool", (ToolResult(call.id, (Text(str(n + 1)),)),)),
        )
        head = len(previous.ids) + len(completion)
        assert prompt.extended and prompt.reason is None, n
        assert prompt.ids[:head] == previous.ids + tuple(completion), n
        assert prompt.ids[head:] == prompt.new_ids
        tail = "<|im_end|>\n" if style == 1 else "\n"
        turn = f"<|im_start|>tool\n{n + 1}<|im_end|>\n<|im_start|>assistant\n"
        assert renderer.decode(prompt.new_ids) == tail + turn, n
        respelled = respelled or style == 2
        # while the sampled text is the template's own, the ids spell the rendered text
        assert (renderer.decode(prompt.ids) == prompt.text) is not respelled, n
    final = loop.sample("The total is 55.<|im_end|>")
    previous = loop.prompt
    last = loop.step(final, Message("assistant", (Text("The total is 55."),)))
    assert last.extended  # a reply with nothing after it: the new ids are the tail + gen prompt
    assert last.ids[: len(previous.ids) + len(final)] == previous.ids + tuple(final)
    assert renderer.decode(last.new_ids) == "\n<|im_start|>assistant\n"


def test_tail_supplies_the_end_marker_the_ids_stopped_short_of(renderer: Renderer) -> None:
    loop = Loop(renderer)
    completion = loop.sample("Let me add.")
    prompt = loop.step(
        completion,
        Message("assistant", (Text("Let me add."),)),
        Message("user", (Text("Go on."),)),
    )
    assert prompt.extended
    assert renderer.decode(prompt.new_ids).startswith("<|im_end|>\n<|im_start|>user\nGo on.")
    assert renderer.decode(prompt.ids) == prompt.text


def test_history_rewrite_is_detected_and_rendered_in_full(renderer: Renderer) -> None:
    loop = Loop(renderer)
    completion = loop.sample("Sure.<|im_end|>")
    loop.messages.append(Message("assistant", (Text("Sure."),)))
    loop.messages[0] = Message("user", (Text("Add the numbers 1 to 5."),))  # edited turn 1
    prompt = loop.step(completion, Message("user", (Text("Now go."),)))
    assert (prompt.extended, prompt.reason) == (False, "history_rewritten")
    assert list(prompt.ids) == renderer.render_prompt(*loop.template())
    assert prompt.new_ids == prompt.ids
    # the next turn extends the full render again
    nxt = loop.step(loop.sample("Ok.<|im_end|>"), Message("assistant", (Text("Ok."),)))
    assert nxt.extended and nxt.ids[: len(prompt.ids)] == prompt.ids


def test_changed_tools_rewrite_history(renderer: Renderer) -> None:
    loop = Loop(renderer)
    previous = loop.prompt
    loop.messages.append(Message("assistant", (Text("Hi."),)))
    messages, _ = loop.template()
    prompt = renderer.render_messages_delta(previous, loop.sample("Hi."), messages, None)
    assert prompt.reason == "history_rewritten"


def test_missing_reply_is_detected(renderer: Renderer) -> None:
    loop = Loop(renderer)
    prompt = loop.step(loop.sample("Hi.<|im_end|>"), Message("user", (Text("Hello?"),)))
    assert (prompt.extended, prompt.reason) == (False, "reply_missing")


def test_template_that_rerenders_the_reply_keeps_the_sampled_ids(renderer: Renderer) -> None:
    # the test template shows reasoning only on the last message, as Qwen3's does
    loop = Loop(renderer)
    before = loop.prompt
    completion = loop.sample("<think>add</think>\nSure.<|im_end|>")
    prompt = loop.step(
        completion,
        Message("assistant", (Reasoning("add"), Text("Sure."))),
        Message("user", (Text("Go."),)),
    )
    assert (prompt.extended, prompt.reason) == (True, None)
    assert prompt.ids[: len(before.ids) + len(completion)] == (*before.ids, *completion)
    # what follows is the user turn's text alone, as the full render writes it
    assert list(prompt.ids) != renderer.render_prompt(*loop.template())  # it drops "add"
    added = renderer.decode(prompt.new_ids)
    assert added.startswith("\n<|im_start|>user\nGo.")
    assert renderer.render_text(*loop.template()).endswith(added)


def test_unalignable_completion_without_eos_is_rendered_in_full(renderer: Renderer) -> None:
    loop = Loop(renderer)
    completion = loop.sample("Something else entirely")  # no EOS, not the reply's text
    prompt = loop.step(
        completion, Message("assistant", (Text("Sure."),)), Message("user", (Text("Go."),))
    )
    assert (prompt.extended, prompt.reason) == (False, "completion_mismatch")


def test_eos_the_template_does_not_render_stays_in_the_sequence(tmp_path: Path) -> None:
    plain = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    renderer = Renderer.from_pretrained(build_tokenizer_dir(tmp_path), chat_template=plain)
    first = renderer.render_conversation([{"role": "user", "content": "1, 2, 3,"}])
    completion = renderer.encode(" 4, 5,<|im_end|>")
    messages = [
        {"role": "user", "content": "1, 2, 3,"},
        {"role": "assistant", "content": " 4, 5,"},
        {"role": "user", "content": " 6,"},
    ]
    prompt = renderer.render_messages_delta(first, completion, messages)
    assert prompt.extended
    assert prompt.ids == (*first.ids, *completion, *renderer.encode(" 6,"))
